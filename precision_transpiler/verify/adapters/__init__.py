"""Framework adapters for verification, registered by the CLI's framework names."""

from __future__ import annotations

import importlib

from precision_transpiler.errors import VerifyError
from precision_transpiler.verify.adapters.base import Adapter, Capture

_ADAPTERS = {
    "torch": ("precision_transpiler.verify.adapters.torch_adapter", "TorchAdapter"),
    "jax": ("precision_transpiler.verify.adapters.flax_adapter", "FlaxAdapter"),
    "tf": ("precision_transpiler.verify.adapters.keras_adapter", "KerasAdapter"),
}


def adapter_for(framework: str) -> Adapter:
    """The adapter of a framework; imports it (and so the framework) only when asked."""
    if framework not in _ADAPTERS:
        raise VerifyError(f"verification is not available for {framework!r} models (torch, jax and tf are)")
    module_name, class_name = _ADAPTERS[framework]
    if framework == "tf":  # before anything imports TensorFlow: no start-up log lines
        from precision_transpiler.verify.quiet import import_tensorflow_quietly

        import_tensorflow_quietly()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise VerifyError(f"verifying {framework} models needs {exc.name or framework} installed") from None
    return getattr(module, class_name)()


__all__ = ["Adapter", "Capture", "adapter_for"]
