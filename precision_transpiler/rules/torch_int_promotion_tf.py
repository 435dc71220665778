"""Integer tensors meeting floats, torch -> Keras (`torch.arange(n) * w` -> `keras.ops.multiply(...)`).

torch promotes an integer tensor combined with a Python float to float32 (`torch.arange(depth) *
w_a + w_0` in torchvision's RegNet), and true division of integers is float32; TensorFlow's
operators do neither: `int64_tensor * 27.89` raises "Cannot convert 27.89 to EagerTensor of dtype
int64", and `int64_tensor / 2` is float64. `keras.ops.add`/`subtract`/`multiply`/`true_divide`
promote as torch does (an int64 tensor times a Python float is float32, times a Python int stays
int64). So for the Keras target this rule rewrites `a op b` into `keras.ops.<op>(a, b)` when one
operand is known to hold integers (a torch call that returns them: `torch.arange` without float
arguments, `argmax`, `.long()`, ...; or a name the function binds only to such calls) and the
other is a float (a float literal, a parameter annotated `float`) or a tensor, or the operator is
`/`. A registered buffer built from values of unknown type (`register_buffer("d",
torch.prod(torch.tensor(shape)))` in normflows' radial flow) may hold integers too, and so may
arithmetic of it with integers (`(self.d - 1) * torch.log(h)`).

Integers of two widths meet the same way: an int32 buffer (`torch.tensor(levels, dtype=int32)`,
registered from that local name in vector-quantize-pytorch's LatentQuantize) floor-divided by 2
against int64 codes (`torch.arange` floor-divided and taken modulo) is int64 in torch, and
TensorFlow's `-` refuses it; `keras.ops.subtract` promotes as torch does. So integers carry through
`+`, `-`, `*`, `//` and `%` with integers, and through names bound to such arithmetic
(`half_width = self._levels // 2`), and an integer tensor meeting a tensor is rewritten.

Division promotes in torch whatever its operands: `loss.sum() / valid.sum()` of a float and an
integer count is float32, where TensorFlow raises. So `/` with a tensor on one side and anything but
a Python number on the other (a literal, a `math` call, a parameter annotated `int`/`float`, `len`,
a `.shape` entry) becomes `keras.ops.true_divide` as well: it divides two floats exactly as `/`.
Everything else keeps its operator: a float tensor times a float needs nothing.

Comparisons too: torch compares a float64 tensor with an integer one (zuko's
`adjacency.double() @ adjacency.double().t() == adjacency.sum(dim=-1)`), TensorFlow raises. A
comparison of two operands known to be tensors, one of them cast (`.double()`, `.to(...)`) or
known to hold integers, becomes `keras.ops.equal`/`less`/... (the operators entry), which promotes
and gives the same booleans when the dtypes agree; so does a boolean tensor compared with a number
(`mask == 0`, the Annotated Transformer's masks: TensorFlow cannot make 0 a bool).

Complex values the same way: `1j * b` and `a + 1j * b` of float tensors are complex64 in torch,
and TensorFlow's operators refuse to mix complex and float; arithmetic with a complex literal, or
a name bound only to such arithmetic, and anything but a Python number becomes keras.ops'.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import libcst as cst

from precision_transpiler.analysis.masks import bool_tensor, combined_mask
from precision_transpiler.analysis.tensors import Where, known_tensor, maybe_tensor_name, torch_value
from precision_transpiler.analysis.torch_models import analysis_for
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.rules.module_variables import bind_register_buffer
from precision_transpiler.runtime import runtime_name
from precision_transpiler.syntax import operator_symbol

#: the operators rewritten; the function applying each with torch's promotion is the Keras
#: framework's `operators` entry in mappings/frameworks.yaml
_OPERATORS = ("+", "-", "*", "/", "**")
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


@register
class TorchIntPromotionTf(Rule):
    name = "torch-int-promotion-tf"
    summary = "Promote integer tensors combined with floats (torch.arange(n) * 0.5, idx / 2) as torch does."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef widths(depth: int, w_a: float, w_0: int):\n"
            "    cont = torch.arange(depth) * w_a + w_0\n    return cont, torch.arange(depth) * 2\n",
            # before the arange shim is copied into the file (vendored=False): its qualified name
            "import precision_transpiler\nimport keras\n\n\ndef widths(depth: int, w_a: float, w_0: int):\n"
            "    cont = keras.ops.multiply(precision_transpiler.runtime.keras.tensor.torch_arange(depth), w_a) + w_0\n"
            "    return cont, precision_transpiler.runtime.keras.tensor.torch_arange(depth) * 2\n",
            to="tf",
            vendored=False,
        ),
        Example(
            # a mask compared with a number as a torch op's argument; `n == 0` stays Python's
            "import torch\n\n\ndef f(scores, mask, n):\n    return scores.masked_fill(mask == 0, -1e9), n == 0\n",
            "import keras\nimport precision_transpiler\n\n\ndef f(scores, mask, n):\n"
            "    return precision_transpiler.runtime.keras.tensor.torch_masked_fill("
            "scores, keras.ops.equal(mask, 0), -1e9), n == 0\n",
            to="tf",
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target == "tf"

    def leave_BinaryOperation(
        self, ctx: RuleContext, original: cst.BinaryOperation, updated: cst.BinaryOperation
    ) -> cst.BaseExpression | None:
        if isinstance(original.operator, cst.BitAnd | cst.BitOr | cst.BitXor):
            return _bitwise_of_variables(ctx, original, updated)
        joined = _shape_joined(ctx, original, updated)
        if joined is not None:
            ctx.record(self.name, original, joined)
            return joined
        symbol = operator_symbol(original.operator)
        op = ctx.mappings.frameworks["tf"].operators.get(symbol) if symbol in _OPERATORS else None
        if op is None:
            return None
        left, right = original.left, original.right
        divide = isinstance(original.operator, cst.Divide)
        if not (
            (self._integers(ctx, left, original) and (divide or self._may_be_float(ctx, right, original)))
            or (self._integers(ctx, right, original) and (divide or self._may_be_float(ctx, left, original)))
            or (divide and self._division_promotes(ctx, left, right, original))
            or (complex_value(ctx, left, original) and not self._number(ctx, right, original))
            or (complex_value(ctx, right, original) and not self._number(ctx, left, original))
        ):
            return None
        # a NumPy float scalar is a Python number to torch, float64 to keras.ops (whisper's
        # `-log_timescale_increment * torch.arange(n)`, the increment `np.log(m) / (c // 2 - 1)`)
        operands = [
            cst.Call(cst.Name("float"), [cst.Arg(new)]) if numpy_float(ctx, old, original) else new
            for old, new in ((left, updated.left), (right, updated.right))
        ]
        call = cst.Call(ctx.expr_for(op), [cst.Arg(operand) for operand in operands])
        replacement = call.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        ctx.record(self.name, original, replacement)
        return replacement

    def leave_Comparison(
        self, ctx: RuleContext, original: cst.Comparison, updated: cst.Comparison
    ) -> cst.BaseExpression | None:
        if len(original.comparisons) != 1:
            return None
        symbol = operator_symbol(original.comparisons[0].operator)
        op = ctx.mappings.frameworks["tf"].operators.get(symbol) if symbol in _COMPARISONS else None
        left, right = original.left, original.comparisons[0].comparator
        if op is None:
            return None
        pairs = ((left, right), (right, left))
        if any(isinstance(a, cst.Integer | cst.Float) and self._mask(ctx, b, original) for a, b in pairs):
            pass  # `mask == 0` of a boolean tensor: TensorFlow cannot make 0 a bool, keras.ops compares
        elif not (known_tensor(ctx, left, original) and known_tensor(ctx, right, original)):
            return None
        elif not any(self._integers(ctx, side, original) or _casts(side) for side in (left, right)):
            return None  # no reason to think the dtypes differ: the operator reads better
        call = cst.Call(ctx.expr_for(op), [cst.Arg(updated.left), cst.Arg(updated.comparisons[0].comparator)])
        replacement = call.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        ctx.record(self.name, original, replacement)
        return replacement

    def _mask(self, ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
        """A boolean tensor; or a name the function binds only to comparisons (`mask = x > 0.5`), or
        any name not bound only to Python values, compared as a torch op's argument
        (`scores.masked_fill(mask == 0, -1e9)`: the op takes a tensor there), for which keras.ops
        compares Python values as well."""
        if bool_tensor(ctx, node, anchor):
            return True
        if not isinstance(node, cst.Name):
            return False
        if combined_mask(ctx, node, anchor):
            return True
        arg = ctx.parent(anchor)
        call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(call, cst.Call) and torch_value(ctx, call) and maybe_tensor_name(ctx, node.value, anchor)

    def _integers(self, ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
        """A torch call returning integers, or a name bound only to such calls in this function."""
        if isinstance(node, cst.Call):
            # ops with `returns: int` in the op tables, and casts to integer types (`.long()`)
            functions, methods = ctx.mappings.integer_results("torch")
            qualified = ctx.qualified_name(node.func)
            if qualified in functions:
                floats = any(isinstance(a.value, cst.Float) for a in node.args)
                return not floats and not any(a.keyword is not None and a.keyword.value == "dtype" for a in node.args)
            func = node.func
            if isinstance(func, cst.Name) and func.value in _integer_functions(ctx):
                return True  # `safe_one_hot(...)`: a function of the file returning such calls
            if qualified is None and isinstance(func, cst.Attribute) and func.attr.value in _SAME_DTYPE_METHODS:
                return self._integers(ctx, func.value, anchor)  # `y.flatten()` of an integer grid
            if qualified in _SAME_DTYPE_FUNCTIONS and node.args and node.args[0].keyword is None:
                return self._integers(ctx, node.args[0].value, anchor)  # `rearrange(powers, '... l -> ... l 1')`
            return qualified is None and isinstance(func, cst.Attribute) and func.attr.value in methods
        if isinstance(node, cst.Subscript):
            return self._integers(ctx, node.value, anchor)  # `y[:, None]`
        if isinstance(node, cst.Name):
            return self._int_name(ctx, node.value, anchor)
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            return _untyped_buffer(ctx, node, anchor)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _INTEGER_ARITHMETIC):
            # an integer tensor plus, minus, times, floor-divided by or modulo integers stays
            # integer (`self.d - 1`, `self._levels // 2`)
            sides = (node.left, node.right)
            return any(self._integers(ctx, s, anchor) for s in sides) and all(
                isinstance(s, cst.Integer) or self._integers(ctx, s, anchor) for s in sides
            )
        return False

    def _division_promotes(
        self, ctx: RuleContext, left: cst.BaseExpression, right: cst.BaseExpression, anchor: cst.CSTNode
    ) -> bool:
        """`a / b` with a tensor on one side and, on the other, something that may be an integer
        tensor: anything but a Python number."""
        return (known_tensor(ctx, left, anchor) and not self._number(ctx, right, anchor)) or (
            known_tensor(ctx, right, anchor) and not self._number(ctx, left, anchor)
        )

    def _number(self, ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
        """A Python number: a literal, a `math` call, `len`/`int`/`float`/`abs`/`min`/`max`/`round`
        of anything, a `.shape` entry or `.size()`, a parameter annotated `int` or `float`, a
        NumPy function of those or `np.pi`, or arithmetic of those."""
        if isinstance(node, cst.Integer | cst.Float):
            return True
        if isinstance(node, cst.UnaryOperation):
            return self._number(ctx, node.expression, anchor)
        if isinstance(node, cst.BinaryOperation):
            return self._number(ctx, node.left, anchor) and self._number(ctx, node.right, anchor)
        if isinstance(node, cst.Call):
            qualified = ctx.qualified_name(node.func) or ""
            if qualified.startswith("math.") or (
                isinstance(node.func, cst.Name) and node.func.value in _NUMBER_BUILTINS
            ):
                return True
            if qualified.startswith("numpy.") and node.args:
                # `np.sqrt(k.size(-1))`: a NumPy scalar, which torch (and TensorFlow's operators)
                # take as a Python number; keras.ops.true_divide would make the result float64
                return all(self._number(ctx, arg.value, anchor) for arg in node.args)
            return isinstance(node.func, cst.Attribute) and node.func.attr.value in ("size", "dim", "numel", "item")
        if isinstance(node, cst.Attribute):
            return ctx.qualified_name(node) in ("numpy.pi", "numpy.e", "numpy.inf")
        if isinstance(node, cst.Subscript):
            value = node.value
            return isinstance(value, cst.Attribute) and value.attr.value == "shape"
        if isinstance(node, cst.Name):
            return self._annotated(ctx, node, anchor, ("int", "float"))
        return False

    def _int_name(self, ctx: RuleContext, name: str, anchor: cst.CSTNode) -> bool:
        """Whether `name` holds integers where `anchor` reads it: its last binding before that
        line in the function binds a torch call returning integers (`y, x = torch.meshgrid(
        torch.arange(h), torch.arange(w))`, then `y.flatten()[:, None] * omega` in vit-pytorch's
        sincos embedding, which rebinds `y` to floats on that line)."""
        bindings = self._int_names(ctx, anchor).get(name)
        if not bindings:
            scope = _scope(ctx, anchor)
            return (
                isinstance(scope, cst.FunctionDef)
                and ctx.enclosing_function() == scope.name.value
                and name in _integer_parameters(ctx).get(scope.name.value, ())
            )
        line = ctx.position(anchor)[0]
        before = [ints for at, ints in bindings if at < line]
        return before[-1] if before else False

    def _int_names(self, ctx: RuleContext, anchor: cst.CSTNode) -> dict[str, list[tuple[int, bool]]]:
        """Name -> (line, holds integers) of each plain or unpacking assignment in the function."""
        scope = _scope(ctx, anchor)
        if not isinstance(scope, cst.FunctionDef):
            return {}
        cache = ctx.per_file("torch-int-promotion-names", dict)
        if id(scope) in cache:
            return cache[id(scope)]
        found: dict[str, list[tuple[int, bool]]] = {}
        cache[id(scope)] = found  # a binding's value may read names bound before it
        rule = self
        assigns: list[cst.Assign] = []

        class _V(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is scope

            def visit_Assign(self, node: cst.Assign) -> None:
                assigns.append(node)

        scope.visit(_V())
        for node in sorted(assigns, key=lambda n: ctx.position(n)[0]):
            line = ctx.position(node)[0]
            value = node.value
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    indexed = value
                    while isinstance(indexed, cst.Subscript):
                        indexed = indexed.value
                    if isinstance(value, cst.Subscript) and isinstance(indexed, cst.Name):
                        # `o = o[..., None]` of an integer tensor bound above (st-moe-pytorch's
                        # one-hot indices): read from the bindings found so far, in this scope
                        earlier = [held for at, held in found.get(indexed.value, []) if at < line]
                        ints = bool(earlier) and earlier[-1]
                    else:
                        bound = isinstance(value, cst.Call | cst.Subscript | cst.BinaryOperation)
                        ints = bound and rule._integers(ctx, value, node)
                    found.setdefault(target.target.value, []).append((line, ints))
                elif isinstance(target.target, cst.Tuple | cst.List):
                    grid = isinstance(value, cst.Call) and ctx.qualified_name(value.func) == "torch.meshgrid"
                    ints = grid and all(rule._integers(ctx, a.value, node) for a in value.args if a.keyword is None)
                    for element in target.target.elements:
                        if isinstance(element.value, cst.Name):
                            found.setdefault(element.value.value, []).append((line, ints))
        return found

    def _may_be_float(self, ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
        """What an integer tensor meets may hold floats unless it is a Python integer: a literal,
        a parameter annotated `int`, `len`/`int` of anything, a `.shape` entry, `.size()`. With
        anything else `keras.ops` promotes as torch does, and computes the same where both hold
        integers (`omega[None, :]`, a float tensor sliced, in vit-pytorch's sincos embedding)."""
        return self._float(ctx, node, anchor) or not self._python_int(ctx, node, anchor)

    def _python_int(self, ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.UnaryOperation):
            return self._python_int(ctx, node.expression, anchor)  # type: ignore[arg-type]
        if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, cst.Divide):
            return self._python_int(ctx, node.left, anchor) and self._python_int(ctx, node.right, anchor)
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value in ("len", "int"):
                return True
            return isinstance(node.func, cst.Attribute) and node.func.attr.value in ("size", "dim", "numel")
        if isinstance(node, cst.Subscript):
            value = node.value
            return isinstance(value, cst.Attribute) and value.attr.value == "shape"
        if isinstance(node, cst.Name):
            return self._annotated(ctx, node, anchor, ("int",)) or self._integers(ctx, node, anchor)
        return False

    def _float(self, ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
        """A float literal, or a parameter of the enclosing function annotated `float`."""
        if isinstance(node, cst.Float):
            return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.expression, cst.Float):
            return True
        if not isinstance(node, cst.Name):
            # a tensor of any dtype: keras.ops promotes an integer one with it as torch does
            return known_tensor(ctx, node, anchor)
        return self._annotated(ctx, node, anchor, ("float",)) or known_tensor(ctx, node, anchor)

    def _annotated(self, ctx: RuleContext, node: cst.Name, anchor: cst.CSTNode, types: tuple[str, ...]) -> bool:
        """A parameter of the enclosing function annotated with one of `types`."""
        scope = Where.scope_of(ctx, anchor)
        if not isinstance(scope, cst.FunctionDef):
            return False
        params = scope.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == node.value and param.annotation is not None:
                annotation = param.annotation.annotation
                return isinstance(annotation, cst.Name) and annotation.value in types
        return False


