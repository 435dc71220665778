"""In-place methods on attribute chains (rules/torch_inplace_ops_model.py, analysis/inplace.py):
`self.proj.bias.copy_(v)` in a constructor sets a layer's parameter while building (dropped with
the initialisation note: the torch checkpoint holds the value), and `self.scale.data.clamp_(lo,
hi)` in a forward pass updates the module's own parameter (`self.scale[...] = ...` on Flax,
`self.scale.assign(...)` on Keras), as torch changes it in place."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, d: int = 8):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.scale = nn.Parameter(torch.ones(1) * 5)
        with torch.no_grad():
            self.proj.bias.copy_(torch.full((d,), 0.5))

    def forward(self, x):
        self.scale.data.clamp_(0.0, 4.0)
        return self.proj(x) * self.scale
"""


@on_both_targets
def test_attribute_chains_convert_and_verify(tmp_path: Path, target: str) -> None:
    result = transpile(SOURCE, to=target)
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert "copy_" not in result.code and "clamp_" not in result.code
    assert any("initialisation is not converted" in d.message for d in result.diagnostics)
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,8]"], name="chains")
    assert verdict.passed, verdict


CACHE = """import torch
from torch import nn


class Cache(nn.Module):
    def __init__(self, n: int = 8, d: int = 4):
        super().__init__()
        self.register_buffer("cached", torch.zeros(n, d), persistent=False)
        self.offset = nn.Parameter(torch.zeros(d))
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        seq = x.shape[0]
        self.cached[:seq] = self.proj(x).detach()
        self.offset[0] += 1.0
        return self.cached[:seq] * 2 + self.offset
"""


@on_both_targets
def test_item_stores_into_buffers_and_parameters_are_kept(tmp_path: Path, target: str) -> None:
    """rotary-embedding-torch fills a slice of its cache buffer in forward: the runtime's
    variables take item assignment (an nnx.Variable, the Keras Parameter and Buffer), so the
    statement stays as written and nothing is reported."""
    result = transpile(CACHE, to=target)
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert "self.cached[:seq] = " in result.code
    verdict = convert_and_verify(tmp_path, CACHE, target, "Cache()", ["float32[5,4]"], name="cache")
    assert verdict.passed, verdict
