"""`getattr(t, mode)` on a tensor, with a name the code computes -> the runtime's `torch_getattr`.

Helper code picks a tensor method by name: x-transformers' masked reductions do `fn = getattr(t,
mode); fn(dim=dim, keepdim=keepdim)`. The op tables convert `t.mean(dim=-1)` written out, but a
method looked up by name stays the target array's own: on JAX `jnp.ndarray.mean` refuses `dim`,
a TensorFlow tensor has no `mean` at all, and nothing said so while converting. Here such a
`getattr` becomes `torch_getattr(t, mode)` of runtime/{flax,keras}/tensor.py, which gives torch's
method with torch's arguments for the reductions and shape attributes, the builtin getattr for
anything that is not an array, and refuses other tensor methods by name when it runs.

The receiver must be known to be a tensor (tensor inference: a torch call, a buffer, a name bound
only to tensors), be a name its function also reads as a tensor (`t.ndim`, `t.shape`, `t.dtype`),
or the method looked up must be called with torch's `dim=` or `keepdim=` (`getattr(t, op)(dim=1)`,
or `fn = getattr(t, op)` then `fn(dim=1)`): `getattr(self, name)`, `getattr(config, key)` and
imported modules stay as written. A
constant name is converted the same way when it is a torch tensor method (`getattr(t, "sum")`).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from precision_transpiler.analysis.tensors import Where, known_tensor
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.rules.op_arguments import STRINGS
from precision_transpiler.runtime import runtime_name
from precision_transpiler.syntax import all_nodes

#: attributes whose reading says the value is an array
_ARRAY_ATTRIBUTES = frozenset({"ndim", "shape", "dtype", "device"})
#: keywords of torch's tensor methods that say the method looked up is one
_TORCH_KEYWORDS = frozenset({"dim", "keepdim"})


@register
class TorchDynamicMethods(Rule):
    name = "torch-dynamic-method"
    summary = "getattr(tensor, name) with a computed name looks torch's method up in the runtime when it runs."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef reduce(t, mode, dim):\n    if t.ndim == 1:\n        return t\n"
            "    return getattr(t, mode)(dim=dim)\n",
            "import precision_transpiler\n\n\ndef reduce(t, mode, dim):\n    if t.ndim == 1:\n        return t\n"
            "    return precision_transpiler.runtime.flax.tensor.torch_getattr(t, mode)(dim=dim)\n",
            to="jax",
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        if not (isinstance(original.func, cst.Name) and original.func.value == "getattr"):
            return None
        args = original.args
        if not 2 <= len(args) <= 3 or any(a.keyword is not None or a.star for a in args):
            return None
        if ctx.qualified_name(original.func) not in (None, "builtins.getattr", "getattr"):
            return None  # a getattr the file defines or imports
        receiver, name = args[0].value, args[1].value
        if isinstance(name, STRINGS):
            constant = name.evaluated_value if isinstance(name, cst.SimpleString) else None
            if constant not in ctx.mappings.method_names.get("torch", ()):
                return None
        if not (
            known_tensor(ctx, receiver, original)
            or _read_as_array(ctx, receiver, original)
            or _called_with_dim(ctx, original)
        ):
            return None
        function = ctx.expr_for(runtime_name(ctx.target, "tensor", "torch_getattr"))
        new = updated.with_changes(func=function)
        ctx.record(self.name, original, new)
        return new


def _read_as_array(ctx: RuleContext, receiver: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """A plain name (not self or cls) whose function also reads `<name>.ndim`, `.shape`, `.dtype`
    or `.device`: the code treats it as an array."""
    if not isinstance(receiver, cst.Name) or receiver.value in ("self", "cls"):
        return False
    scope = Where.scope_of(ctx, anchor)
    if scope is None:
        return False
    return any(
        isinstance(node, cst.Attribute)
        and node.attr.value in _ARRAY_ATTRIBUTES
        and isinstance(node.value, cst.Name)
        and node.value.value == receiver.value
        for node in all_nodes(scope)
    )


def _called_with_dim(ctx: RuleContext, lookup: cst.Call) -> bool:
    """The looked-up method is called with torch's `dim=`/`keepdim=`, written out or in a dict
    spread into the call (`fn(**kwargs)`, `kwargs = dict(dim=dim)`): directly
    (`getattr(t, op)(dim=1)`) or through the name it is assigned to in the same function."""
    parent, scope = ctx.parent(lookup), Where.scope_of(ctx, lookup)
    if scope is None:
        return False
    if isinstance(parent, cst.Call) and parent.func is lookup:
        return _torch_keywords(parent.args, scope)
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
        return False
    target = parent.targets[0].target
    return isinstance(target, cst.Name) and any(
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == target.value
        and _torch_keywords(node.args, scope)
        for node in all_nodes(scope)
    )


def _torch_keywords(args: Sequence[cst.Arg], scope: cst.CSTNode) -> bool:
    for arg in args:
        if arg.keyword is not None and arg.keyword.value in _TORCH_KEYWORDS:
            return True
        if arg.star == "**" and isinstance(arg.value, cst.Name):
            spread = arg.value.value
            for node in all_nodes(scope):
                if isinstance(node, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == spread for t in node.targets
                ):
                    if _dict_with_dim(node.value):
                        return True
    return False


def _dict_with_dim(value: cst.BaseExpression) -> bool:
    """`dict(dim=..., ...)` or `{"dim": ..., ...}` (either key of _TORCH_KEYWORDS)."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        return any(a.keyword is not None and a.keyword.value in _TORCH_KEYWORDS for a in value.args)
    if isinstance(value, cst.Dict):
        return any(
            isinstance(e, cst.DictElement)
            and isinstance(e.key, cst.SimpleString)
            and e.key.evaluated_value in _TORCH_KEYWORDS
            for e in value.elements
        )
    return False
