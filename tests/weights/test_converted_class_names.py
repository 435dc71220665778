"""A converted module class keeps torch's parameter names whatever it is called: a user's
`RMSNorm(nn.Module)` holding `scale` is not Flax's `nnx.RMSNorm` (whose torch `weight` is its
`scale`), so the weight loader and `state_dict` skip the name tables for converted classes
(weights/torch_to_flax.py `_rules_for`, runtime/flax/module_api.py `_torch_param_names`)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int = 16, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.scale


class LayerNorm(nn.LayerNorm):  # a subclass of the layer keeps the layer's table
    pass


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = RMSNorm()
        self.b = LayerNorm(16)

    def forward(self, x):
        return self.b(self.a(x))
"""


@on_both_targets
def test_user_class_named_like_a_layer_keeps_its_names(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,16]"], name="named")
    assert verdict.passed, verdict