#: arithmetic whose result holds integers when its operands do
_INTEGER_ARITHMETIC = cst.Add | cst.Subtract | cst.Multiply | cst.FloorDivide | cst.Modulo
#: Tensor methods whose result has the receiver's dtype (an integer grid stays integer)
_SAME_DTYPE_METHODS = frozenset(
    {"flatten", "reshape", "view", "unsqueeze", "squeeze", "permute", "transpose", "t", "contiguous", "clone",
     "expand", "repeat", "flip"}
)  # fmt: skip
#: functions whose result has their first argument's dtype
_SAME_DTYPE_FUNCTIONS = frozenset({"einops.rearrange", "einops.repeat", "torch.flip", "torch.flatten", "torch.reshape"})
#: builtins whose result is a Python number
_NUMBER_BUILTINS = frozenset({"len", "int", "float", "abs", "min", "max", "round"})
#: torch functions building a tensor whose dtype follows the Python values given to them
_VALUE_TYPED = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor"})


#: tensor methods that change the dtype: an operand built with one may differ from the other's
_CAST_METHODS = frozenset({"double", "float", "half", "bfloat16", "int", "long", "short", "bool", "to", "type"})


def _scope(ctx: RuleContext, anchor: cst.CSTNode) -> cst.CSTNode | None:
    """The function whose bindings `anchor` reads: `Where.scope_of`, or, for a node off the path
    being visited (an earlier assignment whose value `_int_names` reads: `half = idx // 2`), the
    innermost function visited, whose body it was found in."""
    if ctx.parent(anchor) is None:
        return ctx.innermost(cst.FunctionDef)
    return Where.scope_of(ctx, anchor)


