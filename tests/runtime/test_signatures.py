"""Every torch-signature runtime class the layer tables name accepts every argument torch's own
constructor takes (model code passes `device=`, `dtype=`, `bias=` as torch documents them, often
through `**dd` dictionaries: timm), and a BatchNorm or GroupNorm built with `bias=False` has no
bias, as in torch."""

from __future__ import annotations

import importlib
import inspect

import pytest

from precision_transpiler.mappings.registry import load_mappings

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for torch_name, spec in load_mappings().layers.items():
        if not torch_name.startswith("torch.nn."):
            continue
        for target in ("jax", "tf"):
            mapped = spec.targets.get(target)
            shim = mapped and (getattr(mapped, "shim", None) or getattr(mapped, "reference", None))
            if shim:
                cases.append((torch_name, target, shim))
    return cases


def _load(qualified: str):
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("torch_name", "target", "shim"), _cases())
def test_the_runtime_class_takes_every_argument_torch_takes(torch_name: str, target: str, shim: str) -> None:
    torch_params = [
        p for p in inspect.signature(_load(torch_name).__init__).parameters.values() if p.name != "self"
    ]
    ours = inspect.signature(_load(shim).__init__).parameters
    if any(p.kind == p.VAR_KEYWORD for p in ours.values()):
        return
    missing = [p.name for p in torch_params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in ours]
    assert not missing, f"{shim} does not take torch's {missing}"


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_norms_without_bias(to: str) -> None:
    if to == "jax":
        from flax import nnx

        from precision_transpiler.runtime.flax import norm as flax_norm

        assert flax_norm.BatchNorm2d(4, bias=False, rngs=nnx.Rngs(0)).bias is None
        assert flax_norm.GroupNorm(2, 4, bias=False, rngs=nnx.Rngs(0)).bias is None
    else:
        from precision_transpiler.runtime.keras import norm as keras_norm

        assert keras_norm.BatchNorm2d(4, bias=False).bias is None
        assert keras_norm.GroupNorm(2, 4, bias=False).bias is None
