"""Dtype symbols: `torch.half` -> `jnp.float16`, `tf.dtypes.bfloat16` -> `torch.bfloat16`, ...

Any Name or dotted name that resolves (through the file's imports, aliases included) to a dtype
of the source framework is replaced by the target's first spelling of the same canonical dtype
(mappings/dtypes.yaml). A local variable that shadows a framework name does not resolve to an
import and is left alone. A torch dtype no canonical dtype stands for (`torch.complex32`, the
table's `without_equivalent`) becomes the runtime's placeholder on JAX and Keras, with a warning:
kornia's `dtype not in (torch.float16, ..., torch.complex32)` keeps torch's answer instead of
needing torch where it runs.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register


@register
class DtypeSymbol(Rule):
    name = "dtype-symbol"
    summary = "Rename dtype symbols to the target framework's spelling."
    EXAMPLES = (
        Example("import torch\nx = torch.half\n", "import jax.numpy as jnp\nx = jnp.float16\n", to="jax"),
        Example(
            "import torch as t\ny = t.zeros(2).to(t.bfloat16)\n",
            None,  # checked in tests with the op rule; here only the symbol matters
            to="torch",
        ),
        Example(
            "from tensorflow import dtypes\nd = dtypes.bfloat16\n",
            "import torch\nd = torch.bfloat16\n",
            to="torch",
        ),
        Example(
            "from torch import float16 as h\nimport numpy as np\nz = h\n",
            "import numpy as np\nz = np.float16\n",
            to="numpy",
        ),
        Example(
            "import torch\ndef f(torch):\n    return torch.half\n",
            None,
            to="jax",
        ),
        Example(
            "import jax.numpy as jnp\nw = jnp.bfloat16\n",
            "import ml_dtypes\nw = ml_dtypes.bfloat16\n",
            to="numpy",
        ),
    )

    def leave_Name(self, ctx: RuleContext, original: cst.Name, updated: cst.Name) -> cst.BaseExpression | None:
        return self._convert(ctx, original)

    def leave_Attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        return self._convert(ctx, original)

    def _convert(self, ctx: RuleContext, original: cst.Name | cst.Attribute) -> cst.BaseExpression | None:
        qualified = ctx.qualified_name(original)
        if qualified is None:
            return None
        hit = ctx.mappings.symbol_to_dtype.get(qualified)
        if hit is None and qualified in ctx.mappings.dtype_without_equivalent.get(ctx.source or "", ()):
            return self._placeholder(ctx, original, qualified)
        if hit is None or hit[0] != ctx.source or not ctx.is_outermost_name(original):
            return None
        parent = ctx.parent(original)
        if isinstance(parent, cst.Call) and parent.func is original and ctx.target in ("torch", "tf"):
            return None  # `np.float32(3)` builds a scalar; torch/tf dtypes are not callable
        symbol = ctx.mappings.dtype_symbol(ctx.target, hit[1])
        if symbol is None:
            return None  # the engine reports the symbol as unsupported
        ctx.warn_if_x64(hit[1], original)
        replacement = ctx.expr_for(symbol)
        replacement = replacement.with_changes(lpar=original.lpar, rpar=original.rpar)
        ctx.record(self.name, original, replacement)
        return replacement

    def _placeholder(self, ctx: RuleContext, original: cst.Name | cst.Attribute, qualified: str) -> cst.Call | None:
        if ctx.target not in ("jax", "tf") or not ctx.is_outermost_name(original):
            return None  # the engine reports the symbol as unsupported
        name = qualified.rsplit(".", 1)[1]
        ctx.diagnose(
            original,
            "warning",
            "dtype-without-equivalent",
            f"{qualified} has no {ctx.target} counterpart: the converted code names it with a placeholder "
            "that equals only itself (comparisons and membership tests keep torch's answer; "
            "allocating with it fails)",
        )
        placeholder = ctx.expr_for("precision_transpiler.runtime.dtypes.TorchOnlyDtype")
        replacement = cst.Call(
            placeholder, [cst.Arg(cst.SimpleString(f'"{name}"'))], lpar=original.lpar, rpar=original.rpar
        )
        ctx.record(self.name, original, replacement)
        return replacement
