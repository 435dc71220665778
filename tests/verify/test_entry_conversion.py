"""An `--entry` expression that builds torch objects itself (a layer passed to the model, a
tensor argument, a torch function as an activation) is converted before it is evaluated on the
converted side: the converted model gets Flax/Keras layers and arrays, not torch ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files
from precision_transpiler.verify.entry_conversion import convert_entry

pytestmark = [pytest.mark.needs_jax, pytest.mark.needs_tf]

FLOW = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Coupling(nn.Module):
    \"\"\"A masked affine coupling layer whose networks and mask come from its caller.\"\"\"

    def __init__(self, mask, t, s, act=torch.tanh):
        super().__init__()
        self.register_buffer("mask", mask.view(1, -1))
        self.t = t
        self.s = s
        self.act = act

    def forward(self, z):
        masked = self.mask * z
        scale = self.act(self.s(masked))
        return masked + (1 - self.mask) * (z * torch.exp(scale) + self.t(masked))
"""

ENTRY = (
    "Coupling(torch.tensor([1., 0., 1., 0.]), t=nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 4)), "
    "s=torch.nn.Sequential(nn.Linear(4, 4)), act=F.silu)"
)


@pytest.mark.parametrize("target", ["jax", "tf"])
@pytest.mark.parametrize("policy", ["fp32", "mixed"])
def test_an_entry_building_torch_layers_and_tensors_verifies(tmp_path: Path, target: str, policy: str) -> None:
    original = tmp_path / "flow.py"
    original.write_text(FLOW)
    converted = tmp_path / f"flow_{target}.py"
    converted.write_text(transpile(FLOW, to=target, policy=policy, path=str(original)).code)
    result = verify_files(original, converted, VerifyOptions(entry=ENTRY, inputs=["float32[3,4]"], layers=False))
    assert result.passed, result.failures
    if policy == "fp32":
        assert result.max_rel_err is not None and result.max_rel_err < 1e-5


def test_only_the_framework_imports_the_entry_names_go_into_the_snippet() -> None:
    source = FLOW + "\nfrom .helpers import Coupling as Other\nimport os\n"
    entry = "Coupling(torch.ones(4), t=Other(), s=os)"
    converted = convert_entry(entry, source, target="jax", policy="fp32", source="torch")
    assert converted is not None
    assert "jnp.ones(" in converted.code and "torch" not in converted.code
    assert "helpers" not in converted.code  # the model's own names come from the converted module
    assert "import os" in converted.code  # the standard library travels as written


def test_an_entry_naming_no_framework_is_evaluated_as_written() -> None:
    assert convert_entry("Coupling(4, t=None, s=None)", FLOW, target="tf", policy="fp32", source="torch") is None
