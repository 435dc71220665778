"""Layers whose weights torch lets have no elements build on Flax too (rules/torch_layers_model.py).

torch builds `nn.Linear(c, c // 16)` for c < 16 (a squeeze-excitation width of 0 in a small
configuration, pytorchcv's CGNet) with a (0, c) weight, and its init skips it; the forward gives
an empty output, and the next `nn.Linear(0, c)` gives its bias. Flax's default initializers
divide by the fan, so `nnx.Linear(4, 0)` and `nnx.Embed(3, 0)` raise ZeroDivisionError while the
model is built. The layer table's `sizes` names the arguments that size the weight: where one may
be 0 (0 itself, or computed by dividing or subtracting, also through a name: `mid = channels //
reduction`), the call gets the runtime's initializer, which draws as Flax's default does and
builds an empty weight too (`sized_init`); other sizes keep the bare call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SQUEEZE = """import torch
from torch import nn


class Squeeze(nn.Module):
    def __init__(self, channels=4, reduction=16, vocabulary=3):
        super().__init__()
        mid = channels // reduction
        self.fc1 = nn.Linear(channels, mid)
        self.fc2 = nn.Linear(in_features=mid, out_features=channels)
        self.table = nn.Embedding(vocabulary, mid)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        w = torch.sigmoid(self.fc2(torch.relu(self.fc1(x.mean(-1)))))
        return self.head(x.mean(-1) * w), self.table(torch.zeros(x.shape[0], dtype=torch.long)).shape
"""


@on_both_targets
def test_zero_width_layers_build_and_compute_what_torch_computes(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SQUEEZE, target, "Squeeze()", ["float32[2,4,5]"], name="squeeze")
    assert verdict.passed, verdict


@pytest.mark.needs_jax
def test_only_sizes_that_may_be_zero_get_the_initializer() -> None:
    code = transpile(SQUEEZE, to="jax").code
    assert "self.fc1 = nnx.Linear(channels, mid, kernel_init=linear_kernel_init, rngs=rngs)" in code
    assert "self.fc2 = nnx.Linear(mid, channels, kernel_init=linear_kernel_init, rngs=rngs)" in code
    assert "self.table = nnx.Embed(vocabulary, mid, embedding_init=embed_init, rngs=rngs)" in code
    assert "self.head = nnx.Linear(4, 2, rngs=rngs)" in code
    plain = "from torch import nn\n\n\ndef mlp(dim, hidden):\n    width = hidden * 2\n"
    plain += "    return nn.Sequential(nn.Linear(dim, width), nn.Linear(width, dim))\n"
    assert "kernel_init" not in transpile(plain, to="jax").code  # sizes code means to be positive


@pytest.mark.needs_jax
def test_the_initializer_draws_what_flax_draws() -> None:
    """Where the weight has elements, the same values as Flax's default (nothing else changes)."""
    import jax
    from flax import nnx

    from precision_transpiler.runtime.flax.layers import Embedding, Linear, embed_init, linear_kernel_init

    key = jax.random.key(0)
    assert (linear_kernel_init(key, (4, 3)) == nnx.initializers.lecun_normal()(key, (4, 3))).all()
    default = nnx.initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0)
    assert (embed_init(key, (5, 2)) == default(key, (5, 2))).all()
    assert (nnx.Linear(4, 3, rngs=nnx.Rngs(1)).kernel[...] == Linear(4, 3, rngs=nnx.Rngs(1)).kernel[...]).all()
    # the torch-signature classes (a layer class handed around) build empty weights too
    assert Linear(4, 0, rngs=nnx.Rngs(0)).kernel[...].shape == (4, 0)
    assert Embedding(0, 3, rngs=nnx.Rngs(0)).embedding[...].shape == (0, 3)
