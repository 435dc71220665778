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
