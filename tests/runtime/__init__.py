"""Tests of precision_transpiler/runtime as a whole, and helpers for the tests of its parts."""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

from precision_transpiler.runtime import SUBJECTS


def runtime_namespace(package: str, subjects: tuple[str, ...] = SUBJECTS) -> types.SimpleNamespace:
    """Every top-level name of `precision_transpiler.runtime.<package>`'s modules in one namespace
    (`K.Conv2d`, `K.cross_entropy`, `K._tuple`): tests address a definition without caring which
    file of the runtime holds it. Imports the framework."""
    names: dict[str, object] = {}
    for subject in subjects:
        names.update(vars(importlib.import_module(f"precision_transpiler.runtime.{package}.{subject}")))
    return types.SimpleNamespace(**{k: v for k, v in names.items() if not k.startswith("__")})


def runtime_module_of(package: str, name: str) -> str:
    """The dotted name of the module of `precision_transpiler.runtime.<package>` that defines
    `name` (read as text: imports no framework)."""
    root = Path(__file__).resolve().parents[2] / "precision_transpiler" / "runtime" / package
    for subject in SUBJECTS:
        tree = ast.parse((root / f"{subject}.py").read_text(encoding="utf-8"))
        for node in tree.body:
            defined = [node.name] if isinstance(node, ast.FunctionDef | ast.ClassDef) else []
            defined += [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            if name in defined:
                return f"precision_transpiler.runtime.{package}.{subject}"
    raise LookupError(f"no module of runtime/{package} defines {name}")


def run_copied(code: str) -> dict[str, object]:
    """Copy the runtime definitions `code` names into it, as a conversion does (`--runtime
    inline`), check that the copies brought no import line with them (a policy's runtime imports
    inside its functions: `--policy fp32` would leave such a line behind), run the result and
    return its namespace."""
    from precision_transpiler.convert.vendor import MARKER, vendor_shims

    copied, missing = vendor_shims(code)
    assert not missing, missing
    own_imports = [
        line for line in code.splitlines() if line.startswith("import ") and "precision_transpiler" not in line
    ]
    assert copied.split(MARKER)[0].split() == " ".join(own_imports).split(), copied[:500]
    namespace: dict[str, object] = {}
    exec(compile(copied, "<copied runtime>", "exec"), namespace)
    return namespace
