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


COMPLEX = """import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, real=True):
        super().__init__()
        self.real = real

    def forward(self, x, cfg):
        freqs = torch.polar(torch.ones_like(x), x)
        n = 3.0
        return freqs.real, freqs.imag, self.real, cfg.real, n.real
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_real_and_imag_of_a_known_tensor_convert_and_of_anything_else_stay(target: str) -> None:
    """`freqs_cis.real` (kornia's MoonViT rotary embedding): TensorFlow tensors have no `.real`;
    Python numbers, modules and configs may, so only a known tensor's converts."""
    code = transpile(COMPLEX, to=target).code
    prefix = "jnp" if target == "jax" else "keras.ops"
    assert f"return {prefix}.real(freqs), {prefix}.imag(freqs), self.real, cfg.real, n.real" in code
