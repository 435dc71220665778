"""mappings/torch_surface.yaml: written from the installed torch, read like every table."""

from __future__ import annotations

import subprocess
import sys

import pytest

from precision_transpiler import load_mappings
from precision_transpiler.mappings import generate_surface


@pytest.mark.needs_torch
def test_the_written_method_lists_are_the_installed_torchs() -> None:
    import torch

    # a fresh interpreter: libraries imported by other tests add methods to torch.Tensor
    check = subprocess.run(
        [sys.executable, "-m", "precision_transpiler.mappings.generate_surface", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert generate_surface.TARGET.is_file()
    surface = load_mappings().surfaces["torch"]
    assert {"histc", "logical_not_", "add_", "view"} <= surface.tensor_methods
    assert "histc" in dir(torch.Tensor) and "apply" in surface.module_methods


def test_what_lies_outside_models_is_found_by_prefix_with_its_reason() -> None:
    surface = load_mappings().surfaces["torch"]
    assert "distributed" in (surface.outside_model("torch.distributed.get_rank") or "")
    assert "optimizer" in (surface.outside_model("torch._foreach_mul_") or "")
    assert surface.outside_model("torch.distributions.Normal") is None  # a prefix is a whole component
    assert surface.outside_model("torch.matmul") is None
