"""The house rules, checked on the package's source so that they hold while it grows.

- no file of the package over 800 lines, no function over 100;
- no import cycle between the package's modules (imports inside functions count: they run too;
  imports under `if TYPE_CHECKING:` do not), and no cycle between its subpackages;
- the subpackages listed in `LAYERS` import only from the layers below them (docs/architecture.md);
- no private name (`_helper`) imported from another subpackage, outside `runtime/` (whose
  modules share helpers on purpose: vendoring copies them together).

What is over a limit today is listed below with its size; the lists may only shrink: an entry
that grew fails, and an entry that is no longer over its limit fails until it is removed, so a
fix is recorded the moment it lands.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.helpers import REPO

PACKAGE = REPO / "precision_transpiler"
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100

# path below precision_transpiler/ -> its lines when it was listed (it may not grow)
ALLOWED_LONG_FILES: dict[str, int] = {}

# "path::qualified.name" -> its lines when it was listed (it may not grow)
ALLOWED_LONG_FUNCTIONS: dict[str, int] = {}

# subpackage pairs that import each other today, as "a <-> b" with a < b
ALLOWED_PACKAGE_CYCLES: set[str] = set()

# subpackage -> the subpackages (and top-level modules) it may import (docs/architecture.md, "Layers")
LAYERS: dict[str, set[str]] = {
    "mappings": {"errors", "syntax", "version"},
    "runtime": set(),
    "analysis": {"diagnostics", "mappings", "syntax"},
    "rewrite": {"analysis", "diagnostics", "mappings", "runtime", "syntax"},
    "rules": {"analysis", "diagnostics", "mappings", "rewrite", "runtime", "syntax"},
    "precision": {"convert", "errors", "linemap", "mappings", "markers", "rewrite", "runtime", "syntax"},
}


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (annotations only, never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skipped.update(id(inner) for inner in ast.walk(stmt))
    return skipped


def _imports(module: str, path: Path) -> Iterator[tuple[str, ast.alias, ast.stmt]]:
    """(imported module, alias, statement) for every import of the package that runs."""
    tree = _tree(path)
    skipped = _type_checking_only(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                yield target, alias, node
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, alias, node


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """module -> the package's modules it imports (a `from pkg import submodule` names the submodule)."""
    known = modules()
    graph = {}
    for module, path in known.items():
        edges = set()
        for target, alias, node in _imports(module, path):
            if not target.startswith("precision_transpiler"):
                continue
            child = f"{target}.{alias.name}"
            name = child if isinstance(node, ast.ImportFrom) and child in known else target
            if name in known and name != module:
                edges.add(name)
        graph[module] = frozenset(edges)
    return graph


def strongly_connected(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """Tarjan's components of more than one node (iterative: no recursion limit to meet)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _over(measured: dict[str, int], allowed: dict[str, int], limit: int, what: str) -> list[str]:
    problems = []
    for key, lines in sorted(measured.items()):
        if lines > limit and key not in allowed:
            problems.append(f"{key}: {lines} lines (the limit for a {what} is {limit})")
        elif key in allowed and lines > allowed[key]:
            problems.append(f"{key}: grew to {lines} lines (listed at {allowed[key]}: split it instead)")
    for key in sorted(allowed):
        if measured.get(key, 0) <= limit:
            problems.append(f"{key}: no longer over {limit} lines: remove it from the allow-list")
    return problems


def test_no_package_file_over_800_lines() -> None:
    measured = {_rel(path): len(path.read_text(encoding="utf-8").splitlines()) for path in modules().values()}
    assert _over(measured, ALLOWED_LONG_FILES, MAX_FILE_LINES, "file") == []


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield name, node.end_lineno - start + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def test_no_function_over_100_lines() -> None:
    measured = {}
    for path in modules().values():
        for name, lines in _functions(_tree(path)):
            measured[f"{_rel(path)}::{name}"] = lines
    assert _over(measured, ALLOWED_LONG_FUNCTIONS, MAX_FUNCTION_LINES, "function") == []


def test_no_import_cycle_between_modules() -> None:
    assert strongly_connected(import_graph()) == []


def test_subpackage_cycles_only_shrink() -> None:
    edges: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        for target in targets:
            a, b = _subpackage(module), _subpackage(target)
            if a != b:
                edges.setdefault(a, set()).add(b)
    found = {f"{a} <-> {b}" for a in edges for b in edges[a] if a < b and a in edges.get(b, ())}
    assert sorted(found - ALLOWED_PACKAGE_CYCLES) == [], "a new cycle between subpackages"
    assert sorted(ALLOWED_PACKAGE_CYCLES - found) == [], "a cycle is gone: remove it from the allow-list"


def test_layers_import_only_from_below() -> None:
    problems = []
    for module, targets in sorted(import_graph().items()):
        allowed = LAYERS.get(_subpackage(module))
        if allowed is None:
            continue
        for target in sorted(targets):
            below = _subpackage(target)
            if below != _subpackage(module) and below not in allowed:
                problems.append(f"{module} imports {target}")
    assert problems == []


def test_no_private_name_imported_across_subpackages() -> None:
    problems = []
    for module, path in modules().items():
        if _subpackage(module) == "runtime":
            continue
        for target, alias, node in _imports(module, path):
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and target.startswith("precision_transpiler") and _subpackage(target) != _subpackage(module):
                problems.append(f"{_rel(path)}:{node.lineno} imports {alias.name} from {target}")
    assert problems == []


def test_the_checks_see_what_they_check() -> None:
    """The measurements above are of the real package: a sanity floor, not a count to keep."""
    graph = import_graph()
    assert len(graph) > 100
    assert "precision_transpiler.rewrite.engine" in graph["precision_transpiler.pipeline"] or any(
        "precision_transpiler.rewrite" in target for target in graph["precision_transpiler.pipeline"]
    )
    assert strongly_connected({"a": frozenset({"b"}), "b": frozenset({"a"}), "c": frozenset()}) == [["a", "b"]]
