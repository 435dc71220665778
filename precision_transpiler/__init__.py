"""precision_transpiler: convert deep-learning model source between PyTorch, JAX (Flax NNX) and
TensorFlow (Keras 3), applying mixed-precision policies on the way.

Transpiling is static: it parses source with LibCST and never imports the user's code or any
framework. See docs/api.md. Attributes are imported lazily so that `ptranspile --help` stays
fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from precision_transpiler.version import __version__

_EXPORTS = {
    "TranspileResult": "precision_transpiler.api",
    "transpile": "precision_transpiler.api",
    "transpile_file": "precision_transpiler.api",
    "transpile_paths": "precision_transpiler.api",
    "Diagnostic": "precision_transpiler.diagnostics",
    "Rewrite": "precision_transpiler.diagnostics",
    "MappingError": "precision_transpiler.errors",
    "PolicyError": "precision_transpiler.errors",
    "PtranspileError": "precision_transpiler.errors",
    "UsageError": "precision_transpiler.errors",
    "load_mappings": "precision_transpiler.mappings",
}

if TYPE_CHECKING:
    from precision_transpiler.api import TranspileResult, transpile, transpile_file, transpile_paths
    from precision_transpiler.diagnostics import Diagnostic, Rewrite
    from precision_transpiler.errors import MappingError, PolicyError, PtranspileError, UsageError
    from precision_transpiler.mappings import load_mappings


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'precision_transpiler' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "Diagnostic",
    "MappingError",
    "PolicyError",
    "PtranspileError",
    "Rewrite",
    "TranspileResult",
    "UsageError",
    "__version__",
    "load_mappings",
    "transpile",
    "transpile_file",
    "transpile_paths",
]
