"""Remove imports that conversion made unused.

The engine removes unused imports of the source framework (stages after it may leave more: a
resolved feature-detection `try`, convert/feature_detection.py). Model conversion also drops code
that used *other* imports (torchvision's `from ._api import register_model, WeightsEnum`,
`from ..utils import _log_api_usage_once`): an imported name that the original file used and
the converted file no longer uses is removed from its import; an import the original did not use
either is the user's business (a re-export) and stays.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import libcst as cst

from precision_transpiler.rewrite.skips import marker_in
from precision_transpiler.syntax import dotted_name, python_ast


def _used_names(module: cst.Module) -> set[str]:
    used: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_Name(self, node: cst.Name) -> None:
            used.add(node.value)

    module.visit(_V())
    return used


def _imported_locals(code: str) -> set[str]:
    names: set[str] = set()
    for node in python_ast(code).body:
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
    return names


def _local(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return (dotted_name(alias.name) or "").split(".")[0]


def _drop_orphaned_constants(before: dict[str, int], module: cst.Module) -> cst.Module:
    """Private module-level constants (`_COMMON_META = {...}`) that only dropped code used,
    repeatedly (`_COMMON_META_V1 = {**_COMMON_META, ...}` frees `_COMMON_META` in turn).
    `before` counts the names of the original: a constant the original never read itself
    (`_DTYPES = (torch.float32, ...)`, `_selection = _Selection(__name__)`) is there for the
    modules that import it, and a sibling converted for copying must keep it for them."""
    while True:
        smaller = _drop_orphaned_constants_once(before, module)
        if len(smaller.body) == len(module.body):
            return smaller
        module = smaller


def _drop_orphaned_constants_once(before: dict[str, int], module: cst.Module) -> cst.Module:
    counts: dict[str, int] = {}

    class _Count(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            counts[node.value] = counts.get(node.value, 0) + 1

    module.visit(_Count())
    body = []
    for stmt in module.body:
        if (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Assign | cst.AnnAssign)
        ):
            small = stmt.body[0]
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            if (
                len(targets) == 1
                and isinstance(targets[0], cst.Name)
                and targets[0].value.startswith("_")
                and before.get(targets[0].value, 0) > 1
                and counts.get(targets[0].value, 0) == 1
            ):
                continue
        body.append(stmt)
    return module.with_changes(body=body)


def _ast_names(code: str) -> tuple[set[str], dict[str, int]]:
    """Names used (outside imports) and how often, read with `ast` (far cheaper than LibCST)."""
    counts: dict[str, int] = {}
    for node in ast.walk(python_ast(code)):
        if isinstance(node, ast.Name):
            counts[node.id] = counts.get(node.id, 0) + 1
    return set(counts), counts


def _kept(names: Sequence[cst.ImportAlias], orphaned: set[str]) -> list[cst.ImportAlias] | None:
    """The aliases of an import that stay (None: all of them), the last without its comma."""
    keep = [a for a in names if _local(a) not in orphaned]
    if len(keep) == len(names):
        return None
    if keep:
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return keep


def drop_orphaned_imports(original: str, converted: str) -> str:
    try:
        before, before_counts = _ast_names(original)
        after, counts = _ast_names(converted)
    except (SyntaxError, ValueError):
        return converted
    private = {n for n in before if n.startswith("_") and counts.get(n, 0) >= 1}
    imported = _imported_locals(converted)
    if not (private or ((before - after) & imported)):
        return converted  # nothing this step would change: skip the LibCST pass
    module = cst.parse_module(converted)
    module = _drop_orphaned_constants(before_counts, module)
    after = _used_names(module)
    orphaned = before - after

    class _T(cst.CSTTransformer):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            # `from torch import nn  # ptranspile: skip` stays as written (rewrite/skips.py)
            return not (
                any(isinstance(small, cst.Import | cst.ImportFrom) for small in node.body)
                and marker_in(cst.Module([]).code_for_node(node.with_changes(leading_lines=()))) == "skip"
            )

        def leave_ImportFrom(
            self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
        ) -> cst.ImportFrom | cst.RemovalSentinel:
            if isinstance(updated_node.names, cst.ImportStar) or (
                updated_node.module is not None and dotted_name(updated_node.module) == "__future__"
            ):
                return updated_node
            keep = _kept(updated_node.names, orphaned)
            if keep is None or not keep:
                return updated_node if keep is None else cst.RemovalSentinel.REMOVE
            return (
                updated_node.with_changes(names=keep, lpar=None, rpar=None)
                if len(keep) == 1
                else (updated_node.with_changes(names=keep))
            )

        def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import | cst.RemovalSentinel:
            # `import torch` whose last users were converted after the engine ran (a resolved
            # feature-detection `try`, dropped code)
            keep = _kept(updated_node.names, orphaned)
            if keep is None or not keep:
                return updated_node if keep is None else cst.RemovalSentinel.REMOVE
            return updated_node.with_changes(names=keep)

        def leave_SimpleStatementLine(
            self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
        ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
            if not updated_node.body:
                return cst.RemovalSentinel.REMOVE
            return updated_node

    return module.visit(_T()).code
