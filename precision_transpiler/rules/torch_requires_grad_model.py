"""`p.requires_grad = False` / `p.requires_grad_(False)` on parameters and modules -> the runtime.

Fine-tuning code freezes part of a model while building it: `for p in self.backbone.parameters():
p.requires_grad = False`. Converted, `p` is an nnx Param (which refuses new attributes) or a Keras
variable (which has no `requires_grad_`), so the line failed when the model was built. Here an
assignment to `<x>.requires_grad` and a `<x>.requires_grad_(...)` call the op tables left alone
(its receiver is not known to be a tensor: `x.requires_grad_()` of a tensor is the tensor, see
`set_requires_grad` in mappings/ops/tensor_ops.yaml) become `torch_requires_grad_(x, flag)` of
runtime/{flax,keras}/module_api.py: a converted module's own `requires_grad_`, Keras' `trainable`
flag of a layer or variable, or nothing on Flax, where `nnx.grad` is told what to differentiate.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_name


@register
class TorchRequiresGrad(Rule):
    name = "torch-requires-grad"
    summary = "p.requires_grad = flag / p.requires_grad_(flag) on parameters and modules call the runtime."
    EXAMPLES = (
        Example(
            "import torch.nn as nn\n\n\ndef freeze(backbone):\n    for p in backbone.parameters():\n"
            "        p.requires_grad = False\n    backbone.requires_grad_(False)\n",
            "import precision_transpiler\n\n\ndef freeze(backbone):\n"
            "    for p in precision_transpiler.runtime.keras.module_api.parameters(backbone):\n"
            "        precision_transpiler.runtime.keras.module_api.torch_requires_grad_(p, False)\n"
            "    precision_transpiler.runtime.keras.module_api.torch_requires_grad_(backbone, False)\n",
            to="tf",
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Assign(
        self, ctx: RuleContext, original: cst.Assign, updated: cst.Assign
    ) -> cst.BaseSmallStatement | None:
        if len(original.targets) != 1:
            return None
        target = updated.targets[0].target
        if not (isinstance(target, cst.Attribute) and target.attr.value == "requires_grad"):
            return None
        call = self._call(ctx, target.value, [cst.Arg(updated.value)])
        new = cst.Expr(call, semicolon=updated.semicolon)
        ctx.record(self.name, original, new)
        return new

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        func = updated.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_"):
            return None
        new = self._call(ctx, func.value, [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args])
        new = new.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        ctx.record(self.name, original, new)
        return new

    def _call(self, ctx: RuleContext, receiver: cst.BaseExpression, args: list[cst.Arg]) -> cst.Call:
        function = ctx.expr_for(runtime_name(ctx.target, "module_api", "torch_requires_grad_"))
        return cst.Call(function, [cst.Arg(receiver), *args])
