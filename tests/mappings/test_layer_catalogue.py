"""The torch.nn layer catalogue is complete and its copy in docs/support.md is current.

Why this test exists: a torch.nn layer the layer table neither maps nor lists `unsupported:`
reaches users as a bare "has no mapping"; every public layer class torch has
(benchmarks/layer_catalogue.py asks torch) must be one or the other for each target, and the table
docs/support.md shows must be what the script prints. The `unsupported:` section is validated when
the tables load, and its reason is what the converter reports where such a layer is used.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.layer_catalogue import END, START, TARGETS, public_layers, replace_section, status, table
from precision_transpiler import MappingError, transpile
from precision_transpiler.mappings import load_mappings

pytestmark = [pytest.mark.needs_torch]

SUPPORT = Path(__file__).resolve().parents[2] / "docs" / "support.md"


def test_every_public_torch_nn_layer_is_mapped_or_unsupported() -> None:
    mappings = load_mappings()
    layers = public_layers()
    assert len(layers) > 130 and "torch.nn.LSTM" in layers and "torch.nn.Module" in layers
    missing = [(s, t) for s in layers for t in TARGETS if status(mappings, s, t)[0] == "not listed"]
    assert not missing, f"public torch.nn layers neither mapped nor listed unsupported: {missing}"


def test_unsupported_entries_name_torch_layers() -> None:
    public = set(public_layers())
    stale = sorted(s for s in load_mappings().layer_unsupported if s.startswith("torch.nn.") and s not in public)
    assert not stale, f"unsupported: lists names torch.nn does not have: {stale}"


def test_the_docs_table_is_current() -> None:
    text = SUPPORT.read_text(encoding="utf-8")
    assert START in text and END in text, "docs/support.md lost the layer-catalogue markers"
    assert replace_section(text, table()) == text, (
        "docs/support.md's torch.nn layer catalogue is stale: run "
        "`python benchmarks/layer_catalogue.py --write docs/support.md`"
    )


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_an_unsupported_layer_is_reported_with_its_reason(to: str) -> None:
    source = "import torch.nn as nn\n\n\ndef head():\n    return nn.LazyLinear(4)\n"
    result = transpile(source, to=to, path="head.py")
    (diagnostic,) = result.unsupported
    reason = load_mappings().unsupported_layer("torch.nn.LazyLinear", to)
    assert reason and reason in diagnostic.message
    assert diagnostic.format().startswith(f"head.py:5:12: unsupported: torch.nn.LazyLinear has no mapping to {to}: ")
    assert f"# ptranspile: unsupported: torch.nn.LazyLinear has no mapping to {to}: {reason}" in result.code


def test_a_per_target_reason_and_a_layer_passed_as_a_class(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        'kind: layers\nunsupported:\n  torch.nn.MadeUpLayer: {tf: "only for this test"}\n'
        '  torch.nn.FractionalMaxPool2d: "random regions"\n'
    )
    mappings = load_mappings([tmp_path])
    assert mappings.unsupported_layer("torch.nn.FractionalMaxPool2d", "jax") == "random regions"
    assert mappings.unsupported_layer("torch.nn.MadeUpLayer", "tf") == "only for this test"
    assert mappings.unsupported_layer("torch.nn.MadeUpLayer", "jax") is None
    source = "import torch.nn as nn\n\nPOOL = nn.FractionalMaxPool2d\n"
    (diagnostic,) = transpile(source, to="jax", path="p.py").unsupported
    assert diagnostic.format().startswith("p.py:3:8: unsupported: torch.nn.FractionalMaxPool2d has no mapping to jax: ")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("kind: layers\nunsupported: [torch.nn.LazyLinear]\n", ": unsupported: expected symbol: reason"),
        (
            'kind: layers\nunsupported:\n  "torch nn": "x"\n',
            ":3: unsupported.torch nn: 'torch nn' is not a qualified name",
        ),
        ("kind: layers\nunsupported:\n  torch.nn.X: {jax: ''}\n", ":3: unsupported.torch.nn.X: expected a reason"),
        (
            "kind: layers\nlayers:\n  torch.nn.X: {jax: {shim: a.X}}\nunsupported:\n  torch.nn.X: {jax: why}\n",
            ":5: unsupported.torch.nn.X: the layer is mapped to 'jax' in layers: as well",
        ),
    ],
)
def test_malformed_unsupported_sections_name_file_line_key(tmp_path: Path, text: str, where: str) -> None:
    (tmp_path / "t.yaml").write_text(text)
    with pytest.raises(MappingError) as info:
        load_mappings([tmp_path])
    assert str(info.value).startswith(str(tmp_path / "t.yaml")) and where in str(info.value), info.value
