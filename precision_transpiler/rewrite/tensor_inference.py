"""What the rules know about tensors in torch model code: whether an expression is a tensor
(`known_tensor`, `tensor_names`, `torch_value`), what `self.<name>` is in its class
(`attribute_kind`: a buffer or parameter, another tensor, or unknown), where a call stands in its
function (`Where`), which names may share memory with a view bound before (`aliases`,
`warn_aliases`), and whether an in-place call initialises a parameter (`is_initialisation`).

Used by the in-place rule (rules/torch_inplace_ops_model.py) and by the Keras rules that rewrite
only what holds tensors (rules/torch_tensor_index_tf.py, rules/torch_bool_arith_tf.py,
rules/torch_int_promotion_tf.py). Analyses of a scope are computed once per converted file.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from precision_transpiler.mappings.model import MappingSet, OpSpec
from precision_transpiler.mappings.patterns import Pattern
from precision_transpiler.rewrite.context import RuleContext

#: words in a function's name that make `zero_()`/`fill_()` in it initialisation
INIT_WORDS = ("init", "reset")


def inplace_index(mappings: MappingSet) -> dict[str, list[tuple[OpSpec, Pattern]]]:
    """In-place method name -> (op, torch pattern) of the in-place ops (names ending in `_`)."""
    cache = mappings.caches.setdefault("torch-inplace-ops", {})
    if "index" in cache:
        return cache["index"]
    index: dict[str, list[tuple[OpSpec, Pattern]]] = {}
    for op in mappings.ops.values():
        if not op.name.endswith("_"):
            continue
        for pattern in op.patterns.get("torch", ()):
            method = pattern.method_name
            if method is not None and method.endswith("_"):
                index.setdefault(method, []).append((op, pattern))
    cache["index"] = index
    return index


@dataclass
class _Cache:
    """Per-file: what was found for each scope (keyed by the scope node's id)."""

    tensors: dict[int, dict[str, bool | None]] = field(default_factory=dict)
    bools: dict[int, set[str]] = field(default_factory=dict)
    masks: dict[int, set[str]] = field(default_factory=dict)
    aliases: dict[int, Aliases] = field(default_factory=dict)
    #: names a scope binds (also) to Python values: a number by its form, a literal, a loop target
    python_values: dict[int, set[str]] = field(default_factory=dict)


def _cache(ctx: RuleContext) -> _Cache:
    return ctx.per_file("tensor-inference", _Cache)


# ----------------------------------------------------------------------------------------------
# Where a call is
# ----------------------------------------------------------------------------------------------


@dataclass
class Where:
    kind: str  # "statement", "assign", "return", or "" (inside an expression)
    statement: cst.CSTNode | None
    scope: cst.CSTNode | None  # the enclosing FunctionDef or Module
    parameters: frozenset[str]

    @staticmethod
    def of(ctx: RuleContext, call: cst.Call) -> Where:
        parent = ctx.parent(call)
        kind, statement = "", None
        value: cst.CSTNode = call
        while isinstance(parent, cst.IfExp) and parent.test is not value:
            # `return x.mul_(s) if inplace else x * s`: a branch's value is what the statement
            # returns, as if it stood alone there (timm's activations)
            value, parent = parent, ctx.parent(parent)
        if value is not call and not (isinstance(parent, cst.Return) and parent.value is value):
            parent = None  # a branch of an assignment or expression: no statement of its own
        if isinstance(parent, cst.Expr):
            kind, statement = "statement", parent
        elif isinstance(parent, cst.Assign) and parent.value is call:
            kind, statement = "assign", parent
        elif isinstance(parent, cst.Return) and parent.value is value:
            kind, statement = "return", parent
        scope = Where.scope_of(ctx, call)
        params: frozenset[str] = frozenset()
        if isinstance(scope, cst.FunctionDef):
            p = scope.params
            params = frozenset(
                a.name.value
                for a in (*p.posonly_params, *p.params, *p.kwonly_params, p.star_arg, p.star_kwarg)
                if isinstance(a, cst.Param)
            )
        return Where(kind, statement, scope, params)

    @staticmethod
    def scope_of(ctx: RuleContext, node: cst.CSTNode) -> cst.CSTNode | None:
        current: cst.CSTNode | None = node
        while current is not None:
            current = ctx.parent(current)
            if isinstance(current, cst.FunctionDef | cst.Module | cst.Lambda | cst.ClassDef):
                return current if isinstance(current, cst.FunctionDef | cst.Module) else None
        return None


# ----------------------------------------------------------------------------------------------
# What `self.<name>` is
# ----------------------------------------------------------------------------------------------


def declared_outside(scope: cst.CSTNode | None, name: str) -> bool:
    if not isinstance(scope, cst.FunctionDef):
        return True  # module level: other code may read it after the statement
    found = False

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Global(self, node: cst.Global) -> None:
            nonlocal found
            found = found or any(n.name.value == name for n in node.names)

        def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
            nonlocal found
            found = found or any(n.name.value == name for n in node.names)

    scope.visit(_V())
    return found


def attribute_kind(ctx: RuleContext, receiver: cst.Attribute, anchor: cst.CSTNode) -> str:
    """ "variable" (a registered buffer or nn.Parameter), "plain" (another tensor the class assigns
    to self) or "unknown", for `self.<name>`, from the enclosing class's code. `anchor` is a node on
    the path being visited (the call)."""
    name = receiver.attr.value
    current: cst.CSTNode | None = anchor
    cls: cst.ClassDef | None = None
    while current is not None:
        current = ctx.parent(current)
        if isinstance(current, cst.ClassDef):
            cls = current
            break
    if cls is None:
        return "unknown"
    kind = "unknown"

    class _V(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return node is cls

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal kind
            func = node.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("register_buffer", "register_parameter")
                and isinstance(func.value, cst.Name)
                and func.value.value == "self"
                and node.args
                and isinstance(node.args[0].value, cst.SimpleString)
                and node.args[0].value.evaluated_value == name
            ):
                kind = "variable"

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal kind
            for target in node.targets:
                t = target.target
                if (
                    isinstance(t, cst.Attribute)
                    and t.attr.value == name
                    and isinstance(t.value, cst.Name)
                    and t.value.value == "self"
                    and kind != "variable"
                ):
                    kind = "variable" if _is_parameter_call(ctx, node.value) else _plain_or_unknown(ctx, node.value)

    cls.visit(_V())
    return kind


def _is_parameter_call(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Name | cst.Attribute):
        text = ctx.code(func)
        return text.rsplit(".", 1)[-1] in ("Parameter", "Buffer")
    return False


def _plain_or_unknown(ctx: RuleContext, value: cst.BaseExpression) -> str:
    return "plain" if torch_value(ctx, value) else "unknown"


# ----------------------------------------------------------------------------------------------
# Which names are tensors
# ----------------------------------------------------------------------------------------------

_NOT_TENSORS = (
    cst.Dict,
    cst.List,
    cst.Set,
    cst.Tuple,
    cst.ListComp,
    cst.DictComp,
    cst.SetComp,
    cst.GeneratorExp,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.Integer,
    cst.Float,
    cst.Lambda,
)
#: tensor methods (of the op tables) whose result is not a tensor
_NOT_TENSOR_METHODS = frozenset(
    {"split", "chunk", "unbind", "tolist", "item", "size", "dim", "ndimension", "numel", "nelement", "equal"}
)


#: builtins whose result is a Python number
_NUMBER_BUILTINS = frozenset({"len", "int", "float", "bool", "round"})


def _number(value: cst.BaseExpression) -> bool:
    """A Python number by its form: `len(...)`, `int(...)`, `x.size(0)`, `x.numel()`, `x.item()`,
    `x.shape[0]`, `x.ndim`, or arithmetic of such (`n = x.size(1) // 2`)."""
    if isinstance(value, cst.Integer | cst.Float):
        return True
    if isinstance(value, cst.BinaryOperation):
        return _number(value.left) and _number(value.right)
    if isinstance(value, cst.UnaryOperation):
        return _number(value.expression)
    if isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Name):
            return func.value in _NUMBER_BUILTINS
        return isinstance(func, cst.Attribute) and func.attr.value in {"size", "dim", "ndimension", "numel", "item"}
    if isinstance(value, cst.Subscript):
        return isinstance(value.value, cst.Attribute) and value.value.attr.value == "shape"
    return isinstance(value, cst.Attribute) and value.attr.value == "ndim"


