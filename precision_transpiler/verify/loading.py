"""Import the original and the converted model files, and build models from `--entry EXPR`.

Verification is the one place where ptranspile runs user code, and it says so. A file inside a
package (a folder chain with `__init__.py`) is imported as part of that package, so its relative
imports resolve; a converted file written outside any package is executed *beside* the original
(as a sibling module of the original's package), so `from .utils import x` in it finds the
original's helpers.
"""

from __future__ import annotations

import contextlib
import importlib
import linecache
import re
import sys
import traceback
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precision_transpiler.errors import VerifyError
from precision_transpiler.files import package_parts


@dataclass(frozen=True)
class Located:
    """Where a file sits: its package (None for a top-level script) and its import name."""

    path: Path
    package: str | None
    module_name: str | None  # dotted name inside its package
    sys_path_root: Path  # the folder that must be on sys.path


def locate(path: Path) -> Located:
    """Where a model file sits among packages (files.package_parts: regular packages and the
    namespace portions inside them, facenet_pytorch's `models/`): its package and module name,
    and the folder that must be on sys.path."""
    path = path.resolve()
    parts = package_parts(path)
    folder = path.parent
    for _ in parts:
        folder = folder.parent
    if not parts:
        return Located(path, None, None, path.parent)
    return Located(path, ".".join(parts), ".".join([*parts, path.stem]), folder)


@contextlib.contextmanager
def _isolated_registries() -> Iterator[None]:
    """Model zoos register builder names at import time and refuse a second registration
    (torchvision's `@register_model`); the converted copy of a zoo file registers the same
    names again. Let it, then restore the zoo's own registry."""
    saved: list[tuple[dict[Any, Any], dict[Any, Any]]] = []
    api = sys.modules.get("torchvision.models._api")
    registry = getattr(api, "BUILTIN_MODELS", None)
    if isinstance(registry, dict):
        saved.append((registry, dict(registry)))
        registry.clear()
    try:
        yield
    finally:
        for table, content in saved:
            table.clear()
            table.update(content)


