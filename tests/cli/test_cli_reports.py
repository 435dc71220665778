"""Reports and outputs of `ptranspile verify`, `--verify` and `ptranspile weights` are written
safely, and `--report-json` is deterministic.

- Written as UTF-8 whatever the locale and the terminal's encoding, atomically (files.write_report).
- Never over an input: `--report-json`, `--report-html`, `--emit-test` naming a model file, or
  `weights -o` naming the checkpoint, is one line and exit 2, before anything runs.
- A path that cannot be written is one line naming that path, exit 2, never a traceback.
- `--report-json` has the same bytes under any PYTHONHASHSEED; in a verification report only the
  wall-clock fields differ from run to run: `seconds` (the whole verification) and, with
  `--time N`, `timing`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_cli

pytestmark = pytest.mark.needs_torch

MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return torch.relu(self.fc(x))
"""

LAYERS = """import torch
from torch import nn


def upcast(x):
    if x.dtype is torch.float16:
        x = x.float()
    return x, torch.finfo(x.dtype).eps, torch.digamma(x)


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.softmax(self.fc(self.norm(x)).half(), dim=-1)
"""

VERIFY = ("--entry", "Net()", "--input", "float32[2,4]", "-q")
# ASCII on the terminal; Python still decodes file names as UTF-8 (PEP 538/540 for the C locale)
ASCII_TERMINAL: dict[str, str | None] = {"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}
# Wall-clock fields of a verification report; everything else must repeat byte for byte.
TIMING_FIELDS = ("seconds", "timing")

needs_jax = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "jax", "flax")), reason="needs torch, jax and flax"
)
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


