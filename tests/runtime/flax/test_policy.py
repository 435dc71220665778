"""runtime/flax/policy.py on real JAX (CPU): what a Flax policy's generated block binds.

The policy pass decorates `__call__` with the file's `FlaxPolicy` and wraps keep-fp32 inputs in
`fp32_island`; these tests build such modules by hand and check the run-time half: outputs cast
by the outermost call only, fp32 islands, the NaN fallback's recomputation, layer dtypes and path
overrides applied at run time, and the `--device auto` decision. The last test copies the
definitions as a conversion does and runs the copy.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from precision_transpiler.runtime import device
from precision_transpiler.runtime.flax import policy as fp
from tests.runtime import run_copied

pytestmark = pytest.mark.needs_jax

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
nnx = pytest.importorskip("flax.nnx")


def _modules(policy: fp.FlaxPolicy, inner_dtype=jnp.bfloat16) -> type:
    """An outer module holding an inner one, both decorated with `policy`; the inner Linear
    computes in `inner_dtype`."""

    class Inner(nnx.Module):
        def __init__(self, rngs):
            self.fc = nnx.Linear(4, 4, dtype=inner_dtype, rngs=rngs)

        @policy
        def __call__(self, x):
            return self.fc(x)

    class Outer(nnx.Module):
        def __init__(self, rngs):
            self.inner = Inner(rngs)
            self.seen = []

        @policy
        def __call__(self, x):
            out = self.inner(x)
            self.seen.append(out.dtype)  # what the nested call returned
            return {"out": out, "steps": 3}

    return Outer


def test_the_outermost_call_casts_floating_outputs_nested_calls_do_not() -> None:
    policy = fp.FlaxPolicy("mixed", output=jnp.float32)
    model = _modules(policy)(nnx.Rngs(0))
    result = model(jnp.ones((2, 4)))
    assert model.seen == [jnp.bfloat16]  # the inner module's own output, uncast
    assert result["out"].dtype == jnp.float32 and result["steps"] == 3
    assert policy.depth == 0
    assert type(model).__call__.__wrapped__.__name__ == "__call__"


def test_outputs_of_an_output_class_are_cast_item_by_item() -> None:
    class Output(dict):
        pass

    out = Output(logits=jnp.ones(2, jnp.bfloat16), ids=jnp.arange(2))
    cast = fp.map_outputs(fp.FlaxPolicy("mixed", output=jnp.float16).cast_output, out)
    assert type(cast) is Output and cast["logits"].dtype == jnp.float16 and cast["ids"].dtype == jnp.int32
    assert out["logits"].dtype == jnp.bfloat16  # a copy


def test_fp32_island_casts_floating_arrays_only() -> None:
    assert fp.fp32_island(jnp.ones(3, jnp.bfloat16)).dtype == jnp.float32
    assert fp.fp32_island(jnp.arange(3)).dtype == jnp.int32
    assert fp.fp32_island(2.5) == 2.5  # a Python number passes as it is


def test_nan_fallback_recomputes_in_float32_and_restores_the_layers(caplog: pytest.LogCaptureFixture) -> None:
    policy = fp.FlaxPolicy("fp16", output=jnp.float16, nan_fallback=True)

    class Big(nnx.Module):
        def __init__(self, rngs):
            self.fc = nnx.Linear(4, 4, kernel_init=nnx.initializers.ones, dtype=jnp.float16, rngs=rngs)

        @policy
        def __call__(self, x):
            return self.fc(x) * 1e5  # 4e5 overflows float16

    model = Big(nnx.Rngs(0))
    with caplog.at_level(logging.WARNING, logger="ptranspile"):
        out = model(jnp.ones((1, 4)))
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(out), 4e5, rtol=1e-2)
    assert "Big: non-finite output under policy fp16; recomputing in float32" in caplog.text
    assert model.fc.dtype == jnp.float16 and policy.depth == 0
    assert not fp.all_finite({"a": jnp.array([jnp.inf])}) and fp.all_finite((jnp.ones(2), "text"))


def test_layer_dtypes_reach_factory_built_layers_once_where_none_was_set() -> None:
    layer_dtypes = fp.LayerDtypes({"LayerNorm": jnp.float32, "Linear": jnp.bfloat16})
    policy = fp.FlaxPolicy("mixed", output=jnp.float32, prepare=(layer_dtypes,))

    class Net(nnx.Module):
        def __init__(self, layer, rngs):
            self.fc = layer(4, 4, rngs=rngs)  # a factory the converter could not see into
            self.chosen = nnx.Linear(4, 4, dtype=jnp.float16, rngs=rngs)
            self.norm = nnx.LayerNorm(4, rngs=rngs)

        @policy
        def __call__(self, x):
            return self.norm(self.chosen(self.fc(x)))

    model = Net(nnx.Linear, nnx.Rngs(0))
    out = model(jnp.ones((1, 4)))
    assert model.fc.dtype == jnp.bfloat16 and model.norm.dtype == jnp.float32
    assert model.chosen.dtype == jnp.float16  # the code's own choice stays
    assert out.dtype == jnp.float32
    object.__setattr__(model.fc, "dtype", None)
    model(jnp.ones((1, 4)))
    assert model.fc.dtype is None  # applied once per outermost module


def test_fp32_path_overrides_put_matching_submodules_in_float32() -> None:
    policy = fp.FlaxPolicy("mixed", output=jnp.float32, prepare=(fp.Fp32Paths(("blocks.1",)),))

    class Net(nnx.Module):
        def __init__(self, rngs):
            kw = {"dtype": jnp.bfloat16, "preferred_element_type": jnp.float32, "rngs": rngs}
            self.blocks = nnx.List([nnx.Linear(4, 4, **kw), nnx.Linear(4, 4, **kw)])

        @policy
        def __call__(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    model = Net(nnx.Rngs(0))
    model(jnp.ones((1, 4)))
    assert model.blocks[0].dtype == jnp.bfloat16 and model.blocks[0].preferred_element_type == jnp.float32
    assert model.blocks[1].dtype == jnp.float32 and model.blocks[1].preferred_element_type is None


@pytest.mark.parametrize(("forced", "expected"), [("bfloat16", jnp.bfloat16), ("float32", jnp.float32)])
def test_device_compute_dtype_decides_once_and_records_it(
    monkeypatch: pytest.MonkeyPatch, forced: str, expected: object
) -> None:
    monkeypatch.setattr(device, "COMPUTE_DECISIONS", {})
    monkeypatch.setenv("PTRANSPILE_COMPUTE_DTYPE", forced)
    assert fp.device_compute_dtype("half") == jnp.dtype(expected)
    decision = device.COMPUTE_DECISIONS["jax"]
    assert decision["device"] == "cpu" and decision["compute"] == forced and decision["requested"] == "half"
    monkeypatch.setenv("PTRANSPILE_COMPUTE_DTYPE", "float16")
    assert fp.device_compute_dtype("half") == jnp.dtype(expected)  # decided once


def test_copied_into_a_file_the_definitions_run_with_no_import_of_their_own() -> None:
    block = (
        "import jax.numpy as jnp\nimport precision_transpiler\n\n"
        "_ptranspile_fp32 = precision_transpiler.runtime.flax.policy.fp32_island\n"
        '_ptranspile_policy = precision_transpiler.runtime.flax.policy.FlaxPolicy("mixed", output=jnp.float32)\n'
        '_PTRANSPILE_DEVICE_DTYPE = precision_transpiler.runtime.flax.policy.device_compute_dtype("bfloat16")\n'
    )
    namespace = run_copied(block)
    assert namespace["_ptranspile_fp32"](jnp.ones(2, jnp.bfloat16)).dtype == jnp.float32
    assert namespace["_PTRANSPILE_DEVICE_DTYPE"] in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32))
