"""The runtime beside the outputs: one module per output folder with the runtime definitions the
converted files there use, each file importing what it uses from it.

A conversion's result carries the runtime definitions it uses copied in (convert/vendor.py): a
self-contained file, what `--runtime inline` writes. Converted files written to a file or a
folder (`--runtime module`, the default there) instead import them from one module beside them,
`_ptranspile_runtime_jax.py` or `_ptranspile_runtime_tf.py` (one name per target, so that a folder
can hold outputs of both), and a converted file stays about the size of its source; the best-known
source-to-source converters do the same (one auxiliary module beside the outputs).

The module is generated, never edited by hand: its first lines say so and carry a version line
(`# ptranspile-runtime: <version> <target> <digest>`). Writing a folder again merges the names
the folder's earlier outputs import (its `__all__`) with the new ones and regenerates the module
from this version's runtime, so a stale module is refreshed, never mixed with newer definitions.
A file in a package (its folder has `__init__.py`) imports it relatively (`from ._ptranspile_...`),
otherwise as a top-level module found beside it.

Reading a converted file back (`read_runtime_imports`, the pipeline's ReadRuntimeImports stage)
turns those imports into imports from the runtime package, the form the policy passes see; the
VendorRuntime stage then writes the runtime as the job asks.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from precision_transpiler.convert.unvendor import copied_block
from precision_transpiler.convert.vendor import SHIM_DIR, _closure, _shim_module, import_line
from precision_transpiler.runtime import PACKAGE, TARGET_PACKAGES
from precision_transpiler.syntax import import_bound_names
from precision_transpiler.version import __version__

RUNTIME_MODULES = {"jax": "_ptranspile_runtime_jax", "tf": "_ptranspile_runtime_tf"}
_VERSION_LINE = re.compile(r"^# ptranspile-runtime: (\S+) (\S+) (\S+)$", re.MULTILINE)
_IMPORT_FROM_RUNTIME = re.compile(r"^from \.?(_ptranspile_runtime_(?:jax|tf)) import", re.MULTILINE)


def runtime_module_target(source: str) -> str | None:
    """The target whose runtime module (`_ptranspile_runtime_tf`) a converted file imports from:
    its framework when it imports nothing else (a model of runtime layers only)."""
    found = _IMPORT_FROM_RUNTIME.search(source)
    if found is None:
        return None
    return next(target for target, name in RUNTIME_MODULES.items() if name == found.group(1))


@dataclass(frozen=True)
class Split:
    """A converted file whose runtime definitions are imported from the module beside it."""

    code: str
    target: str
    names: tuple[str, ...]  # what it imports from the runtime module

    @property
    def module_name(self) -> str:
        return RUNTIME_MODULES[self.target]


def split_runtime(code: str, target: str, *, relative: bool = False) -> Split | None:
    """`code` with its copied-in runtime block replaced by one import from the runtime module
    (and without the imports only that block used); None when it has no such block."""
    if target not in RUNTIME_MODULES:
        return None
    block = copied_block(code, target)
    if block is None:
        return None
    rest = block.rest
    used = _names_used(rest)
    wanted: dict[str, str] = {}  # local name in the file -> runtime name
    for _, name, local in block.entries:
        if local in used and (local != name or name not in block.rebound):
            wanted.setdefault(local, name)
    runtime_imports = runtime_import_statements(target)
    body: list[cst.BaseStatement] = []
    at = block.at
    for index, stmt in enumerate(rest.body):
        if _only_runtime_import(stmt, rest, used, runtime_imports):
            at -= 1 if index < block.at else 0
            continue
        body.append(stmt)
    names = tuple(sorted(set(wanted.values())))
    if wanted:
        statement = cst.parse_statement(import_line(("." if relative else "") + RUNTIME_MODULES[target], wanted))
        body.insert(min(at, len(body)), statement)  # where the copies were: after the file's imports
    new = rest.with_changes(body=body).code
    return Split(new, target, names)


def _names_used(module: cst.Module) -> set[str]:
    """Every name the module's code mentions (loads, stores, attributes' bases)."""
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)  # `keras.ops.gelu` uses `keras`, not a name `ops`
            return False

        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

    module.visit(_Names())
    return found


def _only_runtime_import(stmt: cst.CSTNode, module: cst.Module, used: set[str], runtime: frozenset[str]) -> bool:
    """A top-level import the copied definitions needed and the file's own code does not use."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    if not isinstance(small, cst.Import | cst.ImportFrom):
        return False
    text = module.code_for_node(small).strip()
    return text in runtime and not (import_bound_names(small) & used)


def runtime_module_source(names: set[str] | frozenset[str], target: str) -> tuple[str, list[str]]:
    """The runtime module that defines `names` for `target` outputs, and the names this
    version's runtime no longer defines (left out)."""
    wanted: dict[str, list[str]] = {}
    gone = []
    for name in sorted(names):
        module = defining_module(name, target)
        if module is None:
            gone.append(name)
        else:
            wanted.setdefault(module, []).append(name)
    imports, definitions, missing = runtime_definitions(wanted)
    gone += missing
    framework = {"jax": "Flax NNX", "tf": "Keras 3"}[target]
    body = (
        ("\n".join(imports) + "\n\n\n" if imports else "")
        + definitions
        + "\n\n__all__ = [\n"
        + "".join(f"    {name!r},\n".replace("'", '"') for name in sorted(set(names) - set(gone)))
        + "]\n"
    )
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]
    head = (
        f'"""Torch-semantics definitions in {framework} for the files converted beside this module.\n\n'
        f"Written by ptranspile from its runtime ({PACKAGE}); written again, with what every\n"
        "converted file here imports, each time files are converted into this folder. Do not edit.\n"
        '"""\n\n'
        f"# ptranspile-runtime: {__version__} {target} {digest}\n\n"
    )
    return head + body, gone