def maybe_tensor_name(ctx: RuleContext, name: str, anchor: cst.CSTNode) -> bool:
    """Whether the name may hold a tensor where `anchor` is: not bound, in its function, only to
    Python values (a number by its form, a literal, a display, a loop target)."""
    scope = Where.scope_of(ctx, anchor)
    tensor_names(ctx, scope)
    return name not in _cache(ctx).python_values.get(id(scope), set())


def torch_value(ctx: RuleContext, value: cst.BaseExpression) -> bool:
    """A torch function call (not a layer), or a tensor method call (`x.clone()`, `x.half()`,
    `x.view(-1)`: a method some op table knows, called on something other than self): a tensor."""
    if not isinstance(value, cst.Call):
        return False
    qualified = ctx.qualified_name(value.func)
    if qualified is not None:
        if not qualified.startswith("torch."):
            return False
        return not qualified.startswith("torch.nn.") or qualified.startswith("torch.nn.functional.")
    func = value.func
    if not isinstance(func, cst.Attribute) or func.attr.value in _NOT_TENSOR_METHODS:
        return False
    receiver = func.value
    if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
        return False
    method = func.attr.value
    return method in ctx.mappings.method_names.get("torch", ()) or method in inplace_index(ctx.mappings)


def known_tensor(ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """Whether `node` is known to be a tensor: a name its function binds only to tensors, a
    registered buffer or parameter `self.<name>`, an index of one, or a torch call (shared by the
    Keras rules that rewrite only what holds tensors: torch_tensor_index_tf, torch_bool_arith_tf)."""
    if isinstance(node, cst.Name):
        return tensor_names(ctx, Where.scope_of(ctx, anchor)).get(node.value) is True
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return attribute_kind(ctx, node, anchor) == "variable"
    if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, _BITWISE):
        # arithmetic with a tensor is a tensor (`a.double() @ a.double().t()`)
        return known_tensor(ctx, node.left, anchor) or known_tensor(ctx, node.right, anchor)
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name | cst.Subscript | cst.Attribute):
        # an index of a tensor (`edge_index[0]`, a buffer's `self.pe[:, :n]`)
        return known_tensor(ctx, node.value, anchor)
    return torch_value(ctx, node)


