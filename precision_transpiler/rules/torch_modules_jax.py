"""torch model structure -> Flax NNX: module classes, `forward`, and `rngs` threading.

* `class Net(nn.Module)` -> `class Net(TorchModule)`: an nnx.Module with torch's module methods
  (`apply`, `parameters`, `eval()` returning the module, ...: runtime/flax/modules.py);
  `def forward` -> `def __call__`.
* Every function that builds layers (analysis/torch_models.py finds them: module `__init__`s,
  helpers such as torchvision's `conv3x3` and `_make_layer`, model builders such as `resnet18`)
  receives a keyword-only `rngs`, and every call it makes to a module class, another builder or
  a layer factory (`norm_layer(planes)`, `block(...)`) passes `rngs=rngs` on. Entry points
  (module `__init__`s and top-level functions) take `rngs: nnx.Rngs | None = None` and create
  `nnx.Rngs(0)` when called without, so `Net()` and `resnet18()` still work as written.
* Weight tying, `a.weight = b.weight` between two layers -> `torch_tie(a, "weight", b, "weight")`
  of the runtime: both layers use one Param, as torch's use one Parameter.
"""

from __future__ import annotations

import ast
import functools

import libcst as cst

from precision_transpiler.analysis.containers import filled_containers, is_empty_container
from precision_transpiler.analysis.torch_models import analysis_for, builder_rngs_in_scope
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.rules.module_classes import concrete_methods, module_metaclass
from precision_transpiler.rules.module_variables import (
    bind_register_buffer,
    calls_a_user_class,
    in_store_target,
    parameter_argument,
    variable_metadata,
    variables_as_arrays,
)
from precision_transpiler.rules.module_walks import module_walk
from precision_transpiler.runtime import runtime_module, runtime_name
from precision_transpiler.syntax import dotted_name


