"""torch.autograd.Function subclasses convert: `forward` runs as written, `backward` becomes the
target's gradient rule (runtime/flax/autograd.py: jax.custom_vjp; runtime/keras/autograd.py:
tf.custom_gradient). A straight-through rounding, whose backward is not the derivative of its
forward, gives torch's values and torch's gradients on both targets; inside a model it verifies."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

SOURCE = """import torch
from torch import nn
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class RoundSTE(Function):
    @staticmethod
    def forward(ctx, x, scale, index):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return torch.round(x * scale) / scale + index.float().sum() * 0

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() < 0.5).float() * ctx.scale, None, None


def rounded(x):
    return RoundSTE.apply(x, 4, torch.arange(3))


class Quant(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return rounded(self.fc(x))
"""

X = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4)


def _torch_values_and_grads() -> tuple[np.ndarray, np.ndarray]:
    import torch

    namespace: dict[str, object] = {}
    exec(compile(SOURCE, "torch_source.py", "exec"), namespace)
    x = torch.tensor(X, requires_grad=True)
    y = namespace["rounded"](x)
    (y * torch.arange(1.0, 9.0).reshape(2, 4)).sum().backward()
    return y.detach().numpy(), x.grad.numpy()


def _load(code: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(code, f"{name}.py", "exec"), module.__dict__)
    return module


def test_jax_gets_torch_values_and_the_custom_gradient() -> None:
    import jax
    import jax.numpy as jnp

    result = transpile(SOURCE, to="jax")
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = _load(result.code, "rounded_jax")
    weights = jnp.arange(1.0, 9.0).reshape(2, 4)
    values = converted.rounded(jnp.asarray(X))
    grads = jax.grad(lambda x: (converted.rounded(x) * weights).sum())(jnp.asarray(X))
    want_values, want_grads = _torch_values_and_grads()
    np.testing.assert_allclose(np.asarray(values), want_values, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(grads), want_grads, rtol=1e-6)
    jitted = jax.jit(jax.grad(lambda x: converted.rounded(x).sum()))(jnp.asarray(X))
    assert jitted.shape == X.shape


def test_keras_gets_torch_values_and_the_custom_gradient() -> None:
    import tensorflow as tf

    result = transpile(SOURCE, to="tf")
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = _load(result.code, "rounded_tf")
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        values = converted.rounded(x)
        total = tf.reduce_sum(values * tf.reshape(tf.range(1.0, 9.0), (2, 4)))
    grads = tape.gradient(total, x)
    want_values, want_grads = _torch_values_and_grads()
    np.testing.assert_allclose(values.numpy(), want_values, rtol=1e-6)
    np.testing.assert_allclose(grads.numpy(), want_grads, rtol=1e-6)


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_model_using_a_function_verifies(tmp_path: Path, target: str) -> None:
    original = tmp_path / "quant.py"
    original.write_text(SOURCE, encoding="utf-8")
    converted = tmp_path / f"quant_{target}.py"
    converted.write_text(transpile(SOURCE, to=target, path=str(original)).code, encoding="utf-8")
    verdict = verify_files(
        original, converted, VerifyOptions(entry="Quant()", inputs=["float32[2,4]"], torch_free=True)
    )
    assert verdict.passed, verdict.failures
