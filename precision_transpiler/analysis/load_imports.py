"""What a converted module imports when it is loaded that needs the source framework.

A conversion to JAX or Keras that still imports torch (or a package built on torch: timm,
the original's own sibling modules) when loaded is not a conversion: it only runs where torch is
installed, and it "verifies" because it is. Verification fails such an output. Read statically
from the converted code (Python's `ast`), nothing is imported:

- the imports that run at load: module level and class bodies, inside module-level `if`,
  `with`, `for` and `try` blocks; not inside functions (they run only when called) and not
  where a `try` catches ImportError (a feature-detection import: the module loads without it);
- flagged when the module is the source framework's (`torch`, `torchvision`, `torchaudio`,
  `torchtext`), an installed distribution that requires torch (its metadata says so), or a
  module file next to the original (a sibling the conversion left imported) that imports torch.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

TORCH_ROOTS = frozenset({"torch", "torchvision", "torchaudio", "torchtext"})
_OPTIONAL = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_IMPORTS_TORCH = re.compile(r"^\s*(?:import|from)\s+torch\b", re.MULTILINE)
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9_.-]+)")


def torch_imports_at_load(code: str, original: Path | None = None) -> list[tuple[int, str, str]]:
    """(line, module, why) for each import of `code` that runs at load and needs torch."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found: list[tuple[int, str, str]] = []
    package_dir = original.parent if original is not None else None
    for node in _load_time_imports(tree.body):
        for module in _modules(node):
            why = _needs_torch(module, node, package_dir)
            if why is not None:
                found.append((node.lineno, module or "." * getattr(node, "level", 0), why))
    return found


def torch_imports_when_called(code: str, original: Path | None = None) -> list[tuple[int, str, str, str, bool]]:
    """(line, module, why, function, guarded) for each import inside a function of `code` that
    needs torch: it does not run at load, but whenever the function runs (spikingjelly's
    `voltage_reset` importing the package's own `voltage`); `guarded` when a `try` around it
    catches ImportError (an optional kernel: the code runs without it where that fails)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    package_dir = original.parent if original is not None else None
    found: list[tuple[int, str, str, str, bool]] = []

    def walk(body: list[ast.stmt], function: str | None, guarded: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                walk(stmt.body, stmt.name, False)
                continue
            if isinstance(stmt, ast.Import | ast.ImportFrom) and function is not None:
                for module in _modules(stmt):
                    why = _needs_torch(module, stmt, package_dir, above=True)
                    if why is not None:
                        found.append((stmt.lineno, module or "." * stmt.level, why, function, guarded))
            inner = guarded or (
                isinstance(stmt, ast.Try | ast.TryStar) and any(catches_import_error(h) for h in stmt.handlers)
            )
            for field in ("body", "orelse", "finalbody"):
                walk(getattr(stmt, field, None) or [], function, inner if field == "body" else guarded)
            for handler in getattr(stmt, "handlers", None) or []:
                walk(handler.body, function, guarded)

    walk(tree.body, None, False)
    return found


def _load_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            yield stmt
        elif isinstance(stmt, ast.ClassDef):
            yield from _load_time_imports(stmt.body)
        elif isinstance(stmt, ast.If | ast.For | ast.While | ast.With):
            yield from _load_time_imports(stmt.body)
            yield from _load_time_imports(getattr(stmt, "orelse", []))
        elif isinstance(stmt, ast.Try | ast.TryStar):
            if not any(catches_import_error(h) for h in stmt.handlers):
                yield from _load_time_imports(stmt.body)
            for handler in stmt.handlers:
                yield from _load_time_imports(handler.body)
            yield from _load_time_imports(stmt.orelse)
            yield from _load_time_imports(stmt.finalbody)


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    """Whether an `except` catches a failed import (`ImportError`, `ModuleNotFoundError`, or
    anything: `Exception`, a bare `except`)."""
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _OPTIONAL for n in names)


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [node.module or ""]


def _needs_torch(module: str, node: ast.stmt, package_dir: Path | None, above: bool = False) -> str | None:
    level = getattr(node, "level", 0)
    if level == 0 and module.split(".")[0] in TORCH_ROOTS:
        return "torch"
    if level == 0:
        dist = torch_distribution(module.split(".")[0])
        if dist is not None:
            return f"a package built on torch (the {dist} distribution requires it)"
        if module.split(".")[0] in known_torch_packages():
            return "a package built on torch (mappings/torch_surface.yaml `packages:`)"
    if package_dir is not None:
        file = _module_file(module, level, package_dir, above)
        if file is not None and _IMPORTS_TORCH.search(file.read_text(encoding="utf-8", errors="replace")):
            return f"a module that imports torch ({file.name}, left imported, not converted)"
    return None


def _module_file(module: str, level: int, package_dir: Path, above: bool = False) -> Path | None:
    """The file of a module next to the original (relative imports from its package; absolute
    ones from its folder, or, `above`, from a folder above it that holds the package:
    `tkpkg.kernels` imported by `tkpkg/model.py`), if there is one."""
    base = package_dir
    for _ in range(max(level - 1, 0)):
        base = base.parent
    parts = [p for p in module.split(".") if p]
    if not parts:
        return None
    bases = [base, *list(base.parents)[:6]] if above and not level else [base]
    for root in bases:
        candidate = root.joinpath(*parts)
        for file in (candidate.with_suffix(".py"), candidate / "__init__.py"):
            if file.is_file() and not file.name.startswith("_ptranspile_runtime_"):
                return file
        if level == 0 and (root / parts[0] / "__init__.py").is_file():
            return None  # the package is here, without that module
    return None


@cache
def known_torch_packages() -> frozenset[str]:
    """Top-level packages built on torch whether or not they are installed here (fairscale's
    parallel layers in llama's model file, timm): the torch surface table's `packages:`."""
    from precision_transpiler.mappings.registry import load_mappings

    surface = load_mappings().surfaces.get("torch")
    return surface.packages if surface is not None else frozenset()


@cache
def torch_distribution(root: str) -> str | None:
    """The installed distribution providing top-level package `root` if it requires torch."""
    from importlib import metadata

    for dist in _distributions().get(root, ()):
        try:
            requires = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            if "extra ==" in requirement:
                continue  # an optional extra: the package itself loads without it
            name = _REQUIREMENT_NAME.match(requirement)
            if name is not None and name.group(1).lower() == "torch":
                return dist
    return None


@cache
def _distributions() -> dict[str, list[str]]:
    from importlib import metadata

    return dict(metadata.packages_distributions())
