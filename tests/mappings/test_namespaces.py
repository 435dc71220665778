"""The layer tables' `namespaces:` against torch's own modules: a namespace not marked `partial`
lists exactly the classes its torch module defines, and every listed member exists in torch."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from precision_transpiler import MappingError
from precision_transpiler.mappings.registry import load_mappings

pytestmark = pytest.mark.needs_torch


@pytest.mark.parametrize("module", sorted(load_mappings().namespaces))
def test_namespace_members_are_torchs(module: str) -> None:
    spec = load_mappings().namespaces[module]
    torch_module = importlib.import_module(module)
    missing = [m for m in spec.members if not hasattr(torch_module, m)]
    assert not missing, missing
    if spec.partial is None:
        defined = [
            name
            for name, value in vars(torch_module).items()
            if isinstance(value, type) and value.__module__ == module and not name.startswith("_")
        ]
        assert sorted(defined) == sorted(spec.members)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("kind: layers\nnamespaces: [torch.nn]\n", ": namespaces: expected module: {members: [...]} pairs"),
        (
            "kind: layers\nnamespaces:\n  torch.nn: {members: relu}\n",
            ":3: namespaces.torch.nn.members: expected a list",
        ),
        (
            "kind: layers\nnamespaces:\n  torch.nn: {members: [ReLU], other: 1}\n",
            ":3: namespaces.torch.nn: unknown key 'other' (allowed: members, partial)",
        ),
        (
            'kind: layers\nnamespaces:\n  "torch nn": {members: [ReLU]}\n',
            ":3: namespaces.torch nn: 'torch nn' is not a qualified name",
        ),
    ],
)
def test_malformed_namespaces_name_file_line_key(tmp_path: Path, text: str, where: str) -> None:
    (tmp_path / "t.yaml").write_text(text)
    with pytest.raises(MappingError) as info:
        load_mappings([tmp_path])
    assert str(info.value).startswith(str(tmp_path / "t.yaml")) and where in str(info.value), info.value
