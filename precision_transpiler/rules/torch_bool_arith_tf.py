"""Arithmetic with a boolean tensor comparison, torch -> Keras (`x *= a > b` -> `keras.ops.multiply`).

torch promotes a bool tensor in arithmetic (`float_mask * (arange > pos)` is float, as in NumPy
and JAX), and transformers builds its causal masks that way (`causal_mask *= torch.arange(n) >
cache_position.reshape(-1, 1)` in OPT, Bart, GPT-Neo and many more). TensorFlow's operators do
not promote: `float_tensor * bool_tensor` silently falls back to the bool operand's `__rmul__`,
which casts the float mask to bool, and the next addition fails (or, worse, a bool mask flows on).
`keras.ops.multiply`/`add`/`subtract` promote as torch does (float32 * bool -> float32, and a
Python number stays weakly typed). So for the Keras target this rule rewrites `x op= <comparison>`
(op `*`, `+`, `-`; `x` a name or attribute) into `x = keras.ops.<op>(x, <comparison>)`, and the
binary operation `y op <comparison>` (either side) into `keras.ops.<op>(y, <comparison>)`, when the
comparison has an operand known to be a tensor (a torch call, a name bound only to tensors, a
registered buffer or parameter). Masks count as comparisons: `&`, `|`, `^` and `~` of them, a name
bound only to them (`is_max = a & (m > t)`; `m * is_max`) and a call of a function of the same
file that returns only them (`keep = _beats(m, n) & _beats(m, p)`). A comparison of operands of
unknown kind meeting a float literal is the idiom that turns a mask into floats (`(group_matrix >
0) + 0.` in TabNet) and is promoted too: on Python values `keras.ops.add` gives the same number,
as a 0-d tensor. Other comparisons of plain Python values are left alone.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.analysis.masks import bool_tensor
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.syntax import operator_symbol

#: the operators rewritten; the function applying each with torch's promotion is the Keras
#: framework's `operators` entry in mappings/frameworks.yaml
_OPERATORS = ("*", "+", "-")


def _promoting(ctx: RuleContext, operator: cst.BaseBinaryOp | cst.BaseAugOp) -> str | None:
    symbol = operator_symbol(operator)
    return ctx.mappings.frameworks["tf"].operators.get(symbol) if symbol in _OPERATORS else None


def _mask_to_float(left: cst.BaseExpression, right: cst.BaseExpression) -> bool:
    """`(a > b) + 0.` or `1.0 * (a > b)`: a comparison meeting a float literal."""
    return (isinstance(left, cst.Comparison) and isinstance(right, cst.Float)) or (
        isinstance(right, cst.Comparison) and isinstance(left, cst.Float)
    )


@register
class TorchBoolArithTf(Rule):
    name = "torch-bool-arith-tf"
    summary = "Promote boolean tensor comparisons in arithmetic (x *= a > b) as torch does, with keras.ops."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef f(mask: torch.Tensor, pos: torch.Tensor, n: int):\n"
            "    mask *= pos > 0\n    return mask + (pos > 1), n * (n > 1)\n",
            "import tensorflow as tf\nimport keras\n\n\ndef f(mask: tf.Tensor, pos: tf.Tensor, n: int):\n"
            "    mask = keras.ops.multiply(mask, pos > 0)\n    return keras.ops.add(mask, (pos > 1)), n * (n > 1)\n",
            to="tf",
        ),
        Example(
            "import torch\n\n\ndef _beats(m: torch.Tensor, n: torch.Tensor):\n    return (m > n) | (m == 0)\n\n\n"
            "def nms(m: torch.Tensor, n: torch.Tensor):\n    keep = _beats(m, n) & ~(m < 0.1)\n    return m * keep\n",
            "import tensorflow as tf\nimport keras\n\n\ndef _beats(m: tf.Tensor, n: tf.Tensor):\n"
            "    return (m > n) | (m == 0)\n\n\n"
            "def nms(m: tf.Tensor, n: tf.Tensor):\n    keep = _beats(m, n) & ~(m < 0.1)\n"
            "    return keras.ops.multiply(m, keep)\n",
            to="tf",
        ),
        Example(
            "import torch\n\n\ndef as_float(m):\n    return (m > 0) + 0.0, m + 0.0\n",
            "import keras\n\n\ndef as_float(m):\n    return keras.ops.add((m > 0), 0.0), m + 0.0\n",
            to="tf",
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target == "tf"

    def leave_AugAssign(self, ctx: RuleContext, original: cst.AugAssign, updated: cst.AugAssign) -> cst.Assign | None:
        op = _promoting(ctx, original.operator)
        if op is None or not isinstance(original.target, cst.Name | cst.Attribute):
            return None
        if not self._tensor_comparison(ctx, original.value, original):
            return None
        call = cst.Call(ctx.expr_for(op), [cst.Arg(updated.target), cst.Arg(updated.value)])  # type: ignore[arg-type]
        replacement = cst.Assign([cst.AssignTarget(updated.target)], call)  # type: ignore[arg-type]
        ctx.record(self.name, original, replacement)
        return replacement

    def leave_BinaryOperation(
        self, ctx: RuleContext, original: cst.BinaryOperation, updated: cst.BinaryOperation
    ) -> cst.BaseExpression | None:
        op = _promoting(ctx, original.operator)
        if op is None:
            return None
        sides = (original.left, original.right)
        if not any(self._tensor_comparison(ctx, side, original) for side in sides) and not _mask_to_float(*sides):
            return None
        call = cst.Call(ctx.expr_for(op), [cst.Arg(updated.left), cst.Arg(updated.right)])
        replacement = call.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        ctx.record(self.name, original, replacement)
        return replacement

    def _tensor_comparison(self, ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
        """A boolean tensor: a comparison (parenthesised or not) with an operand known to be a
        tensor, a mask combined from such with `&`/`|`/`^`/`~`, a name bound only to one, or a
        call of a function of the file that returns one."""
        return bool_tensor(ctx, node, anchor)
