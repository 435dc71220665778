"""`x.dtype is torch.float16` -> `x.dtype == jnp.float16`.

torch dtypes are singletons, so `is` works there; JAX/NumPy dtypes (`np.dtype` vs scalar
types) and TensorFlow DTypes are not, and `is` would silently be False. Identity comparisons
with a dtype symbol become equality when the target is not torch.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register


@register
class DtypeIdentity(Rule):
    name = "dtype-identity"
    summary = "Turn `is`/`is not` comparisons with dtypes into `==`/`!=` outside torch."
    EXAMPLES = (
        Example(
            "import torch\nif x.dtype is torch.float16:\n    pass\n",
            "import jax.numpy as jnp\nif x.dtype == jnp.float16:\n    pass\n",
            to="jax",
        ),
        Example(
            "import torch\nok = x.dtype is not torch.bfloat16\n",
            "import tensorflow as tf\nok = x.dtype != tf.bfloat16\n",
            to="tf",
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.target != "torch"

    def leave_Comparison(
        self, ctx: RuleContext, original: cst.Comparison, updated: cst.Comparison
    ) -> cst.Comparison | None:
        changed = False
        targets = list(updated.comparisons)
        left = original.left
        for i, (orig_target, new_target) in enumerate(zip(original.comparisons, targets, strict=True)):
            right = orig_target.comparator
            op = new_target.operator
            if isinstance(op, cst.Is | cst.IsNot) and (
                ctx.dtype_of(left) is not None or ctx.dtype_of(right) is not None
            ):
                new_op: cst.BaseCompOp
                if isinstance(op, cst.Is):
                    new_op = cst.Equal(whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after)
                else:
                    new_op = cst.NotEqual(whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after)
                targets[i] = new_target.with_changes(operator=new_op)
                changed = True
            left = right
        if not changed:
            return None
        replacement = updated.with_changes(comparisons=targets)
        ctx.record(self.name, original, replacement)
        return replacement
