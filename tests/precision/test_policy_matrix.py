"""Every built-in policy on every framework, executed: the converted model runs, returns the
policy's output dtype, stays finite, and stays close to the fp32 original (same weights)."""

from __future__ import annotations

import numpy as np
import pytest

from precision_transpiler import transpile
from precision_transpiler.precision.policy import BUILTIN_POLICIES, resolve_policy

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

TORCH_MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.norm = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.gelu(self.norm(self.fc1(x)))), dim=-1)
"""

KERAS_MODEL = """
import keras
from keras import layers


def build():
    inputs = keras.Input(shape=(16,))
    x = layers.Dense(32)(inputs)
    x = layers.LayerNormalization()(x)
    x = layers.Activation("gelu")(x)
    x = layers.Dense(8)(x)
    return keras.Model(inputs, keras.ops.log_softmax(x))
"""

FLAX_MODEL = """
import jax
import jax.numpy as jnp
from flax import nnx


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.fc1 = nnx.Linear(16, 32, rngs=rngs)
        self.norm = nnx.LayerNorm(32, rngs=rngs)
        self.fc2 = nnx.Linear(32, 8, rngs=rngs)

    def __call__(self, x):
        return jax.nn.log_softmax(self.fc2(nnx.gelu(self.norm(self.fc1(x)))), axis=-1)
"""

# 16-bit formats: relative error bound against fp32 (bf16 has 8 bits of mantissa, fp16 11).
BOUND = {"float32": 1e-6, "bfloat16": 5e-2, "float16": 1e-2}


def _exec(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "<policy-matrix>", "exec"), namespace)
    return namespace


def _rel(value, reference) -> float:
    value = np.asarray(value, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    return float(np.linalg.norm(value - reference) / np.linalg.norm(reference))


def _expect(policy_name: str) -> tuple[str, float]:
    policy = resolve_policy(policy_name)
    output = policy.classes.get("output", {}).get("output", policy.output)
    return output, BOUND[policy.compute]


@pytest.mark.parametrize("policy", BUILTIN_POLICIES)
def test_torch(policy: str) -> None:
    torch = pytest.importorskip("torch")
    result = transpile(TORCH_MODEL, to="torch", policy=policy)
    assert not result.errors and not result.unsupported
    torch.manual_seed(0)
    reference = _exec(TORCH_MODEL)["Net"]().eval()
    converted = _exec(result.code)["Net"]().eval()
    converted.load_state_dict(reference.state_dict())
    x = torch.randn(4, 16)
    with torch.no_grad():
        expected, got = reference(x), converted(x)
    output, bound = _expect(policy)
    assert str(got.dtype) == f"torch.{output}"
    assert torch.isfinite(got).all()
    assert _rel(got.float(), expected) <= bound


@pytest.mark.parametrize("policy", BUILTIN_POLICIES)
def test_keras(policy: str) -> None:
    keras = pytest.importorskip("keras")
    result = transpile(KERAS_MODEL, to="tf", policy=policy)
    assert not result.errors and not result.unsupported
    keras.utils.set_random_seed(0)
    reference = _exec(KERAS_MODEL)["build"]()
    converted = _exec(result.code)["build"]()
    converted.set_weights(reference.get_weights())
    x = np.random.default_rng(0).normal(size=(4, 16)).astype("float32")
    expected, got = reference(x), converted(x)
    output, bound = _expect(policy)
    assert keras.backend.standardize_dtype(got.dtype) == output
    got = np.asarray(keras.ops.cast(got, "float32"))
    assert np.isfinite(got).all()
    assert _rel(got, expected) <= bound


@pytest.mark.slow
@pytest.mark.parametrize("policy", BUILTIN_POLICIES)
def test_flax(policy: str) -> None:
    jax = pytest.importorskip("jax")
    from flax import nnx

    result = transpile(FLAX_MODEL, to="jax", policy=policy)
    assert not result.errors and not result.unsupported
    reference = _exec(FLAX_MODEL)["Net"](nnx.Rngs(0))
    converted = _exec(result.code)["Net"](nnx.Rngs(0))
    nnx.update(converted, nnx.state(reference))
    x = jax.random.normal(jax.random.key(0), (4, 16))
    expected, got = reference(x), converted(x)
    output, bound = _expect(policy)
    assert str(got.dtype) == output
    got = np.asarray(got.astype("float32"))
    assert np.isfinite(got).all()
    assert _rel(got, expected) <= bound
