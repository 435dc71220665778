"""`torch.autograd.Variable(x)`, torch's pre-0.4 wrapper, is the tensor itself
(mappings/ops/tensor_ops.yaml `autograd_variable`): old model code (pytorchcv's CondenseNet)
still wraps masks and inputs in it. `requires_grad` is dropped with a note."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn
from torch.autograd import Variable


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        mask = Variable(torch.ones(4), requires_grad=False)
        return self.lin(Variable(x)) * mask
"""


def test_variable_is_the_tensor() -> None:
    result = transpile(SOURCE, to="jax")
    assert "import Variable" not in result.code and "return self.lin(x) * mask" in result.code
    assert [d.code for d in result.diagnostics if d.severity != "note"] == []
    assert any("requires_grad" in d.message for d in result.diagnostics)


@on_both_targets
def test_wrapped_tensors_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,4]"], name="variable")
    assert verdict.passed, verdict
