"""Reads at tensor indices converted to Keras (rules/torch_tensor_index_tf.py) compute what torch
computes: gathers on one axis, negative indices, boolean masks, several index arrays, and a
registered buffer used as an index (Swin's relative position bias)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf
import torch

from precision_transpiler import transpile
from tests.runtime.test_tensor_ops_execute_tf import plain_tf

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_tf]

HEADER = "import torch\nfrom torch import nn\n\n\n"
CASES = {
    "gather rows": "def f(x: torch.Tensor, i: torch.Tensor):\n    return x[i]\n",
    "gather columns, negative": "def f(x: torch.Tensor, i: torch.Tensor):\n    return x[:, i - 3]\n",
    "boolean mask": "def f(x: torch.Tensor, i: torch.Tensor):\n    return x[x > 0.5]\n",
    "two arrays": "def f(x: torch.Tensor, i: torch.Tensor):\n    return x[i, i]\n",
    "bound by a torch call": "def f(x: torch.Tensor, i: torch.Tensor):\n    j = torch.flip(i, [0])\n    return x[j]\n",
    # Swin's `table[index.view(-1)].view(...)`: a read whose result a method is called on
    "then a method": "def f(x: torch.Tensor, i: torch.Tensor):\n    return x[i.view(-1)].view(-1).abs()\n",
}


@pytest.mark.parametrize("name", list(CASES))
def test_tensor_index_reads_match_torch(name: str) -> None:
    source = HEADER + CASES[name]
    result = transpile(source, to="tf")
    assert not result.unsupported and "torch_at(x)[" in result.code, result.code
    namespace: dict[str, Any] = {}
    exec(compile(source, "t.py", "exec"), namespace)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    x = np.random.default_rng(0).random((3, 3)).astype(np.float32)
    i = np.array([2, 0, 2, 1])
    expected = namespace["f"](torch.from_numpy(x), torch.from_numpy(i)).numpy()
    got = plain_tf(converted["f"](tf.convert_to_tensor(x), tf.convert_to_tensor(i)))
    np.testing.assert_array_equal(got, expected)


def test_buffer_index_and_plain_reads() -> None:
    source = HEADER + (
        "class Bias(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.table = nn.Parameter(torch.arange(6.0))\n"
        '        self.register_buffer("index", torch.tensor([[5, 0], [1, 1]]))\n\n'
        "    def forward(self, x):\n        rows = [x, x]\n        return self.table[self.index] + x[0] + rows[0]\n"
    )
    result = transpile(source, to="tf")
    assert "torch_at(self.table)[self.index].get()" in result.code
    assert "x[0]" in result.code and "rows[0]" in result.code  # basic reads and lists stay as they are
    namespace: dict[str, Any] = {}
    exec(compile(source, "t.py", "exec"), namespace)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    x = np.ones((2, 2), np.float32)
    expected = namespace["Bias"]()(torch.from_numpy(x)).detach().numpy()
    got = plain_tf(converted["Bias"]()(tf.convert_to_tensor(x)))
    np.testing.assert_array_equal(got, expected)