def short_error(exc: BaseException, filename: str) -> str:
    """`file:line: Type: message` for the innermost frame in `filename`, else the last frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    frame = next((f for f in reversed(frames) if f.filename == filename), frames[-1] if frames else None)
    where = f"{frame.filename}:{frame.lineno}: " if frame is not None else ""
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if line.strip()]
    message = lines[0] if lines else ""
    if message.startswith("Exception encountered when calling") and len(lines) > 1:
        # Keras wraps an error raised in a layer's `call`: its first line names the layer only
        message = f"{lines[1]} ({message.rstrip('.')})"
    return f"{where}{type(exc).__name__}: {message}"


def import_original(path: Path) -> types.ModuleType:
    """Import the original model file (as part of its package when it has one)."""
    located = locate(path)
    root = str(located.sys_path_root)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        if located.module_name is not None:
            _forget_other_copies(located.module_name, root)
            return importlib.import_module(located.module_name)
        name = f"_ptranspile_original_{path.stem}"
        return _exec_module(path.read_text(encoding="utf-8"), name, None, str(located.path))
    except VerifyError:
        raise
    except BaseException as exc:  # user code: anything can happen; report it in one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise VerifyError(f"cannot import the original {path}: {short_error(exc, str(located.path))}") from None


def import_converted(
    path: Path, original: Path, code: str | None = None, variant: str = "", modules: Mapping[str, str] | None = None
) -> types.ModuleType:
    """Import the converted model (`code` if given, else the file's text). Inside a package of
    its own it is imported there; otherwise it runs as a sibling of the original's module.
    `variant` names another version of the same file imported beside it (verification's fp32
    reference), so that its text does not replace the converted file's in tracebacks and the
    per-layer report's source lines. `modules` are modules beside the converted file that are
    not written yet (the runtime module, `--runtime module`), by name: their text as it will be."""
    located = locate(path)
    source = code if code is not None else path.read_text(encoding="utf-8")
    package = located.package
    if package is None:
        package = locate(original).package
        root = str(locate(original).sys_path_root)
    else:
        root = str(located.sys_path_root)
    if root not in sys.path:
        sys.path.insert(0, root)
    if str(located.path.parent) not in sys.path:
        sys.path.append(str(located.path.parent))
    name = f"_ptranspile_converted_{path.stem}_{abs(hash(source)) % 10**8}"
    full = f"{package}.{name}" if package else name
    try:
        if package:
            _forget_other_copies(package, root)
            importlib.import_module(package)  # before the registries are saved
        for beside, text in (modules or {}).items():
            _provide(beside, text, package, located.path.with_name(f"{beside}.py"))
        with _isolated_registries():
            filename = str(located.path) + (f" ({variant})" if variant else "")
            return _exec_module(source, full, package, filename)
    except VerifyError:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise VerifyError(f"cannot import the converted {path}: {short_error(exc, str(located.path))}") from None


def _forget_other_copies(module_name: str, root: str) -> None:
    """A package of the same name imported earlier from another folder (two checkouts, two
    test folders, one process) would answer this import: forget its modules, and put `root`
    first on sys.path, so that the package verified is the one under `root`. A namespace
    package (no `__init__.py`) spans every such folder on sys.path: its first one decides."""
    top = module_name.split(".")[0]
    if top not in sys.modules or top in sys.stdlib_module_names:
        return
    base = Path(root).resolve()

    def elsewhere(module: types.ModuleType | None) -> bool:
        if module is None:
            return False
        places = [getattr(module, "__file__", None), *list(getattr(module, "__path__", None) or [])]
        first = next((place for place in places if place), None)
        return first is not None and not Path(first).resolve().is_relative_to(base)

    if not (elsewhere(sys.modules.get(top)) or elsewhere(sys.modules.get(module_name))):
        return
    for name in [name for name in sys.modules if name == top or name.startswith(f"{top}.")]:
        del sys.modules[name]
    if root in sys.path:
        sys.path.remove(root)
    sys.path.insert(0, root)
    importlib.invalidate_caches()


def _provide(name: str, source: str, package: str | None, path: Path) -> None:
    """Run `source` as module `name` beside the converted file: importable both as a top-level
    module and inside the package the converted file runs in (its relative import)."""
    if sys.modules.get(name) is not None and getattr(sys.modules[name], "_ptranspile_source", None) == source:
        module = sys.modules[name]
    else:
        module = _exec_module(source, name, None, str(path))
        module._ptranspile_source = source  # type: ignore[attr-defined]
    if package:
        sys.modules[f"{package}.{name}"] = module


def _exec_module(source: str, name: str, package: str | None, filename: str) -> types.ModuleType:
    if package:
        importlib.import_module(package)
    module = types.ModuleType(name)
    module.__file__ = filename
    module.__package__ = package or ""
    sys.modules[name] = module
    # inspect (and so the per-layer report's source lines and tracebacks) reads code through
    # linecache; the converted text may not be on disk yet, or may differ from what is.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    try:
        # dont_inherit: this module's `from __future__ import annotations` must not make the
        # converted code's annotations lazy: they are evaluated when it is imported as a file
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def build_model(module: types.ModuleType, entry: str, side: str, converted: Any = None) -> Any:
    """Evaluate the entry expression in the module's namespace; `converted` (a ConvertedEntry,
    verify/entry_conversion.py) is the expression converted for a converted module."""
    if converted is not None:
        return converted.build(module, side)
    try:
        code = compile(entry, "<--entry>", "eval")
    except SyntaxError as exc:
        raise VerifyError(f"--entry {entry!r} is not a Python expression: {exc.msg}") from None
    try:
        return eval(code, module.__dict__)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise VerifyError(
            f"--entry {entry!r} failed in the {side} module: {short_error(exc, module.__file__ or '')}"
        ) from None
