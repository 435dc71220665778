"""Model-zoo code dropped when a torch model file is converted to another framework.

torchvision-style files carry a weights registry (`class ResNet18_Weights(WeightsEnum)`),
registration decorators (`@register_model()`), usage logging (`_log_api_usage_once(self)`) and
pretrained-weights plumbing (`weights = ResNet18_Weights.verify(weights)`). None of it means
anything in the target and all of it imports torch, so it is removed, each time with a note; the
names come from the `zoo:` section of mappings/layers/torch_nn.yaml. Imports left unused are
removed afterwards (convert/cleanup.py).
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.syntax import all_nodes, dotted_name


def _last(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Call):
        node = node.func
    text = dotted_name(node)
    return text.rsplit(".", 1)[-1] if text else None


def _names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(_V())
    return found


@register
class TorchZoo(Rule):
    name = "torch-zoo"
    summary = "Drop model-zoo code (weights registries, registration decorators, usage logging)."
    EXAMPLES = (
        Example(
            "import torch.nn as nn\nfrom ._api import register_model, WeightsEnum\n\n\n"
            "class Net_Weights(WeightsEnum):\n    pass\n\n\n@register_model()\ndef net(weights=None):\n"
            "    weights = Net_Weights.verify(weights)\n    return nn.Identity()\n",
            None,  # checked in tests/e2e/test_torch_to_flax.py (needs the shims)
            to="jax",
            diagnostics=("dropped",),
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf") and bool(ctx.mappings.zoo)

    def _dropped_classes(self, ctx: RuleContext) -> set[str]:
        def build() -> set[str]:
            tree, _ = ctx.module_ast()
            bases = set(ctx.mappings.zoo.get("bases", ()))
            import ast

            out: set[str] = set()
            for node in getattr(tree, "body", []):
                if isinstance(node, ast.ClassDef):
                    for base in node.bases:
                        text = ast.unparse(base).rsplit(".", 1)[-1]
                        if text in bases:
                            out.add(node.name)
            return out

        return ctx.per_file("torch-zoo-classes", build)

    def _zoo_names(self, ctx: RuleContext) -> set[str]:
        return self._dropped_classes(ctx) | set(ctx.mappings.zoo.get("names", ()))

    def leave_ClassDef(
        self, ctx: RuleContext, original: cst.ClassDef, updated: cst.ClassDef
    ) -> cst.RemovalSentinel | None:
        if original.name.value not in self._dropped_classes(ctx):
            return None
        ctx.diagnose(
            original, "note", "zoo-dropped", f"class {original.name.value} dropped: a model-zoo weights registry"
        )
        ctx.retract_under(original)
        ctx.consume(all_nodes(original))
        return cst.RemovalSentinel.REMOVE

    def leave_Decorator(
        self, ctx: RuleContext, original: cst.Decorator, updated: cst.Decorator
    ) -> cst.RemovalSentinel | None:
        decorators = set(ctx.mappings.zoo.get("decorators", ()))
        func = original.decorator.func if isinstance(original.decorator, cst.Call) else original.decorator
        qualified = ctx.qualified_name(func) if isinstance(func, cst.Name | cst.Attribute) else None
        if _last(original.decorator) not in decorators and (qualified or "") not in decorators:
            return None
        ctx.diagnose(
            original,
            "note",
            "zoo-dropped",
            f"decorator @{_short(ctx.code(original.decorator))} dropped (model-zoo or TorchScript plumbing)",
        )
        ctx.consume(all_nodes(original))
        return cst.RemovalSentinel.REMOVE

    def leave_SimpleStatementLine(
        self, ctx: RuleContext, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel | None:
        calls = set(ctx.mappings.zoo.get("calls", ()))
        names = self._zoo_names(ctx)
        for small in original.body:
            value = getattr(small, "value", None)
            if isinstance(value, cst.Call) and (isinstance(small, cst.Expr) or _assigned_back(ctx, small, value)):
                qualified = ctx.qualified_name(value.func) or ""
                if isinstance(small, cst.Expr) and (_last(value) in calls or qualified in calls):
                    break
                if qualified.startswith("torch.nn.init.") or _initialiser_call(ctx, value):
                    ctx.diagnose(
                        original,
                        "note",
                        "init-dropped",
                        f"`{_short(ctx.code(value))}` dropped: initialisation is not converted; load the torch "
                        "weights into the converted model (precision_transpiler.weights)",
                    )
                    ctx.consume(all_nodes(original))
                    return cst.RemovalSentinel.REMOVE
            if isinstance(small, cst.Assign | cst.AnnAssign) and value is not None and _names_in(value) & names:
                break
        else:
            return None
        ctx.diagnose(
            original,
            "note",
            "zoo-dropped",
            f"`{_short(ctx.code(original.body[0]))}` dropped (model-zoo or device plumbing)",
        )
        ctx.consume(all_nodes(original))
        return cst.SimpleStatementLine([cst.Pass()]) if _only_statement(ctx, original) else cst.RemovalSentinel.REMOVE

    def leave_IndentedBlock(
        self, ctx: RuleContext, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock | None:
        if updated.body or not original.body:
            return None
        return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])

    def leave_Param(self, ctx: RuleContext, original: cst.Param, updated: cst.Param) -> cst.Param | None:
        if original.annotation is None or not (_names_in(original.annotation) & self._zoo_names(ctx)):
            return None
        ctx.consume(all_nodes(original.annotation))
        equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        return updated.with_changes(annotation=None, equal=equal if updated.default is not None else updated.equal)


def _short(code: str, limit: int = 80) -> str:
    """One line of code for a one-line message."""
    text = " ".join(code.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _only_statement(ctx: RuleContext, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    return isinstance(parent, cst.IndentedBlock) and len(parent.body) == 1


def _assigned_back(ctx: RuleContext, small: cst.BaseSmallStatement, call: cst.Call) -> bool:
    """`module.weight = nn.init.kaiming_normal_(module.weight, a=0.01)` (monai's DynUNet): an
    in-place initialiser whose result is assigned back to the tensor it filled, the same
    statement as the bare call."""
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and call.args):
        return False
    first = call.args[0]
    if first.keyword is not None and first.keyword.value != "tensor":
        return False
    return ctx.code(small.targets[0].target) == ctx.code(first.value)


def _initialiser_call(ctx: RuleContext, call: cst.Call) -> bool:
    """`trunc_normal_(self.pos_embed, std=0.02)`, `lecun_normal_(m.weight)`: a function named
    with torch's trailing underscore for in-place work, not torch's own (the tables convert
    those), called on an attribute (a parameter of a module). Model libraries initialise weights
    so (timm's `trunc_normal_`, `variance_scaling_`); the converted model takes the torch weights
    instead, as for `torch.nn.init.*`."""
    func = call.func
    name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    if not name.endswith("_") or name.endswith("__") or (ctx.qualified_name(func) or "").startswith("torch."):
        return False
    if isinstance(func, cst.Attribute):
        return False  # `x.add_(y)`: a method of the receiver (the in-place rules)
    first = call.args[0] if call.args and call.args[0].keyword is None and not call.args[0].star else None
    return first is not None and isinstance(first.value, cst.Attribute)
