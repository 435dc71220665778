"""Whether an expression holds a tensor in torch model code: a name its function binds only to
tensors (`tensor_names`, `known_tensor`, `maybe_tensor_name`), a torch call (`torch_value`), what
`self.<name>` is in its class (`attribute_kind`: a buffer or parameter, another tensor, or
unknown), and where a call stands in its function (`Where`).

Used by the in-place rule (rules/torch_inplace_ops_model.py), by the Keras rules that rewrite
only what holds tensors (rules/torch_tensor_index_tf.py, rules/torch_bool_arith_tf.py,
rules/torch_int_promotion_tf.py), by op-pattern and by the engine's report of unmapped tensor
methods. Analyses of a scope are computed once per converted file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from precision_transpiler.analysis.view import FileView
from precision_transpiler.mappings.model import MappingSet, OpSpec
from precision_transpiler.mappings.patterns import Pattern


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
    #: names a scope binds (also) to Python values: a number by its form, a literal, a loop target
    python_values: dict[int, set[str]] = field(default_factory=dict)


def _cache(ctx: FileView) -> _Cache:
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
    def of(ctx: FileView, call: cst.Call) -> Where:
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
    def scope_of(ctx: FileView, node: cst.CSTNode) -> cst.CSTNode | None:
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


def attribute_kind(ctx: FileView, receiver: cst.Attribute, anchor: cst.CSTNode) -> str:
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


def held_object(ctx: FileView, receiver: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """`self.<name>` where the enclosing class assigns it only instances of classes: of its file
    or package (`self.permutation = RandomPermutation(n)` in nflows' flows, whose
    `self.permutation.inverse(x)` is the flow's method, not the tensor's) or torch layers."""
    if not (isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name)):
        return False
    if receiver.value.value != "self":
        return False
    cls: cst.CSTNode | None = anchor
    while cls is not None and not isinstance(cls, cst.ClassDef):
        cls = ctx.parent(cls)
    if cls is None:
        return False
    name, values = receiver.attr.value, []

    class _V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and t.attr.value == name and isinstance(t.value, cst.Name):
                    values.append(node.value if t.value.value == "self" else None)

    cls.visit(_V())
    return bool(values) and all(_constructs_object(ctx, value) for value in values)


def _constructs_object(ctx: FileView, value: cst.BaseExpression | None) -> bool:
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name | cst.Attribute):
        return False
    last = value.func.value if isinstance(value.func, cst.Name) else value.func.attr.value
    if not last[:1].isupper():
        return False
    qualified = ctx.qualified_name(value.func)
    torch = ctx.mappings.frameworks.get("torch")
    return qualified is None or (torch is not None and torch.is_layer_class(qualified))


def _is_parameter_call(ctx: FileView, value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    if isinstance(func, cst.Name | cst.Attribute):
        text = ctx.code(func)
        return text.rsplit(".", 1)[-1] in ("Parameter", "Buffer")
    return False


def _plain_or_unknown(ctx: FileView, value: cst.BaseExpression) -> str:
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


def maybe_tensor_name(ctx: FileView, name: str, anchor: cst.CSTNode) -> bool:
    """Whether the name may hold a tensor where `anchor` is: not bound, in its function, only to
    Python values (a number by its form, a literal, a display, a loop target)."""
    scope = Where.scope_of(ctx, anchor)
    tensor_names(ctx, scope)
    return name not in _cache(ctx).python_values.get(id(scope), set())


def torch_value(ctx: FileView, value: cst.BaseExpression) -> bool:
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


def known_tensor(ctx: FileView, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """Whether `node` is known to be a tensor: a name its function binds only to tensors, a
    registered buffer or parameter `self.<name>`, an index of one, or a torch call (shared by the
    Keras rules that rewrite only what holds tensors: torch_tensor_index_tf, torch_bool_arith_tf)."""
    if isinstance(node, cst.Name):
        if tensor_names(ctx, Where.scope_of(ctx, anchor)).get(node.value) is True:
            return True
        return narrowed_to_tensor(ctx, node.value, anchor)
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return attribute_kind(ctx, node, anchor) == "variable"
    if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, BITWISE):
        # arithmetic with a tensor is a tensor (`a.double() @ a.double().t()`)
        return known_tensor(ctx, node.left, anchor) or known_tensor(ctx, node.right, anchor)
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name | cst.Subscript | cst.Attribute):
        # an index of a tensor (`edge_index[0]`, a buffer's `self.pe[:, :n]`)
        return known_tensor(ctx, node.value, anchor)
    return torch_value(ctx, node)


BITWISE = (cst.BitAnd, cst.BitOr, cst.BitXor)
_TENSOR_TYPES = frozenset({"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def narrowed_to_tensor(ctx: FileView, name: str, anchor: cst.CSTNode) -> bool:
    """Whether `anchor` stands where a test has just shown `name` to be a tensor: after
    `isinstance(name, torch.Tensor) and`, in the body of `if isinstance(name, torch.Tensor):`, or in
    the first branch of `... if isinstance(name, torch.Tensor) else ...` (kornia's
    `v._version if isinstance(v, torch.Tensor) and not v.is_inference() else -1`)."""
    child, parent = anchor, ctx.parent(anchor)
    while parent is not None and not isinstance(parent, cst.FunctionDef | cst.Lambda | cst.ClassDef | cst.Module):
        if isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And):
            test: cst.BaseExpression | None = parent.left if parent.right is child else None
        elif isinstance(parent, cst.IfExp | cst.If):
            test = parent.test if parent.body is child else None
        else:
            test = None
        if test is not None and _tests_tensor(ctx, test, name):
            return True
        child, parent = parent, ctx.parent(parent)
    return False


def _tests_tensor(ctx: FileView, test: cst.BaseExpression, name: str) -> bool:
    """`isinstance(name, torch.Tensor)`, alone or as one operand of an `and`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _tests_tensor(ctx, test.left, name) or _tests_tensor(ctx, test.right, name)
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance"):
        return False
    if len(test.args) != 2 or not isinstance(test.args[0].value, cst.Name) or test.args[0].value.value != name:
        return False
    return ctx.qualified_name(test.args[1].value) in _TENSOR_TYPES


def tensor_names(ctx: FileView, scope: cst.CSTNode | None) -> dict[str, bool | None]:
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
    if isinstance(value, cst.BinaryOperation) and not isinstance(value.operator, BITWISE):
        return [*_operand_names(value.left), *_operand_names(value.right)]
    if isinstance(value, cst.Comparison) and len(value.comparisons) == 1:
        if isinstance(value.comparisons[0].operator, cst.In | cst.NotIn | cst.Is | cst.IsNot):
            return []
        return [*_operand_names(value.left), *_operand_names(value.comparisons[0].comparator)]
    return []


#: torch calls whose results unpack into Python numbers, not tensors (`h, w = x.size()`)
_NUMBER_TUPLES = frozenset({"size", "tolist", "shape", "stride"})


def _tensor_tuple(ctx: FileView, node: cst.BaseExpression) -> bool:
    """A torch call whose result unpacks into tensors (`torch.unique(..., return_inverse=True)`,
    `x.max(dim=1)`, `q.chunk(3, dim=-1)`)."""
    if not isinstance(node, cst.Call) or not torch_value(ctx, node):
        return False
    func = node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    return name not in _NUMBER_TUPLES


def _computed_tensor(ctx: FileView, node: cst.BaseExpression) -> bool:
    """A torch call, or arithmetic or a comparison with one (`a.double() @ a.double().t() ==
    a.sum(-1)`, `x.float() / 2`)."""
    if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, BITWISE):
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
