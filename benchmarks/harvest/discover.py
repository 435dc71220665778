"""Enumerate the torch.nn.Module classes an installed package defines, and what its imports cost.

The harvest counts classes, so the count must not depend on what happened to import: every module
file of the package is imported on its own (one that fails is counted by reason, and the Module
classes its source defines are still found, from its syntax, and counted as "import error"), and
only classes the package itself defines are listed (`cls.__module__` is the module that was
imported, so re-exports of torch's or another package's layers are not counted twice).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from torch import nn

#: module files that are not part of the package's library code (tests, examples, scripts)
SKIPPED_PARTS = {"tests", "test", "testing", "examples", "example", "scripts", "benchmarks", "docs", "__main__"}
IMPORT_LIMIT_S = 60


class ImportTimeout(BaseException):
    """Importing one module took longer than IMPORT_LIMIT_S."""


@dataclass
class FoundClass:
    """A Module subclass the package defines."""

    cls: type
    module: str  # the dotted module name
    qualname: str
    file: str  # relative to the package's folder (for a one-file distribution: the file's name)
    line: int

    @property
    def name(self) -> str:
        return f"{self.module}.{self.qualname}"


@dataclass
class Discovery:
    modules: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # module -> reason
    classes: list[FoundClass] = field(default_factory=list)
    #: Module classes in modules that did not import (found from their syntax): (module, qualname, file, line, reason)
    unimported: list[tuple[str, str, str, int, str]] = field(default_factory=list)


def package_root(import_name: str) -> tuple[Path, bool]:
    """The package's folder (and False), or a one-module distribution's file (and True)."""
    spec = importlib.util.find_spec(import_name)
    if spec is None:
        raise ModuleNotFoundError(f"{import_name} is not installed", name=import_name)
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))), False
    assert spec.origin is not None
    return Path(spec.origin), True


def module_files(import_name: str) -> Iterator[tuple[str, Path, str]]:
    """(dotted module name, file, path relative to the package) for each library module file."""
    root, single = package_root(import_name)
    if single:
        yield import_name, root, root.name
        return
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        parts = rel.with_suffix("").parts
        if any(part in SKIPPED_PARTS or part.startswith(("test_", ".")) for part in parts):
            continue
        if any("-" in part or "." in part for part in parts):
            continue  # not importable as a module name
        names = parts[:-1] if parts[-1] == "__init__" else parts
        yield ".".join((import_name, *names)), path, rel.as_posix()


def import_reason(exc: BaseException) -> str:
    """A short, stable reason for a failed import: `missing pandas`, `timeout`, or the exception's type."""
    if isinstance(exc, ImportTimeout):
        return "timeout"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return f"missing {exc.name.split('.')[0]}"
    return type(exc).__name__


def _on_alarm(signum: int, frame: Any) -> None:
    raise ImportTimeout


def import_module(name: str) -> ModuleType:
    """Import one module, stopped after IMPORT_LIMIT_S."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, IMPORT_LIMIT_S)
    try:
        return importlib.import_module(name)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def class_lines(path: Path) -> dict[str, int]:
    """Qualified class name -> line of its `class` statement, from the file's syntax."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return {}
    found: dict[str, int] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                found[prefix + node.name] = node.lineno
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return found


def _nested(cls: type) -> Iterator[type]:
    yield cls
    for value in vars(cls).values():
        if isinstance(value, type) and value.__qualname__.startswith(cls.__qualname__ + "."):
            yield from _nested(value)


def module_classes(module: ModuleType, rel: str, lines: dict[str, int]) -> list[FoundClass]:
    """The Module subclasses that `module` itself defines, nested classes included."""
    found: list[FoundClass] = []
    for value in list(vars(module).values()):
        if not isinstance(value, type) or value.__module__ != module.__name__:
            continue
        for cls in _nested(value):
            if "<locals>" in cls.__qualname__ or not issubclass(cls, nn.Module) or cls.__module__ != module.__name__:
                continue
            line = lines.get(cls.__qualname__)
            if line is None:
                try:
                    line = inspect.getsourcelines(cls)[1]
                except (OSError, TypeError):
                    line = 0
            found.append(FoundClass(cls, module.__name__, cls.__qualname__, rel, line))
    return found


def static_module_classes(path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(qualified name, line) of the classes a file defines whose bases name a known Module class
    (`nn.Module`, `Module`, torch.nn's layers, the package's own Module classes), to a fixed point
    within the file: how a module that does not import is still counted."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return []
    classes: list[tuple[str, int, list[str]]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
                classes.append((prefix + node.name, node.lineno, bases))
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    names = set(known)
    found: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for qualname, line, bases in classes:
            if qualname not in found and any(b in names for b in bases):
                found[qualname] = line
                names.add(qualname.split(".")[-1])
                changed = True
    return sorted(found.items(), key=lambda item: item[1])


def discover(import_name: str) -> Discovery:
    """Import every library module of the package and list its Module classes, sorted by file
    and line; modules that fail are recorded with their reason and their classes found from
    their syntax."""
    result = Discovery()
    failed_files: list[tuple[str, Path, str]] = []
    seen: set[int] = set()
    for name, path, rel in module_files(import_name):
        result.modules += 1
        try:
            module = sys.modules.get(name) or import_module(name)
        except BaseException as exc:  # an import may raise anything, SystemExit included
            if isinstance(exc, KeyboardInterrupt):
                raise
            result.failed[name] = import_reason(exc)
            failed_files.append((name, path, rel))
            continue
        for found in module_classes(module, rel, class_lines(path)):
            if id(found.cls) not in seen:
                seen.add(id(found.cls))
                result.classes.append(found)
    layers = (getattr(nn, n) for n in dir(nn))
    known = {"Module", *(t.__name__ for t in layers if isinstance(t, type) and issubclass(t, nn.Module))}
    known |= {c.qualname.split(".")[-1] for c in result.classes}
    for name, path, rel in failed_files:
        for qualname, line in static_module_classes(path, known):
            result.unimported.append((name, qualname, rel, line, result.failed[name]))
    result.classes.sort(key=lambda c: (c.file, c.line, c.qualname))
    return result
