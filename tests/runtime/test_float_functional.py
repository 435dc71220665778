"""`nn.quantized.FloatFunctional` (and `torch.ao.nn.quantized`'s): the float arithmetic a model
marks for quantization (pytorchvideo's skip connections) is the runtime's `FloatFunctional` on
both targets (runtime/*/layers.py), its `add`/`mul`/`add_relu`/`cat` plain arithmetic; the calls
on it are the layer's methods, not tensor methods to report."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.skip = nn.quantized.FloatFunctional()
        self.scale = torch.ao.nn.quantized.FloatFunctional()

    def forward(self, x):
        y = self.skip.add(self.lin(x), x)
        z = self.scale.mul_scalar(self.scale.add_scalar(y, 1.0), 0.5)
        return self.scale.cat([self.scale.mul(z, x), self.skip.add_relu(y, x)], dim=1)
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_float_functional_is_the_runtimes_and_its_calls_stay(to: str) -> None:
    result = transpile(SOURCE, to=to)
    assert not result.unsupported, result.unsupported
    assert result.code.count("= FloatFunctional()") == 2
    assert "self.scale.mul(z, x)" in result.code and "self.skip.add(self.lin(x), x)" in result.code


@on_both_targets
def test_float_functional_verifies(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Block()", ["float32[2,4]"], name="ff")
    assert verdict.passed, verdict
