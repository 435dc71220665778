"""The runtime's layers take torch's arguments in torch's positional order, `device` and `dtype`
included: a subclass calls `super().__init__(normalized_shape, eps, elementwise_affine, bias,
device, dtype)` as torch-uncertainty's ChannelLayerNorm does, and so do direct calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import convert_and_verify

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

SOURCE = """import torch
from torch import nn


class ChannelLayerNorm(nn.LayerNorm):
    def __init__(self, num_channels, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__(num_channels, eps, elementwise_affine, bias, device, dtype)

    def forward(self, x):
        return super().forward(x.transpose(1, -1)).transpose(1, -1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, 1, 1, 1, 1, True, "zeros", None, None)
        self.norm = ChannelLayerNorm(4)
        self.rms = nn.RMSNorm(4, None, True, None, None)
        self.attn = nn.MultiheadAttention(4, 2, 0.0, True, False, False, None, None, True, None, None)

    def forward(self, x):
        h = self.norm(self.conv(x)).flatten(2).transpose(1, 2)
        return self.attn(self.rms(h), h, h)[0]
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_device_and_dtype_by_position(to: str, tmp_path: Path) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, to, "Net()", ["float32[2,3,4,4]"], name="positional")
    assert verdict.passed, verdict