_BITWISE = (cst.BitAnd, cst.BitOr, cst.BitXor)


def bool_tensor(ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """Whether `node` is known to be a boolean tensor: a comparison with an operand known to be a
    tensor, `~`, `&`, `|` or `^` of one, a name its function binds only to such values (`is_max =
    a & (m > t)`), or a call of a function of this file whose every `return` is one (kornia's
    `_beats(...) & _beats(...)`). torch_bool_arith_tf promotes such operands in arithmetic."""
    found = _walk_for(ctx, anchor, loose=False)
    return found is not None and found[0].is_bool(node, found[1], frozenset())


def _walk_for(ctx: RuleContext, anchor: cst.CSTNode, *, loose: bool) -> tuple[_BoolWalk, cst.CSTNode] | None:
    """The walk answering a question asked at `anchor`, and the scope it is asked in."""
    module: cst.CSTNode | None = anchor
    while module is not None and not isinstance(module, cst.Module):
        module = ctx.parent(module)
    scope = Where.scope_of(ctx, anchor)
    if scope is None:
        return None
    return _BoolWalk(ctx, module if isinstance(module, cst.Module) else None, anchor, loose=loose), scope


def combined_mask(ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
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
        isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _BITWISE)
    )
    return combined and walk.is_bool(node, scope, frozenset())


class _BoolWalk:
    """One question of `bool_tensor` (or, `loose`, of `combined_mask`: comparisons of anything
    count): parents are known only on the path being visited, so the scope of everything looked
    at is carried along (the function a name or `return` is in)."""

    def __init__(self, ctx: RuleContext, module: cst.Module | None, anchor: cst.CSTNode, loose: bool = False) -> None:
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
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _BITWISE):
            return self.is_bool(node.left, scope, seen) or self.is_bool(node.right, scope, seen)
        if isinstance(node, cst.Name):
            return node.value in self.names(scope, seen)
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


