"""The layout of precision_transpiler/runtime: twin folders, shared arithmetic kept once, clean modules.

The Flax and Keras runtimes are twins (the same torch behaviour written for two frameworks), so
they have the same files, and a framework-free definition they would both carry lives once, in
`runtime/common.py` or the framework-free half of its subject (`runtime/pool.py`, ...): a fix to
torch's arithmetic then reaches both targets.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from precision_transpiler.runtime import PACKAGE, SHARED, SUBJECTS, runtime_module

RUNTIME = Path(__file__).resolve().parents[2] / "precision_transpiler" / "runtime"
# what a framework-free definition may use besides builtins and other framework-free definitions
FREE_MODULES = {
    *("math", "numpy", "typing", "collections", "dataclasses", "functools", "contextlib", "os", "re", "weakref"),
    "itertools",  # runtime/common.py: forward hooks' handle keys
    *("platform", "subprocess", "logging"),  # runtime/device.py asks the machine
    *("copy", "fnmatch"),  # runtime/policy.py: output classes copied item by item, override path globs
    *("io", "pickle", "struct", "zipfile", "ml_dtypes"),  # runtime/checkpoint.py reads torch's files
}


def _files(package: str) -> list[str]:
    return sorted(p.name for p in (RUNTIME / package).glob("*.py"))


def _modules() -> list[str]:
    return [
        ".".join(p.relative_to(RUNTIME).with_suffix("").parts)
        for p in sorted(RUNTIME.rglob("*.py"))
        if p.name != "__init__.py"
    ]


def test_flax_and_keras_have_the_same_files() -> None:
    assert _files("flax") == _files("keras")
    assert _files("flax") == sorted(["__init__.py", *(f"{s}.py" for s in SUBJECTS)])
    assert runtime_module("jax", "conv") == f"{PACKAGE}.flax.conv"
    assert runtime_module("tf", "losses") == f"{PACKAGE}.keras.losses"
    assert runtime_module(None, "common") == f"{PACKAGE}.common"


@pytest.mark.parametrize("package", ["flax", "keras", "torch"])
def test_packages_say_what_they_are(package: str) -> None:
    assert ast.get_docstring(ast.parse((RUNTIME / package / "__init__.py").read_text(encoding="utf-8")))


class _Definition:
    def __init__(self, node: ast.stmt, module_aliases: dict[str, str]) -> None:
        self.node = node
        bound = {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        bound |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        bound |= {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        # modules imported inside the definition (`import weakref` where it is used)
        local = {
            (a.asname or a.name.split(".")[0]): a.name.split(".")[0]
            for n in ast.walk(node)
            if isinstance(n, ast.Import)
            for a in n.names
        }
        local |= {  # `from collections import OrderedDict` inside it
            (a.asname or a.name): (n.module or "").split(".")[0]
            for n in ast.walk(node)
            if isinstance(n, ast.ImportFrom) and n.level == 0
            for a in n.names
        }
        loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        self.free = loads - bound - set(local) - set(dir(builtins))
        self.frameworks = {module_aliases[n] for n in self.free if n in module_aliases} | set(local.values())


def _definitions(path: Path) -> dict[str, _Definition]:
    """A module's top-level definitions; the framework-free ones (using only builtins, the
    standard library, numpy and other framework-free definitions) marked `free`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}  # local name -> the top-level module it comes from
    common: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module in {f"{PACKAGE}.{m}" for m in SHARED}:
            common |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            for alias in node.names:
                aliases[alias.asname or alias.name] = node.module.split(".")[0]
    defs: dict[str, _Definition] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            defs[node.name] = _Definition(node, aliases)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = _Definition(node, aliases)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defs[node.target.id] = _Definition(node, aliases)
    free = set(common)
    while True:
        more = {
            name
            for name, d in defs.items()
            if name not in free and d.frameworks <= FREE_MODULES and d.free - set(aliases) <= free | {name}
        }
        if not more:
            break
        free |= more
    return {name: d for name, d in defs.items() if name in free}


def _normalised(node: ast.stmt) -> str:
    """The definition without docstrings, annotations and comments: two definitions that compute
    the same way compare equal."""
    node = ast.parse(ast.unparse(node)).body[0]  # a copy
    for sub in ast.walk(node):
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
            sub.returns = None
            for arg in [*sub.args.posonlyargs, *sub.args.args, *sub.args.kwonlyargs, sub.args.vararg, sub.args.kwarg]:
                if arg is not None:
                    arg.annotation = None
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            body = sub.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                sub.body = body[1:] or [ast.Pass()]
        if isinstance(sub, ast.AnnAssign):
            sub.annotation = ast.Name("_", ast.Load())
    return ast.unparse(node)


