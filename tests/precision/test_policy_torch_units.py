"""Small, exact checks of what the torch policy pass inserts (real models are in
tests/precision/test_policy_torch_real.py)."""

from __future__ import annotations

from precision_transpiler import transpile

SRC = """import torch
from torch import nn


def attention(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v


def unrelated(x):
    return x


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return attention(self.norm(x), x, x)
"""


def test_helpers_of_a_model_file_get_islands_too() -> None:
    result = transpile(SRC, to="torch", policy="mixed")
    code = result.code
    assert "weights = torch.softmax(_ptranspile_fp32(q @ k.transpose(-2, -1)), dim=-1)" in code
    assert "return attention(self.norm(_ptranspile_fp32(x)), x, x)" in code
    assert "    @_ptranspile_policy\n    def forward(self, x):" in code
    where = {(d.where, d.action) for d in result.precision}
    assert where == {
        ("attention", "fp32 island"),
        ("Block.forward", "fp32 island"),
        ("Block.forward", "autocast region"),
    }
    assert transpile(code, to="torch", policy="fp32").code == SRC


def test_torch_import_added_for_helpers_when_missing() -> None:
    src = "from torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x\n"
    code = transpile(src, to="torch", policy="mixed").code
    assert "import torch  # ptranspile: policy helpers\n" in code
    namespace: dict = {}
    exec(compile(code, "<m>", "exec"), namespace)  # the helpers resolve `torch`
    assert transpile(code, to="torch", policy="fp32").code == src