def _ast_integers(ctx: RuleContext) -> Callable[[ast.expr | None], bool]:
    """Whether an `ast` expression of the file is a torch call returning integers (or a
    subscript of one), read without the rule engine's tree: for code other than the node being
    visited."""
    from precision_transpiler.analysis.torch_models import resolve

    _, bindings = ctx.module_ast()
    functions, methods = ctx.mappings.integer_results("torch")

    def integers(node: ast.expr | None) -> bool:
        while isinstance(node, ast.Subscript):
            node = node.value
        if not isinstance(node, ast.Call):
            return False
        if resolve(node.func, bindings) in functions:
            return not any(k.arg == "dtype" for k in node.keywords)
        return isinstance(node.func, ast.Attribute) and node.func.attr in methods and not node.args

    return integers


def _integer_functions(ctx: RuleContext) -> frozenset[str]:
    """Module-level functions of the file whose every `return` is a torch call returning integers,
    a cast to an integer type or a subscript of one (mixture-of-experts' `safe_one_hot` returns
    `F.one_hot(...)[..., :n]`), read from the file's `ast`: their calls hold integers too."""

    def build() -> frozenset[str]:
        tree, _ = ctx.module_ast()
        if tree is None:
            return frozenset()
        integers = _ast_integers(ctx)
        found = set()
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                returns = [n for n in ast.walk(stmt) if isinstance(n, ast.Return)]
                if returns and all(integers(r.value) for r in returns):
                    found.add(stmt.name)
        return frozenset(found)

    return ctx.per_file("torch-int-promotion-functions", build)