@register
class TorchModules(Rule):
    name = "torch-module"
    summary = "Turn nn.Module classes into nnx modules with torch's module methods and thread rngs through builders."
    EXAMPLES = (
        Example(
            "import torch.nn as nn\n\n\ndef block(d):\n    return nn.Identity()\n\n\nclass Net(nn.Module):\n"
            "    def forward(self, x):\n        return x\n",
            "import precision_transpiler\nfrom flax import nnx\n\n\n"
            "def block(d, *, rngs: nnx.Rngs | None = None):\n    if rngs is None:\n        rngs = nnx.Rngs(0)\n"
            "    return precision_transpiler.runtime.flax.layers.Identity()\n\n\n"
            "class Net(precision_transpiler.runtime.flax.modules.TorchModule):\n    def __call__(self, x):\n"
            "        return x\n",
            to="jax",
            vendored=False,
        ),
        # `@abstractmethod` on an nn.Module (no ABC in torch) would make nnx refuse subclasses
        Example(
            "from abc import abstractmethod\nimport torch.nn as nn\n\n\nclass Base(nn.Module):\n"
            "    @abstractmethod\n    def update(self):\n        pass\n",
            "import precision_transpiler\n\n\nclass Base(precision_transpiler.runtime.flax.modules.TorchModule):\n"
            "    def update(self):\n        pass\n",
            to="jax",
            vendored=False,
        ),
        # a lambda bound to a layer factory takes the rngs its calls pass
        Example(
            "import torch.nn as nn\n\n\ndef block(d, norm):\n"
            "    make = nn.LayerNorm if norm else lambda d: None\n    return make(d)\n",
            "import precision_transpiler\nfrom flax import nnx\n\n\n"
            "def block(d, norm, *, rngs: nnx.Rngs | None = None):\n    if rngs is None:\n        rngs = nnx.Rngs(0)\n"
            "    make = precision_transpiler.runtime.flax.norm.LayerNorm if norm else lambda d, *, rngs=None: None\n"
            "    return make(d, rngs=rngs)\n",
            to="jax",
            vendored=False,
        ),
        # weight tying shares the one Param, whichever way the two layers lay it out
        Example(
            "import torch.nn as nn\n\n\ndef tie(head, embedding):\n    embedding.weight = head.weight\n",
            "import precision_transpiler\n\n\ndef tie(head, embedding):\n"
            '    precision_transpiler.runtime.flax.module_api.torch_tie(embedding, "weight", head, "weight")\n',
            to="jax",
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target == "jax"

    # -- classes -------------------------------------------------------------------------------

    def leave_ClassDef(
        self, ctx: RuleContext, original: cst.ClassDef, updated: cst.ClassDef
    ) -> cst.BaseStatement | None:
        bases = []
        changed = False
        torch = ctx.mappings.frameworks["torch"]
        for before, arg in zip(original.bases, updated.bases, strict=True):
            if torch.is_module_base(ctx.qualified_name(before.value)) or (
                isinstance(before.value, cst.Attribute | cst.Name) and torch.is_module_base(dotted_name(before.value))
            ):
                arg = arg.with_changes(value=ctx.expr_for(runtime_name("jax", "modules", "TorchModule")))
                changed = True
            bases.append(arg)
        keywords = module_metaclass(ctx, original, updated, bases, changed)
        if not changed and keywords is None:
            return None
        ctx.consume(b.value for b in original.bases)
        new = updated.with_changes(bases=bases, body=concrete_methods(ctx, original, updated.body))
        if keywords is not None:
            new = new.with_changes(keywords=keywords)
        ctx.record(self.name, original.name, new.name)
        return new

    # -- functions -----------------------------------------------------------------------------

    def leave_FunctionDef(
        self, ctx: RuleContext, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.BaseStatement | None:
        analysis = analysis_for(ctx)
        key = ctx.enclosing_function()
        if key is None or not _is_this_def(key, original):
            return None
        owner = key.split(".")[0] if "." in key else None
        new = updated
        if owner in analysis.module_classes and original.name.value == "forward":
            new = new.with_changes(name=cst.Name("__call__"))
        if key in analysis.builders and not _has_param(original, "rngs"):
            new = self._add_rngs(ctx, new, public=key in analysis.public)
        if owner in analysis.uses_training and original.name.value == "__init__":
            # torch's `self.training` is flipped by .train()/.eval(); nnx's eval() sets
            # `deterministic=True` on every module that has the attribute.
            new = _prepend(new, "self.deterministic = False\n", after_rngs=True)
        if owner in analysis.random_streams and original.name.value == "__init__" and key in analysis.builders:
            # the stream the class's methods draw torch's random numbers from (`rngs=self`)
            stream = ctx.code(ctx.expr_for(runtime_name("jax", "rng", "random_stream")))
            new = _prepend(new, f"self.torch_rng = {stream}(rngs)\n", after_rngs=True)
        if new is updated:
            return None
        ctx.record(self.name, original.name, new.name)
        return new

    def _add_rngs(self, ctx: RuleContext, func: cst.FunctionDef, public: bool) -> cst.FunctionDef:
        """A keyword-only `rngs: nnx.Rngs | None = None`: every builder can be called without one
        (a factory called in a default argument, a callable handed to code that knows nothing of
        rngs). Entry points then use `nnx.Rngs(0)`, so `Net()` builds the same model each time;
        helpers draw from the runtime's seedable process-wide sequence, as torch layers built
        outside any model draw from torch's global generator."""
        rngs_type = ctx.expr_for("flax.nnx.Rngs")
        annotation = cst.BinaryOperation(rngs_type, cst.BitOr(), cst.Name("None"))
        param = cst.Param(
            name=cst.Name("rngs"),
            annotation=cst.Annotation(annotation),
            default=cst.Name("None"),
            equal=cst.AssignEqual(),
        )
        params = func.params
        star = params.star_arg
        if isinstance(star, cst.MaybeSentinel) or star is None:
            star = cst.ParamStar()
        kwonly = [*params.kwonly_params, param]
        last_positional = [*params.posonly_params, *params.params]
        if last_positional and isinstance(last_positional[-1].comma, cst.Comma) and not params.kwonly_params:
            pass  # the existing trailing comma separates it from `*`
        params = params.with_changes(star_arg=star, kwonly_params=kwonly)
        func = func.with_changes(params=params)
        fallback = f"{ctx.code(rngs_type)}(0)" if public else f"{ctx.code(_default_rngs(ctx))}()"
        return _prepend(func, f"if rngs is None:\n    rngs = {fallback}\n")

    # -- self.training -------------------------------------------------------------------------

    def leave_Attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        value = original.value
        own_class = (  # `Base.forward(self, x)` of a module class of the file: its `__call__`, not
            # TorchModule.forward, which would call the subclass's own `__call__` again
            isinstance(value, cst.Name) and value.value in analysis_for(ctx).module_classes
        ) and ctx.qualified_name(value) is None
        if original.attr.value == "forward" and (_is_super(value) or own_class):
            new = updated.with_changes(attr=cst.Name("__call__"))  # `super().forward(x)` of a layer subclass
            ctx.record(self.name, original, new)
            return new
        if (
            original.attr.value == "training"
            and isinstance(original.value, cst.Name)
            and original.value.value in _MODULE_NAMES
            and not isinstance(ctx.parent(original), cst.AssignTarget)
        ):
            # `module.training` in a helper taking the module (transformers' eager_attention_forward)
            new = cst.Call(
                func=ctx.expr_for(runtime_name("jax", "modules", "is_training")),
                args=[cst.Arg(updated.value)],
            )
            ctx.record(self.name, original, new)
            return new
        layer_read = self._layer_attribute(ctx, original, updated)
        if layer_read is not None:
            return layer_read
        if not (isinstance(original.value, cst.Name) and original.value.value == "self"):
            return None
        if original.attr.value != "training":
            return self._buffer_read(ctx, original, updated)
        key = ctx.enclosing_function()
        owner = key.split(".")[0] if key and "." in key else None
        if owner not in analysis_for(ctx).uses_training:
            return None
        parent = ctx.parent(original)
        if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign) and parent.target is original):
            return None
        new = cst.UnaryOperation(
            cst.Not(),
            cst.Attribute(cst.Name("self"), cst.Name("deterministic")),
            lpar=[cst.LeftParen()],
            rpar=[cst.RightParen()],
        )
        ctx.record(self.name, original, new)
        return new

    def leave_Assign(
        self, ctx: RuleContext, original: cst.Assign, updated: cst.Assign
    ) -> cst.BaseSmallStatement | None:
        """`self.proj = None` in a module class -> `self.proj = nnx.data(None)`: nnx makes an
        attribute first set to None static, and refuses a submodule assigned to it later
        (torchvision's RegNet sets `self.proj = None`, then a block when shapes differ). So is any
        other value of an attribute that a torch op's result is assigned to elsewhere
        (`self.m = matrix` from an argument, `self.m = torch.eye(n)` when it is None)."""
        marked = variable_metadata(ctx, original, updated)
        if marked is not None:
            ctx.record(self.name, original, marked)
            return marked
        if not (isinstance(updated.value, cst.Name) and updated.value.value == "None"):
            return self._container_attribute(ctx, original, updated) or self._array_attribute(ctx, original, updated)
        if not any(
            isinstance(t.target, cst.Attribute)
            and isinstance(t.target.value, cst.Name)
            and t.target.value.value == "self"
            for t in updated.targets
        ):
            return None
        key = ctx.enclosing_function()
        owner = key.split(".")[0] if key and "." in key else None
        if owner not in analysis_for(ctx).module_classes:
            return None
        value = cst.Call(func=ctx.expr_for("flax.nnx.data"), args=[cst.Arg(cst.Name("None"))])
        new = updated.with_changes(value=value)
        ctx.record(self.name, original, new)
        return new

    def leave_Lambda(self, ctx: RuleContext, original: cst.Lambda, updated: cst.Lambda) -> cst.Lambda | None:
        """`normalization = LayerNorm if normalize else lambda: None` (zuko's MLP): the name is a
        layer factory, so its calls pass `rngs=rngs`; the lambda takes (and ignores) it too."""
        params = updated.params
        if _has_param(updated, "rngs"):
            return None
        uses = _mentions_name(updated.body, "rngs")
        if params.star_kwarg is not None and not uses:
            return None  # `lambda **kw: helper(**kw)`: a caller's rngs passes through `kw`
        if not uses and not self._factory_lambda(ctx, original) and not _builds_modules(ctx, original.body):
            return None  # `key=lambda x: x[0]`: no layer factory, left as written
        if not uses:
            default: cst.BaseExpression = cst.Name("None")
        elif builder_rngs_in_scope(ctx):
            default = cst.Name("rngs")  # the builder's, unless the caller passes its own
        else:
            default = cst.Call(_default_rngs(ctx))
        equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
        rngs = cst.Param(cst.Name("rngs"), default=default, equal=equal)
        star = params.star_arg if isinstance(params.star_arg, cst.Param) else cst.ParamStar()
        new = updated.with_changes(
            params=params.with_changes(star_arg=star, kwonly_params=[*params.kwonly_params, rngs])
        )
        if (
            not updated.params.params
            and not updated.params.kwonly_params
            and isinstance(updated.whitespace_after_lambda, cst.MaybeSentinel | cst.SimpleWhitespace)
        ):
            new = new.with_changes(whitespace_after_lambda=cst.SimpleWhitespace(" "))
        ctx.record(self.name, original, new)
        return new

    @staticmethod
    def _factory_lambda(ctx: RuleContext, original: cst.Lambda) -> bool:
        """`make = LayerNorm if norm else lambda d: None` in a builder, where `make` is called as a
        layer factory (so with `rngs=rngs`)."""
        node: cst.CSTNode | None = original
        parent = ctx.parent(node)
        while isinstance(parent, cst.IfExp | cst.BooleanOperation):
            node, parent = parent, ctx.parent(parent)
        if not isinstance(parent, cst.Assign) or parent.value is not node:
            return False
        key = ctx.enclosing_function()
        factories = analysis_for(ctx).factories.get(key or "", set())
        names = {t.target.value for t in parent.targets if isinstance(t.target, cst.Name)}
        return key in analysis_for(ctx).builders and bool(names & factories)

    def _container_attribute(self, ctx: RuleContext, original: cst.Assign, updated: cst.Assign) -> cst.Assign | None:
        """`self._params = {}` filled later with Parameters (analysis/containers.py) ->
        `nnx.data({})`: nnx refuses a static dict that comes to hold Variables or Modules."""
        if len(updated.targets) != 1 or not isinstance(target := original.targets[0].target, cst.Attribute):
            return None
        if not (isinstance(target.value, cst.Name) and target.value.value == "self"):
            return None
        if not is_empty_container(ast.parse(ctx.code(original.value).strip(), mode="eval").body):
            return None
        key = ctx.enclosing_function()
        owner = key.split(".")[0] if key and "." in key else None
        if owner is None or target.attr.value not in filled_containers(ctx).get(owner, frozenset()):
            return None
        if owner not in analysis_for(ctx).module_classes:
            return None
        new = updated.with_changes(value=cst.Call(func=ctx.expr_for("flax.nnx.data"), args=[cst.Arg(updated.value)]))
        ctx.record(self.name, original, new)
        return new

    def _array_attribute(self, ctx: RuleContext, original: cst.Assign, updated: cst.Assign) -> cst.Assign | None:
        if not (
            len(updated.targets) == 1
            and isinstance(target := original.targets[0].target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
        ):
            return None
        analysis = analysis_for(ctx)
        value = original.value
        # a torch call's array is data to nnx already; a container of arrays from a function of
        # the file (`self.grid = get_grid_dict(n)`) and other values are not
        local_call = (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value in analysis.tensor_functions
        )
        if not (local_call or isinstance(value, cst.Name | cst.Attribute | cst.Subscript | cst.IfExp)):
            return None
        key = ctx.enclosing_function()
        owner = key.split(".")[0] if key and "." in key else None
        if owner is None or target.attr.value not in analysis.array_attrs.get(owner, set()):
            return None
        new = updated.with_changes(value=cst.Call(func=ctx.expr_for("flax.nnx.data"), args=[cst.Arg(updated.value)]))
        ctx.record(self.name, original, new)
        return new

    def leave_AnnAssign(
        self, ctx: RuleContext, original: cst.AnnAssign, updated: cst.AnnAssign
    ) -> cst.AnnAssign | None:
        """`self.pos_embed: Optional[nn.Parameter] = None`: as `leave_Assign` (segment-anything)."""
        if not (
            isinstance(updated.value, cst.Name)
            and updated.value.value == "None"
            and isinstance(updated.target, cst.Attribute)
            and isinstance(updated.target.value, cst.Name)
            and updated.target.value.value == "self"
        ):
            return None
        key = ctx.enclosing_function()
        if (key.split(".")[0] if key and "." in key else None) not in analysis_for(ctx).module_classes:
            return None
        new = updated.with_changes(value=cst.Call(func=ctx.expr_for("flax.nnx.data"), args=[cst.Arg(cst.Name("None"))]))
        ctx.record(self.name, original, new)
        return new

    def _layer_attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        """`self.wo.weight` where `self.wo = nn.Linear(...)`, read -> `self.wo.kernel[...].T`:
        what the layer table's `attributes:` says torch's name is in the converted layer."""
        inner = original.value
        if isinstance(inner, cst.Name) and inner.value == "self":
            layer = self._own_layer(ctx, original.attr.value)
        elif isinstance(inner, cst.Name):
            layer = _narrowed_layer(ctx, original, inner.value)
        elif isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Name) and inner.value.value == "self":
            key = ctx.enclosing_function()
            owner = key.split(".")[0] if key and "." in key else None
            layer = analysis_for(ctx).layer_attrs.get(owner or "", {}).get(inner.attr.value)
        else:
            layer = None
        spec = ctx.mappings.layers.get(layer) if layer else None
        target = spec.targets.get(ctx.target) if spec is not None else None
        template = target.attributes.get(original.attr.value) if target is not None else None
        parent = ctx.parent(original)
        if isinstance(parent, cst.AssignTarget | cst.Del) or (
            isinstance(parent, cst.AugAssign) and parent.target is original
        ):
            return None
        if isinstance(parent, cst.Assign) and parent.value is original and _tie(parent) is not None:
            return None  # `wte.weight = lm_head.weight`: the tie shares the variable (`torch_tie`)
        if isinstance(parent, cst.Attribute) and parent.value is original and parent.attr.value == "data":
            grand = ctx.parent(parent)
            if isinstance(grand, cst.AssignTarget | cst.AugAssign) or (
                isinstance(grand, cst.Attribute) and grand.attr.value.endswith("_")
            ):
                return None  # `self.fc.weight.data.normal_(...)`: initialisation, dropped by the init rules
        if template is None:
            return self._unknown_layer_parameter(ctx, original, updated, layer)
        if template.endswith("[...]") and _handed_to_a_class(ctx, original):
            # `RobertaLMHead(weight=self.embed_tokens.weight)` (fair-esm's tied head): a module
            # keeps the variable, so both layers use one Param, as in torch (same layout only)
            template = template.removesuffix("[...]")
        # templates are primaries (`{layer}.kernel[...].T`), so `.dtype` can follow without parentheses
        new = cst.parse_expression(template.replace("{layer}", ctx.code(updated.value)))
        ctx.record(self.name, original, new)
        return new

    def _unknown_layer_parameter(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute, layer: str | None
    ) -> cst.BaseExpression | None:
        """`self.mlp.c_fc.weight.dtype` (open_clip: a Linear inside a Sequential), `blocks[0].bias`:
        torch's parameter name read on a module the converter cannot tell -> the runtime's
        `torch_parameter(module, "weight")`, which looks the name up in the layer's torch names
        (nnx.Linear's `kernel`, transposed) or reads the attribute as it is."""
        inner = original.value
        if layer is not None or original.attr.value not in ("weight", "bias"):
            return None
        if isinstance(inner, cst.Name) and (inner.value == "self" or ctx.qualified_name(inner) is not None):
            return None
        if ctx.enclosing_function() is None:
            return None
        parent = ctx.parent(original)
        if isinstance(parent, cst.Assign | cst.AnnAssign) and parent.value is original:
            return None  # `out.weight = emb.weight`: tying shares the variable, not its value
        if isinstance(parent, cst.AssignTarget | cst.Del) or (
            isinstance(parent, cst.Element) and in_store_target(ctx, parent)
        ):
            return None  # `self.cache.weight, self.cache.logabsdet = ...` (nflows): a write, not a read
        new = cst.Call(
            func=ctx.expr_for(runtime_name("jax", "module_api", "torch_parameter")),
            args=[
                cst.Arg(updated.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(cst.SimpleString(f'"{original.attr.value}"')),
            ],
        )
        ctx.record(self.name, original, new)
        return new

    @staticmethod
    def _own_layer(ctx: RuleContext, attr: str) -> str | None:
        """The torch layer a module class derives from (`class MaskedLinear(nn.Linear)` reading
        `self.weight` in its forward), unless the class sets that attribute itself."""
        key = ctx.enclosing_function()
        owner = key.split(".")[0] if key and "." in key else None
        analysis = analysis_for(ctx)
        layer = analysis.layer_bases.get(owner or "")
        if layer is None or owner is None:
            return None
        if attr in analysis.params.get(owner, set()) | analysis.buffers.get(owner, set()):
            return None
        return None if attr in analysis.layer_attrs.get(owner, {}) else layer

    # -- buffers -------------------------------------------------------------------------------

    def _buffer_read(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        """`self.index` of a registered buffer, read as a value -> `self.index[...]`: the array,
        not the nnx Variable (JAX refuses a Variable as an index, as in Swin's
        `table[self.relative_position_index]`). Writes, `del`, and reads already indexed
        (`self.buf[...]`, `self.buf[0]`) stay as they are."""
        key = ctx.enclosing_function()
        owner = key.split(".")[0] if key and "." in key else None
        if owner is not None and parameter_argument(ctx, original):  # `torch.sigmoid(self.w)`
            return self._as_array(ctx, original, updated)
        if owner is None or original.attr.value not in analysis_for(ctx).buffers.get(owner, ()):
            return None
        parent = ctx.parent(original)
        if isinstance(parent, cst.AssignTarget | cst.Subscript | cst.Del | cst.Attribute | cst.Call):
            return None  # a write, an index, `self.buf.shape`, `self.buf.mul_(...)`: leave to others
        if isinstance(parent, cst.AugAssign | cst.AnnAssign) and parent.target is original:
            return None
        if isinstance(parent, cst.Element) and in_store_target(ctx, parent):
            return None  # `self.sin, self.cos = self._build(...)` (timm's rotary embedding): a write
        nullable = original.attr.value in analysis_for(ctx).nullable_buffers.get(owner, ())
        tested = isinstance(parent, cst.Comparison) and any(
            isinstance(c.operator, cst.Is | cst.IsNot) for c in parent.comparisons
        )
        if tested and not nullable:
            return None  # `self.scale is None` of a buffer never registered as None: the attribute itself
        if ((tested or isinstance(parent, cst.Arg)) and nullable) or (
            original.attr.value in analysis_for(ctx).plain_or_buffers.get(owner, ())
        ):
            # a buffer that may be registered as None (Swin's unshifted `attn_mask`), tested or
            # handed on (`exists(self.scale)`, `mask=self.attn_mask`): its array or None; a buffer
            # on one path and a plain value on another: either, read as a value
            call = cst.Call(
                ctx.expr_for("precision_transpiler.runtime.flax.module_api.buffer_value"), [cst.Arg(updated)]
            )
            ctx.record(self.name, original, call)
            return call
        return self._as_array(ctx, original, updated)

    def _as_array(self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute) -> cst.Subscript:
        new = cst.Subscript(
            value=updated, slice=[cst.SubscriptElement(cst.Index(cst.Ellipsis()))], lpar=updated.lpar, rpar=updated.rpar
        )
        ctx.record(self.name, original, new)
        return new

    def leave_SimpleStatementLine(
        self, ctx: RuleContext, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | None:
        """`self.register_buffer("name", t, persistent=False)` -> `self.name = Buffer(t, persistent=False)`;
        weight tying (`self.wte.weight = self.lm_head.weight`) -> `torch_tie(self.wte, "weight",
        self.lm_head, "weight")`, which makes both layers use one Param (runtime/flax/module_api.py)."""
        tie = _tie(updated.body[0]) if len(updated.body) == 1 and isinstance(updated.body[0], cst.Assign) else None
        if tie is not None:
            target, name, source, source_name = tie
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            args = [target, cst.SimpleString(f'"{name}"'), source, cst.SimpleString(f'"{source_name}"')]
            call = cst.Call(
                func=ctx.expr_for(runtime_name("jax", "module_api", "torch_tie")),
                args=[cst.Arg(a, comma=comma if i < 3 else cst.MaybeSentinel.DEFAULT) for i, a in enumerate(args)],
            )
            new = updated.with_changes(body=[cst.Expr(call, semicolon=updated.body[0].semicolon)])
            ctx.record(self.name, original, new)
            return new
        if len(updated.body) != 1 or not isinstance(updated.body[0], cst.Expr):
            return None
        call = updated.body[0].value
        if not (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, cst.Name)
            and call.func.value.value == "self"
            and call.func.attr.value == "register_buffer"
        ):
            return None
        bound = bind_register_buffer(call.args)
        if bound is None or not isinstance(bound[0], cst.SimpleString):
            return None
        name = bound[0].evaluated_value
        if not isinstance(name, str) or not name.isidentifier():
            return None
        if _mentions_none(bound[1]):
            # `register_buffer("scale", t if use_scale else None)`: the runtime's register_buffer
            # keeps a None out of the module's state, as torch keeps it out of the state dict
            return None
        rest = [cst.Arg(bound[1]), *bound[2]]
        rest = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in rest]
        args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in rest[:-1]]
        value = cst.Call(func=ctx.expr_for(runtime_name("jax", "module_api", "Buffer")), args=[*args, rest[-1]])
        target = cst.AssignTarget(cst.Attribute(cst.Name("self"), cst.Name(name)))
        new = updated.with_changes(body=[cst.Assign(targets=[target], value=value)])
        ctx.record(self.name, original, new)
        return new

    # -- calls ---------------------------------------------------------------------------------

    def _module_walk(
        self, ctx: RuleContext, original: cst.Call, updated: cst.Call, classes: set[str], key: str | None
    ) -> cst.BaseExpression | None:
        """`net.modules()` -> `modules(net)`, `self.add_module(name, m)` -> `add_module(self, name, m)`:
        rules/module_walks.py."""
        new = module_walk(ctx, original, updated, runtime_module("jax", "module_api"))
        if new is not None:
            ctx.record(self.name, original, new)
        return new

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        foreign = self._variables_as_arrays(ctx, original, updated)
        if foreign is not None:
            return foreign
        analysis = analysis_for(ctx)
        key = ctx.enclosing_function()
        walked = self._module_walk(ctx, original, updated, analysis.module_classes, key)
        if walked is not None:
            return walked
        if key is None or key not in analysis.builders or not ctx.in_def_body():
            return None  # `rngs` is in scope in the builder's body only, not in its defaults
        if any(a.keyword is not None and a.keyword.value == "rngs" for a in updated.args):
            return None
        owner = key.split(".")[0] if "." in key else None
        if _is_super_init(original) and owner in analysis.layer_bases:
            # `class OPTLearnedPositionalEmbedding(nn.Embedding)`: the layer's __init__ takes rngs
            takes = _layer_takes_rngs(ctx, analysis.layer_bases[owner])
            return self._with_rngs(ctx, original, updated) if takes else None
        text = _nested_class_name(dotted_name(original.func), analysis.module_classes)
        if text is None:
            return None
        factories = analysis.factories.get(key, set())
        wants = (
            text in analysis.module_classes
            or text in analysis.builders
            or text in factories
            or (owner is not None and text.startswith("self.") and f"{owner}.{text[5:]}" in analysis.builders)
        )
        if not wants or ctx.qualified_name(original.func) is not None:
            return None
        if text in analysis.module_classes and not analysis.constructor_takes_rngs(
            text, lambda layer: _layer_takes_rngs(ctx, layer)
        ):
            return None  # `NewGELU()`: a class with nn.Module's constructor takes no rngs
        return self._with_rngs(ctx, original, updated)

    def _with_rngs(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.Call:
        args = list(updated.args)
        if args and isinstance(args[-1].comma, cst.MaybeSentinel):
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(
            cst.Arg(
                value=cst.Name("rngs"),
                keyword=cst.Name("rngs"),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            )
        )
        new = updated.with_changes(args=args)
        ctx.record(self.name, original, new)
        return new

    def _variables_as_arrays(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.Call | None:
        """`repeat(self.cls, ...)` (einops, a helper library): a parameter or buffer passed to a
        function no table knows is passed as its array (`self.cls[...]`); rules/module_variables.py."""
        new = variables_as_arrays(
            ctx,
            original,
            updated,
            lambda v: cst.Subscript(value=v, slice=[cst.SubscriptElement(cst.Index(cst.Ellipsis()))]),
        )
        if new is not None:
            ctx.record(self.name, original, new)
        return new


def _handed_to_a_class(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Whether `node` is an argument of a call to a class of the user's code."""
    arg = ctx.parent(node)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(call, cst.Call) and arg in call.args and calls_a_user_class(ctx, call)


def _tie(assign: cst.Assign) -> tuple[cst.BaseExpression, str, cst.BaseExpression, str] | None:
    """(target layer, name, source layer, source name) of weight tying, `a.weight = b.weight`
    (`self.transformer.wte.weight = self.lm_head.weight`, a bias alike, the module's own
    parameter onto a layer: `self.decoder.bias = self.bias`; a layer's onto the module:
    neuraloperator's `self.weight = self.conv.weight`, which torch registers under both names), or
    None. Assigning the module's own attributes another value (`self.weight = emb.weight` of a
    local) is not a tie of two layers."""
    if len(assign.targets) != 1:
        return None
    target, value = assign.targets[0].target, assign.value
    if not (isinstance(target, cst.Attribute) and isinstance(value, cst.Attribute)):
        return None
    if target.attr.value not in _TIED_NAMES or value.attr.value not in _TIED_NAMES:
        return None
    if isinstance(target.value, cst.Name) and target.value.value == "self" and not _self_layer(value.value):
        return None  # `self.weight = emb.weight`: the module's own attribute (a layer it holds: a tie)
    if not isinstance(target.value, cst.Name | cst.Attribute | cst.Subscript):
        return None
    return target.value, target.attr.value, value.value, value.attr.value


_TIED_NAMES = frozenset({"weight", "bias"})


def _self_layer(node: cst.BaseExpression) -> bool:
    """`self.conv`: a layer the module holds."""
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def _mentions_none(node: cst.CSTNode) -> bool:
    return _mentions_name(node, "None")


def _mentions_name(node: cst.CSTNode, wanted: str) -> bool:
    class _Find(cst.CSTVisitor):
        found = False

        def visit_Name(self, name: cst.Name) -> None:
            self.found = self.found or name.value == wanted

    finder = _Find()
    node.visit(finder)
    return finder.found


def _builds_modules(ctx: RuleContext, body: cst.BaseExpression) -> bool:
    """Whether a lambda's body builds a torch layer or a module class of the file (`lambda:
    nn.ReLU(inplace=inplace)`, pytorchcv's activation factories): callers that build layers pass
    it `rngs=`, so it takes one even when its layer does not."""
    analysis = analysis_for(ctx)
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False  # a nested lambda is its own factory

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            qualified = ctx.qualified_name(node.func)
            found = found or qualified in ctx.mappings.layers or dotted_name(node.func) in analysis.module_classes

    body.visit(_Find())
    return found


def _default_rngs(ctx: RuleContext) -> cst.BaseExpression:
    """The runtime's `default_rngs` (runtime/flax/rng.py), for code that builds layers where no
    builder's `rngs` is in scope."""
    return ctx.expr_for(runtime_name("jax", "rng", "default_rngs"))


def _narrowed_layer(ctx: RuleContext, node: cst.CSTNode, name: str) -> str | None:
    """The torch layer `name` is known to be at `node`: inside the body of an
    `if isinstance(name, nn.Linear):` (timm's weight initialisers read `m.weight.shape` there)."""
    child, parent = node, ctx.parent(node)
    while parent is not None:
        if isinstance(parent, cst.If) and child is parent.body:
            test = parent.test
            if (
                isinstance(test, cst.Call)
                and isinstance(test.func, cst.Name)
                and test.func.value == "isinstance"
                and len(test.args) == 2
                and isinstance(test.args[0].value, cst.Name)
                and test.args[0].value.value == name
            ):
                qualified = ctx.qualified_name(test.args[1].value)
                return qualified if qualified in ctx.mappings.layers else None
        if isinstance(parent, cst.FunctionDef | cst.Lambda):
            return None
        child, parent = parent, ctx.parent(parent)
    return None


def _layer_takes_rngs(ctx: RuleContext, layer: str) -> bool:
    """Whether the counterpart of torch layer `layer` takes `rngs` (the layer table's `rngs:`)."""
    spec = ctx.mappings.layers.get(layer)
    target = spec.targets.get(ctx.target) if spec is not None else None
    return target is not None and target.rngs


def _is_super(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "super"


def _is_super_init(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "__init__" and _is_super(func.value)


# Parameter names that hold a module in helper functions (`def eager_attention_forward(module, ...)`):
# their `.training` is the module's mode. Other objects' `.training` (an argparse namespace) is left.
_MODULE_NAMES = frozenset({"module", "model", "layer", "block", "submodule", "mod"})


def _nested_class_name(text: str | None, classes: set[str]) -> str | None:
    """`Outer.Inner` (or `self.Inner`) built where `Inner` is a module class nested in a class
    body reads as `Inner`, the name the analysis keys it by."""
    if text is not None and "." in text:
        outer, inner = text.rsplit(".", 1)
        if inner in classes and (outer in classes or outer == "self"):
            return inner
    return text


def _is_this_def(key: str, node: cst.FunctionDef) -> bool:
    return key.rsplit(".", 1)[-1] == node.name.value


def _has_param(func: cst.FunctionDef | cst.Lambda, name: str) -> bool:
    params = func.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for extra in (params.star_arg, params.star_kwarg):
        if isinstance(extra, cst.Param):
            every.append(extra)
    return any(p.name.value == name for p in every)


def _prepend(func: cst.FunctionDef, code: str, after_rngs: bool = False) -> cst.FunctionDef:
    """Insert statements at the start of the body, after a docstring (and after the generated
    `if rngs is None:` block when `after_rngs`)."""
    body = func.body
    if not isinstance(body, cst.IndentedBlock):
        return func
    statements = list(body.body)
    index = 0
    if statements and isinstance(statements[0], cst.SimpleStatementLine):
        first = statements[0].body[0] if statements[0].body else None
        if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString | cst.ConcatenatedString):
            index = 1
    if after_rngs and index < len(statements) and isinstance(statements[index], cst.If):
        test = statements[index].test
        if isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "rngs":
            index += 1
    new = list(_generated_statements(code))
    return func.with_changes(body=body.with_changes(body=[*statements[:index], *new, *statements[index:]]))


@functools.lru_cache(maxsize=256)
def _generated_statements(code: str) -> tuple[cst.BaseStatement, ...]:
    """The statements of a generated snippet, parsed once per process (trees are immutable)."""
    return tuple(cst.parse_module(code).body)
