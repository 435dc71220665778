"""String dtypes in `dtype=` arguments: `jnp.zeros(3, dtype="bfloat16")` -> `dtype=torch.bfloat16`.

torch takes no dtype strings, so converting to torch turns them into symbols; other targets
keep a string but in the target's canonical spelling, because spellings mean different things
(NumPy's `"float"` is float64, torch's `torch.float` is float32). Keras dtype-policy strings
(`"mixed_bfloat16"`) have no dtype-level meaning outside Keras and are reported.
Only arguments of framework calls are touched; user functions keep their own conventions.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext, string_value
from precision_transpiler.rules.base import Example, Rule, register

_KEYWORDS = frozenset({"dtype", "param_dtype", "compute_dtype"})


@register
class DtypeString(Rule):
    name = "dtype-string"
    summary = "Convert string dtypes in dtype= arguments of framework calls."
    EXAMPLES = (
        Example(
            'import jax.numpy as jnp\nx = jnp.zeros(3, dtype="bfloat16")\n',
            "import jax.numpy as jnp\nimport torch\n\n"
            "# ptranspile: unsupported: jax.numpy.zeros has no mapping to torch\n"
            "x = jnp.zeros(3, dtype=torch.bfloat16)\n",
            to="torch",
            diagnostics=("jax.numpy.zeros has no mapping to torch",),
        ),
        Example(
            'import numpy as np\na = np.asarray([1], dtype="float")\n',
            'import jax.numpy as jnp\na = jnp.asarray([1], dtype="float64")\n',
            to="jax",
        ),
    )

    def leave_SimpleString(
        self, ctx: RuleContext, original: cst.SimpleString, updated: cst.SimpleString
    ) -> cst.BaseExpression | None:
        text = string_value(original)
        if text is None:
            return None
        arg = ctx.parent(original)
        if not isinstance(arg, cst.Arg) or arg.keyword is None or arg.keyword.value not in _KEYWORDS:
            return None
        call = ctx.parent(arg)
        if not isinstance(call, cst.Call) or ctx.framework_of(call.func) is None:
            return None
        if text in ctx.mappings.keras_policies and ctx.source == "tf" and ctx.target != "tf":
            if ctx.mappings.string_to_dtype("tf", text) is None:
                ctx.unsupported(
                    original,
                    f"Keras dtype policy {text!r} has no dtype-level equivalent in {ctx.target}; "
                    "use a precision policy (--policy)",
                    "unsupported-dtype-policy",
                )
                return None
        value = ctx.convert_dtype_string(original)
        if value is None or value is original:
            return None
        ctx.record(self.name, original, value)
        return value
