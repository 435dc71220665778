"""runtime/keras/modules.py `TorchModule.__call__`: arguments reach `call` as torch passes them,
around Keras' own handling of `mask` arguments (Keras fills a `mask` that is None with the
inputs' Keras mask, as a keyword)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import convert_and_verify

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_tf]

SOURCE = """import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, dim * 3)

    def forward(self, x, mask=None, rotary_pos_emb=None):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        sim = q @ k.transpose(-1, -2)
        if mask is not None:
            sim = sim.masked_fill(~mask[:, None, :], -1e9)
        if rotary_pos_emb is not None:
            sim = sim * rotary_pos_emb
        return sim.softmax(dim=-1) @ v


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x, *args, **kwargs):
        return self.fn(self.norm(x), *args, **kwargs)


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.attn = PreNorm(dim, Attention(dim))

    def forward(self, x, mask=None):
        return self.attn(x, mask, None) + self.attn(x, None, 2.0)
"""


@pytest.mark.parametrize("inputs", [["float32[1,4,8]"], ["float32[1,4,8]", "bool[1,4]"]])
def test_a_mask_passed_positionally_reaches_call_once(tmp_path: Path, inputs: list[str]) -> None:
    """x-clip's `attn(x, mask, rotary_pos_emb)` through PreNorm's `*args`: with no mask, Keras
    added `mask=None` as a keyword beside the positional one (`got multiple values for argument
    'mask'`)."""
    verdict = convert_and_verify(tmp_path, SOURCE, "tf", "Block()", inputs, name="masked")
    assert verdict.passed, verdict


CHECKED = """import functools

import torch
from torch import nn


def checked(init):
    @functools.wraps(init)
    def wrapper(*args, **kwargs):
        return init(*args, **kwargs)

    return wrapper


class Gate(nn.Module):
    @checked
    def __init__(self, dim=8, gates=2):
        super().__init__()
        self.fc = nn.Linear(dim, gates)

    def forward(self, x):
        return self.fc(x).softmax(dim=-1)
"""


def test_a_constructor_under_a_wrapper_taking_only_args_and_kwargs_builds(tmp_path: Path) -> None:
    """st-moe-pytorch's `@beartype` on `__init__`: Keras reads the first positional name of the
    constructor's argument spec, which such a wrapper lacks (IndexError while building)."""
    verdict = convert_and_verify(tmp_path, CHECKED, "tf", "Gate()", ["float32[2,8]"], name="checked")
    assert verdict.passed, verdict


ROTARY = """import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim=8, width=4):
        super().__init__()
        self.width = width
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self):
        t = torch.arange(self.width).float()
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        return torch.cat((freqs, freqs), dim=-1)


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.rotary = RotaryEmbedding(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x) * self.rotary().cos()
"""


def test_a_module_called_without_arguments_runs_its_forward(tmp_path: Path) -> None:
    """block-recurrent-transformer-pytorch's `self.rotary_pos_emb()`: Keras' `Layer.__call__`
    reads a first argument (IndexError with none)."""
    verdict = convert_and_verify(tmp_path, ROTARY, "tf", "Block()", ["float32[1,4,8]"], name="rotary")
    assert verdict.passed, verdict
