"""Removing imports that conversion made unused, without eating the file's layout.

LibCST's RemoveImportsVisitor drops a removed import line together with the blank lines and
comments above it, so `\"\"\"doc\"\"\"\\n\\nimport torch` would lose the blank line after the docstring
(or a `# third-party` comment). This subclass hands those leading lines to the next statement
that survives.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
from libcst.codemod.visitors import RemoveImportsVisitor


class RemoveImportsKeepingLayout(RemoveImportsVisitor):
    """RemoveImportsVisitor that keeps the blank lines and comments of removed import lines."""

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        updated_node = super().leave_Module(original_node, updated_node)
        return updated_node.with_changes(body=_carry_layout(original_node.body, updated_node.body))

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        return updated_node.with_changes(body=_carry_layout(original_node.body, updated_node.body))


def _statement_key(node: cst.CSTNode) -> str:
    if isinstance(node, cst.SimpleStatementLine):
        return cst.Module([]).code_for_node(node.with_changes(leading_lines=()))
    return ""


def _carry_layout(
    original: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]
) -> list[cst.BaseStatement]:
    """Match original and updated statements in order; move lines of dropped import lines on."""
    if len(original) == len(updated):
        return list(updated)
    out: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] = []
    j = 0
    for stmt in original:
        removed = (
            isinstance(stmt, cst.SimpleStatementLine)
            and all(isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body)
            and (j >= len(updated) or not _same_line(stmt, updated[j]))
        )
        if removed:
            carry.extend(stmt.leading_lines)  # type: ignore[union-attr]
            continue
        if j >= len(updated):
            break
        new = updated[j]
        j += 1
        if carry:
            new = _merge(carry, new)
            carry = []
        out.append(new)
    out.extend(updated[j:])
    return out


def _same_line(a: cst.BaseStatement, b: cst.BaseStatement) -> bool:
    if not isinstance(b, cst.SimpleStatementLine):
        return False
    if _statement_key(a) == _statement_key(b):
        return True
    # A partially trimmed `from torch import a, b` is still the same line.
    return _import_origin(a) is not None and _import_origin(a) == _import_origin(b)


def _import_origin(stmt: cst.BaseStatement) -> str | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.ImportFrom) and small.module is not None:
        return "from " + cst.Module([]).code_for_node(small.module)
    if isinstance(small, cst.Import):
        return "import " + ",".join(sorted(cst.Module([]).code_for_node(a.name) for a in small.names))
    return None


def _merge(carry: list[cst.EmptyLine], stmt: cst.BaseStatement) -> cst.BaseStatement:
    own = list(getattr(stmt, "leading_lines", ()))
    if any(line.comment is not None for line in carry):
        lines = [*carry, *own]
    elif own:
        lines = own
    else:
        lines = carry
    return stmt.with_changes(leading_lines=lines)  # type: ignore[return-value]
