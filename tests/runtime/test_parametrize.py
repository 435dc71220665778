"""torch.nn.utils' weight reparametrisations (`weight_norm`, `spectral_norm`, and their
`parametrizations` forms) on converted layers: runtime/{flax,keras}/parametrize.py give the layer
a subclass (same name) whose weight is computed from parameters held under torch's state-dict
names, so the torch checkpoint loads as it is. Inference uses the stored power-iteration vectors
as torch's eval mode does; a training call takes torch's power-iteration step and stores it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

SOURCE = """import torch
from torch import nn
from torch.nn.utils import spectral_norm, weight_norm
from torch.nn.utils import parametrizations


class Net(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.a = weight_norm(nn.Linear(d, d))
        self.b = parametrizations.weight_norm(nn.Conv1d(d, d, 3, padding=1), dim=None)
        self.c = spectral_norm(nn.Linear(d, d))
        self.d = parametrizations.spectral_norm(nn.ConvTranspose1d(d, d, 3, padding=1))
        self.e = parametrizations.spectral_norm(nn.Linear(d, d), n_power_iterations=2)

    def forward(self, x):
        y = self.c(self.a(x)).transpose(1, 2)
        y = self.d(self.b(y)).transpose(1, 2)
        return self.e(y)
"""

TORCH_KEYS = {
    "a.bias", "a.weight_g", "a.weight_v",
    "b.bias", "b.parametrizations.weight.original0", "b.parametrizations.weight.original1",
    "c.bias", "c.weight_orig", "c.weight_u", "c.weight_v",
    "d.bias", "d.parametrizations.weight.original", "d.parametrizations.weight.0._u", "d.parametrizations.weight.0._v",
    "e.bias", "e.parametrizations.weight.original", "e.parametrizations.weight.0._u", "e.parametrizations.weight.0._v",
}  # fmt: skip


def _convert(tmp_path: Path, target: str) -> tuple[Path, Path]:
    original = tmp_path / "model.py"
    original.write_text(SOURCE, encoding="utf-8")
    result = transpile(SOURCE, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    return original, converted


def _load(path: Path, name: str):  # a module
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_reparametrised_layers_verify(tmp_path: Path, target: str) -> None:
    original, converted = _convert(tmp_path, target)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,5,8]"], torch_free=True)
    verdict = verify_files(original, converted, options)
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_torch_keys_and_training_power_iteration(tmp_path: Path, target: str) -> None:
    """The state dict has torch's keys; a training call updates the vectors as torch's does."""
    import torch

    original, converted = _convert(tmp_path, target)
    torch.manual_seed(0)
    reference = _load(original, f"reference_{target}").Net()
    model = _load(converted, f"converted_{target}").Net()
    with torch.no_grad():  # vectors away from convergence, so that a step shows
        for key, value in reference.state_dict().items():
            if key in ("c.weight_u", "c.weight_v") or key.endswith(("._u", "._v")):
                value.copy_(torch.nn.functional.normalize(torch.randn_like(value), dim=0))
    state = {k: v.detach().numpy().copy() for k, v in reference.state_dict().items()}
    assert set(state) == TORCH_KEYS
    assert set(model.state_dict()) == TORCH_KEYS
    model.load_state_dict(state)
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    reference.train()
    model.train()
    with torch.no_grad():
        expected = reference(torch.from_numpy(x)).numpy()
    got = np.asarray(model(x))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    after = {k: np.asarray(v) for k, v in model.state_dict().items()}
    for key in ("c.weight_u", "e.parametrizations.weight.0._v"):
        np.testing.assert_allclose(after[key], reference.state_dict()[key].numpy(), rtol=1e-4, atol=1e-6)
        assert not np.allclose(after[key], state[key])
