"""Small LibCST helpers that the mapping tables and the rewriter both use."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from functools import lru_cache

import libcst as cst

_EMPTY = cst.Module([])

#: a line that imports torch (`import torch`, `from torch import nn`, indented too), read from
#: the text alone: which files are torch code, before (or without) parsing them
IMPORTS_TORCH = re.compile(r"^[ \t]*(?:import[ \t]+torch\b|from[ \t]+torch\b)", re.MULTILINE)


def is_dunder(name: str) -> bool:
    """`__name__`, `__file__`: what Python sets on every module. Never a name to import from a
    module: imported, it would replace the importing module's own (its `__name__`)."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def code_of(node: cst.CSTNode) -> str:
    """Source text of a node (without the surrounding file's formatting context)."""
    return _EMPTY.code_for_node(node)


def dotted_name(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a Name/Attribute chain, None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


_OPERATOR_SYMBOLS: dict[type[cst.CSTNode], str] = {
    cst.Add: "+",
    cst.Subtract: "-",
    cst.Multiply: "*",
    cst.Divide: "/",
    cst.FloorDivide: "//",
    cst.Modulo: "%",
    cst.Power: "**",
    cst.MatrixMultiply: "@",
    cst.Equal: "==",
    cst.NotEqual: "!=",
    cst.LessThan: "<",
    cst.LessThanEqual: "<=",
    cst.GreaterThan: ">",
    cst.GreaterThanEqual: ">=",
    cst.AddAssign: "+",
    cst.SubtractAssign: "-",
    cst.MultiplyAssign: "*",
    cst.DivideAssign: "/",
    cst.FloorDivideAssign: "//",
    cst.ModuloAssign: "%",
    cst.PowerAssign: "**",
    cst.MatrixMultiplyAssign: "@",
}


#: the arithmetic operators, as Python spells them
OPERATORS: tuple[str, ...] = tuple(dict.fromkeys(_OPERATOR_SYMBOLS.values()))


def operator_symbol(operator: cst.BaseBinaryOp | cst.BaseAugOp | cst.BaseCompOp) -> str | None:
    """The arithmetic or comparison operator as Python spells it ("*" for both `a * b` and
    `a *= b`), the key of mappings/frameworks.yaml's `operators`; None for bitwise operators,
    `in`, `is`."""
    return _OPERATOR_SYMBOLS.get(type(operator))


def all_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """`node` and every node under it (what a rule that replaces a subtree hands to
    `ctx.consume`, so nothing in it is reported unconverted)."""
    out: list[cst.CSTNode] = []

    class _Collect(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            out.append(n)
            return True

    node.visit(_Collect())
    return out


def import_bound_names(small: cst.BaseSmallStatement) -> set[str]:
    """Names an `import`/`from ... import` binds (`import a.b` binds `a`); none for other
    statements and star imports."""
    names: set[str] = set()
    if isinstance(small, cst.Import):
        for alias in small.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                names.add(alias.asname.name.value)
            else:
                names.add((dotted_name(alias.name) or "").split(".")[0])
    elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
        for alias in small.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                names.add(alias.asname.name.value)
            else:
                names.add(dotted_name(alias.name) or "")
    return names


def statements_bound_names(lines: Sequence[cst.BaseStatement], *, assignments: bool = False) -> set[str]:
    """The names top-level `lines` bind: their imports', classes' and functions', and with
    `assignments` their plain assignments' (`x = ...`) too."""
    names: set[str] = set()
    for line in lines:
        if isinstance(line, cst.ClassDef | cst.FunctionDef):
            names.add(line.name.value)
        elif isinstance(line, cst.SimpleStatementLine):
            for small in line.body:
                if isinstance(small, cst.Import | cst.ImportFrom):
                    names |= import_bound_names(small)
                elif assignments and isinstance(small, cst.Assign):
                    names |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
    return names


def is_import_statement(stmt: cst.CSTNode) -> bool:
    """An import line, or a block that only imports (`try: from typing import Literal` /
    `except ImportError: from typing_extensions import Literal`, `if TYPE_CHECKING: import x`; not
    an `if` on anything else).
    Code copied into a file (sibling definitions, runtime definitions) and the imports it needs go
    after the file's run of these, so that they follow every import the file makes (timm's
    vision_transformer.py imports torch after such a `try`)."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return bool(stmt.body) and all(isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body)
    if isinstance(stmt, cst.Try):
        blocks = [stmt.body, *(h.body for h in stmt.handlers)]
        blocks += [b.body for b in (stmt.orelse, stmt.finalbody) if b is not None]
    elif isinstance(stmt, cst.If) and stmt.orelse is None and (dotted_name(stmt.test) or "").endswith("TYPE_CHECKING"):
        # only `if TYPE_CHECKING:`: a condition that calls something (`if is_torch_flex_attn_available():`,
        # transformers) may call what the copied code defines, which must come before it
        blocks = [stmt.body]
    else:
        return False
    for block in blocks:
        inner = block.body if isinstance(block, cst.IndentedBlock) else [block]
        for line in inner:
            if not isinstance(line, cst.SimpleStatementLine):
                return False
            if not all(isinstance(s, cst.Import | cst.ImportFrom | cst.Pass) for s in line.body):
                return False
    return True


@lru_cache(maxsize=8)
def python_ast(code: str) -> ast.Module:
    """Python's own `ast` of `code`, parsed once for the stages that read the same text one
    after another (import clean-up, name resolution, positions, the final check). Shared: the
    caller must not change it. Raises what `ast.parse` raises (errors are not remembered)."""
    return ast.parse(code)


def is_docstring(stmt: cst.CSTNode) -> bool:
    """A statement that is only a string: a module's, class's or function's docstring when first."""
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )
