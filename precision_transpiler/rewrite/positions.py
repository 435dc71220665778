"""Source positions of original nodes, computed only where a message needs one.

LibCST's PositionProvider generates code for the whole module up front, which costs more than
the whole conversion on a large file, while a conversion reports positions for a few dozen
nodes. This finder takes the innermost statement around a node from the traversal path, gets
that statement's first line from Python's `ast` (which records it for every statement), and
runs PositionProvider on that one statement only.
"""

from __future__ import annotations

import ast

import libcst as cst

from precision_transpiler.rewrite.names import enter_block
from precision_transpiler.syntax import python_ast

_STATEMENT = (cst.SimpleStatementLine, cst.BaseCompoundStatement)
_MAX_STATEMENT_TABLES = 40  # beyond this, one PositionProvider pass over the module is cheaper


class PositionFinder:
    def __init__(self, module: cst.Module, source: str) -> None:
        self.module = module
        self.source = source
        self._lines = source.splitlines()
        self._ast: ast.Module | bool | None = None
        self._tables: dict[int, dict[cst.CSTNode, tuple[int, int]]] = {}
        self._whole: dict[cst.CSTNode, tuple[int, int]] | None = None

    def find(self, node: cst.CSTNode, stack: list[cst.CSTNode]) -> tuple[int, int]:
        """1-based (line, column) of `node`; `stack` is the path from the module to it."""
        # Many statements to map (a dense file full of rewrites): one whole-module pass is cheaper.
        located = self._locate(stack) if len(self._tables) < _MAX_STATEMENT_TABLES else None
        if located is not None:
            stmt, line = located
            table = self._tables.get(id(stmt))
            if table is None:
                table = self._statement_table(stmt, line)
                self._tables[id(stmt)] = table
            hit = table.get(node)
            if hit is not None:
                return hit
        return self._whole_table().get(node, (0, 0))

    # -- statement lines from ast --------------------------------------------------------------

    def _tree(self) -> ast.Module | None:
        if self._ast is None:
            try:
                self._ast = python_ast(self.source)
            except (SyntaxError, ValueError, RecursionError):
                self._ast = False
        return self._ast or None  # type: ignore[return-value]

    def _locate(self, stack: list[cst.CSTNode]) -> tuple[cst.CSTNode, int] | None:
        """The innermost statement on the path and its first line, via parallel ast bodies."""
        tree = self._tree()
        if tree is None or not stack or stack[0] is not self.module:
            return None
        cst_body: list[cst.CSTNode] = list(self.module.body)
        ast_body: list[ast.stmt] = tree.body
        found: tuple[cst.CSTNode, int] | None = None
        for node in stack[1:]:
            if not isinstance(node, _STATEMENT):
                continue
            index = _ast_index(cst_body, node)
            if index is None or index >= len(ast_body):
                return found
            ast_stmt = ast_body[index]
            decorators = getattr(ast_stmt, "decorator_list", None) or []
            found = (node, min([ast_stmt.lineno, *(d.lineno for d in decorators)]))
            pair = enter_block(node, ast_stmt, {id(n) for n in stack})
            if pair is None:
                return found
            cst_body, ast_body = pair
        return found

    def _statement_table(self, stmt: cst.CSTNode, first_line: int) -> dict[cst.CSTNode, tuple[int, int]]:
        assert isinstance(stmt, _STATEMENT)
        stripped = stmt.with_changes(leading_lines=())
        if isinstance(stripped, cst.FunctionDef | cst.ClassDef):
            stripped = stripped.with_changes(lines_after_decorators=stripped.lines_after_decorators)
        from libcst.metadata import MetadataWrapper, PositionProvider

        mini = cst.Module(body=[stripped], header=(), footer=())
        positions = MetadataWrapper(mini, unsafe_skip_copy=True).resolve(PositionProvider)
        # The statement alone is rendered without its block's indentation; a line of it differs
        # from the source line by that prefix (continuation lines included, strings excepted).
        mini_lines = mini.code.splitlines()
        shift: list[int] = []
        for i, text in enumerate(mini_lines):
            n = first_line - 1 + i
            original = self._lines[n] if n < len(self._lines) else text
            shift.append(len(original) - len(text) if original.endswith(text) else 0)
        table: dict[cst.CSTNode, tuple[int, int]] = {}
        for node, pos in positions.items():
            i = pos.start.line - 1
            col = pos.start.column + (shift[i] if i < len(shift) else 0) + 1
            table[node] = (pos.start.line + first_line - 1, col)
        if stripped in table:
            table[stmt] = table.pop(stripped)
        return table

    def _whole_table(self) -> dict[cst.CSTNode, tuple[int, int]]:
        if self._whole is None:
            from libcst.metadata import MetadataWrapper, PositionProvider

            positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
            self._whole = {node: (pos.start.line, pos.start.column + 1) for node, pos in positions.items()}
        return self._whole


def _ast_index(cst_body: list[cst.CSTNode], node: cst.CSTNode) -> int | None:
    """Index in the matching ast body: a `a; b` line is one LibCST statement, two ast ones."""
    index = 0
    for item in cst_body:
        if item is node:
            return index
        index += len(item.body) if isinstance(item, cst.SimpleStatementLine) else 1
    return None