def test_no_framework_free_definition_is_duplicated_between_flax_and_keras() -> None:
    flax = {n: d for p in (RUNTIME / "flax").glob("*.py") for n, d in _definitions(p).items()}
    keras = {n: d for p in (RUNTIME / "keras").glob("*.py") for n, d in _definitions(p).items()}
    flax_by_text = {_normalised(d.node): n for n, d in flax.items()}
    twins = sorted(
        f"{flax_by_text[text]} / {name}" for name, d in keras.items() if (text := _normalised(d.node)) in flax_by_text
    )
    assert not twins, f"framework-free twins belong in runtime/common.py or runtime/<subject>.py: {twins}"


@pytest.mark.parametrize("package", ["flax", "keras"])
def test_no_two_modules_copied_into_one_output_define_one_name(package: str) -> None:
    """An output carries the definitions it uses from one target's modules and the shared ones,
    in one namespace: two helpers of one name (the random functions' `_float_dtype(dtype)` and
    the distributions' `_float_dtype(ops, value)`) meet there, and the later replaces the
    earlier for every caller (torch-uncertainty's Bayesian layers, kornia's AutoAugment failed
    with a TypeError)."""
    places: dict[str, set[str]] = {}
    files = [RUNTIME / f"{m}.py" for m in SHARED] + sorted((RUNTIME / package).glob("*.py"))
    for path in files:
        if path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [node.name] if isinstance(node, ast.FunctionDef | ast.ClassDef) else []
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            for name in names:
                places.setdefault(name, set()).add(str(path.relative_to(RUNTIME)))
    clashes = {name: sorted(where) for name, where in places.items() if len(where) > 1}
    assert not clashes, f"one name, two definitions an output may carry together: {clashes}"


def test_the_shared_modules_are_the_top_level_ones() -> None:
    assert sorted(SHARED) == sorted(p.stem for p in RUNTIME.glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("shared", SHARED)
def test_shared_modules_are_framework_free(shared: str) -> None:
    tree = ast.parse((RUNTIME / f"{shared}.py").read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0] if isinstance(node, ast.Import) else (node.module or "").split(".")[0]
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= FREE_MODULES | {"__future__", "precision_transpiler"}
    runtime = {
        n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(PACKAGE)
    }
    assert runtime <= {f"{PACKAGE}.{m}" for m in SHARED}, "a framework-free module takes only framework-free names"
    assert set(_definitions(RUNTIME / f"{shared}.py")) == {
        n.name if isinstance(n, ast.FunctionDef | ast.ClassDef) else _assigned(n)
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.Assign | ast.AnnAssign)
    }


def _assigned(node: ast.Assign | ast.AnnAssign) -> str:
    """The name a module-level assignment binds (plain or annotated)."""
    target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
    assert isinstance(target, ast.Name)
    return target.id


@pytest.mark.parametrize("module", _modules())
def test_runtime_module_imports_cleanly(module: str) -> None:
    """Each module imports on its own (no import cycle between runtime modules); and none has
    `from __future__ import annotations`, which the copies of its definitions would not have."""
    source = (RUNTIME.joinpath(*module.split(".")).with_suffix(".py")).read_text(encoding="utf-8")
    assert "from __future__ import annotations" not in source
    if module.startswith("keras."):
        pytest.importorskip("keras")
    if module.startswith("flax."):
        pytest.importorskip("flax.nnx")
    if module.startswith("torch."):
        pytest.importorskip("torch")
    importlib.import_module(f"{PACKAGE}.{module}")


def test_runtime_passes_ruff() -> None:
    ruff = Path(sys.executable).parent / "ruff"
    command = [str(ruff)] if ruff.exists() else [sys.executable, "-m", "ruff"]
    for args in (["check"], ["format", "--check"]):
        done = subprocess.run([*command, *args, str(RUNTIME)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


#: the namespace of array operations a framework-free module computes with, when it is not
#: `functional.py`'s `_ArrayOps` (distributions also draw, so theirs carry the draws)
_OPS_NAMESPACES = {"distributions": ("distributions", "_DistributionOps")}


def _ops_used(shared: str) -> set[str]:
    """The `ops.<name>` and `self.ops.<name>` a framework-free module calls."""
    return {
        node.attr
        for node in ast.walk(ast.parse((RUNTIME / f"{shared}.py").read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "ops")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "ops")
        )
    }


def test_the_twins_array_ops_are_what_the_shared_bodies_use() -> None:
    """Both targets' `_ArrayOps` (and `_DistributionOps`) have the same names, and every
    `ops.<name>` a framework-free module calls is one of them."""
    pytest.importorskip("flax.nnx")
    pytest.importorskip("keras")
    used_in_all = 0
    for shared in SHARED:
        subject, namespace = _OPS_NAMESPACES.get(shared, ("functional", "_ArrayOps"))
        flax = set(vars(getattr(importlib.import_module(f"{PACKAGE}.flax.{subject}"), namespace)))
        keras = set(vars(getattr(importlib.import_module(f"{PACKAGE}.keras.{subject}"), namespace)))
        assert flax == keras, sorted(flax ^ keras)
        used = _ops_used(shared)
        assert used <= flax, (shared, sorted(used - flax))
        used_in_all += len(used)
    assert used_in_all > 40  # the check reads the shared modules' calls
