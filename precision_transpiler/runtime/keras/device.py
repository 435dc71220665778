"""Devices for Keras code: torch's `x.device`, `torch.cuda.device_count()` / `is_available()` on
TensorFlow, and the `--device auto` decision (the compute dtype where the model runs; see
runtime/device.py).
"""

import platform

import keras
import tensorflow as tf

from precision_transpiler.runtime.common import TorchDevice
from precision_transpiler.runtime.device import _ptranspile_pick


def tensor_device(x):
    """torch's `x.device` from a TensorFlow device string ("/job:localhost/.../device:GPU:0" ->
    cuda:0); "cpu" for a tensor without one (a KerasTensor, a tensor placed nowhere yet)."""
    device = getattr(x, "device", None)
    if not isinstance(device, str) or ":GPU:" not in device.upper():
        return TorchDevice(("cpu", None))
    return TorchDevice(("cuda", int(device.rsplit(":", 1)[1])))


def torch_cuda_device_count():
    """torch.cuda.device_count(): the GPUs TensorFlow sees (0 on CPU)."""
    return len(tf.config.list_physical_devices("GPU"))


def torch_cuda_is_available():
    """torch.cuda.is_available(): whether TensorFlow sees a GPU."""
    return torch_cuda_device_count() > 0


def torch_mps_is_available():
    """torch.backends.mps.is_available(): whether TensorFlow runs on Apple's Metal (the
    tensorflow-metal plugin shows the Apple GPU as a "GPU" device of a macOS process); False
    elsewhere, where a GPU is CUDA's."""
    return platform.system() == "Darwin" and torch_cuda_device_count() > 0


def _ptranspile_keras_device(requested):
    """The compute dtype name for a policy asking for `requested`, on the Keras backend's
    device: TensorFlow's GPUs have bfloat16 from compute capability 8.0; the JAX and torch
    backends are asked the same way their frameworks are."""
    backend = keras.backend.backend()
    where, gpu_bf16 = "cpu", False
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if tf.config.list_logical_devices("TPU"):
            where = "tpu"
        elif gpus:
            where = "gpu"
            capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability") or (0, 0)
            gpu_bf16 = tuple(capability) >= (8, 0)
    elif backend == "jax":
        import jax

        where = {"gpu": "gpu", "tpu": "tpu"}.get(jax.default_backend(), "cpu")
        capability = str(getattr(jax.devices()[0], "compute_capability", "0") or "0")
        gpu_bf16 = where == "gpu" and float(capability.split(".")[0] or 0) >= 8
    elif backend == "torch":
        import torch

        if torch.cuda.is_available():
            where, gpu_bf16 = "gpu", torch.cuda.is_bf16_supported()
    return _ptranspile_pick("keras", requested, where, gpu_bf16)
