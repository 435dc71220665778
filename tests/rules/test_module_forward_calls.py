"""`m.forward(x)` on a module the code holds (rules/module_walks.py, runtime/common.py
`torch_forward`): a Flax or Keras layer and the runtime's containers have no `forward`, so the
call goes through the runtime's function, which takes the object's own `forward` where it has one
(a converted module, the user's own class) and calls the object otherwise. `self.forward(x)` and
`super().forward(x)` stay method calls, and so does `Base.forward(self, x)`, a class's method
called with the instance (its `__call__` on Flax, `call` on Keras); a method merely named like it
stays too."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

SOURCE = """import torch
from torch import nn


class Plain:
    def forward(self, x):  # not a module: its own forward is called
        return x * 2


class Wrap(nn.Module):
    def __init__(self, core):
        super().__init__()
        self.core = core
        self.lin = nn.Linear(4, 4)
        self.plain = Plain()

    def forward(self, x):
        return self.core.forward(x) + self.lin.forward(x) + self.plain.forward(x) + self.forward_one(x)

    def forward_one(self, x):
        return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = Wrap(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))

    def forward(self, x):
        return self.w.forward(x)


class Twice(Net):
    def forward(self, x):  # the base class's forward, called with the instance: its own method
        return Net.forward(self, x) * 2
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_forward_calls_on_held_modules_go_through_the_runtime(to: str, tmp_path: Path) -> None:
    code = transpile(SOURCE, to=to).code
    assert "torch_forward(self.core, x) + torch_forward(self.lin, x) + torch_forward(self.plain, x)" in code
    assert "self.forward_one(x)" in code and "return torch_forward(self.w, x)" in code
    assert f"return Net.{'__call__' if to == 'jax' else 'call'}(self, x) * 2" in code
    verdict = convert_and_verify(tmp_path, SOURCE, to, "Twice()", ["float32[2,4]"], name="forwards")
    assert verdict.passed, verdict
