"""runtime/keras/policy.py on real Keras (TensorFlow backend, CPU): what a Keras policy's
generated block binds.

`KerasPolicy` serves Keras code people wrote (precision/passes/keras.py), `TorchAutocastPolicy`
torch models converted to Keras (precision/passes/keras_torch.py); these tests build such layers
by hand and check the run-time half: output casts, fp32 islands and their results handed back,
autocast regions, the NaN fallback's recomputation, path overrides, and the `--device auto`
decision. The last test copies the definitions as a conversion does and runs the copy.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from tests.runtime import run_copied

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from precision_transpiler.runtime import device

pytestmark = pytest.mark.needs_tf

keras = pytest.importorskip("keras")
kp = pytest.importorskip("precision_transpiler.runtime.keras.policy")


def _dtype(t: object) -> str:
    return keras.backend.standardize_dtype(t.dtype)  # type: ignore[attr-defined]


def test_fp32_islands() -> None:
    x = keras.ops.ones((2, 3), dtype="bfloat16")
    assert _dtype(kp.fp32_cast(x)) == "float32"
    nested = kp.fp32_island({"a": x, "ids": keras.ops.arange(3)})
    assert _dtype(nested["a"]) == "float32" and _dtype(nested["ids"]) == "int32"


def test_a_subclassed_model_gets_its_policy_and_casts_its_outputs() -> None:
    policy = kp.KerasPolicy("mixed", output="float32")

    @policy.layer("mixed_bfloat16")
    class Block(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(4, dtype="mixed_bfloat16")
            self.norm = keras.layers.LayerNormalization(dtype="float32")

        def call(self, x):
            return x + policy.compute(self.norm(self.dense(x)), self)  # float32 back to bfloat16

    @policy.layer("mixed_bfloat16")
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.block = Block()

        def call(self, x):
            return self.block(x)

    net = Net()
    assert net.dtype_policy.name == "mixed_bfloat16" and net.block.dtype_policy.name == "mixed_bfloat16"
    assert _dtype(net(np.ones((2, 4), np.float32))) == "float32"  # the outermost call casts
    assert _dtype(net.block(np.ones((2, 4), np.float32))) == "bfloat16"  # a layer does not
    assert policy.depth == 0 and not policy.initializing


def test_an_explicit_dtype_is_kept_and_a_float32_layer_computes_inside_in_float32() -> None:
    policy = kp.KerasPolicy("mixed", output="float32")

    @policy.layer("float32")
    class Island(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(4)

        def call(self, x):
            return self.dense(x)

    island = Island()
    assert island.dense.dtype_policy.name == "float32"
    out = island(keras.ops.ones((1, 4), dtype="bfloat16"))
    assert _dtype(out) == "bfloat16"  # handed back in the dtype it was given
    assert Island(dtype="float16").dtype_policy.name == "float16"


def test_output_activation_and_nan_fallback_of_a_functional_model(caplog: pytest.LogCaptureFixture) -> None:
    policy = kp.KerasPolicy("fp16", output="float32", nan_fallback=True)
    inputs = keras.Input(shape=(4,))
    big = keras.layers.Dense(4, kernel_initializer="ones", dtype="float16")(inputs)
    outputs = policy.output_activation(keras.layers.Lambda(lambda t: t * 1e5, dtype="float16")(big))
    model = policy.model(keras.Model(inputs, outputs))
    with caplog.at_level(logging.WARNING, logger="ptranspile"):
        out = model(np.ones((1, 4), np.float32))
    assert _dtype(out) == "float32"
    np.testing.assert_allclose(np.asarray(out), 4e5, rtol=1e-2)
    assert "non-finite output under policy fp16; recomputing in float32" in caplog.text
    assert model.layers[1].dtype_policy.name == "float16" and policy.depth == 0  # restored


def test_fp32_paths_reach_matching_layers_and_everything_inside() -> None:
    paths = kp.Fp32Paths(("layers.1",))
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(4, dtype="mixed_bfloat16"),
            keras.layers.Dense(4, dtype="mixed_bfloat16"),
        ]
    )
    assert paths(model) is model
    assert [layer.dtype_policy.name for layer in model.layers] == ["mixed_bfloat16", "float32"]


def test_autocast_regions_hand_results_back_in_the_input_dtype() -> None:
    policy = kp.TorchAutocastPolicy(
        "mixed", base="float32", compute="bfloat16", output="float32", layer_dtypes={"Dense": "mixed_bfloat16"}
    )

    @policy.module
    class Net(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.fc = keras.layers.Dense(4)
            self.norm = keras.layers.LayerNormalization()

        def call(self, x):
            h = self.fc(x)
            self.seen = _dtype(h)
            a = policy.autocast(kp.autocast_matmul, h, keras.ops.transpose(h))
            return self.norm(h) + keras.ops.sum(a)

    net = Net()
    assert net.fc.dtype_policy.name == "mixed_bfloat16" and net.norm.dtype_policy.name == "float32"
    out = net(np.ones((2, 4), np.float32))
    assert net.seen == "float32"  # the region's boundary: back in its input's dtype
    assert _dtype(out) == "float32"
    assert _dtype(policy.base_cast(keras.ops.ones(2, dtype="bfloat16"))) == "float32"


def test_the_torch_model_nan_fallback_recomputes_in_float32(caplog: pytest.LogCaptureFixture) -> None:
    policy = kp.TorchAutocastPolicy("fp16", base="float16", compute="float16", output="float16", nan_fallback=True)

    @policy.module
    class Big(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.fc = keras.layers.Dense(4, kernel_initializer="ones")

        def call(self, x):
            return self.fc(x) * 1e5

    model = Big()
    with caplog.at_level(logging.WARNING, logger="ptranspile"):
        out = model(np.ones((1, 4), np.float32))
    assert _dtype(out) == "float32" and np.isfinite(np.asarray(out)).all()
    assert "Big: non-finite output under policy fp16" in caplog.text
    assert model.fc.dtype_policy.name == "float16"


def test_device_compute_dtype_and_the_mixed_policy_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "COMPUTE_DECISIONS", {})
    monkeypatch.setenv("PTRANSPILE_COMPUTE_DTYPE", "bfloat16")
    assert kp.device_compute_dtype("half") == "bfloat16"
    assert device.COMPUTE_DECISIONS["keras"]["compute"] == "bfloat16"
    assert kp.mixed_policy_name("bfloat16") == "mixed_bfloat16" and kp.mixed_policy_name("float32") == "float32"


def test_copied_into_a_file_the_definitions_run_with_no_import_of_their_own() -> None:
    block = (
        "import keras\nimport precision_transpiler\n\n"
        '_ptranspile_policy = precision_transpiler.runtime.keras.policy.KerasPolicy("mixed", output="float32")\n'
        "_ptranspile_paths = precision_transpiler.runtime.keras.policy.Fp32Paths(('layers.1',))\n"
        "_ptranspile_module = precision_transpiler.runtime.keras.policy.TorchAutocastPolicy(\n"
        '    "mixed", base="float32", compute="bfloat16", output="float32"\n).module\n'
    )
    namespace = run_copied(block)
    out = namespace["_ptranspile_policy"].output_activation(keras.ops.ones(2, dtype="bfloat16"))
    assert _dtype(out) == "float32"
