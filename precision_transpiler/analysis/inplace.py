"""What an in-place call in torch model code touches: whether it initialises a parameter
(`is_initialisation`, `sets_parameter_data`, `in_initialiser`), and which names may share
memory with a view bound before (`aliases`, `warn_aliases`): torch tensors share memory with
their views, JAX arrays and Keras tensors share nothing.

Used by the in-place rule (rules/torch_inplace_ops_model.py) and the in-place initialisation
rule (rules/torch_inplace_init_model.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from precision_transpiler.analysis.split_chunks import SplitLoop, split_loop
from precision_transpiler.analysis.tensors import Where, bound_names, inplace_index
from precision_transpiler.analysis.view import FileView

#: words in a function's name that make `zero_()`/`fill_()` in it initialisation
INIT_WORDS = ("init", "reset")


def sets_parameter_data(ctx: FileView, call: cst.Call, *, statement: bool = False) -> bool:
    """A statement calling an in-place method on a tensor's `.data` that sets a parameter while
    building: `w.data.copy_(values)` anywhere (kornia's fixed kernels), any other in a function
    named *init*/*reset* (timm's ConvNeXt `_init_weights`: `module.weight.data.mul_(scale)`).
    Left to the torch-inplace-init rule, which drops it: the torch checkpoint holds the values.
    `statement`: the caller knows the call is a statement (it visits the statement)."""
    func = call.func
    if not (
        isinstance(func, cst.Attribute)
        and func.attr.value.endswith("_")
        and isinstance(func.value, cst.Attribute)
        and (statement or isinstance(ctx.parent(call), cst.Expr))
    ):
        return False
    if func.value.attr.value != "data":
        # `self.dt_proj.bias.copy_(inv_dt)` in a constructor (mambapy): a layer's parameter set
        # while building, through an attribute of an attribute (a plain `self.x.copy_(v)` stays
        # an update of the module's own variable)
        return in_initialiser(ctx) and isinstance(func.value.value, cst.Attribute)
    return func.attr.value == "copy_" or in_initialiser(ctx)


def in_initialiser(ctx: FileView) -> bool:
    """Whether the node being visited is in a function named *init*/*reset* (`__init__`,
    `_init_weights`, `reset_parameters`): where parameters are set while building."""
    function = (ctx.enclosing_function() or "").rsplit(".", 1)[-1].lower()
    return any(w in function for w in INIT_WORDS)


def is_initialisation(ctx: FileView, receiver: cst.BaseExpression, call: cst.Call) -> bool:
    """`zero_()`/`fill_()` on something other than a local tensor: initialisation of a parameter
    (`p.weight.zero_()`, `for p in m.parameters(): p.zero_()`, `w = m.weight; w.fill_(1)`, any in
    a function named *init*/*reset*), left to the torch-inplace-init rule."""
    base = receiver.value if isinstance(receiver, cst.Subscript) else receiver
    if not isinstance(base, cst.Name):
        return True
    scope = Where.scope_of(ctx, call)
    if isinstance(scope, cst.FunctionDef) and any(w in scope.name.value.lower() for w in INIT_WORDS):
        return True
    return _loop_or_alias(scope, base.value)


def _loop_or_alias(scope: cst.CSTNode | None, name: str) -> bool:
    """Whether `name` is a loop target in the scope or bound to an attribute (`w = m.weight`)."""
    if scope is None:
        return False
    found = False

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_For(self, node: cst.For) -> None:
            nonlocal found
            found = found or name in set(bound_names(node.target))

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            if isinstance(node.value, cst.Attribute | cst.Subscript):
                found = found or any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets)

    scope.visit(_V())
    return found


# ----------------------------------------------------------------------------------------------
# Aliases: torch tensors share memory with their views, JAX arrays share nothing
# ----------------------------------------------------------------------------------------------

#: methods whose result may share memory with the receiver (views, or the tensor itself)
_VIEW_METHODS = frozenset(
    {
        "view", "view_as", "reshape", "reshape_as", "transpose", "t", "permute", "unsqueeze", "squeeze",
        "expand", "expand_as", "flatten", "unflatten", "narrow", "select", "diagonal", "detach", "contiguous",
        "as_strided", "swapaxes", "swapdims", "movedim", "unfold", "split", "chunk", "unbind", "to", "type",
        "float", "double", "half", "bfloat16", "type_as", "view_as_real", "view_as_complex",
    }
)  # fmt: skip
_VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})


@dataclass
class Aliases:
    order: dict[int, int]  # id(small statement) -> its position in the scope
    #: (position, name bound, the name it may now share memory with or None for a fresh value,
    #: whether it surely does: a view, not a cast or a reshape that may copy)
    events: list[tuple[int, str, str | None, bool]]
    #: name -> the positions of the statements that read it
    reads: dict[str, list[int]] = field(default_factory=dict)
    #: id(for loop) -> the split chunks it changes in place and gets written back
    #: (analysis/split_chunks.py)
    split_loops: dict[int, SplitLoop] = field(default_factory=dict)


@dataclass
class _Cache:
    """Per-file: the aliases found for each scope (keyed by the scope node's id)."""

    aliases: dict[int, Aliases] = field(default_factory=dict)


def _cache(ctx: FileView) -> _Cache:
    return ctx.per_file("tensor-inference-aliases", _Cache)


def _view_of(ctx: FileView, value: cst.BaseExpression) -> str | None:
    """The plain name whose memory `value` may share (`h.view(-1)`, `h[0]`, `h.T`, `h.add_(1)`)."""
    while True:
        if isinstance(value, cst.Name):
            return value.value
        if isinstance(value, cst.Subscript) or (
            isinstance(value, cst.Attribute) and value.attr.value in _VIEW_ATTRIBUTES
        ):
            value = value.value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            method = value.func.attr.value
            if method not in _VIEW_METHODS and method not in inplace_index(ctx.mappings):
                return None
            value = value.func.value
        else:
            return None


def aliases(ctx: FileView, scope: cst.CSTNode) -> Aliases:
    state = _cache(ctx)
    known = state.aliases.get(id(scope))
    if known is not None:
        return known
    result = Aliases({}, [])
    #: what a plain name was last assigned (`row_splits = zip(q.split(2), o.split(2))`, iterated later)
    values: dict[str, cst.BaseExpression] = {}

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            self._line(node.body)

        def visit_For(self, node: cst.For) -> None:
            # `for row in h`, `for xc, oc in zip(x.split(2), o.split(2))`: each target is a view
            # of what it iterates, bound before the body's first statement
            position = len(result.order) - 0.5
            loop = split_loop(node, values, lambda method: method in inplace_index(ctx.mappings))
            written = {back.chunk for back in loop.write_backs} if loop is not None else set()
            if loop is not None:
                result.split_loops[id(node)] = loop
            for name, iterated in _loop_targets(node.target, node.iter, values):
                source = None if name in written else _view_of(ctx, iterated)  # its changes are written back
                certain = source is not None and _surely_a_view(ctx, iterated)
                result.events.append((position, name, source, certain))  # type: ignore[arg-type]

        def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
            self._line(node.body)

        def _line(self, body: Sequence[cst.BaseSmallStatement]) -> None:
            for statement in body:
                position = len(result.order)
                result.order[id(statement)] = position
                for read in _names_in(statement):
                    result.reads.setdefault(read, []).append(position)
                if not isinstance(statement, cst.Assign | cst.AugAssign | cst.AnnAssign):
                    continue
                value = statement.value
                fresh = value is None or isinstance(statement, cst.AugAssign)
                source = None if fresh else _view_of(ctx, value)
                certain = source is not None and _surely_a_view(ctx, value)  # type: ignore[arg-type]
                targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else []
                if not isinstance(statement, cst.Assign):
                    targets = [statement.target]
                for target in targets:
                    for name in bound_names(target):
                        result.events.append((position, name, source, certain))
                        values.pop(name, None)
                if len(targets) == 1 and isinstance(targets[0], cst.Name) and value is not None:
                    values[targets[0].value] = value

    scope.visit(_V())
    state.aliases[id(scope)] = result
    return result


def _loop_targets(
    target: cst.BaseExpression, iterated: cst.BaseExpression, values: dict[str, cst.BaseExpression]
) -> list[tuple[str, cst.BaseExpression]]:
    """(name, what its values are taken from) for a loop target: the iterable itself for a name,
    through `zip(...)` and `enumerate(...)` for tuples of names, and through a name the scope
    assigned one of them to (`row_splits = zip(...)`, then `for i, (qc, oc) in enumerate(row_splits)`)."""
    value = values.get(iterated.value) if isinstance(iterated, cst.Name) else None
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("zip", "enumerate"):
        iterated = value
    if isinstance(target, cst.Name):
        return [(target.value, iterated)]
    if not isinstance(target, cst.Tuple | cst.List) or not isinstance(iterated, cst.Call):
        return []
    function = iterated.func.value if isinstance(iterated.func, cst.Name) else None
    elements = [e.value for e in target.elements]
    args = [a.value for a in iterated.args if not a.star and a.keyword is None]
    if function == "zip" and len(args) == len(elements):
        return [
            pair for element, arg in zip(elements, args, strict=True) for pair in _loop_targets(element, arg, values)
        ]
    if function == "enumerate" and len(elements) == 2 and args:
        return _loop_targets(elements[1], args[0], values)
    return []


def warn_aliases(ctx: FileView, scope: cst.CSTNode | None, statement: cst.CSTNode, name: str, at: cst.CSTNode) -> None:
    """Warn when `name`, changed in place by `statement`, may share memory with another name
    bound earlier in the scope (`y = h.view(-1)`, `y = h`, `y = h.mul_(2)`): torch's change
    shows through the other name, the converted code's does not."""
    if scope is None:
        return
    known = aliases(ctx, scope)
    position = known.order.get(id(statement))
    if position is None:
        return
    groups = _memory_groups(known, position, surely=False)
    siblings = _unpacked_with(known, position, name)
    others = sorted(groups.get(name, {name}) - {name} - siblings)
    if not others:
        return
    shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
    sure = _memory_groups(known, position, surely=True).get(name, {name}) - {name} - siblings
    used = sorted(o for o in sure if any(p > position for p in known.reads.get(o, ())))
    if used:  # the change is read through the other name: the converted code cannot give torch's result
        ctx.diagnose(
            at,
            "unsupported",
            "inplace-alias",
            f"{name} shares memory with {', '.join(used[:3])} (a view or the same tensor, bound before), which "
            f"later code reads: torch's in-place change shows through it, the converted code changes {name} only "
            "(mamba.py's parallel scan writes so into its inputs); write the result back explicitly",
        )
        return
    ctx.diagnose(
        at,
        "warning",
        "inplace-alias",
        f"{name} may share memory with {shown} (a view or the same tensor, bound before): torch's in-place change "
        f"shows through {shown} too, the converted code changes {name} only; check that {shown} is not used after",
    )


def _unpacked_with(known: Aliases, position: int, name: str) -> set[str]:
    """The other names the statement that last bound `name` before `position` unpacked from the
    same value (`coords, vals, mask = x`): parts of one value, each may share memory with it, not
    with each other (lie-transformer's `GlobalPool` fills `vals` in place, then reads `mask`)."""
    last = None
    for event in known.events:
        if event[0] >= position:
            break
        if event[1] == name:
            last = event
    if last is None or last[2] is None:
        return set()
    return {bound for where, bound, source, _ in known.events if where == last[0] and source == last[2]} - {name}


def _memory_groups(known: Aliases, position: int, surely: bool) -> dict[str, set[str]]:
    """Name -> the names sharing its memory before `position` (one set per group); `surely`:
    through views only."""
    groups: dict[str, set[str]] = {}
    for where, bound, source, certain in known.events:
        if where >= position:
            break
        if source == bound:
            continue  # `h = h.t()`: still the same memory
        old = groups.pop(bound, None)
        if old is not None:
            old.discard(bound)
        if source is None or (surely and not certain):
            continue  # a fresh value
        group = groups.setdefault(source, {source})
        group.add(bound)
        groups[bound] = group
    return groups


#: methods whose result is always a view of the receiver (no cast, no reshape that may copy)
_SURE_VIEWS = frozenset(
    {"view", "view_as", "transpose", "t", "permute", "unsqueeze", "squeeze", "expand", "expand_as", "narrow",
     "select", "diagonal", "detach", "as_strided", "swapaxes", "swapdims", "movedim", "unfold", "split", "chunk",
     "unbind", "tensor_split"}
)  # fmt: skip


def _surely_a_view(ctx: FileView, value: cst.BaseExpression) -> bool:
    """`h`, `h.view(...)`, `h[:, 0]`, `h.add_(1)`: memory shared for certain. Casts (`h.half()`,
    a copy unless `h` is half already), reshapes that may copy and indexing by a name (a tensor
    index copies) are not."""
    while not isinstance(value, cst.Name):
        if isinstance(value, cst.Subscript):
            if not all(_basic_index(element.slice) for element in value.slice):
                return False
            value = value.value
        elif isinstance(value, cst.Attribute) and value.attr.value in _VIEW_ATTRIBUTES:
            value = value.value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            method = value.func.attr.value
            if method not in _SURE_VIEWS and method not in inplace_index(ctx.mappings):
                return False
            value = value.func.value
        else:
            return False
    return True


def _basic_index(index: cst.BaseSlice) -> bool:
    if isinstance(index, cst.Slice):
        return True
    value = index.value  # type: ignore[attr-defined]
    return isinstance(value, cst.Integer | cst.Ellipsis) or (isinstance(value, cst.Name) and value.value == "None")


def _names_in(statement: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

    statement.visit(_Names())
    return found
