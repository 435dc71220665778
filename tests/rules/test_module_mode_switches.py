"""`m.eval()` and `self.m.train(mode)` on modules the code holds but did not define
(rules/module_walks.py, runtime/{flax,keras}/modules.py `torch_eval`, `torch_train`).

A layer handed to a constructor (`self.base_model.eval()`, neuraloperator's UQNO) may be a runtime
or Keras layer, which has no `eval`; nnx's `eval()` returns None where torch's returns the module
(`self.head = nn.Sequential(...).eval()`). Each case converts to JAX and Keras and verifies; the
no-op cases are the calls that are not torch's mode switch."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

MODES = """import torch
from torch import nn


class Wrap(nn.Module):
    def __init__(self, base):
        super().__init__()
        self.base_model = base
        self.base_model.eval()
        self.head = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).eval()
        self.head.train(False)

    def forward(self, x):
        return self.head(self.base_model(x))


def build():
    model = Wrap(nn.Linear(4, 4))
    return model.eval()
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_mode_switches_on_held_layers_return_the_module(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, MODES, target, "build()", ["float32[2,4]"], name="modes")
    assert verdict.passed, verdict


def test_the_calls_become_the_runtime_functions() -> None:
    code = transpile(MODES, to="tf").code
    assert "torch_eval(self.base_model)" in code
    assert "self.head = torch_eval(Sequential(Linear(4, 4), Dropout(0.5)))" in code
    assert "torch_train(self.head, False)" in code and "return torch_eval(model)" in code


NO_OP = """from torch import nn


class Net(nn.Module):
    def __init__(self, trainer):
        super().__init__()
        self.trainer = trainer
        self.eval()
        self.train(True)

    def fit(self, data, expr):
        self.trainer.train(data, epochs=3)
        trainer = self.trainer
        trainer.train()
        return expr.eval(1)
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_other_eval_and_train_calls_stay(target: str) -> None:
    code = transpile(NO_OP, to=target).code
    code = code[code.index("class Net(") :]  # (the runtime inlined above it)
    assert "torch_eval" not in code and "torch_train" not in code
    for call in ("self.eval()", "self.train(True)", "self.trainer.train(data, epochs=3)", "trainer.train()"):
        assert call in code
    assert "expr.eval(1)" in code
