"""torch names a file imports through a module of its own package become imports from torch.

Model packages gather their layers in one module and import them from there:

    # norms.py                                    # model.py
    try:                                          from .norms import FusedNorm, GroupNorm
        from apex.normalization import (
            FusedLayerNorm as FusedNorm)
    except ImportError:
        from torch.nn import LayerNorm as FusedNorm
    from torch.nn import GroupNorm
    Linear = nn.Linear

The names are torch's own layers (fair-esm's `ESM1bLayerNorm`), but the converting file sees
them as names of its package, which the tables do not know: they stayed imported from that
module, so the output loaded it and torch with it, and the layers did not take the weights. Before
the rules run, each such import becomes the import of the torch name it binds:

    from torch.nn import LayerNorm as FusedNorm
    from torch.nn import GroupNorm

A name counts as torch's when the module binds it at top level by an import from torch (`from
torch.nn import X as name`, `from torch import nn`, `import torch`), by an alias of one (`name =
nn.Linear`), through a re-export of another module of the package (followed a few levels), or
under `try: <an import of something else> ... except ImportError: <torch's>`: an optional
accelerator of torch (apex), which a converted module can never use (as
convert/feature_detection.py decides for the file's own). The inverse, a torch feature probed
under `try` with a fallback of the package's own (diffusers' `try: from torch._dynamo import
allow_in_graph as maybe_allow_in_graph` / `except ImportError: def maybe_allow_in_graph(cls):
...`), stays the package's when the tables do not convert that feature: the copied module takes
its fallback, as a torch without it would. A name the module also defines itself
(a class, a function) is its own, and stays. Static: modules are read as files, nothing is
imported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import libcst as cst

from precision_transpiler.convert.feature_detection import IMPORT_ERRORS
from precision_transpiler.convert.siblings.resolve import locator, parsed_source
from precision_transpiler.files import ReadError, read_source
from precision_transpiler.syntax import dotted_name

_DEPTH = 4  # re-exports followed through at most this many modules


Convertible = Callable[[str], bool]


def resolve_torch_reexports(module: cst.Module, path: str, convertible: Convertible | None = None) -> cst.Module | None:
    """`module` with its imports of torch names from modules of its own package made imports
    from torch; None when there is none. `convertible` says whether the tables convert a torch
    name (a feature probed with a fallback of the package's own counts only then)."""
    file = Path(path)
    if not file.is_file():
        return None
    locate = locator(file, None)
    body: list[cst.BaseStatement] = []
    changed = False
    for statement in module.body:
        replaced = _replaced(statement, locate, convertible)
        if replaced is None:
            body.append(statement)
            continue
        changed = True
        body.extend(replaced)
    return module.with_changes(body=body) if changed else None


def _replaced(statement: cst.BaseStatement, locate, convertible: Convertible | None) -> list[cst.BaseStatement] | None:
    """The statements an import line becomes (what stays of it, then torch's imports)."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    small = statement.body[0]
    if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
        return None
    level = len(small.relative)
    module_name = dotted_name(small.module) if small.module is not None else None
    if not level and not module_name:
        return None
    found, _ = locate(level, module_name)
    if found is None:
        return None
    kept: list[cst.ImportAlias] = []
    added: list[cst.BaseStatement] = []
    for alias in small.names:
        name = dotted_name(alias.name) or ""
        local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
        torch_name = torch_binding(found, name, _DEPTH, convertible)
        if torch_name is None:
            kept.append(alias)
        else:
            added.append(_import_line(torch_name, local))
    if not added:
        return None
    lines: list[cst.BaseStatement] = []
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if len(kept) == 1:  # `from m import a`, not `from m import (a)`
            small = small.with_changes(lpar=None, rpar=None)
        lines.append(statement.with_changes(body=[small.with_changes(names=kept)]))
    else:
        added[0] = added[0].with_changes(leading_lines=statement.leading_lines)
    return [*lines, *added]


def _import_line(qualified: str, local: str) -> cst.SimpleStatementLine:
    if "." not in qualified:
        text = f"import {qualified}" + (f" as {local}" if local != qualified else "")
    else:
        parent, leaf = qualified.rsplit(".", 1)
        text = f"from {parent} import {leaf}" + (f" as {local}" if local != leaf else "")
    statement = cst.parse_statement(text + "\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


def torch_binding(file: Path, name: str, depth: int = _DEPTH, convertible: Convertible | None = None) -> str | None:
    """The torch name (`torch.nn.LayerNorm`, `torch.nn`) the module at `file` binds to `name`
    at top level, or None (see the module docstring)."""
    try:
        tree = parsed_source(read_source(file))
    except (ReadError, SyntaxError, ValueError):
        return None
    if any(isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in tree.body):
        return None  # the module's own definition
    bound: str | None = None
    for node in tree.body:
        found = _statement_binding(node, name, file, depth, convertible)
        if found is not None:
            bound = found if found != "" else None  # the last binding wins, as at run time
    return bound


def _statement_binding(
    node: ast.stmt, name: str, file: Path, depth: int, convertible: Convertible | None = None
) -> str | None:
    """What a top-level statement binds `name` to: a torch name, "" (something else), or None
    (it does not bind `name`)."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return _import_binding(node, name, file, depth, convertible)
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
        return _alias_binding(node.value, file)
    if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
        optional = not any(_imports_torch(n) for n in ast.walk(ast.Module(body=node.body, type_ignores=[])))
        branches = [h.body for h in node.handlers] if optional else [node.body]
        for branch in branches:
            found = None
            for statement in branch:
                found = _statement_binding(statement, name, file, depth, convertible) or found
            if found and not optional and convertible is not None and not convertible(found):
                if any(_defines(h, name) for h in node.handlers):
                    return ""  # a torch feature the target lacks, with the package's own fallback
            if found:
                return found
        return "" if _binds(node, name) else None
    if isinstance(node, ast.If | ast.With | ast.For | ast.While | ast.Try) and _binds(node, name):
        return ""
    return None


def _import_binding(
    node: ast.Import | ast.ImportFrom, name: str, file: Path, depth: int, convertible: Convertible | None = None
) -> str | None:
    for alias in node.names:
        local = alias.asname or alias.name.split(".")[0]
        if local != name:
            continue
        if isinstance(node, ast.Import):
            root = alias.name.split(".")[0]
            return (alias.name if alias.asname else root) if root == "torch" else ""
        module = node.module or ""
        if not node.level and module.split(".")[0] == "torch":
            return f"{module}.{alias.name}"
        if depth <= 1:
            return ""
        found, _ = locator(file, None)(node.level, node.module)
        if found is None or found.resolve() == file.resolve():
            return ""
        return torch_binding(found, alias.name, depth - 1, convertible) or ""
    return None


def _alias_binding(value: ast.expr, file: Path) -> str:
    """`nn.Linear` / `torch.nn.Linear` assigned to a name: the torch name, when the module's
    import of the first part is torch's."""
    dotted = _dotted(value)
    if dotted is None:
        return ""
    head, _, rest = dotted.partition(".")
    base = torch_binding(file, head, 1) if head != "torch" else "torch"
    if not base:
        return ""
    return f"{base}.{rest}" if rest else base


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in IMPORT_ERRORS for k in kinds)


def _imports_torch(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "torch" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return not node.level and (node.module or "").split(".")[0] == "torch"
    return False


def _defines(handler: ast.ExceptHandler, name: str) -> bool:
    """The handler binds `name` by a definition or an assignment of its own (not an import)."""
    for sub in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if isinstance(sub, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and sub.name == name:
            return True
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id == name:
            return True
    return False


def _binds(node: ast.stmt, name: str) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id == name:
            return True
        if isinstance(sub, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and sub.name == name:
            return True
        if isinstance(sub, ast.Import | ast.ImportFrom) and any(
            (a.asname or a.name.split(".")[0]) == name for a in sub.names
        ):
            return True
    return False
