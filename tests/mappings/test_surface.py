"""mappings/torch_surface.yaml: written from the installed torch, read like every table."""

from __future__ import annotations

import pytest

from precision_transpiler import load_mappings
from precision_transpiler.mappings import generate_surface


@pytest.mark.needs_torch
def test_the_written_method_lists_are_the_installed_torchs() -> None:
    import torch

    assert generate_surface.main(["--check"]) == 0
    surface = load_mappings().surfaces["torch"]
    assert {"histc", "logical_not_", "add_", "view"} <= surface.tensor_methods
    assert "histc" in dir(torch.Tensor) and "apply" in surface.module_methods


def test_what_lies_outside_models_is_found_by_prefix_with_its_reason() -> None:
    surface = load_mappings().surfaces["torch"]
    assert "distributed" in (surface.outside_model("torch.distributed.get_rank") or "")
    assert "optimizer" in (surface.outside_model("torch._foreach_mul_") or "")
    assert surface.outside_model("torch.distributions.Normal") is None  # a prefix is a whole component
    assert surface.outside_model("torch.matmul") is None
