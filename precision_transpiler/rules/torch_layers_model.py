"""torch.nn layers through the layer table (mappings/layers/*.yaml), torch -> Flax NNX and Keras.

`nn.Linear(512, 10, bias=False)` becomes `nnx.Linear(512, 10, use_bias=False, rngs=rngs)`: the
torch arguments are bound to torch's signature and emitted under the target's names, with
target defaults that differ made explicit (`nnx.LayerNorm(d, epsilon=1e-05, ...)`). Layers whose
semantics Flax does not have (NCHW convolutions, torch pooling, BatchNorm momentum) become
torch-signature shims copied into the converted file (`Conv2d(3, 64, 7, 2, 3, rngs=rngs)`). A
layer class used as a value (`norm_layer = nn.BatchNorm2d`) becomes the torch-signature class.

For Keras (`--to tf`) every layer is a torch-signature shim (runtime/keras/) and nothing gets
`rngs`: the table's `tf:` targets drive the same code.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import libcst as cst

from precision_transpiler.analysis.tensors import Where
from precision_transpiler.analysis.torch_models import builder_rngs_in_scope
from precision_transpiler.mappings.layers import LayerSpec, LayerTarget
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_name
from precision_transpiler.syntax import all_nodes


@register
class TorchLayers(Rule):
    name = "torch-layer"
    summary = "Convert torch.nn layer constructors and layer classes through the layer table."
    EXAMPLES = (
        Example(
            "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(4, 2, bias=False)\n",
            "from flax import nnx\nimport precision_transpiler\n\n\n"
            "class Net(precision_transpiler.runtime.flax.modules.TorchModule):\n"
            "    def __init__(self, *, rngs: nnx.Rngs | None = None):\n        if rngs is None:\n"
            "            rngs = nnx.Rngs(0)\n        super().__init__()\n"
            "        self.fc = nnx.Linear(4, 2, use_bias=False, rngs=rngs)\n",
            to="jax",
            vendored=False,
        ),
        Example(
            # symbols read for an attribute of theirs: a version check, a base class's __init__
            "import torch\nimport torch.nn as nn\n\nWITH_PT20 = int(torch.__version__.split('.')[0]) >= 2\n\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        nn.Module.__init__(self)\n",
            "import precision_transpiler\nfrom flax import nnx\n\n"
            "WITH_PT20 = int(precision_transpiler.runtime.common.torch_version.split('.')[0]) >= 2\n\n\n"
            "class Net(precision_transpiler.runtime.flax.modules.TorchModule):\n"
            "    def __init__(self, *, rngs: nnx.Rngs | None = None):\n        if rngs is None:\n"
            "            rngs = nnx.Rngs(0)\n"
            "        precision_transpiler.runtime.flax.modules.TorchModule.__init__(self)\n",
            to="jax",
            vendored=False,
        ),
        Example(
            "import torch.nn as nn\n\n\ndef head():\n    return nn.ReLU(inplace=True)\n",
            "from typing import Any\nimport keras\nfrom keras import ops\n\n\n"
            "# ptranspile: torch-compatible definitions copied from precision_transpiler/runtime (torch semantics)\n"
            "class ReLU(keras.layers.Layer):\n"
            '    """torch.nn.ReLU; `inplace` has no meaning for immutable tensors."""\n\n'
            "    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:\n"
            "        super().__init__(**kwargs)\n        self.built = True\n\n"
            "    def call(self, input: Any) -> Any:\n        return ops.relu(input)\n\n\n"
            "def head():\n    return ReLU(inplace=True)\n",
            to="tf",
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        qualified = ctx.qualified_name(original.func)
        spec = ctx.mappings.layers.get(qualified) if qualified else None
        target = spec.targets.get(ctx.target) if spec is not None else None
        if spec is None or target is None:
            direct = ctx.mappings.layer_symbols.get(qualified or "", {}).get(ctx.target)
            if direct is None:
                if _report_unsupported(ctx, original, qualified):
                    ctx.consume([original.func])  # reported with the reason, not as a bare name
                return None
            ctx.consume([original.func])
            if direct in _TYPES_ONLY and _legacy_constructor_of_data(original):
                return None  # `torch.FloatTensor([0.5])`: the op tables' (dtype_ops.yaml)
            if direct in _TYPES_ONLY:
                # `torch.FloatTensor([0.5])` builds a tensor; `jax.Array([0.5])` raises
                ctx.unsupported(
                    original,
                    f"{qualified}(...) as a constructor has no {ctx.target} equivalent: write "
                    "torch.tensor(data, dtype=...)",
                    "unsupported-symbol",
                )
                return None
            new = updated.with_changes(func=ctx.expr_for(direct))
            positional = ctx.mappings.symbol_positional.get(qualified or "")
            if positional is not None:
                new = new.with_changes(args=_first_positional(new.args, positional))
            ctx.record(self.name, original, new)
            return new
        ctx.consume([original.func])
        rngs = self._rngs(ctx) if target.rngs else None
        new = None
        if target.call is not None and not (target.torch_attributes & _attributes_read(ctx)):
            new = self._direct(ctx, spec, target, original, updated, rngs)
        if new is None:
            symbol = target.shim or target.reference
            if symbol is None:
                return None
            args = list(updated.args)
            if rngs is not None and not any(a.keyword and a.keyword.value == "rngs" for a in args):
                args.append(_keyword("rngs", rngs))
            new = updated.with_changes(func=ctx.expr_for(symbol), args=_commas(args))
        ctx.record(self.name, original, new)
        return new

    def _rngs(self, ctx: RuleContext) -> cst.BaseExpression:
        """`rngs` where a builder's is in scope or inside a lambda (which then takes `rngs`:
        TorchModules.leave_Lambda), else the runtime's `default_rngs()`, a seedable process-wide
        sequence, as torch draws a layer built outside any model from its global generator."""
        if builder_rngs_in_scope(ctx) or ctx.in_lambda():
            return cst.Name("rngs")
        return cst.Call(func=ctx.expr_for(runtime_name("jax", "rng", "default_rngs")))

    def _direct(
        self,
        ctx: RuleContext,
        spec: LayerSpec,
        target: LayerTarget,
        original: cst.Call,
        updated: cst.Call,
        rngs: cst.BaseExpression | None,
    ) -> cst.Call | None:
        """Bind to torch's signature and emit the target call; None when the call cannot be
        bound (star-args, unknown keywords, arguments the target cannot express): the caller
        then uses the torch-signature class instead."""
        names = [p.name for p in spec.signature]
        bound: dict[str, cst.BaseExpression] = {}
        for position, arg in enumerate(updated.args):
            if arg.star:
                return None
            if arg.keyword is None:
                if position >= len(names):
                    return None
                bound[names[position]] = arg.value
            elif arg.keyword.value in names:
                bound[arg.keyword.value] = arg.value
            else:
                return None
        used = set(target.args) | set(target.keywords.values()) | target.drop
        if set(bound) - used:
            return None
        assert target.call is not None
        args = [cst.Arg(bound[name]) for name in target.args if name in bound]
        emitted = set()
        for keyword, param in target.keywords.items():
            if param in bound:
                args.append(_keyword(keyword, bound[param]))
                emitted.add(keyword)
        for keyword, code in target.defaults.items():
            if keyword not in emitted:
                args.append(_keyword(keyword, cst.parse_expression(code)))
        sized = {n: a.value for n, a in zip(names, original.args, strict=False) if a.keyword is None}
        sized |= {a.keyword.value: a.value for a in original.args if a.keyword is not None}
        if any(_may_be_zero(ctx, sized.get(size), original) for size in target.sizes):
            # torch builds a weight with no elements (`nn.Linear(c, c // 16)`), Flax's default
            # initializer divides by its fan: one that builds it too, where a size may be 0
            args.extend(_keyword(keyword, ctx.expr_for(init)) for keyword, init in target.sized_init.items())
        for param in sorted(target.drop & set(bound)):
            value = ctx.code(bound[param])
            if value != "None":
                ctx.diagnose(
                    original,
                    "note",
                    "argument-dropped",
                    f"{spec.symbol}: {param}={value} dropped (no meaning in {ctx.target})",
                )
        if rngs is not None:
            args.append(_keyword("rngs", rngs))
        return cst.Call(func=ctx.expr_for(target.call), args=_commas(args))

    # -- layer classes used as values ----------------------------------------------------------

    def leave_Name(self, ctx: RuleContext, original: cst.Name, updated: cst.Name) -> cst.BaseExpression | None:
        return self._reference(ctx, original, updated)

    def _reference(
        self, ctx: RuleContext, original: cst.Name | cst.Attribute, updated: cst.Name | cst.Attribute
    ) -> cst.BaseExpression | None:
        if not ctx.is_outermost_name(original):
            return self._symbol_read_for_attribute(ctx, original)
        parent = ctx.parent(original)
        if isinstance(parent, cst.Call) and parent.func is original:
            return None  # a constructor call: leave_Call converts it
        qualified = ctx.qualified_name(original)
        spec = ctx.mappings.layers.get(qualified) if qualified else None
        target = spec.targets.get(ctx.target) if spec is not None else None
        if target is None:
            direct = ctx.mappings.layer_symbols.get(qualified or "", {}).get(ctx.target)
            if ctx.target == "tf" and ctx.mappings.frameworks["torch"].is_module_base(qualified):
                if not _class_base(ctx, original):
                    # a value (`base_cls = torch.nn.Module`, then `issubclass(act, base_cls)`): every
                    # converted layer is a Keras Layer, only converted module classes TorchModules
                    direct = "keras.layers.Layer"
            if direct is None:
                # kept as written, reported with the reason (instead of the bare "has no mapping")
                return updated if _report_unsupported(ctx, original, qualified) else None
            new = ctx.expr_for(direct).with_changes(lpar=original.lpar, rpar=original.rpar)
            ctx.record(self.name, original, new)
            return new
        symbol = target.call if target.call and _in_isinstance(ctx, original) else target.class_symbol
        new = ctx.expr_for(symbol).with_changes(lpar=original.lpar, rpar=original.rpar)
        ctx.record(self.name, original, new)
        return new

    def _symbol_read_for_attribute(
        self, ctx: RuleContext, original: cst.Name | cst.Attribute
    ) -> cst.BaseExpression | None:
        """A mapped symbol read for one of its own attributes (`torch.__version__.split(".")`,
        `nn.Module.__init__(self)`): the symbol is converted and the attribute read on the converted
        value, when no table maps the whole dotted name. A module base stays its class counterpart
        here (`TorchModule.__init__`), and tensor types are left to the op tables (`torch.Tensor.add`)."""
        qualified = ctx.qualified_name(original)
        direct = ctx.mappings.layer_symbols.get(qualified or "", {}).get(ctx.target)
        if direct is None:
            return self._layer_method(ctx, original, qualified)
        if direct in _TYPES_ONLY:
            return None
        whole = ctx.qualified_name(ctx.parent(original))
        if whole is None or whole in ctx.mappings.layers or whole in ctx.mappings.layer_symbols:
            return None
        if whole in ctx.mappings.converted_symbols("torch", ctx.target):
            return None
        if ctx.target == "jax" and ctx.mappings.frameworks["torch"].is_module_base(qualified):
            direct = runtime_name("jax", "modules", "TorchModule")  # the base converted classes have
        chain: list[cst.CSTNode] = [original]
        while isinstance(parent := ctx.parent(chain[-1]), cst.Attribute) and parent.value is chain[-1]:
            chain.append(parent)  # the whole dotted name is converted now, not left to report
        ctx.consume(chain)
        new = ctx.expr_for(direct).with_changes(lpar=original.lpar, rpar=original.rpar)
        ctx.record(self.name, original, new)
        return new

    def _layer_method(
        self, ctx: RuleContext, original: cst.Name | cst.Attribute, qualified: str | None
    ) -> cst.BaseExpression | None:
        """`nn.Embedding.__init__(self, ...)`, `nn.Embedding.forward(self, x)` in a subclass of the
        layer (loralib's LoRA layers): the class the base became, its method under the target's
        name (`forward` is Flax's `__call__`, Keras' `call`; `train`/`eval` are TorchModule's, as
        torch's Module.train is every layer's)."""
        spec = ctx.mappings.layers.get(qualified or "")
        target = spec.targets.get(ctx.target) if spec is not None else None
        parent = ctx.parent(original)
        if target is None or not isinstance(parent, cst.Attribute) or parent.value is not original:
            return None
        if not isinstance(ctx.parent(parent), cst.Call):
            return None
        method = parent.attr.value
        if method in ("train", "eval"):
            symbol = runtime_name(ctx.target, "modules", "TorchModule")
        else:
            symbol = target.class_symbol
        renamed = {"forward": "__call__" if ctx.target == "jax" else "call"}.get(method, method)
        ctx.consume([original, parent])
        new = ctx.expr_for(symbol).with_changes(lpar=original.lpar, rpar=original.rpar)
        ctx.record(self.name, original, new)
        self.__dict__.setdefault("_renamed_methods", {})[id(parent)] = renamed  # one rule object per file
        return new

    def leave_Attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        renamed = self.__dict__.get("_renamed_methods", {}).pop(id(original), None)
        if renamed is not None:
            return updated.with_changes(attr=cst.Name(renamed))
        return self._reference(ctx, original, updated)


#: counterparts of torch's tensor classes that are types to annotate and check against, not to call
_TYPES_ONLY = frozenset({"jax.Array", "tensorflow.Tensor"})


def _class_base(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Whether `node` is a base in a class statement (`class Net(nn.Module)`)."""
    arg = ctx.parent(node)
    return isinstance(arg, cst.Arg) and isinstance(ctx.parent(arg), cst.ClassDef)


def _legacy_constructor_of_data(call: cst.Call) -> bool:
    """`torch.FloatTensor([0.5])`: a typed constructor given one list or tuple of values."""
    return (
        len(call.args) == 1
        and not call.args[0].keyword
        and not call.args[0].star
        and isinstance(call.args[0].value, cst.List | cst.Tuple | cst.ListComp)
    )


def _report_unsupported(ctx: RuleContext, node: cst.CSTNode, qualified: str | None) -> bool:
    """Report a layer the tables list `unsupported:` for the target, with the table's reason; False
    for any other name."""
    reason = ctx.mappings.unsupported_layer(qualified, ctx.target)
    if reason is None:
        return False
    ctx.unsupported(node, f"{qualified} has no mapping to {ctx.target}: {reason}", "unsupported-symbol")
    return True


def _in_isinstance(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """`isinstance(m, nn.Linear)` checks against the class instances are created with."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = ctx.parent(current)
        if isinstance(parent, cst.Call):
            return isinstance(parent.func, cst.Name) and parent.func.value in ("isinstance", "issubclass")
        if not isinstance(parent, cst.Arg | cst.Tuple | cst.Element):
            return False
        current = parent
    return False


def _may_be_zero(ctx: RuleContext, node: cst.BaseExpression | None, anchor: cst.CSTNode) -> bool:
    """Whether a layer size may be 0: the literal 0, or a size the code computes by dividing or
    subtracting (`channels // reduction`, `heads - local_heads`, `int(dim * ratio)`), also
    through a name the function binds to such a value (`mid = channels // reduction`). Other
    names, attributes, products and sums are taken as the positive sizes code means them to be,
    so `nn.Linear(dim, hidden)` stays a plain call."""
    if isinstance(node, cst.Name):
        scope = Where.scope_of(ctx, anchor)
        return scope is not None and any(_computed_small(v) for v in _assigned(scope, node.value))
    return _computed_small(node)


def _assigned(scope: cst.CSTNode, name: str) -> list[cst.BaseExpression]:
    """The values `scope`'s statements assign to `name` (`name = ...`); `name //= r` or
    `name -= r` as 0, a size it may shrink to."""
    found: list[cst.BaseExpression] = []
    for sub in all_nodes(scope):
        if isinstance(sub, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == name for t in sub.targets
        ):
            found.append(sub.value)
        elif isinstance(sub, cst.AugAssign) and isinstance(sub.target, cst.Name) and sub.target.value == name:
            shrinks = isinstance(sub.operator, cst.FloorDivideAssign | cst.SubtractAssign | cst.ModuloAssign)
            found.append(cst.Integer("0") if shrinks else sub.value)
    return found


def _computed_small(node: cst.BaseExpression | None) -> bool:
    if node is None:
        return False
    if isinstance(node, cst.Integer):
        return node.evaluated_value == 0
    for sub in all_nodes(node):
        if isinstance(sub, cst.BinaryOperation) and isinstance(
            sub.operator, cst.FloorDivide | cst.Subtract | cst.Modulo | cst.RightShift
        ):
            return True
        if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Name) and sub.func.value in ("int", "round"):
            return True
    return False


def _keyword(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )


def _commas(args: list[cst.Arg]) -> list[cst.Arg]:
    """Separate arguments with ", " (the last one keeps no comma)."""
    out = []
    for i, arg in enumerate(args):
        comma = (
            cst.MaybeSentinel.DEFAULT if i == len(args) - 1 else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
        if i == len(args) - 1 and isinstance(arg.comma, cst.Comma):
            comma = cst.MaybeSentinel.DEFAULT
        out.append(arg.with_changes(comma=comma))
    return out


def _attributes_read(ctx: RuleContext) -> frozenset[str]:
    """Every attribute name the file reads (`self.embeddings[0].embedding_dim`): where one is a
    torch attribute the direct target class lacks, the layer is built as the reference class."""

    def build() -> frozenset[str]:
        tree, _ = ctx.module_ast()
        if tree is None:
            return frozenset()
        return frozenset(n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load))

    return ctx.per_file("attributes-read", build)


def _first_positional(args: Sequence[cst.Arg], keyword: str) -> list[cst.Arg]:
    """`nn.Parameter(data=t, requires_grad=False)` -> `(t, requires_grad=False)`: the counterpart
    names its first parameter otherwise (`nnx.Param(value)`), so torch's keyword would be refused."""
    if any(a.keyword is None and a.star == "" for a in args):
        return list(args)
    given = [a for a in args if a.keyword is not None and a.keyword.value == keyword]
    if not given:
        return list(args)
    first = given[0].with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
    return _commas([first, *(a for a in args if a is not given[0])])
