"""Integer tensors meeting floats, torch -> Keras (`torch.arange(n) * w` -> `keras.ops.multiply(...)`).

torch promotes an integer tensor combined with a Python float to float32 (`torch.arange(depth) *
w_a + w_0` in torchvision's RegNet), and true division of integers is float32; TensorFlow's
operators do neither: `int64_tensor * 27.89` raises "Cannot convert 27.89 to EagerTensor of dtype
int64", and `int64_tensor / 2` is float64. `keras.ops.add`/`subtract`/`multiply`/`true_divide`
promote as torch does (an int64 tensor times a Python float is float32, times a Python int stays
int64). So for the Keras target this rule rewrites `a op b` into `keras.ops.<op>(a, b)` when one
operand is known to hold integers (a torch call that returns them: `torch.arange` without float
arguments, `argmax`, `.long()`, ...; or a name the function binds only to such calls) and the
other is a float (a float literal, a parameter annotated `float`), or the operator is `/`.
Everything else keeps its operator: a float tensor times a float needs nothing.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rewrite.tensor_inference import Where
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.syntax import operator_symbol

#: the operators rewritten; the function applying each with torch's promotion is the Keras
#: framework's `operators` entry in mappings/frameworks.yaml
_OPERATORS = ("+", "-", "*", "/")


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
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target == "tf"

    def leave_BinaryOperation(
        self, ctx: RuleContext, original: cst.BinaryOperation, updated: cst.BinaryOperation
    ) -> cst.BaseExpression | None:
        symbol = operator_symbol(original.operator)
        op = ctx.mappings.frameworks["tf"].operators.get(symbol) if symbol in _OPERATORS else None
        if op is None:
            return None
        left, right = original.left, original.right
        divide = isinstance(original.operator, cst.Divide)
        if not (
            (self._integers(ctx, left, original) and (divide or self._float(ctx, right, original)))
            or (self._integers(ctx, right, original) and (divide or self._float(ctx, left, original)))
        ):
            return None
        call = cst.Call(ctx.expr_for(op), [cst.Arg(updated.left), cst.Arg(updated.right)])
        replacement = call.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        ctx.record(self.name, original, replacement)
        return replacement

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
            return qualified is None and isinstance(func, cst.Attribute) and func.attr.value in methods
        if isinstance(node, cst.Name):
            return self._int_names(ctx, anchor).get(node.value, False)
        return False

    def _int_names(self, ctx: RuleContext, anchor: cst.CSTNode) -> dict[str, bool]:
        scope = Where.scope_of(ctx, anchor)
        if not isinstance(scope, cst.FunctionDef):
            return {}
        cache = ctx.per_file("torch-int-promotion-names", dict)
        if id(scope) in cache:
            return cache[id(scope)]
        found: dict[str, bool] = {}
        rule = self

        class _V(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is scope

            def visit_Assign(self, node: cst.Assign) -> None:
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        name = target.target.value
                        ints = isinstance(node.value, cst.Call) and rule._integers(ctx, node.value, anchor)
                        found[name] = found.get(name, True) and ints

        scope.visit(_V())
        cache[id(scope)] = found
        return found

    def _float(self, ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
        """A float literal, or a parameter of the enclosing function annotated `float`."""
        if isinstance(node, cst.Float):
            return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.expression, cst.Float):
            return True
        if not isinstance(node, cst.Name):
            return False
        scope = Where.scope_of(ctx, anchor)
        if not isinstance(scope, cst.FunctionDef):
            return False
        params = scope.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == node.value and param.annotation is not None:
                annotation = param.annotation.annotation
                return isinstance(annotation, cst.Name) and annotation.value == "float"
        return False
