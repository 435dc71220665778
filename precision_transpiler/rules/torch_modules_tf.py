"""torch model structure -> Keras 3: module classes, `forward`, module walks.

* `class Net(nn.Module)` -> `class Net(TorchModule)` (through the `symbols:` of the layer table;
  `TorchModule` is a `keras.layers.Layer` with torch's Module behaviour, runtime/keras/modules.py).
  A class deriving from a torch layer (`class Stage(nn.Sequential)`, `class LayerNorm2d(nn.LayerNorm)`)
  derives from its torch-signature Keras shim and gets `TorchModule` as the base right after it
  (before any plain mixin), so it has torch's module methods, mode and buffers too.
* `def forward` -> `def call` (Keras calls `call`), and `self.forward(...)` /
  `super().forward(...)` in module classes and `Net.forward(self, x)` -> `.call(...)`;
  `TorchModule.forward` calls `call`, so `model.forward(x)` from outside still works.
* `self.modules()` / `named_modules()` / `children()` / `named_children()` / `add_module(name, m)`
  on `self` and its attributes -> `modules(self)`, ... (runtime/keras/module_api.py): the attribute may
  be a Keras shim (`Sequential`) that has no such method.
* `isinstance(m, nn.Module)` -> `isinstance(m, keras.layers.Layer)`: converted layers are Keras
  layers, only converted module classes are `TorchModule`s.

Attributes that keras.layers.Layer owns (`self.name`, `self.dtype`, `self.weights`, `self.trainable`,
...) but a module class of the file sets as its own (pretrainedmodels' `self.name = name`, which
Keras then uses for its name scope; kornia's `self.weights = ...`) are renamed with a trailing
underscore in every module class of the file (`self.name_`), with a note; the class gets
`_torch_renamed = {"name_": "name"}`, so torch names (state dicts, `named_children`, weight
transfer) stay torch's. A method Keras wraps or calls itself (`build`, `quantize`) that a module
class defines is renamed the same way (`def quantize_`, `self.quantize_(z)`), with a note.
Nothing else needs rewriting: Keras layers take no `rngs`, `self.training` is a property of
`TorchModule`, and `self.register_buffer(...)` / `self.register_parameter(...)` are its methods.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.analysis.torch_models import analysis_for
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.rules.module_variables import variables_as_arrays
from precision_transpiler.rules.module_walks import module_walk
from precision_transpiler.runtime import runtime_module
from precision_transpiler.syntax import dotted_name, is_docstring

_SHIMS = runtime_module("tf", "modules")
_WALKS = runtime_module("tf", "module_api")
#: read-only properties of keras.layers.Layer (Keras 3.15): `self.dtype = ...` raises AttributeError
#: (`input` and `output` too, but TorchModule makes them assignable: BERT's `self.output`)
_KERAS_READ_ONLY = frozenset(
    {
        "compute_dtype", "dtype", "input_dtype", "losses", "metrics", "metrics_variables",
        "non_trainable_variables", "non_trainable_weights", "path", "quantization_mode",
        "trainable_variables", "trainable_weights", "variable_dtype", "variables", "weights",
    }
)  # fmt: skip
#: attributes Keras reads itself: assigning them changes how the layer behaves
_KERAS_SETTINGS = frozenset({"trainable", "dtype_policy", "input_spec", "supports_masking", "built", "autocast"})
#: what a module class may not keep under its torch name: Keras' read-only properties, its
#: settings, and `name` (Keras builds name scopes from it: `self.name = None` breaks every call)
_KERAS_OWNED = _KERAS_READ_ONLY | _KERAS_SETTINGS | {"name"}
#: methods of keras.layers.Layer that Keras wraps when the layer is made or calls itself
#: (`build(input_shape)` at the first call, `quantize` replaced by its `quantize_wrapper`):
#: a module class's own method of that name would be Keras', not the source's
_KERAS_METHODS = frozenset({"build", "quantize", "quantized_build", "quantized_call", "compute_mask"})


def _owned_methods(ctx: RuleContext) -> frozenset[str]:
    """Methods Keras owns that some module class of the file defines (vector-quantize's
    `LatentQuantize.quantize(self, z)`, which Keras replaced by its quantization at construction)."""

    def build() -> frozenset[str]:
        import ast

        tree, _ = ctx.module_ast()
        classes = analysis_for(ctx).module_classes
        return frozenset(
            stmt.name
            for node in (ast.walk(tree) if tree is not None else ())
            if isinstance(node, ast.ClassDef) and node.name in classes
            for stmt in node.body
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name in _KERAS_METHODS
        )

    return ctx.per_file("keras-owned-methods", build)


def _owned_attributes(ctx: RuleContext) -> frozenset[str]:
    """Attributes Keras owns that some module class of the file assigns on `self`."""

    def build() -> frozenset[str]:
        import ast

        tree, _ = ctx.module_ast()
        classes = analysis_for(ctx).module_classes
        found: set[str] = set()
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.ClassDef) and node.name in classes:
                for inner in ast.walk(node):
                    named = _registered_name(inner)
                    if named in _KERAS_OWNED:
                        found.add(named)
                    targets = inner.targets if isinstance(inner, ast.Assign) else []
                    if isinstance(inner, ast.AnnAssign | ast.AugAssign):
                        targets = [inner.target]
                    # `self.device, self.dtype = device, dtype` (torch-uncertainty's MCBatchNorm)
                    targets = [t for target in targets for t in _unpacked(target)]
                    for target in targets:
                        if (
                            isinstance(target, ast.Attribute)
                            and isinstance(target.value, ast.Name)
                            and target.value.id == "self"
                            and target.attr in _KERAS_OWNED
                        ):
                            found.add(target.attr)
        return frozenset(found)

    return ctx.per_file("keras-owned-attributes", build)


def _unpacked(target: object) -> list[object]:
    """The targets an assignment target binds: a tuple or list target's elements, nested."""
    import ast

    if isinstance(target, ast.Tuple | ast.List):
        return [t for element in target.elts for t in _unpacked(element)]
    return [target]


