"""Devices for Keras code: torch's `x.device`, `torch.cuda.device_count()` / `is_available()` on
TensorFlow. (The `--device auto` decision of a precision policy is `device_compute_dtype` in
policy.py.)
"""

import platform

import tensorflow as tf

from precision_transpiler.runtime.common import TorchDevice


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
