"""Loops over the chunks of `tensor.split(size, dim)` that change a chunk in place.

Blockwise attention (memory-efficient-attention's flash attention) walks its output in row
blocks and accumulates into each block in place:

    row_splits = zip(q.split(bucket, dim=-2), o.split(bucket, dim=-2))
    for ind, (qc, oc) in enumerate(row_splits):
        ...
        oc.mul_(scale).add_(values)     # writes into `o`, through the view `oc`

Converted, `oc` is an array of its own: the in-place change rebinds `oc` and `o` stays as it
was. Each chunk of `split(size)` is the slice `[i * size : (i + 1) * size]` of its dimension, so
the loop can write the chunk back at the end of each iteration (`o = torch_write_split(o, oc,
ind, bucket, -2)`), which gives `o` torch's values. This module finds those loops; the rule
rules/torch_split_write_back_model.py writes the chunks back, and analysis/inplace.py stops
counting such a chunk as a view of what it came from (its changes reach it now).

Only what is sure is taken: `split` with one size (not a list of sizes, no call in it) and a
literal dim, a body that does not `return` or `yield` (a `break` or `continue` of the loop
writes the chunks back before it leaves the iteration: ring-attention's `if causal: ...
continue`), a chunk the body changes in place (an in-place method, an item assignment, an augmented
assignment) and does not rebind, and a split name the body neither rebinds nor changes itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from precision_transpiler.syntax import all_nodes


@dataclass(frozen=True)
class WriteBack:
    """A chunk to write back at the end of each iteration: `source` is the name split."""

    chunk: str
    source: str
    size: cst.BaseExpression
    dim: int


@dataclass(frozen=True)
class SplitLoop:
    """A loop that changes chunks of a split in place: its write-backs, and the name of its
    iteration counter (None when the loop has none: the rule adds one)."""

    write_backs: tuple[WriteBack, ...]
    counter: str | None


def split_loop(
    node: cst.For, values: dict[str, cst.BaseExpression], is_inplace: Callable[[str], bool]
) -> SplitLoop | None:
    """The loop's chunks to write back, or None. `values`: what names of the scope were last
    assigned before the loop (`row_splits = zip(...)`); `is_inplace(method)`: whether a tensor
    method changes its receiver (`mul_`, `copy_`)."""
    if node.asynchronous is not None or node.orelse is not None:
        return None
    if any(isinstance(n, cst.Return | cst.Yield) for n in all_nodes(node.body)):
        return None  # `break` and `continue` write the chunks back before they leave (the rule)
    target, iterated, counter = node.target, node.iter, None
    if isinstance(iterated, cst.Name) and iterated.value in values:
        iterated = values[iterated.value]
    if _called(iterated, "enumerate"):
        assert isinstance(iterated, cst.Call)
        if not isinstance(target, cst.Tuple) or len(target.elements) != 2 or len(iterated.args) != 1:
            return None
        first = target.elements[0].value
        if not isinstance(first, cst.Name):
            return None
        counter, target, iterated = first.value, target.elements[1].value, iterated.args[0].value
        if isinstance(iterated, cst.Name) and iterated.value in values:
            iterated = values[iterated.value]
    pairs = _pairs(target, iterated)
    changed = _changed_names(node.body, is_inplace)
    rebound = _assigned_names(node.body)
    backs = []
    for name, source in pairs:
        split = _split(source)
        # a source the body rebinds or changes itself is not what the chunks are views of, and
        # a chunk it rebinds (`oc = oc * 2`) is no view any more
        if split is not None and name in changed - rebound and split[0] not in changed | rebound | {name}:
            backs.append(WriteBack(name, *split))
    if not backs or (counter is not None and counter in changed):
        return None
    return SplitLoop(tuple(backs), counter)


def _called(node: cst.BaseExpression, function: str) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == function


def _pairs(target: cst.BaseExpression, iterated: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """(loop name, the iterable its values come from): the iterable for one name, through
    `zip(...)` for a tuple of names."""
    if isinstance(target, cst.Name):
        return [(target.value, iterated)]
    if not isinstance(target, cst.Tuple | cst.List) or not _called(iterated, "zip"):
        return []
    assert isinstance(iterated, cst.Call)
    args = [a.value for a in iterated.args if not a.star and a.keyword is None]
    if len(args) != len(iterated.args) or len(args) != len(target.elements):
        return []
    found = []
    for element, arg in zip(target.elements, args, strict=True):
        if isinstance(element.value, cst.Name):
            found.append((element.value.value, arg))
    return found


def _split(node: cst.BaseExpression) -> tuple[str, cst.BaseExpression, int] | None:
    """(name, size, dim) for `name.split(size, dim)` with one size and a literal dim."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    if node.func.attr.value != "split" or not isinstance(node.func.value, cst.Name):
        return None
    size: cst.BaseExpression | None = None
    dim: cst.BaseExpression | None = None
    for index, arg in enumerate(node.args):
        if arg.star:
            return None
        key = arg.keyword.value if arg.keyword is not None else ("split_size" if index == 0 else "dim")
        if key in ("split_size", "split_size_or_sections"):
            size = arg.value
        elif key == "dim":
            dim = arg.value
        else:
            return None
    if size is None or isinstance(size, cst.List | cst.Tuple | cst.ListComp):
        return None
    if any(isinstance(n, cst.Call) for n in all_nodes(size)):
        return None  # written again after the loop, a call would run again (and stay unconverted)
    literal = _int(dim) if dim is not None else 0
    return None if literal is None else (node.func.value.value, size, literal)


def _int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _int(node.expression)
        return None if inner is None else -inner
    return None


def _assigned_names(body: cst.CSTNode) -> set[str]:
    """Names the body binds anew (`o = ...`, a loop or `with` target)."""
    names: set[str] = set()
    for node in all_nodes(body):
        targets: list[cst.CSTNode] = []
        if isinstance(node, cst.AssignTarget | cst.AnnAssign | cst.For):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        for target in targets:
            names.update(n.value for n in all_nodes(target) if isinstance(n, cst.Name))
    return names


def _changed_names(body: cst.CSTNode, is_inplace: Callable[[str], bool]) -> set[str]:
    """Names the body changes in place: `n.mul_(...)` (also at the start of a chain), `n[i] =
    ...`, `n += ...`."""
    changed: set[str] = set()
    for node in all_nodes(body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and is_inplace(node.func.attr.value):
            receiver = node.func.value
            while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
                receiver = receiver.func.value  # `oc.mul_(a).add_(b)`: oc
            if isinstance(receiver, cst.Name):
                changed.add(receiver.value)
        elif isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Subscript):
            if isinstance(node.target.value, cst.Name):
                changed.add(node.target.value.value)
        elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
            changed.add(node.target.value)
    return changed
