"""Test-only work-around for this environment's torchvision wheel, applied before torchvision imports.

The torchvision wheel installed here is a CUDA build beside a CPU torch: its C++ operators fail to
register, and `import torchvision` then stops at `torch.library.register_fake("torchvision::nms")`
with "operator torchvision::nms does not exist". The model code the tests convert is pure Python
and imports once `torch.library.register_fake` is a no-op.

This file is the one copy of that work-around. It installs a `sys.meta_path` finder that makes
`register_fake` a no-op the moment something first imports torchvision (torch itself is not
imported before then, so a process that never touches torchvision is not slowed down). It reaches

- the pytest processes (xdist workers included): tests/conftest.py imports this module;
- subprocesses the tests start, such as `ptranspile --verify` on torchvision's own files: this
  folder goes on their PYTHONPATH (`tests.helpers.torchvision_env()`), and Python imports a
  `sitecustomize` module found there at start-up;
- the benchmarks, through `tests.real_models.import_torchvision()`.

ptranspile itself does nothing of the kind: it imports the user's files as they are.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from typing import Any

_MARK = "_ptranspile_tests_torchvision_workaround"


def neutralise_register_fake() -> None:
    """Make `torch.library.register_fake` a no-op, unless torchvision is already imported (too
    late, and not needed: it imported) or torch is not importable (nothing to do)."""
    if "torchvision" in sys.modules:
        return
    try:
        import torch
    except ImportError:
        return
    torch.library.register_fake = lambda *args, **kwargs: lambda fn: fn  # type: ignore[assignment]


class _BeforeTorchvision(importlib.abc.MetaPathFinder):
    """Runs the work-around when `torchvision` is about to be found, then lets the normal
    finders find it."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> None:
        if fullname == "torchvision":
            neutralise_register_fake()
        return None


def install() -> None:
    """Put the finder first on `sys.meta_path` (once per process, however this module was imported)."""
    if not any(getattr(finder, _MARK, False) for finder in sys.meta_path):
        finder = _BeforeTorchvision()
        setattr(finder, _MARK, True)
        sys.meta_path.insert(0, finder)


install()
