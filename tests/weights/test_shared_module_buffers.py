"""A module registered under two names (performer's `ProjectionUpdater` holds the model's `net`
as `instance`) has its buffers under both names in torch's state_dict; a buffer of a child read
into a parent attribute (`self.degrees = linear.degrees`) is named once, under the child. Both
load into the converted Flax and Keras models, and the conversions verify."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

SHARED = """import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.register_buffer("projection", torch.randn(dim, dim))
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x @ self.projection)


class Updater(nn.Module):
    def __init__(self, instance):
        super().__init__()
        self.instance = instance
        self.register_buffer("calls", torch.tensor(0))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(Attention(), nn.ReLU(), Attention())
        self.updater = Updater(self.net)
        self.first = self.net[0].projection  # a child's buffer read into the parent

    def forward(self, x):
        return self.net(x) + self.first.sum()
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_buffers_of_a_shared_module_load_under_every_name(tmp_path: Path, target: str) -> None:

    namespace: dict[str, object] = {}
    exec(compile(SHARED, "shared.py", "exec"), namespace)
    keys = list(namespace["Net"]().state_dict())  # type: ignore[operator]
    assert "net.0.projection" in keys and "updater.instance.0.projection" in keys and "first" not in keys
    original = tmp_path / "shared.py"
    original.write_text(SHARED, encoding="utf-8")
    converted = tmp_path / f"shared_{target}.py"
    converted.write_text(transpile(SHARED, to=target, path=str(original)).code, encoding="utf-8")
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,8]"], torch_free=True))
    assert verdict.passed, verdict.failures
