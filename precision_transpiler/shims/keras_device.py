"""`--device auto` for Keras code: the compute dtype where the model runs (see device.py)."""

import keras

from precision_transpiler.shims.device import _ptranspile_pick


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
