"""Run examples/precision_utils.py in torch and its conversions in JAX and TensorFlow.

This is the demo's proof that the dtype-level conversion is right: every function is called on
the same input in each framework and the values and dtypes are compared.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np

from precision_transpiler import transpile

HERE = Path(__file__).parent
SOURCE = (HERE / "precision_utils.py").read_text()


def load(code: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(code, f"<{name}>", "exec"), module.__dict__)
    return module


def dtype_name(value: object) -> str:
    """Framework-neutral dtype name: torch.float16, jnp float16 and tf.float16 all give float16."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return type(value).__name__
    name = getattr(dtype, "name", None)  # numpy/JAX dtypes and tf.DType have .name
    return name if isinstance(name, str) else str(dtype).removeprefix("torch.")


def as_float64(value: object) -> np.ndarray:
    if hasattr(value, "detach"):  # torch: bf16 has no NumPy counterpart, go through fp32
        value = value.detach().float()
    return np.asarray(value, dtype=np.float64)


def main() -> int:
    import jax.numpy as jnp
    import tensorflow as tf
    import torch

    original = load(SOURCE, "torch_version")
    converted = {
        "jax": load(transpile(SOURCE, to="jax").code, "jax_version"),
        "tf": load(transpile(SOURCE, to="tf").code, "tf_version"),
    }
    data = np.linspace(-3, 3, 8, dtype=np.float32)
    inputs = {"torch": torch.tensor(data), "jax": jnp.asarray(data), "tf": tf.constant(data)}
    half_inputs = {
        "torch": torch.tensor(data).half(),
        "jax": jnp.asarray(data, jnp.float16),
        "tf": tf.constant(data, tf.float16),
    }
    failures = 0
    rows = []
    for name, call in [
        ("half_range()", lambda m, fw: m.half_range()),
        ("to_compute_dtype(x, True)", lambda m, fw: m.to_compute_dtype(inputs[fw], True)),
        ("to_compute_dtype(x, False)", lambda m, fw: m.to_compute_dtype(inputs[fw], False)),
        ("stable_scale(x_fp16)", lambda m, fw: m.stable_scale(half_inputs[fw])),
        ("bytes_per_element(x_fp16)", lambda m, fw: m.bytes_per_element(half_inputs[fw])),
        ("index_tensor([1, 2])", lambda m, fw: m.index_tensor([1, 2])),
    ]:
        expected = call(original, "torch")
        for fw, module in converted.items():
            got = call(module, fw)
            exp_vals = [as_float64(v) for v in (expected if isinstance(expected, tuple) else (expected,))]
            got_vals = [as_float64(v) for v in (got if isinstance(got, tuple) else (got,))]
            same = all(np.allclose(a, b, rtol=1e-6) for a, b in zip(exp_vals, got_vals, strict=True))
            dt_e = dtype_name(expected) if not isinstance(expected, tuple) else "-"
            dt_g = dtype_name(got) if not isinstance(got, tuple) else "-"
            # JAX keeps 64-bit types off by default; ptranspile warns where the code asks for one.
            x64_off = fw == "jax" and (dt_e, dt_g) in {("int64", "int32"), ("float64", "float32")}
            ok = same and (dt_e == dt_g or x64_off)
            failures += not ok
            rows.append(
                f"{name:28s} {fw:4s} values {'equal' if same else 'DIFFER'}  dtype {dt_e} -> {dt_g}  "
                f"{'OK' if ok else 'FAIL'}{' (JAX x64 off: warned)' if x64_off else ''}"
            )
    print("\n".join(rows))
    print("all conversions agree" if not failures else f"{failures} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