def _integer_parameters(ctx: RuleContext) -> dict[str, frozenset[str]]:
    """Module-level function -> its parameters that some call in the file passes integers: a
    torch call returning them, or a name the calling function binds only to such calls
    (deformable-attention's `seq_range = torch.arange(n)`, then `normalize_grid(seq_range)`,
    whose `2.0 * arange` torch promotes). Passing a float elsewhere does no harm: keras.ops
    computes floats as the operator does."""

    def build() -> dict[str, frozenset[str]]:
        tree, _ = ctx.module_ast()
        if tree is None:
            return {}
        integers = _ast_integers(ctx)
        defs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
        found: dict[str, set[str]] = {}
        for caller in ast.walk(tree):
            if not isinstance(caller, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            held: dict[str, bool] = {}  # name -> every binding of it here holds integers
            for node in ast.walk(caller):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            held[target.id] = held.get(target.id, True) and integers(node.value)
            for call in ast.walk(caller):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in defs):
                    continue
                callee = defs[call.func.id].args
                params = [a.arg for a in (*callee.posonlyargs, *callee.args)]
                given = [
                    (params[i], a) for i, a in enumerate(call.args[: len(params)]) if not isinstance(a, ast.Starred)
                ]
                given += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
                for param, value in given:
                    if integers(value) or (isinstance(value, ast.Name) and held.get(value.id, False)):
                        found.setdefault(call.func.id, set()).add(param)
        return {name: frozenset(params) for name, params in found.items()}

    return ctx.per_file("torch-int-promotion-parameters", build)


