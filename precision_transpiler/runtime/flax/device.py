"""Devices for Flax code: torch's `x.device`, `torch.cuda.device_count()` / `is_available()` on
JAX. (The `--device auto` decision of a precision policy is `device_compute_dtype` in policy.py.)
"""

import jax

from precision_transpiler.runtime.common import TorchDevice


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
