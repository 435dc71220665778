"""`overrides: [{path: ..., compute: float32}]` in a policy file, executed: the generated Flax and
Keras policy code looks the paths up at run time (Flax: NNX graph paths at the outermost call;
Keras: `layers.<i>` / attribute paths, or layer names, when the model is built or first called)
and puts exactly those layers, and what they contain, in float32.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from precision_transpiler import transpile

pytestmark = [pytest.mark.needs_jax, pytest.mark.needs_tf]

_COUNTER = itertools.count()


def _import(code: str, folder: Path) -> ModuleType:
    name = f"_ptx_overrides_{next(_COUNTER)}"
    path = folder / f"{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _policy(folder: Path, *paths: str, base: str = "mixed") -> str:
    lines = [f"extends: {base}", "overrides:"]
    lines += [f'  - path: "{p}"\n    compute: float32' for p in paths]
    file = folder / f"policy_{next(_COUNTER)}.yaml"
    file.write_text("\n".join(lines) + "\n")
    return str(file)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(a64))


# -- Flax NNX ------------------------------------------------------------------------------------

FLAX = """\
import jax
import jax.numpy as jnp
from flax import nnx


class Attention(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.query = nnx.Linear(dim, dim, rngs=rngs)
        self.key = nnx.Linear(dim, dim, rngs=rngs)

    def __call__(self, x):
        weights = jax.nn.softmax(self.query(x) @ self.key(x).swapaxes(-1, -2), axis=-1)
        return x + weights @ x


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.convs = nnx.List(
            [nnx.Conv(3, 8, kernel_size=(3, 3), rngs=rngs), nnx.Conv(8, 8, kernel_size=(3, 3), rngs=rngs)]
        )
        self.block = Attention(8, rngs)
        self.head = nnx.Linear(8, 4, rngs=rngs)

    def __call__(self, x):
        for conv in self.convs:
            x = nnx.relu(conv(x))
        x = self.block(x.reshape(x.shape[0], -1, x.shape[-1]))
        return self.head(x.mean(axis=1))
"""


@pytest.fixture(scope="module")
def flax_inputs() -> list[np.ndarray]:
    pytest.importorskip("flax.nnx")
    return [np.random.default_rng(0).standard_normal((2, 6, 6, 3)).astype(np.float32)]


def _flax_layers(module: ModuleType, inputs: list[np.ndarray], original: ModuleType) -> dict[str, float]:
    """Per-layer relative error of `module.Net` against the float32 `original.Net` on the same weights."""
    from flax import nnx

    from precision_transpiler.verify.adapters.flax_adapter import FlaxAdapter

    adapter = FlaxAdapter()
    reference, converted = original.Net(nnx.Rngs(0)), module.Net(nnx.Rngs(1))
    adapter.prepare(reference, inputs, seed=0, perturb=True, calibrate_bn=False)
    adapter.copy_weights(reference, converted)
    base, ours = adapter.run(reference, inputs, capture=True), adapter.run(converted, inputs, capture=True)
    assert [d for _, _, d in ours.outputs] == ["float32"]
    return {p: _rel(base.layers[p][0], ours.layers[p][0]) for p in base.order}


@pytest.mark.slow
def test_flax_path_override_runs_that_layer_in_fp32(tmp_path: Path, flax_inputs: list[np.ndarray]) -> None:
    import jax.numpy as jnp
    from flax import nnx

    original = _import(FLAX, tmp_path)
    code = transpile(FLAX, to="jax", policy=_policy(tmp_path, "convs.0")).code
    assert "_PTRANSPILE_FP32_PATHS = ('convs.0',)" in code
    overridden = _import(code, tmp_path)
    errors = _flax_layers(overridden, flax_inputs, original)
    assert errors["convs.0"] == 0.0  # float32 compute on the same float32 input and weights: exact
    assert errors["convs.1"] > 1e-4 and errors["head"] > 1e-4  # bfloat16 compute
    model = overridden.Net(nnx.Rngs(0))
    model(jnp.asarray(flax_inputs[0]))
    assert model.convs[0].dtype == jnp.float32 and model.convs[0].preferred_element_type is None
    assert model.convs[1].dtype == jnp.bfloat16 and model.convs[1].preferred_element_type == jnp.float32

    plain = _import(transpile(FLAX, to="jax", policy="mixed").code, tmp_path)
    assert _flax_layers(plain, flax_inputs, original)["convs.0"] > 1e-4  # without the override


@pytest.mark.slow
def test_flax_glob_covers_the_module_and_what_it_contains(tmp_path: Path, flax_inputs: list[np.ndarray]) -> None:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    module = _import(transpile(FLAX, to="jax", policy=_policy(tmp_path, "bl*", "*.1")).code, tmp_path)
    model = module.Net(nnx.Rngs(0))
    out = nnx.jit(lambda m, x: m(x))(model, jnp.asarray(flax_inputs[0]))  # first call under jit
    assert out.dtype == jnp.float32
    assert model.block.query.dtype == model.block.key.dtype == model.convs[1].dtype == jnp.float32
    assert model.convs[0].dtype == model.head.dtype == jnp.bfloat16
    eager = model(jnp.asarray(flax_inputs[0]))
    assert float(jax.numpy.abs(eager - out).max()) < 1e-5


def test_flax_overrides_strip_exactly(tmp_path: Path) -> None:
    policy = _policy(tmp_path, "convs.0")
    code = transpile(FLAX, to="jax", policy=policy).code
    assert transpile(code, to="jax", policy=policy).code == code
    assert transpile(code, to="jax", policy="fp32").code == FLAX
    assert "_ptranspile_apply_paths" not in transpile(FLAX, to="jax", policy="mixed").code


# -- Keras 3 -------------------------------------------------------------------------------------

KERAS = """\
import keras
from keras import layers


def functional():
    inputs = keras.Input(shape=(10, 10, 3))
    x = layers.Conv2D(8, 3, activation="relu")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Conv2D(8, 3, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(8, activation="relu")(x)
    logits = layers.Dense(4, name="classifier")(x)
    return keras.Model(inputs, logits)


def sequential():
    return keras.Sequential([keras.Input((6,)), layers.Dense(8), layers.Dense(8), layers.Dense(2)])


class Block(layers.Layer):
    def __init__(self, dim: int, **kwargs):
        super().__init__(**kwargs)
        self.norm = layers.LayerNormalization()
        self.dense = layers.Dense(dim, activation="gelu")

    def call(self, x):
        return self.dense(self.norm(x))


class Net(keras.Model):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.proj = layers.Dense(dim)
        self.blocks = [Block(dim), Block(dim)]
        self.head = layers.Dense(4)

    def call(self, x):
        x = self.proj(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)
"""


def _keras_dtypes(model, x: np.ndarray) -> tuple[dict[str, str], object]:
    """Layer path -> dtype of its output (first call), by the verifier's path scheme."""
    from precision_transpiler.verify.adapters.keras_adapter import walk

    found: dict[str, str] = {}

    def recording(call, path):
        def run(*args, **kwargs):
            out = call(*args, **kwargs)
            found.setdefault(path, str(out.dtype.name if hasattr(out.dtype, "name") else out.dtype))
            return out

        return run

    model(x, training=False)  # build, apply the overrides
    patched = []
    for path, layer in walk(model):
        object.__setattr__(layer, "call", recording(layer.call, path))
        patched.append(layer)
    try:
        out = model(x, training=False)
    finally:
        for layer in patched:
            layer.__dict__.pop("call", None)
    return found, out


def test_keras_functional_path_and_name_overrides(tmp_path: Path) -> None:
    keras = pytest.importorskip("keras")
    from precision_transpiler.verify.adapters.keras_adapter import KerasAdapter

    code = transpile(KERAS, to="tf", policy=_policy(tmp_path, "layers.1", "classif*")).code
    assert "_ptranspile_paths(keras.Model(inputs, _ptranspile_output(logits)))" in code
    module, original = _import(code, tmp_path), _import(KERAS, tmp_path)
    x = np.random.default_rng(0).standard_normal((2, 10, 10, 3)).astype(np.float32)
    model = module.functional()
    dtypes, out = _keras_dtypes(model, x)
    assert dtypes == {
        "layers.1": "float32",  # the path override
        "layers.2": "bfloat16",
        "layers.3": "bfloat16",
        "layers.4": "bfloat16",
        "layers.5": "bfloat16",
        "layers.6": "float32",  # the layer named "classifier"
        "layers.7": "float32",  # the policy's float32 output Activation
    }
    assert str(out.dtype.name) == "float32"

    adapter = KerasAdapter()
    reference, converted = original.functional(), module.functional()
    adapter.prepare(reference, [x], seed=0, perturb=True, calibrate_bn=True)
    adapter.copy_weights(reference, converted)
    base, ours = adapter.run(reference, [x], capture=True), adapter.run(converted, [x], capture=True)
    assert _rel(base.layers["layers.1"][0], ours.layers["layers.1"][0]) == 0.0  # float32, exact
    assert _rel(base.layers["layers.3"][0], ours.layers["layers.3"][0]) > 1e-4
    assert keras.config.dtype_policy().name == "float32"


def test_keras_subclassed_path_override(tmp_path: Path) -> None:
    pytest.importorskip("keras")
    policy = _policy(tmp_path, "blocks.1")
    code = transpile(KERAS, to="tf", policy=policy).code
    assert code.count("@_ptranspile_paths_call") == 2
    module = _import(code, tmp_path)
    model = module.Net()
    dtypes, _ = _keras_dtypes(model, np.ones((2, 5, 8), np.float32))
    assert dtypes == {
        "proj": "bfloat16",
        "blocks.0": "bfloat16",
        "blocks.0.norm": "float32",  # keep-fp32 class, as without overrides
        "blocks.0.dense": "bfloat16",
        "blocks.1": "float32",
        "blocks.1.norm": "float32",
        "blocks.1.dense": "float32",
        "head": "bfloat16",
    }
    assert transpile(code, to="tf", policy=policy).code == code
    assert transpile(code, to="tf", policy="fp32").code == KERAS
    assert "_ptranspile_paths" not in transpile(KERAS, to="tf", policy="mixed").code


def test_keras_sequential_override_under_bf16(tmp_path: Path) -> None:
    pytest.importorskip("keras")
    code = transpile(KERAS, to="tf", policy=_policy(tmp_path, "layers.1", base="bf16")).code
    assert "return _ptranspile_paths(keras.Sequential([" in code
    model = _import(code, tmp_path).sequential()
    dtypes, out = _keras_dtypes(model, np.ones((2, 6), np.float32))
    assert dtypes == {"layers.0": "bfloat16", "layers.1": "float32", "layers.2": "bfloat16"}
    assert str(model.layers[1].kernel.dtype) == "bfloat16"  # stored as the policy says, computed in float32
    assert str(out.dtype.name) == "bfloat16"
