"""A tensor method no table maps is reported where it cannot be converted, never passed through
silently (it would fail when the converted code runs): rewrite/engine.py with the method names of
mappings/torch_surface.yaml."""

from __future__ import annotations

import pytest

from precision_transpiler import transpile

SRC = """\
import torch
import torch.distributed as dist


def f(x, d, s):
    h = torch.zeros(3)
    a = h.kthvalue(2)
    h.index_put_((x,), h)
    x.share_memory_()
    b = s.strip().split(",")
    c = d.items()
    rank = dist.new_group()
    return a, b, c, x.float(), x.sparse_mask(h), rank
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_unmapped_tensor_methods_are_reported_at_their_position(to: str) -> None:
    result = transpile(SRC, to=to, path="m.py")
    reported = [d.format() for d in result.unsupported]
    assert f"m.py:7:9: unsupported: h.kthvalue(...): the tensor method kthvalue has no mapping to {to}" in reported
    assert any(r.startswith("m.py:8:5: unsupported: h.index_put_(...)") for r in reported), reported
    # an in-place method Python's types do not have: a tensor whatever the receiver
    assert any(r.startswith("m.py:9:5: unsupported: x.share_memory_(...)") for r in reported), reported
    # outside models: the reason is said with the symbol
    assert any(
        r.startswith("m.py:12:12: unsupported: torch.distributed.new_group has no mapping")
        and "distributed training" in r
        for r in reported
    ), reported
    assert "# ptranspile: unsupported: h.kthvalue(...)" in result.code
    # str and dict methods, and a method of an argument not known to be a tensor, are left alone
    assert not [r for r in reported if ":10:" in r or ":11:" in r or "sparse_mask" in r], reported


def test_methods_of_the_module_itself_and_mapped_methods_are_not_reported() -> None:
    src = (
        "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        self.requires_grad_(False)\n        h = torch.ones(2)\n"
        "        return h.logical_not_(), x.float()\n"
    )
    result = transpile(src, to="jax", path="m.py")
    assert not result.unsupported, [d.format() for d in result.unsupported]


HELD_FLOW = """
import torch
import torch.nn as nn


class Perm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("idx", torch.arange(n).flip(0))

    def forward(self, x):
        return x[:, self.idx]

    def inverse(self, x):
        return x[:, torch.argsort(self.idx)]


class Flow(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.permutation = Perm(n)
        self.w = torch.Tensor(n, n)

    def forward(self, x):
        return self.permutation.inverse(x), self.w.inverse(x)
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_a_method_of_a_held_module_named_like_a_tensor_method_is_not_reported(to: str) -> None:
    """nflows' `self.permutation.inverse(outputs)`: the flow's own method on a module the class
    holds, reported as a tensor `.inverse(...)` no pattern matches (and marked in the output);
    on an attribute that holds a tensor (`torch.Tensor(n, n)`) the report stays."""
    result = transpile(HELD_FLOW, to=to, path="m.py")
    reported = [d.format() for d in result.unsupported]
    assert len(reported) == 1 and reported[0].startswith("m.py:25:45: unsupported: .inverse(...)"), reported
    assert "self.permutation.inverse(x)" in result.code
