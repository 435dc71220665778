"""Load real model source from installed packages, convert it, and import the result.

Random weights only: nothing is downloaded. torchvision's wheel here is a CUDA build whose C++
ops fail to register beside the CPU torch; model code is pure Python and imports once the
work-around in tests/torchvision_shim/sitecustomize.py (its one copy) is in place, which
`import_torchvision()` makes sure of (tests/conftest.py does too, for every test).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from tests.torchvision_shim.sitecustomize import install as _install_torchvision_workaround


def import_torchvision() -> types.ModuleType:
    """Import torchvision with the work-around installed first (it must precede any import of
    torchvision; transformers imports it, optionally)."""
    _install_torchvision_workaround()
    import torchvision

    return torchvision


def package_file(package: str, rel: str) -> Path:
    """A file of an installed package. A package that is not installed raises
    ModuleNotFoundError, which the tests turn into a skip (tests/conftest.py)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{package} is not installed", name=package)
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    assert path.is_file(), path
    return path


def load_beside(code: str, package: str, name: str) -> types.ModuleType:
    """Execute converted `code` as module `package.name`, so its relative imports resolve."""
    full = f"{package}.{name}"
    module = types.ModuleType(full)
    module.__package__ = package
    module.__file__ = f"<ptranspile {full}>"
    sys.modules[full] = module
    registry = _torchvision_registry() if package.startswith("torchvision") else None
    saved = dict(registry) if registry is not None else None
    if registry is not None:
        registry.clear()  # the converted copy registers the same model names again
    try:
        exec(compile(code, module.__file__, "exec"), module.__dict__)
    finally:
        if registry is not None and saved is not None:
            registry.clear()
            registry.update(saved)
    return module


def _torchvision_registry() -> dict | None:
    from torchvision.models import _api

    return getattr(_api, "BUILTIN_MODELS", None)


def relative_error(reference, value) -> float:
    import torch

    ref = reference.detach().double()
    diff = value.detach().double() - ref
    return float(torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref))


def calibrate_batchnorm(model, batch) -> None:
    """Recompute BatchNorm running statistics on a random batch: random-init deep CNNs in eval
    mode otherwise vanish or explode (docs/precision-reference.md, "Verification with random weights")."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.reset_running_stats()
            module.momentum = None
    model.train()
    with torch.no_grad():
        model(batch)
    model.eval()


def perturb_(model, scale: float = 0.05, seed: int = 0) -> None:
    """Perturb every parameter and buffer (constant-initialised ones included) so no branch is
    hidden by an initialisation that makes it vanish."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point():
                tensor.add_(torch.randn(tensor.shape, generator=gen) * scale)