def _models(folder: Path, name: str = "model") -> tuple[Path, Path]:
    from precision_transpiler import transpile

    original = folder / f"{name}.py"
    original.write_text(MODEL, encoding="utf-8")
    converted = folder / f"{name}_jax.py"
    converted.write_text(transpile(MODEL, to="jax", path=str(original)).code, encoding="utf-8")
    return original, converted


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("ptranspile: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@needs_jax
@pytest.mark.slow
def test_verify_reports_are_utf8_with_non_ascii_paths_and_an_ascii_terminal(tmp_path: Path) -> None:
    folder = tmp_path / "modèles"
    folder.mkdir()
    original, converted = _models(folder, "modèle")
    report, html, emitted = folder / "rapport-é.json", folder / "rapport-é.html", folder / "test_modèle.py"
    r = run_cli(
        "verify", original.name, converted.name, *VERIFY,
        "--report-json", report.name, "--report-html", html.name, "--emit-test", emitted.name,
        cwd=folder, env=ASCII_TERMINAL,
    )  # fmt: skip
    assert r.code == 0, r.err
    data = json.loads(report.read_bytes().decode("utf-8"))
    assert data["converted"].endswith("modèle_jax.py") and data["passed"] is True
    assert "modèle" in html.read_bytes().decode("utf-8")
    compile(emitted.read_bytes().decode("utf-8"), str(emitted), "exec")
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_write_report_writes_utf8_under_an_ascii_locale(tmp_path: Path) -> None:
    """With UTF-8 mode and locale coercion off, Python's locale encoding is ASCII: the report is
    still UTF-8, and a file name Python could not decode keeps its bytes."""
    script = (
        "import sys\n"
        "from precision_transpiler.files import write_report\n"
        "write_report(sys.argv[1], '\\u00e9 \\u2264 ' + sys.argv[1] + '\\n')\n"
    )  # the command line itself ASCII: Python decodes it with the locale's codec
    target = tmp_path / "rapport-é.txt"
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env.pop("PYTHONIOENCODING", None)
    proc = subprocess.run(
        [sys.executable, "-c", script, os.fsencode(target)], env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == ("é ≤ " + str(target) + "\n").encode("utf-8")
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no temporary file left


@pytest.mark.parametrize("option", ["--report-json", "--report-html", "--emit-test"])
@pytest.mark.parametrize("which", ["original", "converted"])
def test_verify_reports_never_overwrite_a_model_file(tmp_path: Path, option: str, which: str) -> None:
    original, converted = tmp_path / "model.py", tmp_path / "model_jax.py"
    original.write_text(MODEL)
    converted.write_text("import jax\n")
    victim = original if which == "original" else converted
    before = victim.read_bytes()
    r = run_cli("verify", original.name, converted.name, *VERIFY, option, victim.name, cwd=tmp_path)
    assert r.code == 2
    line = _one_error_line(r.err)
    assert line == f"ptranspile: error: {option} {victim.name} would overwrite the input {victim.name}"
    assert victim.read_bytes() == before


@pytest.mark.parametrize("option", ["--report-json", "--report-html", "--emit-test", "--policy-out"])
def test_verify_option_reports_never_overwrite_the_model(tmp_path: Path, option: str) -> None:
    original = tmp_path / "model.py"
    original.write_text(MODEL)
    mode = ("--policy", "auto") if option == "--policy-out" else ("--verify",)
    r = run_cli(original.name, "--to", "jax", *mode, *VERIFY, option, original.name, cwd=tmp_path)
    assert r.code == 2
    assert _one_error_line(r.err) == f"ptranspile: error: {option} model.py would overwrite the input model.py"
    assert original.read_text() == MODEL


@needs_jax
@pytest.mark.slow
def test_an_unwritable_verify_report_is_one_line(tmp_path: Path) -> None:
    _models(tmp_path)
    (tmp_path / "afile").write_text("")  # a parent that is a file: unwritable even for root
    r = run_cli("verify", "model.py", "model_jax.py", *VERIFY, "--report-json", "afile/r.json", cwd=tmp_path)
    assert r.code == 2
    assert _one_error_line(r.err) == "ptranspile: error: afile/r.json: cannot write: afile is not a directory"


@needs_torch
def test_an_unwritable_weights_output_is_one_line(tmp_path: Path) -> None:
    import torch

    torch.save({"fc.weight": torch.zeros(2, 4), "fc.bias": torch.zeros(2)}, tmp_path / "model.pt")
    (tmp_path / "afile").write_text("")
    r = run_cli("weights", "model.pt", "--to", "jax", "-o", "afile/w.safetensors", cwd=tmp_path)
    assert r.code == 2
    line = _one_error_line(r.err)
    assert line == "ptranspile: error: afile/w.safetensors: cannot write: afile is not a directory"
    assert run_cli("weights", "model.pt", "--to", "jax", "-o", "w.safetensors", cwd=tmp_path).code == 0
    r = run_cli("weights", "w.safetensors", "--to", "jax", "-o", "w.safetensors", cwd=tmp_path)
    assert r.code == 2
    assert _one_error_line(r.err) == "ptranspile: error: -o w.safetensors would overwrite the input w.safetensors"


def _with_seed(seed: str, *args: str, cwd: Path) -> None:
    r = run_cli(*args, cwd=cwd, env={"PYTHONHASHSEED": seed})
    assert r.code in (0, 1), r.err


def test_conversion_report_json_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .layers import Block, upcast\n")
    (pkg / "layers.py").write_text(LAYERS)
    (pkg / "model.py").write_text(MODEL)
    for seed in ("1", "2"):
        args = ("pkg", "--to", "jax", "--policy", "mixed", "-o", f"out{seed}", "--report-json", f"r{seed}.json")
        _with_seed(seed, *args, cwd=tmp_path)
    first, second = (tmp_path / "r1.json").read_bytes(), (tmp_path / "r2.json").read_bytes()
    assert first == second
    assert len(json.loads(first)["files"]) == 3


@needs_jax
@pytest.mark.slow
def test_verify_report_json_differs_only_in_timings_across_hash_seeds(tmp_path: Path) -> None:
    _models(tmp_path)
    for seed in ("1", "2"):
        _with_seed(seed, "verify", "model.py", "model_jax.py", *VERIFY, "--report-json", f"v{seed}.json", cwd=tmp_path)
    reports = [json.loads((tmp_path / f"v{seed}.json").read_bytes()) for seed in ("1", "2")]
    for report in reports:
        assert "seconds" in report
        for field in TIMING_FIELDS:
            report.pop(field, None)
    assert json.dumps(reports[0], sort_keys=True) == json.dumps(reports[1], sort_keys=True)
