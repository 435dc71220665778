"""The `--entry` expression, converted for the converted side.

An entry may build framework objects itself: `MaskedAffineFlow(t=nn.Sequential(nn.Linear(4, 16)))`,
`TabNet(group_attention_matrix=torch.eye(8))`, `FullyConnectedNet(act=torch.nn.functional.silu)`.
Evaluated as written in the converted module it would hand torch layers and tensors to a Flax or
Keras model (or fail on a `torch` the converted file no longer imports). So before it is
evaluated there, the expression goes through the same conversion as the file: a snippet made of
the original's imports that the expression names (frameworks and the standard library only; the
model's own names are already defined in the converted module) and one assignment, transpiled
with the file's target and policy. The snippet runs in a copy of the converted module's
namespace: runtime definitions the converted module already has (its `Sequential`, `Linear`) are
not redefined, so `isinstance` checks inside the model see one class.

This builds the converted side's *input* to the comparison; the converted file itself is not
touched (verification observes a conversion and never changes it). An entry that names no
framework import is evaluated as written.
"""

from __future__ import annotations

import ast
import sys
import types
from dataclasses import dataclass
from typing import Any

from precision_transpiler.errors import PolicyError, VerifyError

#: the name the snippet assigns the entry's value to (not a dunder: module dunders are not converted)
RESULT = "ptranspile_entry_value"


@dataclass(frozen=True)
class ConvertedEntry:
    """The converted snippet whose execution binds RESULT, and what its conversion reported."""

    entry: str
    code: str
    unconverted: tuple[str, ...] = ()  # `line:col: message` of what the conversion could not map

    def build(self, module: types.ModuleType, side: str) -> Any:
        """Execute the snippet in a copy of `module`'s namespace and return the entry's value."""
        namespace = dict(module.__dict__)
        tree = ast.parse(self.code)
        defined = _definitions(module)
        tree.body = [node for node in tree.body if not _already_defined(node, namespace, defined)]
        try:
            exec(compile(tree, f"<--entry converted for {side}>", "exec"), namespace)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            from precision_transpiler.verify.loading import short_error

            why = f" (the conversion reported: {self.unconverted[0]})" if self.unconverted else ""
            raise VerifyError(
                f"--entry {self.entry!r}, converted, failed in the {side} module: "
                f"{short_error(exc, module.__file__ or '')}{why}"
            ) from None
        return namespace[RESULT]


def _already_defined(node: ast.stmt, namespace: dict[str, Any], defined: dict[str, str] | None) -> bool:
    """A class or function the converted module defines already, the same definition (the
    runtime's `Sequential`). A class of the model's own named like a runtime one
    (torch-geometric's `Linear` beside the runtime's, for `torch.nn.Linear`) is not it: the entry
    gets the runtime's (in its own copy of the namespace; the model's code keeps its class)."""
    if not isinstance(node, ast.ClassDef | ast.FunctionDef) or node.name not in namespace:
        return False
    return defined is None or defined.get(node.name) == ast.unparse(node)


def _definitions(module: types.ModuleType) -> dict[str, str] | None:
    """Top-level class and function name -> its source (unparsed) in `module`'s text (through
    linecache, where the loader put the converted text); None when it cannot be read (then a
    name alone says a definition is there)."""
    import linecache

    text = "".join(linecache.getlines(module.__file__ or ""))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    if not text:
        return None
    return {n.name: ast.unparse(n) for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}


def convert_entry(entry: str, original_code: str, *, target: str, policy: str, source: str) -> ConvertedEntry | None:
    """The entry converted to `target` under `policy`; None when it names no framework import
    (it is then evaluated as written) or cannot be parsed (build_model reports that)."""
    try:
        names = {node.id for node in ast.walk(ast.parse(entry, mode="eval")) if isinstance(node, ast.Name)}
        module = ast.parse(original_code)
    except SyntaxError:
        return None
    imports = _imports_named(module, names)
    if not imports:
        return None
    snippet = "\n".join([*imports, f"{RESULT} = ({entry})", ""])
    from precision_transpiler.api import transpile

    try:
        result = transpile(snippet, to=target, from_=source, policy=policy, path="<--entry>")
    except PolicyError:  # a policy file that does not resolve here: the entry's layers at fp32
        result = transpile(snippet, to=target, from_=source, path="<--entry>")
    unconverted = tuple(
        f"{d.line}:{d.col}: {d.message}" for d in result.diagnostics if d.severity in ("error", "unsupported")
    )
    return ConvertedEntry(entry, result.code, unconverted)


def _imports_named(module: ast.Module, names: set[str]) -> list[str]:
    """The module-level imports (also inside `try`/`if` blocks) that bind one of `names` to a
    framework the mapping tables know or to the standard library, one statement per name."""
    from precision_transpiler.mappings import load_mappings

    table = load_mappings()

    def known(qualified: str) -> bool:
        root = qualified.split(".")[0]
        return root in sys.stdlib_module_names or table.framework_of(qualified) is not None

    found: dict[str, str] = {}
    for node in _module_level(module.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound in names and known(alias.name):
                    as_ = f" as {alias.asname}" if alias.asname else ""
                    found.setdefault(bound, f"import {alias.name}{as_}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                bound = alias.asname or alias.name
                if bound in names and known(f"{node.module}.{alias.name}"):
                    as_ = f" as {alias.asname}" if alias.asname else ""
                    found.setdefault(bound, f"from {node.module} import {alias.name}{as_}")
    return list(found.values())


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements at module level, looking into `try`/`if` blocks (optional imports)."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.Try):
            out += _module_level(node.body)
        elif isinstance(node, ast.If):
            out += _module_level(node.body) + _module_level(node.orelse)
    return out
