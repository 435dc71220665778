"""Keras 3 policies on subclassed layers and models, executed (TensorFlow backend, CPU).

A user's `keras.layers.Layer` subclass has no `dtype=` the pass could add; left in float32 it adds
its float32 input to its bfloat16 sublayer's output and TensorFlow raises (`x + self.dense(x)`:
AddV2 float vs bfloat16). The generated `@_ptranspile_layer(...)` gives such classes the policy's
dtype policy after `__init__`, a subclassed Model's outermost call returns the policy's output
dtype, and float32 islands inside their methods hand back the compute dtype. `--nan-fallback`
recomputes a non-finite outermost result in float32.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from precision_transpiler import transpile

pytestmark = pytest.mark.needs_tf

keras = pytest.importorskip("keras")

_COUNTER = itertools.count()

SOURCE = '''\
import keras
from keras import layers

SEEN = []  # dtypes seen inside Outer.call


class Scale(layers.Layer):
    """Weights made in __init__, as in the Keras guide's first custom layer."""

    def __init__(self, dim: int, **kwargs):
        super().__init__(**kwargs)
        self.gain = self.add_weight(shape=(dim,), initializer="ones", name="gain")

    def call(self, x):
        return x * self.gain


class Residual(layers.Layer):
    def __init__(self, dim: int, **kwargs):
        super().__init__(**kwargs)
        self.dense = layers.Dense(dim, activation="gelu")

    def call(self, x):
        return x + self.dense(x)


