"""torch symbols without a counterpart left in annotations -> `typing.Any`.

A signature annotates what it takes with torch types the tables do not map
(vector-quantize-pytorch's `in_place_codebook_optimizer: Callable[..., Optimizer] = None`, with
`from torch.optim import Optimizer`). Python evaluates a function's annotations when it defines
the function, so that one name keeps `from torch.optim import Optimizer` in the converted module,
which then loads only where torch is installed, for a hint. Once the other rules ran, such a
symbol still names torch: in an annotation (of a parameter, a return or a variable) it becomes
`typing.Any`, said with a note instead of the `unsupported` report, and the import goes when
nothing else uses it. Annotations the tables map (`torch.Tensor` -> the target's array type) are
converted before this rule sees them.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.syntax import all_nodes


@register
class TorchAnnotations(Rule):
    name = "torch-annotations"
    summary = "torch symbols without a counterpart in annotations become typing.Any."
    EXAMPLES = (
        Example(
            "from typing import Callable\n\nfrom torch.optim import Optimizer\n\n\n"
            "def make(opt: Callable[..., Optimizer] = None):\n    return opt\n",
            "from typing import Callable\n\nimport typing\n\n\n"
            "def make(opt: Callable[..., typing.Any] = None):\n    return opt\n",
            to="jax",
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Annotation(
        self, ctx: RuleContext, original: cst.Annotation, updated: cst.Annotation
    ) -> cst.Annotation | None:
        inner = {
            id(node.value) for node in all_nodes(updated.annotation) if isinstance(node, cst.Attribute)
        }  # `torch.optim` inside `torch.optim.Optimizer`: the whole name is the symbol
        left = [node for node in all_nodes(updated.annotation) if id(node) not in inner and _torch_symbol(ctx, node)]
        if not left:
            return None
        replacer = _Replace(ctx, {id(node) for node in left})
        expression = updated.annotation.visit(replacer)
        new = updated.with_changes(annotation=expression)
        ctx.consume(all_nodes(original.annotation))
        codes = {ctx.code(node) for node in left}
        names = ", ".join(sorted(c for c in codes if not any(o.startswith(c + ".") for o in codes)))
        ctx.diagnose(
            original,
            "note",
            "annotation-any",
            f"{names} in an annotation has no counterpart in the target: annotated typing.Any, so the "
            "converted module does not import torch to define the function",
        )
        ctx.record(self.name, original.annotation, expression)  # an Annotation alone has no indicator to print
        return new


def _torch_symbol(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """A dotted name of the original tree naming a torch symbol no table converts (a layer
    class, `nn.Module` or a mapped symbol is left to the stages that convert it)."""
    if not isinstance(node, cst.Name | cst.Attribute):
        return False
    qualified = ctx.qualified_name(node)
    if qualified is None or qualified.split(".")[0] != "torch":
        return False
    mappings = ctx.mappings
    if qualified in mappings.converted_symbols("torch", ctx.target):
        return False
    framework = mappings.frameworks.get("torch")
    return not (framework is not None and (framework.is_module_base(qualified) or framework.is_layer_class(qualified)))


class _Replace(cst.CSTTransformer):
    def __init__(self, ctx: RuleContext, targets: set[int]) -> None:
        super().__init__()
        self._ctx = ctx
        self._targets = targets

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        if id(original) in self._targets:
            return self._ctx.expr_for("typing.Any")
        return updated
