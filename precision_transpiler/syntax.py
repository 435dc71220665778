"""Small LibCST helpers that the mapping tables and the rewriter both use."""

from __future__ import annotations

import libcst as cst

_EMPTY = cst.Module([])


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


def operator_symbol(operator: cst.BaseBinaryOp | cst.BaseAugOp) -> str | None:
    """The arithmetic operator as Python spells it ("*" for both `a * b` and `a *= b`), the key
    of mappings/frameworks.yaml's `operators`; None for bitwise operators."""
    return _OPERATOR_SYMBOLS.get(type(operator))
