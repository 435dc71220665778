"""`a @ b`, torch -> Keras (`x @ self.w` -> `keras.ops.matmul(x, self.w)`).

torch's `@` is `torch.matmul`: a 1-d operand is a vector (`hidden @ self.beta` with a `(dim,)`
parameter, hyper-connection code), batch dimensions broadcast, and it promotes mixed dtypes.
TensorFlow's `@` is `tf.matmul`, which refuses a 1-d operand ("In[1] ndims must be >= 2") and
mixed dtypes, and the rank of an operand is seldom known while converting. `keras.ops.matmul`
follows NumPy's rules, which are torch's, so every `@` of the Keras target becomes it (the
framework's `operators` entry in mappings/frameworks.yaml). JAX's `@` is `jnp.matmul` already.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register


@register
class TorchMatmulTf(Rule):
    name = "torch-matmul-tf"
    summary = "a @ b -> keras.ops.matmul(a, b): torch's matmul takes vectors, TensorFlow's @ does not."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef mix(h: torch.Tensor, beta: torch.Tensor):\n    return h @ beta\n",
            "import tensorflow as tf\nimport keras\n\n\ndef mix(h: tf.Tensor, beta: tf.Tensor):\n"
            "    return keras.ops.matmul(h, beta)\n",
            to="tf",
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target == "tf"

    def leave_BinaryOperation(
        self, ctx: RuleContext, original: cst.BinaryOperation, updated: cst.BinaryOperation
    ) -> cst.BaseExpression | None:
        if not isinstance(original.operator, cst.MatrixMultiply):
            return None
        op = ctx.mappings.frameworks["tf"].operators.get("@")
        if op is None:
            return None
        # (a call needs no parentheses of its own: `(a @ b).sum()` -> `keras.ops.matmul(a, b).sum()`)
        new = cst.Call(ctx.expr_for(op), [cst.Arg(updated.left), cst.Arg(updated.right)])
        ctx.record(self.name, original, new)
        return new