def existing_names(path: Path) -> set[str]:
    """The names an existing runtime module offers (its `__all__`), read without running it;
    empty when there is none or it cannot be read."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            with contextlib.suppress(ValueError):
                value = ast.literal_eval(node.value)
                if isinstance(value, list | tuple):
                    return {str(v) for v in value}
    return set()


def is_current(text: str) -> bool:
    """The module was written by this version and has not been edited since."""
    match = _VERSION_LINE.search(text)
    if match is None or match.group(1) != __version__:
        return False
    body = text[match.end() :].lstrip("\n")
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:12] == match.group(3)


@dataclass(frozen=True)
class Planned:
    """What a folder's runtime module will hold after this run."""

    path: Path
    text: str
    gone: tuple[str, ...]  # names earlier outputs import that this version no longer defines
    changes: bool  # differs from what is on disk
    stale: bool = False  # what is on disk was written by another version, or edited since


def plan_module(folder: Path, target: str, names: set[str]) -> Planned:
    """The runtime module for `folder`: what its earlier outputs import plus `names`."""
    path = folder / f"{RUNTIME_MODULES[target]}.py"
    before = path.read_text(encoding="utf-8") if path.is_file() else None
    merged = set(names) | (existing_names(path) if before is not None else set())
    text, gone = runtime_module_source(merged, target)
    return Planned(path, text, tuple(gone), text != before, before is not None and not is_current(before))


def is_package(folder: Path, written: set[Path]) -> bool:
    """`folder` is a package: it has an `__init__.py` or one is written there in this run."""
    init = folder / "__init__.py"
    return init.is_file() or init in written


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold a lock on `folder` itself (no lock file is left behind): hooks may convert files of
    one folder in several processes, each merging its names into the same module."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no POSIX locks (Windows): one process per folder is the user's care
        yield
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # closing releases the lock


def runtime_definitions(wanted: dict[str, list[str]]) -> tuple[list[str], str, list[str]]:
    """(the import statements they need, the definitions, what is missing) for the runtime
    definitions `wanted` ({runtime module: [names]}) and every definition they need, in the
    order vendor_shims copies them: the body of a runtime module written beside the outputs."""
    missing: list[str] = []
    keys = _closure(wanted, missing)
    needed: dict[str, str] = {}
    blocks = []
    for shim_name, symbol in keys:
        shim = _shim_module(shim_name)
        definition = shim.definitions[symbol]
        blocks.append(definition.source.rstrip("\n"))
        for alias in definition.imports:
            needed.setdefault(alias, shim.imports[alias])
    return [stmt for _, stmt in sorted(needed.items())], "\n\n\n".join(blocks) + "\n", missing


def runtime_modules_of(target: str) -> list[str]:
    """The runtime modules a `target` output may copy from: the target's own, then the
    framework-free ones (`common`, `device`), by dotted name below the runtime package."""
    own, shared = [], []
    for path in sorted(SHIM_DIR.rglob("*.py")):
        parts = path.relative_to(SHIM_DIR).with_suffix("").parts
        if parts[-1] == "__init__" or path.stem.startswith("_"):
            continue
        if len(parts) == 1:
            shared.append(parts[0])
        elif parts[0] == TARGET_PACKAGES[target]:
            own.append(".".join(parts))
    return own + shared


def runtime_import_statements(target: str) -> frozenset[str]:
    """Every import statement a definition copied for `target` may need."""
    found: set[str] = set()
    for name in runtime_modules_of(target):
        found.update(_shim_module(name).imports.values())
    return frozenset(found)


def defining_module(name: str, target: str) -> str | None:
    """The runtime module that defines `name` for `target` outputs (its own modules first)."""
    return next((m for m in runtime_modules_of(target) if name in _shim_module(m).definitions), None)


def imports_runtime_module(code: str) -> bool:
    """`code` imports a runtime module beside it (it was written with `--runtime module`)."""
    return _IMPORT_FROM_RUNTIME.search(code) is not None


def read_runtime_imports(code: str) -> str:
    """A converted file that imports from a runtime module beside it, with those imports made
    imports from ptranspile's runtime package (`from precision_transpiler.runtime.flax.conv import
    Conv2d`), each statement's on its own line: the form policy passes work on (what
    `unvendor.unvendor` makes of a self-contained output), which the pipeline's VendorRuntime stage
    turns back into the runtime module's import or into copies. Unchanged when the file names a
    definition this version's runtime does not have (verification will say)."""
    match = _IMPORT_FROM_RUNTIME.search(code)
    if match is None:
        return code
    target = next(t for t, m in RUNTIME_MODULES.items() if m == match.group(1))
    module = cst.parse_module(code)
    body: list[cst.BaseStatement] = []
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if (
            isinstance(small, cst.ImportFrom)
            and isinstance(small.module, cst.Name)
            and small.module.value == match.group(1)
            and not isinstance(small.names, cst.ImportStar)
        ):
            lines = []
            for alias in small.names:
                name = alias.name.value if isinstance(alias.name, cst.Name) else ""
                where = defining_module(name, target)
                if where is None:
                    return code
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
                lines.append(
                    f"from {PACKAGE}.{where} import {name}" + (f" as {local}" if local and local != name else "")
                )
            new = cst.parse_statement("; ".join(lines) + "\n")
            body.append(new.with_changes(leading_lines=stmt.leading_lines))
            continue
        body.append(stmt)
    return module.with_changes(body=body).code
