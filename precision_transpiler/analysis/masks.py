"""Boolean tensors and dtype names in torch model code: whether an expression is known to be a
boolean tensor (`bool_tensor`), a mask combined with `&`, `|`, `^` or `~` (`combined_mask`), and
whether a name is bound only to dtypes (`dtype_name`).

Used by the Keras rules that promote booleans as torch does (rules/torch_bool_arith_tf.py) and
index with masks (rules/torch_tensor_index_tf.py), and by op-pattern's argument checks
(rules/op_arguments.py: `x.to(orig_type)`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from precision_transpiler.analysis.tensors import BITWISE, Where, bound_names, known_tensor, tensor_names, torch_value
from precision_transpiler.analysis.view import FileView


@dataclass
class _Cache:
    """Per-file: the boolean names found for each scope (keyed by the scope node's id)."""

    bools: dict[int, set[str]] = field(default_factory=dict)
    masks: dict[int, set[str]] = field(default_factory=dict)


def _cache(ctx: FileView) -> _Cache:
    return ctx.per_file("tensor-inference-bools", _Cache)


def bool_tensor(ctx: FileView, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """Whether `node` is known to be a boolean tensor: a comparison with an operand known to be a
    tensor, `~`, `&`, `|` or `^` of one, a name its function binds only to such values (`is_max =
    a & (m > t)`), or a call of a function of this file whose every `return` is one (kornia's
    `_beats(...) & _beats(...)`). torch_bool_arith_tf promotes such operands in arithmetic."""
    found = _walk_for(ctx, anchor, loose=False)
    return found is not None and found[0].is_bool(node, found[1], frozenset())


def _walk_for(ctx: FileView, anchor: cst.CSTNode, *, loose: bool) -> tuple[_BoolWalk, cst.CSTNode] | None:
    """The walk answering a question asked at `anchor`, and the scope it is asked in."""
    module: cst.CSTNode | None = anchor
    while module is not None and not isinstance(module, cst.Module):
        module = ctx.parent(module)
    scope = Where.scope_of(ctx, anchor)
    if scope is None:
        return None
    return _BoolWalk(ctx, module if isinstance(module, cst.Module) else None, anchor, loose=loose), scope


def combined_mask(ctx: FileView, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """Whether `node` is a mask combined with `&`, `|`, `^` or `~` from comparisons, whatever
    their operands (`(inputs >= -bound) & (inputs <= bound)`, or a name bound only to one):
    Python code combines truth values with `and`/`or`, so this is a boolean tensor, and what it
    indexes is a tensor too (normflows' splines: `inputs[inside_interval_mask]`)."""
    found = _walk_for(ctx, anchor, loose=True)
    if found is None:
        return False
    walk, scope = found
    if isinstance(node, cst.Name):
        return node.value in walk.names(scope, frozenset())
    combined = (isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert)) or (
        isinstance(node, cst.BinaryOperation) and isinstance(node.operator, BITWISE)
    )
    return combined and walk.is_bool(node, scope, frozenset())


#: what keeps its tensor's dtype: a boolean tensor stays one (superpointnet's `F.pad(mask, ...)`,
#: then `mask2[i, 0]`, compared with 1)
_SAME_DTYPE_METHODS = frozenset(
    {"clone", "contiguous", "detach", "flatten", "view", "reshape", "permute", "transpose", "squeeze", "unsqueeze",
     "expand", "expand_as", "repeat", "flip", "roll", "t"}
)  # fmt: skip
_SAME_DTYPE_FUNCTIONS = frozenset(
    {"torch.nn.functional.pad", "torch.flip", "torch.roll", "torch.flatten", "torch.reshape", "torch.squeeze",
     "torch.unsqueeze", "torch.transpose", "torch.permute", "torch.clone"}
)  # fmt: skip


class _BoolWalk:
    """One question of `bool_tensor` (or, `loose`, of `combined_mask`: comparisons of anything
    count): parents are known only on the path being visited, so the scope of everything looked
    at is carried along (the function a name or `return` is in)."""

    def __init__(self, ctx: FileView, module: cst.Module | None, anchor: cst.CSTNode, loose: bool = False) -> None:
        self.ctx, self.module, self.anchor, self.loose = ctx, module, anchor, loose
        self.here = Where.scope_of(ctx, anchor)

    def tensor(self, node: cst.BaseExpression, scope: cst.CSTNode) -> bool:
        if self.loose:
            return True
        if isinstance(node, cst.Name):
            return tensor_names(self.ctx, scope).get(node.value) is True
        if scope is self.here:  # `self.<name>` is judged where the question was asked
            return known_tensor(self.ctx, node, self.anchor)
        return torch_value(self.ctx, node)

    def is_bool(self, node: cst.BaseExpression, scope: cst.CSTNode, seen: frozenset[int]) -> bool:
        if isinstance(node, cst.Comparison):
            return any(self.tensor(part, scope) for part in (node.left, *(c.comparator for c in node.comparisons)))
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
            return self.is_bool(node.expression, scope, seen)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, BITWISE):
            return self.is_bool(node.left, scope, seen) or self.is_bool(node.right, scope, seen)
        if isinstance(node, cst.Name):
            return node.value in self.names(scope, seen)
        if isinstance(node, cst.Subscript):
            return self.is_bool(node.value, scope, seen)  # `mask[i, 0]`: an index keeps the dtype
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method == "bool" and not node.args:
                return self.tensor(node.func.value, scope) or self.is_bool(node.func.value, scope, seen)
            if method in _SAME_DTYPE_METHODS and self.ctx.qualified_name(node.func) is None:
                return self.is_bool(node.func.value, scope, seen)  # `mask.flatten()`, `mask.clone()`
            if self.ctx.qualified_name(node.func) in _SAME_DTYPE_FUNCTIONS and node.args:
                return self.is_bool(node.args[0].value, scope, seen)  # `F.pad(mask, (p, p))`
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            function = self.function(node.func.value)
            if function is None or id(function) in seen:
                return False
            returns = _returns(function)
            inner = seen | {id(function)}
            return bool(returns) and all(
                r.value is not None and self.is_bool(r.value, function, inner) for r in returns
            )
        return False

    def function(self, name: str) -> cst.FunctionDef | None:
        """The top-level `def name` of the file (the last one, as Python binds it)."""
        found = None
        for statement in self.module.body if self.module is not None else ():
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                found = statement
        return found

    def names(self, scope: cst.CSTNode, seen: frozenset[int]) -> set[str]:
        """Names of a function bound only by plain assignments, each of a boolean tensor (a least
        fixed point: `is_max = is_max & (m > t)` is one once its first binding is)."""
        state = _cache(self.ctx)
        found = state.masks if self.loose else state.bools
        known = found.get(id(scope))
        if known is not None:
            return known  # complete, or the partial set while it is being found (a recursive lookup)
        current: set[str] = set()
        found[id(scope)] = current
        bindings = _plain_bindings(scope)
        changed = True
        while changed:
            changed = False
            for name, values in bindings.items():
                if name not in current and values and all(self._bound_bool(v, scope, seen) for v in values):
                    current.add(name)
                    changed = True
        return current

    def _bound_bool(self, value: cst.BaseExpression, scope: cst.CSTNode, seen: frozenset[int]) -> bool:
        """A binding of a mask name: loose, only combined masks (`a > b` alone may compare numbers)."""
        if self.loose and isinstance(value, cst.Comparison):
            return False
        return self.is_bool(value, scope, seen)


def _returns(function: cst.FunctionDef) -> list[cst.Return]:
    found: list[cst.Return] = []

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

    function.visit(_V())
    return found


def dtype_name(ctx: FileView, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """A name the function around `anchor` binds only to dtypes (`orig_type = x.dtype`, then
    `x.to(orig_type)` in open_clip's LayerNorm): a dtype argument, as `x.dtype` itself is."""
    if not isinstance(node, cst.Name):
        return False
    scope = Where.scope_of(ctx, anchor)
    if not isinstance(scope, cst.FunctionDef):
        return False
    values = _plain_bindings(scope).get(node.value)
    return bool(values) and all(ctx.is_dtype_like(value) for value in values)


def _plain_bindings(scope: cst.CSTNode) -> dict[str, list[cst.BaseExpression] | None]:
    """Name -> the values of its plain assignments in `scope` (not in nested functions or
    classes); None for a name also bound otherwise (a parameter, a loop, `+=`, unpacking)."""
    bindings: dict[str, list[cst.BaseExpression] | None] = {}
    if isinstance(scope, cst.FunctionDef):
        bindings.update(dict.fromkeys(_parameter_names(scope)))

    def plain(name: str, value: cst.BaseExpression) -> None:
        if name not in bindings:
            bindings[name] = [value]
        elif (values := bindings[name]) is not None:
            values.append(value)

    def otherwise(target: cst.BaseExpression) -> None:
        for name in bound_names(target):
            bindings[name] = None

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    plain(target.target.value, node.value)
                else:
                    otherwise(target.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name) and node.value is not None:
                plain(node.target.value, node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            otherwise(node.target)

        def visit_For(self, node: cst.For) -> None:
            otherwise(node.target)

        def visit_WithItem(self, node: cst.WithItem) -> None:
            if node.asname is not None:
                otherwise(node.asname.name)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            otherwise(node.target)

    scope.visit(_V())
    return bindings


def _parameter_names(function: cst.FunctionDef) -> set[str]:
    p = function.params
    return {
        a.name.value
        for a in (*p.posonly_params, *p.params, *p.kwonly_params, p.star_arg, p.star_kwarg)
        if isinstance(a, cst.Param)
    }
