"""An attribute set on a parameter or buffer (`self.A_log._no_weight_decay = True`, mambapy's mark
for the optimiser) is Variable metadata on Flax (`self.A_log.set_metadata(...)`: an nnx Variable
refuses other attributes) and an attribute of the Keras variable; buffers assigned together from
a tuple are written, not read (rules/module_variables.py)."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, d: int = 8):
        super().__init__()
        self.A_log = nn.Parameter(torch.zeros(d))
        self.A_log._no_weight_decay = True
        self.fc = nn.Linear(d, d)
        self.fc.note = "kept"  # a layer's attribute, not a parameter's: stays as written

    def forward(self, x):
        return self.fc(x) * torch.exp(self.A_log)
"""


def test_flax_sets_metadata() -> None:
    code = transpile(SOURCE, to="jax").code
    assert 'self.A_log.set_metadata("_no_weight_decay", True)' in code
    assert 'self.fc.note = "kept"' in code


@on_both_targets
def test_marked_parameters_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,8]"], name="marked")
    assert verdict.passed, verdict


TUPLE_TARGET = """import torch
from torch import nn


class Rope(nn.Module):
    # timm's RotaryEmbeddingCat: buffers that may be None, set together from a tuple
    def __init__(self, d: int = 8, steps=None):
        super().__init__()
        self.d = d
        if steps is None:
            self.register_buffer("sin", None, persistent=False)
            self.register_buffer("cos", None, persistent=False)
        else:
            self.register_buffer("sin", torch.zeros(steps, d), persistent=False)
            self.register_buffer("cos", torch.ones(steps, d), persistent=False)

    def _build(self, steps):
        t = torch.arange(steps, dtype=torch.float32)[:, None] * torch.ones(self.d)
        return torch.sin(t), torch.cos(t)

    def forward(self, x):
        self.sin, self.cos = self._build(x.shape[1])
        return x * self.cos + x * self.sin
"""


@on_both_targets
def test_buffers_in_a_tuple_target_are_written(tmp_path: Path, target: str) -> None:
    code = transpile(TUPLE_TARGET, to=target).code
    assert "self.sin, self.cos = self._build(" in code
    verdict = convert_and_verify(tmp_path, TUPLE_TARGET, target, "Rope()", ["float32[2,5,8]"], name="rope")
    assert verdict.passed, verdict
