"""Keras -> Keras precision policies on real model code (keras.applications ResNet50/MobileNetV2).

Per-layer dtype policies: the converted model's error against the fp32 original is no worse than
1.5x Keras' own mixed_bfloat16 global policy on the same weights and input, its output is the
policy's output dtype, and keep-fp32 layers really hold float32 compute.
"""

from __future__ import annotations

import numpy as np
import pytest

from precision_transpiler import transpile
from tests.real_models import load_beside, package_file

pytestmark = pytest.mark.needs_tf

keras = pytest.importorskip("keras")


def _rel(value, reference) -> float:
    value = np.asarray(value, dtype=np.float64)
    return float(np.linalg.norm(value - reference) / np.linalg.norm(reference))


@pytest.mark.slow
@pytest.mark.parametrize(("file", "builder"), [("resnet.py", "ResNet50"), ("mobilenet_v2.py", "MobileNetV2")])
def test_applications_mixed(file: str, builder: str) -> None:
    path = package_file("keras", f"src/applications/{file}")
    result = transpile(path.read_text(), to="tf", policy="mixed", path=str(path))
    assert not result.errors and not result.unsupported, result.diagnostics
    module = load_beside(result.code, "keras.src.applications", f"_ptx_{file[:-3]}")
    import importlib

    original = importlib.import_module(f"keras.src.applications.{file[:-3]}")
    kwargs = {"weights": None, "input_shape": (64, 64, 3), "classes": 10}
    keras.utils.set_random_seed(0)
    reference = getattr(original, builder)(**kwargs)
    converted = getattr(module, builder)(**kwargs)
    converted.set_weights(reference.get_weights())
    x = np.random.default_rng(0).normal(size=(2, 64, 64, 3)).astype("float32")
    fp32 = np.asarray(reference(x, training=False), dtype=np.float64)
    ours = converted(x, training=False)
    assert str(ours.dtype) in ("float32", "<dtype: 'float32'>")
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        auto_model = getattr(original, builder)(**kwargs)
    finally:
        keras.config.set_dtype_policy("float32")
    auto_model.set_weights(reference.get_weights())
    auto = np.asarray(keras.ops.cast(auto_model(x, training=False), "float32"))
    err_ours, err_auto = _rel(ours, fp32), _rel(auto, fp32)
    assert 0 < err_ours <= 1.5 * err_auto, (err_ours, err_auto)
    assert {d.action for d in result.precision} >= {"dtype=_PTRANSPILE_LOW", "float32 output activation"}


def test_keep_fp32_layers_and_roundtrip(tmp_path) -> None:
    src = (
        "import keras\nfrom keras import layers\n\n\ndef build():\n"
        "    inputs = keras.Input(shape=(8,))\n"
        '    x = layers.Dense(16, activation="relu")(inputs)\n'
        "    x = layers.LayerNormalization()(x)\n"
        '    x = layers.Dense(\n        4,\n        name="head",\n    )(x)\n'
        "    return keras.Model(inputs, keras.ops.softmax(x))\n"
    )
    mixed = transpile(src, to="tf", policy="mixed").code
    namespace: dict = {}
    exec(compile(mixed, "<keras-mixed>", "exec"), namespace)
    model = namespace["build"]()
    dense = model.layers[1]
    norm = model.layers[2]
    assert dense.dtype_policy.name == "mixed_bfloat16" and dense.compute_dtype == "bfloat16"
    assert dense.variable_dtype == "float32"
    assert norm.compute_dtype == "float32"
    out = model(np.ones((2, 8), dtype="float32"))
    assert str(out.dtype) in ("float32", "<dtype: 'float32'>")
    np.testing.assert_allclose(np.asarray(out).sum(axis=-1), 1.0, rtol=1e-5)
    assert transpile(mixed, to="tf", policy="mixed").code == mixed  # idempotent
    assert transpile(mixed, to="tf", policy="fp32").code == src  # exactly reversible
    bf16 = transpile(src, to="tf", policy="bf16").code
    assert "_PTRANSPILE_LOW = _PTRANSPILE_DEVICE_DTYPE" in bf16  # bfloat16 variables: decided where it runs
    assert '_PTRANSPILE_LOW = "bfloat16"' in transpile(src, to="tf", policy="bf16", device="cpu").code
