"""Which receivers a tensor attribute or method pattern takes (rules/op_arguments.py): a module
bound by `import X` is never a tensor, so `esm.data.Alphabet` (a package's `data` submodule) stays
as written while `x.data` of a tensor converts; torch's own modules were already excluded
(`torch.utils.data`)."""

from __future__ import annotations

import pytest

from precision_transpiler import transpile

SOURCE = """import collections
import torch
import torch.nn as nn
import mypkg
import mypkg.data as alphabets


class Model(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        alphabet = mypkg.data.Alphabet()
        self.size = alphabets.T + len(collections.data) if False else alphabet.n
        self.embed = nn.Embedding(alphabet.n, dim)

    def forward(self, idx):
        y = self.embed(idx)
        return y.data + y.T
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_imported_modules_are_not_tensors(target: str) -> None:
    code = transpile(SOURCE, to=target).code
    assert "alphabet = mypkg.data.Alphabet()" in code
    assert "alphabets.T + len(collections.data)" in code
    assert "stop_gradient(y)" in code  # a tensor's `.data` still converts