@register
class TorchModulesKeras(Rule):
    name = "torch-module-keras"
    summary = "Turn nn.Module classes into Keras layers with torch's module behaviour (forward -> call)."
    EXAMPLES = (
        # (class conversions carry the whole TorchModule shim: tests/e2e/test_torch_to_keras.py)
        Example(
            "import torch.nn as nn\n\n\ndef is_layer(m):\n    return isinstance(m, (nn.Module, int))\n",
            "import keras\n\n\ndef is_layer(m):\n    return isinstance(m, (keras.layers.Layer, int))\n",
            to="tf",
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target == "tf"

    @staticmethod
    def _owner(ctx: RuleContext) -> str | None:
        key = ctx.enclosing_function()
        return key.split(".")[0] if key and "." in key else None

    # -- classes -------------------------------------------------------------------------------

    def leave_ClassDef(
        self, ctx: RuleContext, original: cst.ClassDef, updated: cst.ClassDef
    ) -> cst.BaseStatement | None:
        """A module class deriving from a torch layer (and from no module class of the file)
        gets `TorchModule` as a base after the layer's; one whose attributes were renamed says so
        (`_torch_renamed`)."""
        analysis = analysis_for(ctx)
        if original.name.value not in analysis.module_classes:
            return None
        updated = self._declare_renamed(ctx, original, updated)
        last_layer = -1
        for index, arg in enumerate(original.bases):
            qualified = ctx.qualified_name(arg.value)
            if ctx.mappings.frameworks["torch"].is_module_base(qualified):
                return updated
            if dotted_name(arg.value) in analysis.module_classes:
                return updated
            if qualified is not None and qualified in ctx.mappings.layers:
                last_layer = index
        if last_layer < 0 or any(a.keyword is not None or a.star for a in updated.bases):
            return updated
        # right after the last layer base, before plain mixins (`class Embedding(nn.Embedding,
        # LoRALayer)`): the layer's `super().__init__(dtype=...)` then reaches TorchModule and
        # Keras, never the mixin's `__init__`, as torch's Module.__init__ ends the chain
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        bases = list(updated.bases)
        module = cst.Arg(ctx.expr_for(f"{_SHIMS}.TorchModule"), comma=bases[last_layer].comma)
        bases[last_layer] = bases[last_layer].with_changes(comma=comma)
        bases.insert(last_layer + 1, module)
        new = updated.with_changes(bases=bases)
        ctx.record(self.name, original.name, new.name)
        return new

    def _declare_renamed(self, ctx: RuleContext, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        used = sorted(
            name
            for name in _owned_attributes(ctx)
            if any(
                isinstance(n, cst.Attribute)
                and n.attr.value == name
                and isinstance(n.value, cst.Name)
                and n.value.value == "self"
                for n in _attributes(original)
            )
        )
        if not used or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        mapping = ", ".join(f'"{name}_": "{name}"' for name in used)
        line = cst.parse_statement(f"_torch_renamed = {{{mapping}}}  # Keras owns these names\n")
        body = list(updated.body.body)
        at = 1 if body and is_docstring(body[0]) else 0
        body.insert(at, line)
        following = body[at + 1] if at + 1 < len(body) else None
        if isinstance(following, cst.FunctionDef) and not following.leading_lines:
            body[at + 1] = following.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        return updated.with_changes(body=updated.body.with_changes(body=body))

    # -- forward -> call -----------------------------------------------------------------------

    def leave_FunctionDef(
        self, ctx: RuleContext, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.BaseStatement | None:
        key = ctx.enclosing_function()
        if key is None or key.rsplit(".", 1)[-1] != original.name.value:
            return None
        name = original.name.value
        if name not in _owned_methods(ctx) and name != "forward":
            return None
        if self._owner(ctx) not in analysis_for(ctx).module_classes:
            return None
        if name != "forward":  # `def quantize(self, z)` -> `def quantize_(self, z)`
            new = updated.with_changes(name=cst.Name(f"{name}_"))
            ctx.record(self.name, original.name, new.name)
            ctx.diagnose(
                original.name,
                "note",
                "keras-reserved-attribute",
                f"method {name} renamed {name}_ in the module classes of this file: keras.layers.Layer "
                f"(the base of converted modules) owns `{name}` and would call or replace it",
            )
            return new
        new = updated.with_changes(name=cst.Name("call"))
        ctx.record(self.name, original.name, new.name)
        return new

    def leave_Attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        """`self.forward`, `super().forward` inside a module class and `Net.forward` of a module
        class of the file -> `.call` (`super().forward(x)` in a subclass would otherwise reach
        `TorchModule.forward`, which calls the subclass's own `call` again)."""
        if original.attr.value != "forward":
            return self._rename_owned(ctx, original, updated)
        value = original.value
        classes = analysis_for(ctx).module_classes
        is_self = isinstance(value, cst.Name) and value.value == "self" and self._owner(ctx) in classes
        is_super = (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Name)
            and value.func.value == "super"
            and self._owner(ctx) in classes
        )
        is_class = isinstance(value, cst.Name) and value.value in classes and ctx.qualified_name(value) is None
        if not (is_self or is_super or is_class):
            return None
        new = updated.with_changes(attr=cst.Name("call"))
        ctx.record(self.name, original, new)
        return new

    # -- attributes Keras owns ----------------------------------------------------------------

    def _rename_owned(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        """`self.name` in a module class of a file whose module classes set `self.name` -> `self.name_`;
        likewise `self.quantize` where they define a method `quantize`."""
        name = original.attr.value
        if not (isinstance(original.value, cst.Name) and original.value.value == "self"):
            return None
        owned = _owned_attributes(ctx) | _owned_methods(ctx)
        if name not in owned or self._owner(ctx) not in analysis_for(ctx).module_classes:
            return None
        new = updated.with_changes(attr=cst.Name(f"{name}_"))
        ctx.record(self.name, original, new)
        return new

    def leave_Assign(self, ctx: RuleContext, original: cst.Assign, updated: cst.Assign) -> None:
        for target in original.targets:
            elements = [target.target]
            while any(isinstance(e, cst.Tuple | cst.List) for e in elements):  # `self.device, self.dtype = ...`
                elements = [
                    x
                    for e in elements
                    for x in ([i.value for i in e.elements] if isinstance(e, cst.Tuple | cst.List) else [e])
                ]
            for element in elements:
                self._check_attribute(ctx, element, original)

    def leave_AnnAssign(self, ctx: RuleContext, original: cst.AnnAssign, updated: cst.AnnAssign) -> None:
        self._check_attribute(ctx, original.target, original)

    def _check_attribute(self, ctx: RuleContext, target: cst.BaseExpression, statement: cst.CSTNode) -> None:
        """`self.name = ...` in a module class: renamed (`_rename_owned`); say so once per class
        and attribute."""
        if not (
            isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
        ):
            return
        name = target.attr.value
        owner = self._owner(ctx)
        if name not in _owned_attributes(ctx) or owner not in analysis_for(ctx).module_classes:
            return
        said = ctx.per_file("keras-owned-said", set)
        if (owner, name) in said:
            return
        said.add((owner, name))
        ctx.diagnose(
            statement,
            "note",
            "keras-reserved-attribute",
            f"self.{name} renamed self.{name}_ in the module classes of this file: keras.layers.Layer "
            f"(the base of converted modules) owns `{name}`; torch names (state dicts) keep `{name}`",
        )

    # -- calls ---------------------------------------------------------------------------------

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        renamed = self._rename_registered(ctx, original, updated)
        if renamed is not None:
            walked = self._module_walk(ctx, original, renamed)
            return walked if walked is not None else renamed
        foreign = self._variables_as_arrays(ctx, original, updated)
        if foreign is not None:
            return foreign
        walked = self._module_walk(ctx, original, updated)
        if walked is not None:
            return walked
        return self._isinstance_module(ctx, original, updated)

    def _rename_registered(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.Call | None:
        """`self.register_buffer("weights", w)` (kornia's VonMisesKernel) in a module class: the
        renamed attribute, `"weights_"`, as `self.weights` reads became `self.weights_`."""
        func = original.func
        if not (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
            and func.attr.value in _REGISTERING
            and updated.args
            and isinstance(updated.args[0].value, cst.SimpleString)
        ):
            return None
        literal = updated.args[0].value
        name = literal.evaluated_value
        if name not in _owned_attributes(ctx) or self._owner(ctx) not in analysis_for(ctx).module_classes:
            return None
        quote = literal.quote
        args = [updated.args[0].with_changes(value=cst.SimpleString(f"{quote}{name}_{quote}")), *updated.args[1:]]
        new = updated.with_changes(args=args)
        ctx.record(self.name, original, new)
        if original.args and isinstance(original.args[0].value, cst.SimpleString):
            said = ctx.per_file("keras-owned-said", set)
            if (self._owner(ctx), name) not in said:
                said.add((self._owner(ctx), name))
                ctx.diagnose(
                    original,
                    "note",
                    "keras-reserved-attribute",
                    f"{name} registered as {name}_ in the module classes of this file: keras.layers.Layer "
                    f"(the base of converted modules) owns `{name}`; torch names (state dicts) keep `{name}`",
                )
        return new

    def _module_walk(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        """`net.modules()` -> `modules(net)`, `self.add_module(name, m)` -> `add_module(self, name, m)`:
        rules/module_walks.py."""
        new = module_walk(ctx, original, updated, _WALKS)
        if new is not None:
            ctx.record(self.name, original, new)
        return new

    def _isinstance_module(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        if not (isinstance(original.func, cst.Name) and original.func.value in ("isinstance", "issubclass")):
            return None
        if len(original.args) != 2:
            return None
        classes = original.args[1].value
        targets = [e.value for e in classes.elements] if isinstance(classes, cst.Tuple) else [classes]
        is_module = ctx.mappings.frameworks["torch"].is_module_base
        if not any(is_module(ctx.qualified_name(t)) for t in targets):
            return self._isinstance_tensor(ctx, original, updated, targets)
        converted = updated.args[1].value
        layer = ctx.expr_for("keras.layers.Layer")
        if isinstance(classes, cst.Tuple) and isinstance(converted, cst.Tuple):
            elements = [
                e.with_changes(value=layer) if is_module(ctx.qualified_name(o.value)) else e
                for o, e in zip(classes.elements, converted.elements, strict=True)
            ]
            value: cst.BaseExpression = converted.with_changes(elements=elements)
        else:
            value = layer
        new = updated.with_changes(args=[updated.args[0], updated.args[1].with_changes(value=value)])
        ctx.record(self.name, original, new)
        return new

    def _isinstance_tensor(
        self, ctx: RuleContext, original: cst.Call, updated: cst.Call, targets: list[cst.BaseExpression]
    ) -> cst.BaseExpression | None:
        """`isinstance(self.emb0, torch.Tensor)` -> `isinstance(self.emb0, (tf.Tensor, keras.Variable))`:
        a buffer or parameter of a converted module is a Keras variable, not a tf.Tensor (kornia
        checks its buffers so and raised TypeError)."""
        if original.func.value != "isinstance" or not any(  # type: ignore[attr-defined]
            ctx.qualified_name(t) in _TENSOR_CLASSES for t in targets
        ):
            return None
        converted = updated.args[1].value
        variable = cst.Element(ctx.expr_for("keras.Variable"))
        if isinstance(converted, cst.Tuple):
            elements = [*converted.elements]
            elements[-1] = elements[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            value: cst.BaseExpression = converted.with_changes(elements=[*elements, variable])
        else:
            first = cst.Element(converted, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            value = cst.Tuple([first, variable])
        new = updated.with_changes(args=[updated.args[0], updated.args[1].with_changes(value=value)])
        ctx.record(self.name, original, new)
        return new

    def _variables_as_arrays(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.Call | None:
        """`repeat(self.cls, ...)` (einops, a helper library): a parameter or buffer passed to a
        function no table knows is passed as its tensor, `tf.convert_to_tensor(self.cls.value)`:
        `.value` applies Keras' autocast but is TensorFlow's own variable where none applies, which
        code reading `.ndim` of it refuses (torch-uncertainty's packed attention), and
        `keras.ops.convert_to_tensor` hands a Keras variable back as it is; rules/module_variables.py."""
        to_tensor = ctx.expr_for(ctx.mappings.frameworks["tf"].as_array or "tensorflow.convert_to_tensor")
        new = variables_as_arrays(
            ctx, original, updated, lambda v: cst.Call(to_tensor, [cst.Arg(cst.Attribute(v, cst.Name("value")))])
        )
        if new is not None:
            ctx.record(self.name, original, new)
        return new


#: torch's tensor classes, which a converted module's variables stand for too
_TENSOR_CLASSES = frozenset({"torch.Tensor", "torch.FloatTensor", "torch.LongTensor", "torch.BoolTensor"})

#: methods of a module that bind an attribute named by their first argument
_REGISTERING = frozenset({"register_buffer", "register_parameter", "add_module", "register_module"})


def _registered_name(node: object) -> str | None:
    """`self.register_buffer("weights", ...)` -> "weights" (an `ast` node)."""
    import ast

    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    func = node.func
    if not (isinstance(func.value, ast.Name) and func.value.id == "self" and func.attr in _REGISTERING):
        return None
    first = node.args[0] if node.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _attributes(node: cst.CSTNode) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class _V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> None:
            found.append(n)

    node.visit(_V())
    return found