class Stack(layers.Layer):
    """A list of sublayers, then a post-norm residual (a LayerNormalization result plus a
    Dense result)."""

    def __init__(self, dim: int, depth: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.blocks = [Residual(dim) for _ in range(depth)]
        self.scale = Scale(dim)
        self.norm = layers.LayerNormalization()

    def call(self, x):
        for block in self.blocks:
            x = block(x)
        h = self.norm(self.scale(x))
        return h + self.blocks[0](h)


class Net(keras.Model):
    def __init__(self, dim: int = 16, classes: int = 4, **kwargs):
        super().__init__(**kwargs)
        self.embed = layers.Dense(dim)
        self.stack = Stack(dim)
        self.head = layers.Dense(classes)

    def call(self, x):
        h = self.stack(self.embed(x))
        logits = self.head(h)
        probs = keras.ops.softmax(logits)
        return {"logits": logits, "probs": probs, "mixed": h * probs[..., :1]}


class Outer(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.net = Net()

    def call(self, x):
        out = self.net(x)
        SEEN.append(str(out["logits"].dtype))
        return out["logits"]
'''

NAN_SOURCE = """\
import keras
from keras import layers


class Big(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(4, kernel_initializer="ones", use_bias=False)

    def call(self, x):
        return self.dense(x)


def functional():
    inputs = keras.Input(shape=(100,))
    return keras.Model(inputs, layers.Dense(4, kernel_initializer="ones", use_bias=False)(inputs))
"""


def _import(code: str, folder: Path) -> ModuleType:
    name = f"_ptx_keras_sub_{next(_COUNTER)}"
    path = folder / f"{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _dtype(t: Any) -> str:
    return str(keras.backend.standardize_dtype(t.dtype))


def _flat(out: Any) -> np.ndarray:
    parts = keras.tree.flatten(out)
    return np.concatenate([np.asarray(keras.ops.cast(p, "float32"), dtype=np.float64).ravel() for p in parts])


def _rel(value: Any, reference: Any) -> float:
    a, b = _flat(value), _flat(reference)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((2, 5, 16)).astype("float32")


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return _import(SOURCE, tmp_path_factory.mktemp("orig"))


@pytest.fixture(scope="module")
def reference(original: ModuleType, x: np.ndarray) -> tuple[Any, list[np.ndarray]]:
    """The float32 original with every weight perturbed (constant-initialised LayerNorm and
    Scale weights would hide their branch otherwise), and those weights."""
    keras.utils.set_random_seed(0)
    model = original.Net()
    model(x)
    rng = np.random.default_rng(1)
    weights = [w + rng.normal(scale=0.1, size=w.shape).astype(w.dtype) for w in model.get_weights()]
    model.set_weights(weights)
    return model, weights


def _same_weights(model: Any, weights: list[np.ndarray], x: np.ndarray) -> Any:
    model(x)
    model.set_weights(weights)
    return model


def test_mixed_runs_in_bf16_with_float32_outputs(
    tmp_path: Path, original: ModuleType, reference: tuple[Any, list[np.ndarray]], x: np.ndarray
) -> None:
    result = transpile(SOURCE, to="tf", policy="mixed")
    assert not result.errors and not result.unsupported, result.diagnostics
    code = result.code
    assert code.count("@_ptranspile_layer(_PTRANSPILE_LOW)\nclass ") == 5
    assert "h = _ptranspile_compute(self.norm(self.scale(x)), self)" in code
    assert "probs = _ptranspile_compute(keras.ops.softmax(_ptranspile_fp32(logits)), self)" in code
    module = _import(code, tmp_path)
    ref_model, weights = reference
    model = _same_weights(module.Net(), weights, x)

    seen: list[str] = []
    dense = model.stack.blocks[0].dense
    call = dense.call
    object.__setattr__(dense, "call", lambda *a, **k: seen.append(_dtype(out := call(*a, **k))) or out)
    try:
        out = model(x)
    finally:
        dense.__dict__.pop("call", None)
    assert seen and set(seen) == {"bfloat16"}  # captured inside the residual block
    assert {k: _dtype(v) for k, v in out.items()} == {"logits": "float32", "probs": "float32", "mixed": "float32"}
    assert model.compute_dtype == model.stack.compute_dtype == dense.compute_dtype == "bfloat16"
    assert model.stack.scale.compute_dtype == "bfloat16" and model.stack.norm.compute_dtype == "float32"
    assert model.variable_dtype == dense.variable_dtype == model.stack.scale.gain.dtype == "float32"

    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        auto = original.Net()
    finally:
        keras.config.set_dtype_policy("float32")
    auto = _same_weights(auto, weights, x)
    fp32 = ref_model(x)
    err_ours, err_auto = _rel(out, fp32), _rel(auto(x), fp32)
    assert 1e-4 < err_ours < 1e-1, err_ours
    assert err_ours <= 1.5 * err_auto, (err_ours, err_auto)


def test_nested_model_casts_only_outermost(tmp_path: Path, x: np.ndarray) -> None:
    module = _import(transpile(SOURCE, to="tf", policy="mixed").code, tmp_path)
    outer = module.Outer()
    out = outer(x)
    assert _dtype(out) == "float32"
    assert module.SEEN[-1] == "<dtype: 'bfloat16'>"  # the inner Net's result, not yet cast
    assert {_dtype(v) for v in module.Net()(x).values()} == {"float32"}  # called alone: outermost


def test_graph_mode_and_predict(tmp_path: Path, x: np.ndarray) -> None:
    module = _import(transpile(SOURCE, to="tf", policy="mixed").code, tmp_path)
    model = module.Net()
    out = model.predict(x, verbose=0)
    assert str(out["logits"].dtype) == "float32"
    eager = model(x)
    np.testing.assert_allclose(out["logits"], np.asarray(eager["logits"]), rtol=1e-2, atol=1e-2)


def test_bf16_runs(tmp_path: Path, reference: tuple[Any, list[np.ndarray]], x: np.ndarray) -> None:
    module = _import(transpile(SOURCE, to="tf", policy="bf16").code, tmp_path)
    ref_model, weights = reference
    model = _same_weights(module.Net(), weights, x)
    out = model(x)
    assert {_dtype(v) for v in out.values()} == {"bfloat16"}  # bf16's output dtype
    assert model.stack.blocks[0].dense.kernel.dtype == "bfloat16"
    # Scale made its weight in __init__ (float32): it gets mixed_bfloat16 so that it is autocast
    assert model.stack.scale.dtype_policy.name == "mixed_bfloat16"
    assert model.stack.dtype_policy.name == "bfloat16"
    assert 1e-4 < _rel(out, ref_model(x)) < 1e-1


def test_explicit_dtype_is_respected(tmp_path: Path, original: ModuleType, x: np.ndarray) -> None:
    module = _import(transpile(SOURCE, to="tf", policy="mixed").code, tmp_path)
    stack = module.Stack(16, dtype="float32")
    h = keras.ops.convert_to_tensor(x)
    out = stack(h)
    assert _dtype(out) == "float32"
    assert {layer.compute_dtype for layer in stack._flatten_layers()} == {"float32"}
    keras.utils.set_random_seed(3)
    plain = original.Stack(16)
    plain(h)
    stack.set_weights(plain.get_weights())
    np.testing.assert_array_equal(np.asarray(stack(h)), np.asarray(plain(h)))  # float32 throughout
    assert module.Stack(16, dtype="mixed_float16").compute_dtype == "float16"  # kept as given
    assert module.Stack(16).compute_dtype == "bfloat16"


def test_class_override_keeps_a_custom_layer_in_float32(tmp_path: Path, x: np.ndarray) -> None:
    policy = tmp_path / "residual_fp32.yaml"
    policy.write_text("extends: mixed\noverrides:\n  - class: Residual\n    compute: float32\n")
    code = transpile(SOURCE, to="tf", policy=str(policy)).code
    assert "@_ptranspile_layer(_PTRANSPILE_FP32)\nclass Residual" in code
    module = _import(code, tmp_path)
    block = module.Residual(16)
    assert block.compute_dtype == block.dense.compute_dtype == "float32"
    h = keras.ops.convert_to_tensor(x)
    assert _dtype(block(h)) == "float32"
    assert _dtype(block(keras.ops.cast(h, "bfloat16"))) == "bfloat16"  # computed in float32, handed back
    stack = module.Stack(16)
    assert stack.compute_dtype == "bfloat16" and stack.blocks[1].dense.compute_dtype == "float32"
    assert _dtype(stack(h)) == "bfloat16"  # `h + self.blocks[0](h)` sees one dtype


def test_strip_exact_and_idempotent() -> None:
    for policy, fallback in (("mixed", False), ("bf16", False), ("mixed-fp16", True)):
        code = transpile(SOURCE, to="tf", policy=policy, nan_fallback=fallback).code
        assert code != SOURCE
        assert transpile(code, to="tf", policy=policy, nan_fallback=fallback).code == code
        assert transpile(code, to="tf", policy="fp32").code == SOURCE
    functional = transpile(NAN_SOURCE.split("\n\n\nclass")[0] + "\n", to="tf", policy="mixed").code
    assert "_ptranspile_layer" not in functional  # no runtime helpers for files without subclasses


def _nan_run(tmp_path: Path, fallback: bool, caplog: pytest.LogCaptureFixture) -> dict[str, np.ndarray]:
    result = transpile(NAN_SOURCE, to="tf", policy="mixed-fp16", nan_fallback=fallback)
    assert not [d for d in result.diagnostics if d.code == "nan-fallback-unsupported"]
    module = _import(result.code, tmp_path)
    x = np.full((1, 100), 1000.0, "float32")  # 100000 per output: beyond float16's 65504
    outs = {}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ptranspile"):
        for name, model in (("Big", module.Big()), ("functional", module.functional())):
            out = model(x)
            assert _dtype(out) == "float32"
            outs[name] = np.asarray(out)
            assert model.layers[-1].compute_dtype in ("float16", "float32")
            assert {layer.compute_dtype for layer in model._flatten_layers()} >= {"float16"}  # restored
    outs["warnings"] = np.asarray([r.getMessage() for r in caplog.records])
    return outs


def test_nan_fallback_recomputes_in_float32(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    outs = _nan_run(tmp_path, True, caplog)
    np.testing.assert_array_equal(outs["Big"], np.full((1, 4), 100000.0, np.float32))
    np.testing.assert_array_equal(outs["functional"], np.full((1, 4), 100000.0, np.float32))
    assert list(outs["warnings"]) == [
        "Big: non-finite output under policy mixed-fp16; recomputing in float32",
        "Functional: non-finite output under policy mixed-fp16; recomputing in float32",
    ]


def test_no_fallback_without_the_flag(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    outs = _nan_run(tmp_path, False, caplog)
    assert np.isinf(outs["Big"]).all() and np.isinf(outs["functional"]).all()
    assert len(outs["warnings"]) == 0


def test_nan_fallback_not_checked_in_graph_mode(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import tensorflow as tf

    module = _import(transpile(NAN_SOURCE, to="tf", policy="mixed-fp16", nan_fallback=True).code, tmp_path)
    model = module.Big()
    x = np.full((1, 100), 1000.0, "float32")
    with caplog.at_level(logging.WARNING, logger="ptranspile"):
        out = tf.function(lambda t: model(t))(x)
    assert np.isinf(np.asarray(out)).all() and not caplog.records
