"""`nn.Parameter` in every call form converts: positional or `data=` by keyword, `requires_grad`.

Flax's `nnx.Param` names its first parameter `value`, so torch's `nn.Parameter(data=t)` written
as is built nothing (a TypeError when the model was constructed, nothing reported while
converting). The symbol table says which keyword the counterparts take positionally
(`positional: data` in mappings/layers/torch_nn.yaml); each form converts to JAX and Keras,
builds, takes the torch weights and computes what torch computes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
import torch.nn as nn
from torch.nn.parameter import Parameter


class Scaled(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.w = nn.Parameter(data=torch.ones(c, c), requires_grad=False)
        self.b = nn.Parameter(torch.zeros(c), requires_grad=True)
        self.g = Parameter(requires_grad=False, data=torch.full((c,), 0.5))
        self.s = nn.Parameter(torch.ones(1))
        self.lin = nn.Linear(c, c)

    def forward(self, x):
        return (self.lin(x) @ self.w + self.b) * self.g * self.s
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_parameter_call_forms_no_op_and_keyword(target: str) -> None:
    code = transpile(SOURCE, to=target).code
    assert "data=" not in code  # `data=` became the first positional argument ...
    assert "requires_grad=False, data" not in code
    assert code.count("requires_grad=False") == 2  # ... and the other keywords stay as written
    assert "(torch.ones(1))" not in code and "ones(1))" in code  # positional: unchanged form


@on_both_targets
def test_parameter_call_forms_build_and_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Scaled(3)", ["float32[2,3]"], name="scaled")
    assert verdict.passed, verdict
