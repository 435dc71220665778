"""Flax NNX -> Flax NNX precision policies, executed with real JAX.

Flax model code is not shipped inside installed packages the way torchvision and
keras.applications ship theirs, so the models here are written in the style of the Flax NNX
examples (a CNN with BatchNorm and a pre-norm transformer block with softmax attention).
"""

from __future__ import annotations

import numpy as np
import pytest

from precision_transpiler import transpile

pytestmark = pytest.mark.needs_jax

jax = pytest.importorskip("jax")

MODEL = """
import jax
import jax.numpy as jnp
from flax import nnx


class CNN(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(3, 16, kernel_size=(3, 3), rngs=rngs)
        self.bn1 = nnx.BatchNorm(16, use_running_average=True, rngs=rngs)
        self.conv2 = nnx.Conv(16, 32, kernel_size=(3, 3), rngs=rngs)
        self.head = nnx.Linear(32, 10, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.bn1(self.conv1(x)))
        x = nnx.relu(self.conv2(x))
        return self.head(x.mean(axis=(1, 2)))


class Block(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(dim, rngs=rngs)
        self.qkv = nnx.Linear(dim, 3 * dim, rngs=rngs)
        self.out = nnx.Linear(
            dim,
            dim,
            rngs=rngs,
        )

    def __call__(self, x):
        q, k, v = jnp.split(self.qkv(self.norm(x)), 3, axis=-1)
        weights = jax.nn.softmax(q @ k.swapaxes(-1, -2) / 8.0, axis=-1)
        return x + self.out(weights @ v)
"""


def _load(code: str) -> dict:
    namespace: dict = {}
    exec(compile(code, "<flax-model>", "exec"), namespace)
    return namespace


def _copy_state(src, dst) -> None:
    from flax import nnx

    nnx.update(dst, nnx.state(src))


def _rel(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["CNN", "Block"])
def test_mixed_policy_runs_in_bf16_with_fp32_outputs(name: str) -> None:
    from flax import nnx

    result = transpile(MODEL, to="jax", policy="mixed")
    assert not result.errors and not result.unsupported, result.diagnostics
    original, mixed = _load(MODEL), _load(result.code)
    args = (nnx.Rngs(0),) if name == "CNN" else (64, nnx.Rngs(0))
    reference = original[name](*args)
    converted = mixed[name](*args)
    _copy_state(reference, converted)
    shape = (2, 16, 16, 3) if name == "CNN" else (2, 12, 64)
    x = jax.random.normal(jax.random.key(1), shape)
    fp32, ours = reference(x), converted(x)
    assert ours.dtype == jax.numpy.float32
    err = _rel(ours, fp32)
    assert 0 < err < 3e-2, err  # bf16 compute: a visible but small error
    if name == "Block":
        assert converted.norm.dtype == jax.numpy.float32  # keep-fp32 class
        assert converted.qkv.dtype == jax.numpy.bfloat16 and converted.qkv.param_dtype == jax.numpy.float32
        assert converted.qkv.kernel[...].dtype == jax.numpy.float32
        assert converted.out.preferred_element_type == jax.numpy.float32


def test_bf16_policy_stores_bf16_params_and_roundtrips() -> None:
    from flax import nnx

    bf16 = transpile(MODEL, to="jax", policy="bf16").code
    block = _load(bf16)["Block"](64, nnx.Rngs(0))
    assert block.qkv.kernel[...].dtype == jax.numpy.bfloat16
    assert block.norm.scale[...].dtype == jax.numpy.float32
    out = block(jax.numpy.ones((1, 4, 64)))
    assert out.dtype == jax.numpy.bfloat16
    mixed = transpile(MODEL, to="jax", policy="mixed").code
    assert transpile(mixed, to="jax", policy="mixed").code == mixed
    assert transpile(mixed, to="jax", policy="fp32").code == MODEL
    assert transpile(bf16, to="jax", policy="fp32").code == MODEL


def test_nan_fallback_recomputes_in_fp32(caplog) -> None:
    from flax import nnx

    src = (
        "import jax\nimport jax.numpy as jnp\nfrom flax import nnx\n\n\nclass Big(nnx.Module):\n"
        "    def __init__(self, rngs: nnx.Rngs):\n"
        "        self.fc = nnx.Linear(4, 4, kernel_init=nnx.initializers.ones, rngs=rngs)\n\n"
        "    def __call__(self, x):\n        return self.fc(x) * 1e5\n"
    )
    x = jax.numpy.ones((1, 4))
    plain = _load(transpile(src, to="jax", policy="fp16").code)["Big"](nnx.Rngs(0))
    assert not np.isfinite(np.asarray(plain(x), dtype=np.float32)).all()  # 4e5 overflows float16
    code = transpile(src, to="jax", policy="fp16", nan_fallback=True).code
    model = _load(code)["Big"](nnx.Rngs(0))
    with caplog.at_level("WARNING", logger="ptranspile"):
        out = model(x)
    assert out.dtype == jax.numpy.float32
    np.testing.assert_allclose(np.asarray(out), 4e5, rtol=1e-2)
    assert "recomputing in float32" in caplog.text
    assert model.fc.dtype == jax.numpy.float16  # layers restored after the recomputation
