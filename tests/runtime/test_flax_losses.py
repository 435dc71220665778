"""Loss modules converted torch -> Flax NNX compute torch's values: class weights (a buffer),
label smoothing, ignore_index, reductions, pos_weight."""

from __future__ import annotations

import numpy as np
import pytest

from precision_transpiler import transpile

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax]

torch = pytest.importorskip("torch")
jnp = pytest.importorskip("jax.numpy")

LOSSES = """import torch
import torch.nn as nn


class Losses(nn.Module):
    def __init__(self):
        super().__init__()
        self.ce = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]), label_smoothing=0.1)
        self.ce_plain = nn.CrossEntropyLoss(ignore_index=2, reduction="none")
        self.nll = nn.NLLLoss(ignore_index=1)
        self.mse = nn.MSELoss(reduction="sum")
        self.l1 = nn.L1Loss()
        self.bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0, 1.0, 3.0]))

    def forward(self, x, t):
        return (
            self.ce(x, t),
            self.ce_plain(x, t),
            self.nll(torch.log_softmax(x, 1), t),
            self.mse(x, x * 2),
            self.l1(x, -x),
            self.bce(x, torch.sigmoid(x * 3)),
        )
"""


def test_loss_modules_match_torch() -> None:
    result = transpile(LOSSES, to="jax")
    assert result.ok, [d.format() for d in result.diagnostics]
    assert "import torch" not in result.code
    torch_ns: dict = {}
    exec(compile(LOSSES, "losses.py", "exec"), torch_ns)
    jax_ns: dict = {}
    exec(compile(result.code, "losses_jax.py", "exec"), jax_ns)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    t = np.array([0, 1, 2, 1, 0])
    want = torch_ns["Losses"]()(torch.from_numpy(x), torch.from_numpy(t))
    got = jax_ns["Losses"]()(jnp.asarray(x), jnp.asarray(t))
    assert len(want) == len(got) == 6
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-5, atol=1e-6)