def dtype_name(ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
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


def tensor_names(ctx: RuleContext, scope: cst.CSTNode | None) -> dict[str, bool | None]:
    """Names of a function (or module) -> True when it binds them only to tensors (a torch call,
    a `torch.Tensor` annotation) and at least once so; False when some binding is not a tensor
    (a display, a literal, a loop target)."""
    if scope is None:
        return {}
    state = _cache(ctx)
    known = state.tensors.get(id(scope))
    if known is not None:
        return known
    evidence: dict[str, set[bool | None]] = {}
    indexed: list[tuple[str, str]] = []  # (name, the name it is an index of)

    def add(name: str, what: bool | None) -> None:
        evidence.setdefault(name, set()).add(what)

    def annotated_tensor(annotation: cst.Annotation | None) -> bool:
        # torch.Tensor and its typed aliases (FloatTensor, BoolTensor, LongTensor, ...)
        qualified = ctx.qualified_name(annotation.annotation) if annotation is not None else None
        return qualified is not None and qualified.startswith("torch.") and qualified.endswith("Tensor")

    if isinstance(scope, cst.FunctionDef):
        p = scope.params
        for param in (*p.posonly_params, *p.params, *p.kwonly_params):
            add(param.name.value, True if annotated_tensor(param.annotation) else None)

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                self.bind(target.target, node.value)

        def bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
            if isinstance(target, cst.Tuple | cst.List) and isinstance(value, cst.Tuple | cst.List):
                targets, values = target.elements, value.elements
                if len(targets) == len(values) and not any(
                    isinstance(e, cst.StarredElement) for e in (*targets, *values)
                ):
                    for t, v in zip(targets, values, strict=True):  # `row, col = edge_index[0], edge_index[1]`
                        self.bind(t.value, v.value)
                    return
            for name in bound_names(target):
                if isinstance(target, cst.Name):
                    if _computed_tensor(ctx, value) or (isinstance(value, cst.Name) and value.value == name):
                        add(name, True)
                    elif isinstance(value, _NOT_TENSORS) or _number(value):
                        add(name, False)
                    else:
                        add(name, None)
                        # `oris = grads[:, 1:]`, `mask = adjacency`, `keep = index[0] != index[1]`
                        indexed.extend((name, base) for base in _operand_names(value))
                elif _tensor_tuple(ctx, value):
                    add(name, True)  # `values, inverse = torch.unique(x, return_inverse=True)`
                else:
                    add(name, None)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name):
                add(node.target.value, True if annotated_tensor(node.annotation) else None)

        def visit_For(self, node: cst.For) -> None:
            for name in bound_names(node.target):
                add(name, False)

        def visit_CompFor(self, node: cst.CompFor) -> None:
            for name in bound_names(node.target):
                add(name, False)

        def visit_WithItem(self, node: cst.WithItem) -> None:
            if node.asname is not None:
                for name in bound_names(node.asname.name):
                    add(name, False)

    scope.visit(_V())
    result = {name: True in seen and False not in seen for name, seen in evidence.items()}
    # an index of a tensor (or the tensor itself, or arithmetic or a comparison with one) is a
    # tensor: a name bound (also) to one counts once its base does
    changed = True
    while changed:
        changed = False
        for name, base in indexed:
            if result.get(base) and not result.get(name) and False not in evidence[name]:
                evidence[name].add(True)
                result[name] = True
                changed = True
    state.tensors[id(scope)] = result
    state.python_values[id(scope)] = {name for name, seen in evidence.items() if False in seen}
    return result


def _operand_names(value: cst.BaseExpression) -> list[str]:
    """The names whose being tensors makes `value` one: the name itself, the base of an index
    (`grads[:, 1:]`), and those of the operands of arithmetic and of a comparison
    (`index[0] != index[1]`, `x * 2`)."""
    if isinstance(value, cst.Name):
        return [value.value]
    if isinstance(value, cst.Subscript):
        return [value.value.value] if isinstance(value.value, cst.Name) else []
    if isinstance(value, cst.BinaryOperation) and not isinstance(value.operator, _BITWISE):
        return [*_operand_names(value.left), *_operand_names(value.right)]
    if isinstance(value, cst.Comparison) and len(value.comparisons) == 1:
        if isinstance(value.comparisons[0].operator, cst.In | cst.NotIn | cst.Is | cst.IsNot):
            return []
        return [*_operand_names(value.left), *_operand_names(value.comparisons[0].comparator)]
    return []


#: torch calls whose results unpack into Python numbers, not tensors (`h, w = x.size()`)
_NUMBER_TUPLES = frozenset({"size", "tolist", "shape", "stride"})