def _shape_joined(
    ctx: RuleContext, original: cst.BinaryOperation, updated: cst.BinaryOperation
) -> cst.BinaryOperation | None:
    """`x.shape[:-1] + (-1, 2)` (llama2.c's rotary embedding): torch's shape is a tuple, so `+`
    joins tuples; TensorFlow's is a `TensorShape`, whose `+` refuses -1. The shape side becomes
    `tuple(...)`; so does a name the function binds only to a shape (vector-quantize's
    `z_shape = z.shape`, then `z_shape[:-1] + (-1,)`)."""
    if not isinstance(original.operator, cst.Add):
        return None
    sides = (original.left, original.right)
    if not any(isinstance(side, cst.Tuple) for side in sides):
        return None
    new = [updated.left, updated.right]
    changed = False
    for index, side in enumerate(sides):
        value = side.value if isinstance(side, cst.Subscript) else side
        if isinstance(value, cst.Name):
            bound = _plain_bindings(ctx, original).get(value.value, [])
            value = bound[0] if bound and all(_is_shape(b) for b in bound) else value
        if _is_shape(value):
            new[index] = cst.Call(cst.Name("tuple"), [cst.Arg(new[index])])
            changed = True
    return updated.with_changes(left=new[0], right=new[1]) if changed else None


