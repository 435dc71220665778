"""`p.data = value`, torch -> Flax, Keras: set the parameter's value.

torch code replaces a parameter's or buffer's values through `.data` (normflows' ActNorm
initialises its scale from the first batch: `self.s.data = -torch.log(z.std(...))`). An nnx
Variable refuses a `data` attribute, and on a Keras variable the assignment only adds an
attribute, leaving the values as they were: a wrong result without an error. So the statement
becomes `p.value = value` (nnx) or `p.assign(value)` (Keras). So does a new value for a
registered buffer outside the constructor (`self.done = torch.tensor(1.0)` in `forward`), which
would replace the variable by a plain array.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.analysis.torch_models import analysis_for
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register

_SOURCE = "import torch\n\n\ndef reset(p, z):\n    p.data = torch.log(z)\n"


@register
class TorchDataAssign(Rule):
    name = "torch-data-assign"
    summary = "Turn `p.data = value` into setting the nnx Variable's value or assigning the Keras variable."
    EXAMPLES = (
        Example(_SOURCE, "import jax.numpy as jnp\n\n\ndef reset(p, z):\n    p.value = jnp.log(z)\n", to="jax"),
        Example(_SOURCE, "import keras\n\n\ndef reset(p, z):\n    p.assign(keras.ops.log(z))\n", to="tf"),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_SimpleStatementLine(
        self, ctx: RuleContext, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | None:
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.Assign):
            return None
        assign = updated.body[0]
        if len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        if not isinstance(target, cst.Attribute):
            return None
        if target.attr.value != "data":
            if not _buffer_outside_constructor(ctx, target):
                return None
            target = cst.Attribute(target, cst.Name("data"))  # handled as `self.buf.data = value`
        elif isinstance(target.value, cst.Name) and target.value.value == "self":
            return None  # `self.data = 2.0`: a module attribute of that name
        if ctx.target == "jax":
            new_target = target.with_changes(attr=cst.Name("value"))
            new = updated.with_changes(body=[assign.with_changes(targets=[cst.AssignTarget(new_target)])])
        else:
            call = cst.Call(func=cst.Attribute(target.value, cst.Name("assign")), args=[cst.Arg(assign.value)])
            new = updated.with_changes(body=[cst.Expr(call)])
        ctx.record(self.name, original, new)
        return new


def _buffer_outside_constructor(ctx: RuleContext, target: cst.Attribute) -> bool:
    """`self.<registered buffer>` assigned in a method other than `__init__`."""
    key = ctx.enclosing_function()
    if key is None or "." not in key or key.endswith(".__init__"):
        return False
    owner = key.split(".")[0]
    return (
        isinstance(target.value, cst.Name)
        and target.value.value == "self"
        and target.attr.value in analysis_for(ctx).buffers.get(owner, ())
    )