def _tensor_tuple(ctx: RuleContext, node: cst.BaseExpression) -> bool:
    """A torch call whose result unpacks into tensors (`torch.unique(..., return_inverse=True)`,
    `x.max(dim=1)`, `q.chunk(3, dim=-1)`)."""
    if not isinstance(node, cst.Call) or not torch_value(ctx, node):
        return False
    func = node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name not in _NUMBER_TUPLES


def _computed_tensor(ctx: RuleContext, node: cst.BaseExpression) -> bool:
    """A torch call, or arithmetic or a comparison with one (`a.double() @ a.double().t() ==
    a.sum(-1)`, `x.float() / 2`)."""
    if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, _BITWISE):
        return _computed_tensor(ctx, node.left) or _computed_tensor(ctx, node.right)
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        if isinstance(node.comparisons[0].operator, cst.In | cst.NotIn | cst.Is | cst.IsNot):
            return False
        return _computed_tensor(ctx, node.left) or _computed_tensor(ctx, node.comparisons[0].comparator)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus | cst.BitInvert):
        return _computed_tensor(ctx, node.expression)
    return torch_value(ctx, node)


def bound_names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, cst.Tuple | cst.List):
        for element in target.elements:
            yield from bound_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from bound_names(target.value)


def sets_parameter_data(ctx: RuleContext, call: cst.Call, *, statement: bool = False) -> bool:
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
        and func.value.attr.value == "data"
        and (statement or isinstance(ctx.parent(call), cst.Expr))
    ):
        return False
    return func.attr.value == "copy_" or in_initialiser(ctx)


def in_initialiser(ctx: RuleContext) -> bool:
    """Whether the node being visited is in a function named *init*/*reset* (`__init__`,
    `_init_weights`, `reset_parameters`): where parameters are set while building."""
    function = (ctx.enclosing_function() or "").rsplit(".", 1)[-1].lower()
    return any(w in function for w in INIT_WORDS)


def is_initialisation(ctx: RuleContext, receiver: cst.BaseExpression, call: cst.Call) -> bool:
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
    #: (position, name bound, the name it may now share memory with or None for a fresh value)
    events: list[tuple[int, str, str | None]]


def _view_of(ctx: RuleContext, value: cst.BaseExpression) -> str | None:
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


def aliases(ctx: RuleContext, scope: cst.CSTNode) -> Aliases:
    state = _cache(ctx)
    known = state.aliases.get(id(scope))
    if known is not None:
        return known
    result = Aliases({}, [])

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            self._line(node.body)

        def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
            self._line(node.body)

        def _line(self, body: Sequence[cst.BaseSmallStatement]) -> None:
            for statement in body:
                position = len(result.order)
                result.order[id(statement)] = position
                if not isinstance(statement, cst.Assign | cst.AugAssign | cst.AnnAssign):
                    continue
                value = statement.value
                source = None if value is None or isinstance(statement, cst.AugAssign) else _view_of(ctx, value)
                targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else []
                if not isinstance(statement, cst.Assign):
                    targets = [statement.target]
                for target in targets:
                    for name in bound_names(target):
                        result.events.append((position, name, source))

    scope.visit(_V())
    state.aliases[id(scope)] = result
    return result


def warn_aliases(
    ctx: RuleContext, scope: cst.CSTNode | None, statement: cst.CSTNode, name: str, at: cst.CSTNode
) -> None:
    """Warn when `name`, changed in place by `statement`, may share memory with another name
    bound earlier in the scope (`y = h.view(-1)`, `y = h`, `y = h.mul_(2)`): torch's change
    shows through the other name, the converted code's does not."""
    if scope is None:
        return
    known = aliases(ctx, scope)
    position = known.order.get(id(statement))
    if position is None:
        return
    groups: dict[str, set[str]] = {}  # name -> the names sharing its memory (one set per group)
    for where, bound, source in known.events:
        if where >= position:
            break
        if source == bound:
            continue  # `h = h.t()`: still the same memory
        old = groups.pop(bound, None)
        if old is not None:
            old.discard(bound)
        if source is None:
            continue  # a fresh value
        group = groups.setdefault(source, {source})
        group.add(bound)
        groups[bound] = group
    others = sorted(groups.get(name, {name}) - {name})
    if not others:
        return
    shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
    ctx.diagnose(
        at,
        "warning",
        "inplace-alias",
        f"{name} may share memory with {shown} (a view or the same tensor, bound before): torch's in-place change "
        f"shows through {shown} too, the converted code changes {name} only; check that {shown} is not used after",
    )
