"""Verification report rendering: the terminal tree, the HTML page, and that page in a real browser.

The browser test (`browser` marker) runs under `make test-browser` or CI=true and fails there
without Chromium; elsewhere it is skipped with that reason (tests/conftest.py).

The reports are built from the real `VerificationResult`/`LayerRecord`/`OutputRecord` dataclasses
and `.to_json()`, exactly what `ptranspile verify` saves, so a field rename breaks these tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from precision_transpiler.verify.render import render_html, render_text
from precision_transpiler.verify.result import LayerRecord, OutputRecord, VerificationResult

INSTALL_HINT = (
    "Chromium is required for the HTML report test (asked for by make test-browser, "
    "PTRANSPILE_BROWSER_TESTS=1 or CI=true) and was not found. `make test-browser` installs it "
    "(Debian/Ubuntu: `apt-get install -y chromium`), or point PTRANSPILE_CHROMIUM at a Chromium/Chrome binary."
)


def _layer(path: str, kind: str, order: int, rel: float | None, share: float | None, **kw: Any) -> LayerRecord:
    return LayerRecord(
        path=path,
        kind=kind,
        order=order,
        calls=kw.pop("calls", 1),
        shape=kw.pop("shape", [2, 64, 56, 56]),
        rel_err=rel,
        max_abs_err=kw.pop("max_abs_err", None if rel is None else rel * 3.0),
        reference_err=kw.pop("reference_err", None),
        share=share,
        exceeded=kw.pop("exceeded", False),
        nonfinite=kw.pop("nonfinite", False),
        source=kw.pop("source", f"torchvision/models/resnet.py:{100 + order}"),
        note=kw.pop("note", None),
    )


def _output(
    rel: float, *, shape: list[int] | None = None, nonfinite_converted: int = 0, ref: float | None = None
) -> OutputRecord:
    return OutputRecord(
        name="logits",
        shape_original=shape or [2, 1000],
        shape_converted=shape or [2, 1000],
        dtype_original="float32",
        dtype_converted="float32",
        expected_dtype="float32",
        max_abs_err=rel * 40,
        rel_err=rel,
        cosine=0.99996 if rel < 0.05 else 0.9312,
        argmax_agreement=1.0 if rel < 0.05 else 0.5,
        nonfinite_original=0,
        nonfinite_converted=nonfinite_converted,
        reference_err=ref,
    )


def failing_report() -> dict[str, Any]:
    """A ResNet-like run in bf16 whose `layer1.0.bn1` goes over its share and `layer1.1.conv2` overflows.

    Execution order deliberately differs from alphabetical order (conv1 runs before bn1).
    """
    share = 4.0e-3
    layers = [
        _layer("conv1", "Conv2d", 0, 1.1e-3, share, reference_err=1.0e-3, shape=[2, 64, 112, 112]),
        _layer("bn1", "BatchNorm2d", 1, 1.3e-3, share, reference_err=1.2e-3),
        _layer("layer1.0.conv1", "Conv2d", 2, 2.2e-3, share, reference_err=2.0e-3),
        _layer(
            "layer1.0.bn1",
            "BatchNorm2d",
            3,
            3.1e-2,
            share,
            reference_err=2.1e-3,
            exceeded=True,
            source="models/resnet_jax.py:57",
        ),
        _layer("layer1.0.relu", "ReLU", 4, 3.0e-2, share, reference_err=2.0e-3, calls=2),
        _layer("layer1.1.conv2", "Conv2d", 5, float("inf"), share, reference_err=2.5e-3, nonfinite=True),
        _layer("fc", "Linear", 6, 4.2e-1, 2.0e-2, reference_err=6.0e-3, shape=[2, 1000], exceeded=True),
    ]
    result = VerificationResult(
        passed=False,
        source="torch",
        target="jax",
        policy="bf16",
        original="models/resnet.py",
        converted="models/resnet_jax.py",
        entry="ResNet.forward",
        inputs=["x: float32[2, 3, 224, 224]"],
        seed=0,
        max_abs_err=16.8,
        max_rel_err=4.2e-1,
        cosine=0.9312,
        argmax_agreement=0.5,
        nonfinite=3,
        tolerance={
            "max_rel_err": 2.4e-2,
            "rule": "4x the framework's own bf16 run",
            "reference": "torch.autocast(bfloat16)",
            "reference_err": 6.0e-3,
            "factor": 4.0,
        },
        failures=[
            "max rel err 4.20e-01 > tolerance 2.40e-02",
            "3 non-finite values in output 'logits'",
        ],
        outputs=[_output(4.2e-1, nonfinite_converted=3, ref=6.0e-3)],
        layers=layers,
        first_bad_layer="layer1.0.bn1",
        first_bad_source="models/resnet_jax.py:57",
        notes=["BatchNorm statistics computed in bfloat16"],
        seconds=3.52,
    )
    return result.to_json()


def passing_report() -> dict[str, Any]:
    """A small MLP in fp16 mixed precision that is well inside its tolerance; no reference run.

    The model itself is recorded too (path ""), as torch's `named_modules()` reports it.
    """
    layers = [
        _layer("encoder.0", "Linear", 0, 3.0e-4, 1.0e-3, shape=[8, 256]),
        _layer("encoder.1", "GELU", 1, 3.2e-4, 1.0e-3, shape=[8, 256]),
        _layer("encoder", "Sequential", 2, 3.2e-4, 1.0e-3, shape=[8, 256]),
        _layer("head", "Linear", 3, 4.0e-4, 1.0e-3, shape=[8, 10]),
        _layer("", "MLP", 4, 4.0e-4, 1.0e-3, shape=[8, 10], source="mlp_tf.py:12"),
    ]
    result = VerificationResult(
        passed=True,
        source="torch",
        target="tf",
        policy="mixed",
        original="mlp.py",
        converted="mlp_tf.py",
        entry="MLP.forward",
        inputs=["x: float32[8, 64]"],
        seed=7,
        max_abs_err=1.9e-3,
        max_rel_err=4.0e-4,
        cosine=0.9999999,
        argmax_agreement=1.0,
        nonfinite=0,
        tolerance={"max_rel_err": 1.0e-2, "rule": "fp16 mixed: 1e-2"},
        outputs=[_output(4.0e-4, shape=[8, 10])],
        layers=layers,
        seconds=0.41,
    )
    report = result.to_json()
    # Set on the dict, not the dataclass: the renderers must cope with reports with and without it.
    report["param_bytes"] = {"original": 1_183_744, "converted": 591_872}
    return report


def _embedded_json(page: str) -> Any:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert m, "report JSON block missing"
    return json.loads(m.group(1))


def _tree_lines(text: str) -> list[str]:
    """The tree column of the layer section: connectors plus node name, without the metrics after it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Layers ("))
    tree = []
    for line in lines[start + 1 :]:
        if not line.startswith("  ") or line.startswith("  ..."):
            break
        if line.startswith("  first layer over its share"):
            continue
        m = re.match(r"(?:\|   |    |\|-- |`-- )*\S+", line[2:])
        assert m, line
        tree.append(m.group(0))
    return tree


# ------------------------------------------------------------------------------ terminal text


def test_text_failing_report_has_verdict_summary_and_tree_in_execution_order() -> None:
    text = render_text(failing_report())
    first = text.splitlines()[0]
    assert first.startswith("FAILED")
    assert "torch -> jax" in first and "policy=bf16" in first and "entry=ResNet.forward" in first
    assert "4.20e-01  > tolerance 2.40e-02  (4x the framework's own bf16 run)" in text
    assert "cosine        0.931200" in text
    assert "argmax agree  50.0%" in text
    assert "non-finite    3" in text
    assert "  - 3 non-finite values in output 'logits'" in text
    assert "\x1b[" not in text  # no colour unless asked for

    # The tree follows the module hierarchy and execution order (conv1 before bn1, although
    # "bn1" < "conv1" alphabetically), with `layer1` and `layer1.0`/`layer1.1` as container nodes.
    assert _tree_lines(text) == [
        "model",
        "|-- conv1",
        "|-- bn1",
        "|-- layer1",
        "|   |-- 0",
        "|   |   |-- conv1",
        "|   |   |-- bn1",
        "|   |   `-- relu",
        "|   `-- 1",
        "|       `-- conv2",
        "`-- fc",
    ]


def test_text_layer_lines_show_kind_error_share_reference_and_markers() -> None:
    text = render_text(failing_report())
    bn1 = next(line for line in text.splitlines() if "|   |   |-- bn1" in line)
    assert "BatchNorm2d" in bn1
    assert "3.10e-02 / 4.00e-03" in bn1
    assert "x7.8" in bn1  # 3.1e-2 is 7.75x its share
    assert "ref 2.10e-03" in bn1
    assert "!! over share" in bn1
    assert bn1.endswith("<- first layer over its share (models/resnet_jax.py:57)")
    assert text.count("<- first layer over its share") == 1
    assert "first layer over its share: layer1.0.bn1 at models/resnet_jax.py:57" in text

    conv2 = next(line for line in text.splitlines() if "`-- conv2" in line)
    assert "!! non-finite" in conv2 and "inf / 4.00e-03" in conv2

    good = next(line for line in text.splitlines() if "|   |   |-- conv1" in line)
    assert "!!" not in good and "2.20e-03 / 4.00e-03" in good and "ref 2.00e-03" in good

    # Columns line up: every layer row has its kind starting at the same column.
    rows = [line for line in text.splitlines() if re.search(r"(Conv2d|BatchNorm2d|ReLU|Linear)\b", line)]
    assert len(rows) == 7
    assert len({re.search(r"(Conv2d|BatchNorm2d|ReLU|Linear)\b", r).start() for r in rows}) == 1


def test_sources_are_the_original_line_with_the_converted_one_beside_it() -> None:
    """`source` is the user's line (the original model), `converted_source` the converted file's;
    the terminal and the page show both, and a report from before `converted_source` still renders."""
    report = failing_report()
    assert "converted_source" in report["layers"][0] and "first_bad_converted_source" in report
    bad = next(layer for layer in report["layers"] if layer["path"] == "layer1.0.bn1")
    bad["source"], bad["converted_source"] = "models/resnet.py:12", "models/resnet_jax.py:455"
    report["first_bad_source"], report["first_bad_converted_source"] = bad["source"], bad["converted_source"]
    text = render_text(report)
    both = "models/resnet.py:12 (converted models/resnet_jax.py:455)"
    assert f"first layer over its share: layer1.0.bn1 at {both}" in text
    assert next(line for line in text.splitlines() if "|-- bn1" in line and "!!" in line).endswith(f"({both})")
    page = render_html(report)
    assert f"created at <code>{both}</code>" in page
    assert "<dt>converted source</dt><dd>models/resnet_jax.py:455</dd>" in page
    assert "<dt>source</dt><dd>models/resnet.py:12</dd>" in page
    for layer in report["layers"]:
        layer.pop("converted_source")
    report.pop("first_bad_converted_source")
    assert "at models/resnet.py:12\n" in render_text(report) and "<dt>converted source</dt>" not in render_html(report)


def test_text_passing_report_without_reference_errors() -> None:
    text = render_text(passing_report())
    assert text.startswith("PASSED  torch -> tf  policy=mixed  entry=MLP.forward")
    assert "Failures" not in text
    assert "ref " not in text[text.index("Layers (") :]  # no reference column when no layer has one
    assert "!!" not in text and "first layer over its share" not in text
    # `encoder` is itself a recorded layer (it runs after its children, yet is their parent).
    assert _tree_lines(text) == ["model", "|-- encoder", "|   |-- 0", "|   `-- 1", "`-- head"]
    model = next(line for line in text.splitlines() if line.startswith("  model"))
    assert "MLP" in model and "4.00e-04 / 1.00e-03" in model
    assert "parameters    1.1 MiB -> 578.0 KiB (x0.50)" in text
    encoder = next(line for line in text.splitlines() if "|-- encoder" in line)
    assert "Sequential" in encoder and "3.20e-04 / 1.00e-03" in encoder


def test_text_max_layers_keeps_bad_layers_and_counts_the_rest() -> None:
    report = failing_report()
    text = render_text(report, max_layers=2)
    tree = _tree_lines(text)
    # First two in execution order + the three bad ones; relu and layer1.0.conv1 are elided.
    assert "|-- conv1" in tree and "|-- bn1" in tree
    assert not any(line.endswith("relu") for line in tree)
    assert "|   |   |-- conv1" not in tree
    assert any(line.endswith("bn1") and line.startswith("|   |") for line in tree)
    assert any(line.endswith("conv2") for line in tree) and tree[-1] == "`-- fc"
    assert "... 2 more layers elided (showing the first 2 and every layer over its share)" in text
    assert render_text(report, max_layers=50) == render_text(report)  # nothing to elide
    assert "elided" not in render_text(report)


def test_text_colour_only_when_asked() -> None:
    coloured = render_text(failing_report(), color=True)
    assert "\x1b[1;31mFAILED\x1b[0m" in coloured
    assert "\x1b[1;31m!! over share\x1b[0m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == render_text(failing_report())


def test_text_survives_missing_values_and_zero_layers() -> None:
    report = failing_report()
    report.update(layers=[], outputs=[], max_rel_err=None, cosine=None, argmax_agreement=None, first_bad_layer=None)
    text = render_text(report)
    assert "max rel err   n/a  vs tolerance 2.40e-02" in text
    assert "cosine        n/a" in text
    assert "Layers" not in text


# ------------------------------------------------------------------------------ HTML (static)


def test_html_structure_and_embedded_json_round_trip() -> None:
    report = failing_report()
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>")
    assert '<header class="banner fail"' in page and "FAILED" in page
    assert "http://" not in page and "https://" not in page and "<link" not in page  # self-contained
    assert "4x the framework&#x27;s own bf16 run" in page
    # Layer tree: one <details> per tree node (7 layers + containers layer1, layer1.0, layer1.1).
    assert page.count('<details id="layer-') == 10
    assert 'class="node exceeded first-bad leaf"' in page
    assert 'class="node nonfinite leaf"' in page
    # Ancestors of bad layers are open; a healthy leaf is not.
    assert re.search(r'<details id="layer-layer1" class="node group has-bad"[^>]*\bopen>', page)
    assert re.search(r'<details id="layer-layer1.0.conv1"[^>]*data-depth="2">', page)
    # The call-out links to the node and names the source line.
    assert '<a href="#layer-layer1.0.bn1">layer1.0.bn1</a> created at <code>models/resnet_jax.py:57</code>' in page

    embedded = _embedded_json(page)
    inf_layer = next(layer for layer in embedded["layers"] if layer["path"] == "layer1.1.conv2")
    assert inf_layer["rel_err"] == "inf"  # JSON.parse cannot read a bare Infinity
    assert inf_layer["max_abs_err"] == "inf"
    inf_layer["rel_err"] = inf_layer["max_abs_err"] = float("inf")
    assert embedded == report


def test_html_escapes_hostile_paths_everywhere() -> None:
    report = failing_report()
    evil = 'blocks.<script>alert("x")</script>&.proj'
    report["layers"].append({**report["layers"][0], "path": evil, "order": 99, "kind": "<b>Kind</b>"})
    report["notes"].append("</script><script>alert(1)</script>")
    page = render_html(report)
    assert "<script>alert" not in page and "<b>Kind</b>" not in page
    assert page.count("<script") == 2  # only our JSON block and our own script
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in page
    assert _embedded_json(page) is not None
    assert next(layer for layer in _embedded_json(page)["layers"] if layer["order"] == 99)["path"] == evil


def test_html_passing_zero_layers_and_no_reference() -> None:
    page = render_html(passing_report())
    assert '<header class="banner pass"' in page and "PASSED" in page
    assert "reference run" not in page and 'class="ref"' not in page  # no reference errors at all
    assert "exceeded" not in re.sub(r"<script.*?</script>", "", page, flags=re.S).replace(".exceeded", "")
    assert page.count('<details id="layer-') == 5  # the model node holds the other four
    assert page.index('id="layer-root"') < page.index('id="layer-encoder"') < page.index('id="layer-head"')
    assert '<div class="value">578.0 KiB</div><div class=sub>from 1.1 MiB, x0.50</div>' in page

    empty = passing_report()
    empty["layers"] = []
    page = render_html(empty)
    assert "No per-layer records in this report." in page
    assert '<details id="layer-' not in page
    assert _embedded_json(page)["layers"] == []


# ------------------------------------------------------------------------------ real browser


def _chromium() -> str:
    exe = os.environ.get("PTRANSPILE_CHROMIUM") or shutil.which("chromium")
    if not exe:
        pytest.fail(INSTALL_HINT, pytrace=False)
    return exe


def _run_chromium(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        exe,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into rows of pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(b"".join(bytes(line[i : i + 3]) for i in range(0, stride, bpp)))  # RGB only
        prev = line
    return width, height, rows


@pytest.mark.browser
def test_html_report_in_headless_chromium(tmp_path: Path) -> None:
    exe = _chromium()
    page = tmp_path / "report.html"
    page.write_text(render_html(failing_report()), encoding="utf-8")
    url = page.resolve().as_uri()

    started = time.monotonic()
    dom = _run_chromium(exe, tmp_path / "profile", "--dump-dom", url).stdout
    # The inline script ran to the end and parsed the embedded JSON (it counts the layers).
    body = re.search(r"<body[^>]*>", dom)
    assert body, dom[:2000]
    assert 'data-rendered="true"' in body.group(0), f"inline script did not run: {body.group(0)}"
    assert 'data-layers="7"' in body.group(0)
    # It revealed the toolbar and filled in the pretty-printed JSON.
    assert re.search(r'<div class="toolbar">', dom), "toolbar still hidden"
    assert '"first_bad_layer": "layer1.0.bn1"' in dom
    # The tree the browser built: every layer and container node, bad ones highlighted.
    nodes = re.findall(r'<details id="layer-[^"]*" class="([^"]*)" data-path="([^"]*)"', dom)
    paths = [p for _, p in nodes]
    assert paths == [
        "conv1",
        "bn1",
        "layer1",
        "layer1.0",
        "layer1.0.conv1",
        "layer1.0.bn1",
        "layer1.0.relu",
        "layer1.1",
        "layer1.1.conv2",
        "fc",
    ]
    classes = dict((p, c.split()) for c, p in nodes)
    assert "exceeded" in classes["layer1.0.bn1"] and "first-bad" in classes["layer1.0.bn1"]
    assert "nonfinite" in classes["layer1.1.conv2"]
    assert "exceeded" in classes["fc"]
    assert "has-bad" in classes["layer1"] and "exceeded" not in classes["conv1"]

    # The filter box works in the browser (a #filter= link pre-fills it): only BatchNorm layers and
    # the containers leading to them stay visible.
    dom = _run_chromium(exe, tmp_path / "profile", "--dump-dom", url + "#filter=batchnorm").stdout
    nodes = re.findall(r'<details id="layer-[^"]*" class="([^"]*)" data-path="([^"]*)"', dom)
    visible = [p for c, p in nodes if "filtered-out" not in c.split()]
    assert visible == ["bn1", "layer1", "layer1.0", "layer1.0.bn1"], visible
    assert '<span id="filter-count">2 matches</span>' in dom

    # A report without layers (and without reference errors) still runs the script to the end.
    empty = passing_report()
    empty["layers"] = []
    (tmp_path / "empty.html").write_text(render_html(empty), encoding="utf-8")
    dom = _run_chromium(exe, tmp_path / "profile", "--dump-dom", (tmp_path / "empty.html").as_uri()).stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body and 'data-rendered="true"' in body.group(0) and 'data-layers="0"' in body.group(0), dom[:2000]

    shot = tmp_path / "report.png"
    _run_chromium(exe, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,900", url)
    elapsed = time.monotonic() - started
    data = shot.read_bytes()
    assert len(data) > 10_000, f"screenshot suspiciously small ({len(data)} bytes)"
    width, height, rows = _png_pixels(data)
    assert (width, height) == (1280, 900)
    # The page was laid out and styled: the verdict banner at the top is red (#cf222e), and the
    # screenshot is not one flat colour.
    r, g, b = rows[10][640 * 3 : 640 * 3 + 3]
    assert r > 150 and g < 80 and b < 80, f"banner pixel is {(r, g, b)}, expected the FAILED red"
    assert len({rows[y][x * 3 : x * 3 + 3] for y in range(0, height, 15) for x in range(0, width, 15)}) > 20
    assert elapsed < 60, f"four headless Chromium runs took {elapsed:.1f}s"