def _is_shape(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "shape"


#: NumPy functions whose value on Python numbers is a float64 NumPy scalar
_NUMPY_FLOATS = frozenset(
    {
        "log", "log2", "log10", "log1p", "sqrt", "cbrt", "exp", "exp2", "expm1", "sin", "cos", "tan", "arcsin",
        "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "hypot", "deg2rad", "rad2deg", "radians", "degrees",
        "float64", "float32", "true_divide",
    }
)  # fmt: skip


def numpy_float(ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode, depth: int = 0) -> bool:
    """A NumPy float scalar made from numbers: `np.log(m)`, `np.sqrt(d) / 2`, or a name the
    function binds only to one (whisper's `log_timescale_increment = np.log(max_timescale) /
    (channels // 2 - 1)`). torch takes it as a Python number (float32 with an integer tensor);
    keras.ops as float64."""
    if isinstance(node, cst.UnaryOperation):
        return numpy_float(ctx, node.expression, anchor, depth)  # type: ignore[arg-type]
    if isinstance(node, cst.BinaryOperation):
        sides = (node.left, node.right)
        return any(numpy_float(ctx, side, anchor, depth) for side in sides) and not any(
            known_tensor(ctx, side, anchor) for side in sides
        )
    if isinstance(node, cst.Call):
        qualified = ctx.qualified_name(node.func) or ""
        return (
            qualified.startswith("numpy.")
            and qualified.rsplit(".", 1)[-1] in _NUMPY_FLOATS
            and not any(known_tensor(ctx, arg.value, anchor) for arg in node.args)
        )
    if isinstance(node, cst.Name) and depth < 3:
        values = _plain_bindings(ctx, anchor).get(node.value, [])
        return bool(values) and all(numpy_float(ctx, value, anchor, depth + 1) for value in values)
    return False


def complex_value(ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode, depth: int = 0) -> bool:
    """A complex value the code makes with Python's complex literals: `1j * b`, `a + 1j * b`, or a
    name the function binds only to such (gated-state-spaces' `Lambda = -a.exp() + 1j * b`).
    torch makes a complex64 tensor of it with a float32 one; TensorFlow's operators refuse to mix
    them (`Cannot convert 1j to EagerTensor of dtype float`), keras.ops promote as torch does."""
    if isinstance(node, cst.Imaginary):
        return True
    if isinstance(node, cst.UnaryOperation):
        return complex_value(ctx, node.expression, anchor, depth)  # type: ignore[arg-type]
    if isinstance(node, cst.BinaryOperation) and isinstance(
        node.operator, cst.Add | cst.Subtract | cst.Multiply | cst.Divide
    ):
        return complex_value(ctx, node.left, anchor, depth) or complex_value(ctx, node.right, anchor, depth)
    if isinstance(node, cst.Name) and depth < 3:
        values = _plain_bindings(ctx, anchor).get(node.value, [])
        return bool(values) and all(
            value is not None and complex_value(ctx, value, anchor, depth + 1) for value in values
        )
    return False


def _plain_bindings(ctx: RuleContext, anchor: cst.CSTNode) -> dict[str, list[cst.BaseExpression]]:
    """Name -> the values the function around `anchor` assigns it (single-name targets only; a
    name also bound otherwise, by a loop, an unpacking or a parameter, maps to a None entry)."""
    scope = Where.scope_of(ctx, anchor)
    if not isinstance(scope, cst.FunctionDef):
        return {}
    cache = ctx.per_file("torch-int-promotion-plain-bindings", dict)
    if id(scope) not in cache:
        found: dict[str, list] = {}
        for param in (*scope.params.posonly_params, *scope.params.params, *scope.params.kwonly_params):
            found.setdefault(param.name.value, []).append(None)

        class _V(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is scope

            def visit_Assign(self, node: cst.Assign) -> None:
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        found.setdefault(target.target.value, []).append(node.value)
                    else:
                        for name in _names_in(target.target):
                            found.setdefault(name, []).append(None)

            def visit_For(self, node: cst.For) -> None:
                for name in _names_in(node.target):
                    found.setdefault(name, []).append(None)

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                for name in _names_in(node.target):
                    found.setdefault(name, []).append(None)

        scope.visit(_V())
        cache[id(scope)] = found
    return cache[id(scope)]


def _names_in(target: cst.CSTNode) -> list[str]:
    return [n.value for n in _walk_names(target)]


def _walk_names(node: cst.CSTNode) -> list[cst.Name]:
    if isinstance(node, cst.Name):
        return [node]
    if isinstance(node, cst.Tuple | cst.List):
        return [n for element in node.elements for n in _walk_names(element.value)]
    return []


def _casts(node: cst.BaseExpression) -> bool:
    """Whether `node` contains a dtype cast (`a.double() @ a.double().t()`)."""
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            nonlocal found
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in _CAST_METHODS:
                found = True

    node.visit(_Find())
    return found


def _untyped_buffer(ctx: RuleContext, node: cst.Attribute, anchor: cst.CSTNode) -> bool:
    """`self.<name>` registered as a buffer from a value that may hold integers: built by a torch
    function that takes its dtype from Python values (`torch.tensor(shape)`, no `dtype=`, no float
    literal), directly or through another attribute of the class (`self.d_cpu`)."""
    cls: cst.CSTNode | None = anchor
    while cls is not None and not isinstance(cls, cst.ClassDef):
        cls = ctx.parent(cls)
    cls = cls or ctx.innermost(cst.ClassDef)  # an anchor off the path visited: a binding read before its use
    if cls is None:
        return False
    values = _attribute_values(cls)
    registered = values.get(("buffer", node.attr.value))
    if registered is None:
        return False
    seen: set[str] = set()

    def may_be_int(value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "self":
            name = value.attr.value
            if name in seen:
                return False
            seen.add(name)
            return any(may_be_int(v) for v in values.get(("attribute", name), ()))
        found = False

        class _Calls(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> None:
                nonlocal found
                if any(
                    a.keyword is not None and a.keyword.value == "dtype" and _integer_dtype(ctx, a.value)
                    for a in call.args
                ):
                    found = True  # `torch.zeros(1, dtype=torch.long)`: integers, whatever the function
                    return
                if ctx.qualified_name(call.func) not in _VALUE_TYPED:
                    return
                keywords = {a.keyword.value for a in call.args if a.keyword is not None}
                floats = any(isinstance(n, cst.Float) for a in call.args for n in _literals(a.value))
                found = found or ("dtype" not in keywords and not floats)

        value.visit(_Calls())
        return found

    return any(may_be_int(v) for v in registered)


def _integer_dtype(ctx: RuleContext, node: cst.BaseExpression) -> bool:
    """`torch.long`, `torch.int32`, ...: a torch integer dtype symbol."""
    entry = ctx.mappings.symbol_to_dtype.get(ctx.qualified_name(node) or "")
    return entry is not None and entry[1].startswith(("int", "uint"))


def _literals(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.List | cst.Tuple):
        return [e.value for e in node.elements]
    return [node]


def _attribute_values(cls: cst.CSTNode) -> dict[tuple[str, str], list[cst.BaseExpression]]:
    """("buffer", name) -> values given to `self.register_buffer(name, value)`, or, for a local
    name given (`_levels = torch.tensor(levels, dtype=int32)`, then `register_buffer("_levels",
    _levels)` in vector-quantize-pytorch's LatentQuantize), the values the method assigns it;
    ("attribute", name) -> values assigned to `self.<name>`, in the class's own methods."""
    found: dict[tuple[str, str], list[cst.BaseExpression]] = {}
    methods: list[cst.FunctionDef] = []

    class _V(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return node is cls

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            methods.append(node)

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            methods.pop()

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            registers = isinstance(func, cst.Attribute) and func.attr.value == "register_buffer"
            bound = bind_register_buffer(node.args) if registers else None
            if bound is not None and isinstance(bound[0], cst.SimpleString):
                name = bound[0].evaluated_value
                if isinstance(name, str):
                    value = bound[1]
                    values = [value]
                    if isinstance(value, cst.Name) and methods:
                        values = _local_values(methods[-1], value.value) or values
                    found.setdefault(("buffer", name), []).extend(values)

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                    found.setdefault(("attribute", t.attr.value), []).append(node.value)

    cls.visit(_V())
    return found


def _local_values(function: cst.FunctionDef, name: str) -> list[cst.BaseExpression]:
    """The values `function` assigns to the plain name `name` (not in functions nested in it)."""
    values: list[cst.BaseExpression] = []

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Assign(self, node: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
                values.append(node.value)

    function.visit(_V())
    return values


def _bitwise_of_variables(
    ctx: RuleContext, original: cst.BinaryOperation, updated: cst.BinaryOperation
) -> cst.BaseExpression | None:
    """`codes & self.mask` with a parameter or buffer, a Keras variable: the variable's `&`, `|`
    and `^` are logical (`int_tensor & variable` gives booleans), where torch's are bitwise on
    integers, and TensorFlow's refuse integers of two widths (vector-quantize-pytorch's LFQ bit
    masks: an int32 code against an int64 buffer). So the operation goes through the runtime's
    `torch_and`/`torch_or`/`torch_xor`: logical on booleans, bitwise on the promoted integers."""
    key = ctx.enclosing_function()
    owner = key.split(".")[0] if key and "." in key else None
    if owner is None:
        return None
    analysis = analysis_for(ctx)
    names = analysis.params.get(owner, set()) | analysis.buffers.get(owner, set())

    def variable(node: cst.BaseExpression) -> bool:
        return (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
            and node.attr.value in names
        )

    if not (variable(original.left) or variable(original.right)):
        return None
    function = {cst.BitAnd: "torch_and", cst.BitOr: "torch_or", cst.BitXor: "torch_xor"}[type(original.operator)]
    name = runtime_name("tf", "tensor", function)
    call = cst.Call(ctx.expr_for(name), [cst.Arg(updated.left), cst.Arg(updated.right)])
    replacement = call.with_changes(lpar=updated.lpar, rpar=updated.rpar)
    ctx.record(TorchIntPromotionTf.name, original, replacement)
    return replacement
