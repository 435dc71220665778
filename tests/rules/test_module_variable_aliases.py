"""A parameter reached through a local name and handed to einops (rules/module_variables.py):
`weight, bias = self.weight, self.bias` then `rearrange(bias, ...)` (g-mlp-pytorch's spatial
gating). The name is bound only to a parameter, so it is passed as its array, as `self.bias`
itself is; one also indexed on some path (`bias = bias[:, :n]`) may be either, and is converted
to an array (`jnp.asarray`, `tf.convert_to_tensor`: Keras' own returns a variable as it is); a
name also bound otherwise stays as written. Both targets verify."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from einops import rearrange
from torch import nn


class Gate(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.bias = nn.Parameter(torch.ones(n))
        self.weight = nn.Parameter(torch.ones(n, n))

    def forward(self, x, causal: bool = False):
        weight, bias = self.weight, self.bias
        other = self.bias
        other = other * 2  # bound otherwise too: as written
        cut = self.bias
        if causal:
            cut = cut[:2]  # indexed on one path: a variable or an array
        out = x @ weight + rearrange(bias, "n -> () n") + rearrange(other, "n -> () n")
        return out + rearrange(cut, "n -> () n")
"""


@pytest.mark.parametrize(
    ("to", "array", "either"),
    [("jax", "bias[...]", "jnp.asarray(cut)"), ("tf", "tf.convert_to_tensor(bias.value)", "tf.convert_to_tensor(cut)")],
)
def test_a_local_name_of_a_parameter_is_passed_as_its_array(to: str, array: str, either: str) -> None:
    code = transpile(SOURCE, to=to).code
    assert f'rearrange({array}, "n -> () n")' in code
    assert 'rearrange(other, "n -> () n")' in code
    assert f'rearrange({either}, "n -> () n")' in code


@on_both_targets
def test_gating_through_a_local_name_verifies(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Gate()", ["float32[2,4]"], name="gate")
    assert verdict.passed, verdict
