"""The layer tables' `namespaces:` against torch's own modules: a namespace not marked `partial`
lists exactly the classes its torch module defines, and every listed member exists in torch."""

from __future__ import annotations

import importlib

import pytest

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
