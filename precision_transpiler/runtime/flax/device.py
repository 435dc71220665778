"""Devices for Flax code: torch's `x.device`, `torch.cuda.device_count()` / `is_available()` on
JAX, and the `--device auto` decision (the compute dtype where the model runs; see
runtime/device.py).
"""

import jax
import jax.numpy as jnp

from precision_transpiler.runtime.common import TorchDevice
from precision_transpiler.runtime.device import _ptranspile_pick


def torch_cuda_device_count():
    """torch.cuda.device_count(): the GPUs of JAX's default backend (0 on CPU)."""
    return sum(1 for device in jax.devices() if device.platform == "gpu")


def torch_cuda_is_available():
    """torch.cuda.is_available(): whether JAX's default backend has a GPU."""
    return torch_cuda_device_count() > 0


def torch_mps_is_available():
    """torch.backends.mps.is_available(): whether JAX runs on Apple's Metal (the jax-metal plugin's
    "METAL" platform); False on CPU, CUDA and TPU backends."""
    return any(device.platform.lower() == "metal" for device in jax.devices())


def tensor_device(x):
    """torch's `x.device` on a JAX array (JAX's default device for a traced array under jax.jit,
    which has none); any other object's own `.device`."""
    try:
        device = x.device
    except AttributeError:
        device = jax.devices()[0]
    if not hasattr(device, "platform"):
        return device
    kind = {"gpu": "cuda"}.get(device.platform, device.platform)
    return TorchDevice((kind, None if kind == "cpu" else device.id))


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
