"""torch feature checks answered for the converted code (`hasattr(torch, "compiler")` -> `True`).

Library code tests what the installed torch offers before it uses it: timm's
`_has_silu = 'silu' in dir(torch.nn.functional)` and `hasattr(torch, 'compiler') and
hasattr(torch.compiler, 'is_exporting')`. Converted, such a check would still need torch (and is
reported unsupported). What it asks of the converted code is whether the name converts: so
`hasattr(<torch module>, "name")` and `"name" in dir(<torch module>)` (and `not in`) become the
literal answer: `True` where the mapping tables convert `module.name` to the target (a mapped
function, layer or symbol, or a module above one), `False` otherwise, which takes the code's own
fallback (timm's hand-written activations, no `is_exporting` call).
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.syntax import all_nodes


@register
class TorchFeatureChecks(Rule):
    name = "torch-feature-checks"
    summary = "Answer hasattr(torch..., name) / name in dir(torch...) for what the converted code offers."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef f(x: torch.Tensor):\n    has_silu = 'silu' in dir(torch.nn.functional)\n"
            "    return x if hasattr(torch.compiler, 'no_such_thing') else x * has_silu\n",
            "import jax\n\n\ndef f(x: jax.Array):\n    has_silu = True\n    return x if False else x * has_silu\n",
            to="jax",
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        if not (isinstance(original.func, cst.Name) and original.func.value == "hasattr" and len(original.args) == 2):
            return None
        answer = self._converts(ctx, original.args[0].value, original.args[1].value)
        if answer is None:
            return None
        return self._literal(ctx, original, answer)

    def leave_Comparison(
        self, ctx: RuleContext, original: cst.Comparison, updated: cst.Comparison
    ) -> cst.BaseExpression | None:
        if len(original.comparisons) != 1:
            return None
        target = original.comparisons[0]
        listing = target.comparator
        if not (
            isinstance(target.operator, cst.In | cst.NotIn)
            and isinstance(listing, cst.Call)
            and isinstance(listing.func, cst.Name)
            and listing.func.value == "dir"
            and len(listing.args) == 1
        ):
            return None
        answer = self._converts(ctx, listing.args[0].value, original.left)
        if answer is None:
            return None
        return self._literal(ctx, original, answer == isinstance(target.operator, cst.In))

    def _converts(self, ctx: RuleContext, module: cst.BaseExpression, name: cst.BaseExpression) -> bool | None:
        """Whether `module.name` converts; None when `module` is no torch module or `name` no string."""
        qualified = ctx.qualified_name(module)
        if qualified is None or ctx.mappings.framework_of(qualified) != "torch":
            return None
        if not isinstance(name, cst.SimpleString) or not isinstance(name.evaluated_value, str):
            return None
        return f"{qualified}.{name.evaluated_value}" in ctx.mappings.converted_symbols("torch", ctx.target)

    def _literal(self, ctx: RuleContext, original: cst.BaseExpression, answer: bool) -> cst.Name:
        ctx.consume(all_nodes(original))  # the torch module named in the check is answered, not left to report
        replacement = cst.Name("True" if answer else "False", lpar=original.lpar, rpar=original.rpar)
        ctx.record(self.name, original, replacement)
        return replacement
