"""Every torch-signature runtime class the layer tables name accepts every argument torch's own
constructor takes (model code passes `device=`, `dtype=`, `bias=` as torch documents them, often
through `**dd` dictionaries: timm), a BatchNorm or GroupNorm built with `bias=False` has no
bias, as in torch, and every function of the runtimes' functional.py named like a
torch.nn.functional one takes that function's parameters."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from precision_transpiler.mappings.registry import load_mappings
from precision_transpiler.runtime import runtime_package_dir

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
    torch_params = [p for p in inspect.signature(_load(torch_name).__init__).parameters.values() if p.name != "self"]
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


def _torch_function_parameters(function: object) -> list[tuple[str, object, bool]]:
    """(name, default, keyword-only) of a torch.nn.functional function's parameters, from its
    signature or, for a builtin (`F.softplus`, `F.elu_`), its docstring's first line
    (`softplus(input, beta=1, threshold=20) -> Tensor`)."""
    empty = inspect.Parameter.empty
    try:
        parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
        return [(p.name, p.default, p.kind == p.KEYWORD_ONLY) for p in parameters]
    except (TypeError, ValueError):
        pass
    head = (function.__doc__ or "").strip().splitlines()[0].split("->")[0].strip()
    arguments = ast.parse(f"def {head}: pass").body[0].args  # type: ignore[attr-defined]

    def value(node: ast.expr | None) -> object:  # `1./8`: evaluated, not a literal
        return empty if node is None else eval(compile(ast.Expression(node), "<doc>", "eval"), {"__builtins__": {}})

    positional = arguments.posonlyargs + arguments.args
    defaults = [None] * (len(positional) - len(arguments.defaults)) + arguments.defaults
    found = [(a.arg, value(d), False) for a, d in zip(positional, defaults, strict=True)]
    return found + [(a.arg, value(d), True) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)]


def _functional_cases() -> list[tuple[str, str]]:
    """(package, name) of each public function of runtime/{flax,keras}/functional.py, read as text
    (collecting imports no framework), that torch.nn.functional has too."""
    import torch.nn.functional as F

    cases = []
    for package in ("flax", "keras"):
        path = Path(runtime_package_dir("jax" if package == "flax" else "tf")) / "functional.py"
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and hasattr(F, node.name):
                cases.append((package, node.name))
    return cases


@pytest.mark.parametrize(("package", "name"), _functional_cases())
def test_functional_runtime_functions_take_torchs_signature(package: str, name: str) -> None:
    """A function of runtime/<target>/functional.py named like a torch.nn.functional one stands
    for it wherever torch code passes that function around (`act=F.elu`, `partial(F.leaky_relu,
    negative_slope=0.2)`), so it takes torch's parameters: the same names in the same order, with
    the same defaults. It may add keyword-only ones (the key source of a random draw)."""
    import torch.nn.functional as F

    want = _torch_function_parameters(getattr(F, name))
    wanted = {n for n, _, _ in want}
    module = importlib.import_module(f"precision_transpiler.runtime.{package}.functional")
    ours = inspect.signature(getattr(module, name))
    got = [
        (p.name, p.default, p.kind == p.KEYWORD_ONLY)
        for p in ours.parameters.values()
        if p.kind != p.KEYWORD_ONLY or p.name in wanted
    ]
    assert got == want, f"{package}.functional.{name}{ours} is not torch's {name}{want}"


def test_the_runtime_torch_version_is_the_torch_the_tables_are_tested_with() -> None:
    """`torch.__version__` in converted code is runtime/common.torch_version: version checks take
    the path written for the torch these tables and tests describe, so it follows the pinned torch."""
    import torch

    from precision_transpiler.runtime.common import torch_version

    assert torch_version == torch.__version__.split("+")[0]
