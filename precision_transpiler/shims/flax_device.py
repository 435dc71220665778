"""`--device auto` for Flax code: the compute dtype where the model runs (see device.py)."""

import jax
import jax.numpy as jnp

from precision_transpiler.shims.device import _ptranspile_pick


def _ptranspile_flax_device(requested):
    """The compute dtype for a policy asking for `requested`, on JAX's default backend: a GPU
    has bfloat16 from compute capability 8.0; a CPU is asked about its bf16 instructions."""
    where = jax.default_backend()
    where = where if where in ("gpu", "tpu") else "cpu"
    if where == "cpu" and jax.devices()[0].platform in ("cuda", "rocm"):
        where = "gpu"
    capability = str(getattr(jax.devices()[0], "compute_capability", "0") or "0")
    gpu_bf16 = where == "gpu" and float(capability.split(".")[0] or 0) >= 8
    return jnp.dtype(_ptranspile_pick("jax", requested, where, gpu_bf16))
