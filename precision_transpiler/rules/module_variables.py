"""A module's parameters and buffers passed to functions that take arrays only.

A converted module holds its parameters and buffers as framework variables (an `nnx.Param`, a
`keras.Variable`). The framework's own functions take them as arrays, but a function of another
library does not: einops' `repeat(self.cls, "1 1 d -> b 1 d", b=b)` asks the argument's type for
a backend and finds none. Such arguments are passed as their arrays; how a target spells that
(`self.cls[...]` in Flax, `self.cls.value` in Keras, which applies Keras' autocast) is the
rule's `wrap`.

Also, for Flax, what else touches a module's variables in attribute form: an attribute set on
one (`variable_metadata`) and a tuple assignment target holding some (`in_store_target`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

import libcst as cst

from precision_transpiler.analysis.tensors import attribute_kind
from precision_transpiler.analysis.torch_models import analysis_for
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.runtime import runtime_name
from precision_transpiler.syntax import dotted_name


def variables_as_arrays(
    ctx: RuleContext,
    original: cst.Call,
    updated: cst.Call,
    wrap: Callable[[cst.BaseExpression], cst.BaseExpression],
) -> cst.Call | None:
    """`updated` with each argument that is `self.<parameter or buffer>` wrapped, when the call
    goes to an imported function no table knows (`RuleContext.is_foreign_call`) or to a function
    of the file outside initialisers (denoising-diffusion-pytorch's `normalize_weight(self.weight)`,
    which packs it with einops); None when nothing changes. Only attributes the class assigns a
    `nn.Parameter` (and nothing else) or registers as a buffer qualify: one that may hold None is
    left as written."""
    key = ctx.enclosing_function()
    owner = key.split(".")[0] if key and "." in key else None
    if owner is None:
        return None
    dynamic = _dynamic_variable_read(ctx, original, updated, owner)
    if dynamic is None and _mapped_over(ctx, original) and not _initialiser(key.split(".")[-1]):
        return _displays_as_arrays(ctx, original, updated, wrap, owner)
    if dynamic is not None or not (ctx.is_foreign_call(original) or _helper_call(ctx, original, key or "")):
        return dynamic
    if calls_a_user_class(ctx, original):
        return None  # `Head(weight=self.embed.weight)`: a module keeps the variable (a tie)
    analysis = analysis_for(ctx)
    names = analysis.params.get(owner, set()) | analysis.buffers.get(owner, set())
    names -= analysis.nullable_buffers.get(owner, set())
    layers = analysis.layer_attrs.get(owner, {})
    if not names and not layers:
        return None
    args = list(updated.args)
    changed = False
    aliases: dict[str, bool] | None = None
    convert = ctx.mappings.frameworks[ctx.target].as_array
    for index, (before, after) in enumerate(zip(original.args, updated.args, strict=True)):
        value = before.value
        if _layer_variable(value, layers) and _layer_variable(after.value, layers) and convert is not None:
            # `rearrange(self.to_kv.weight, ...)` (colt5-attention): a layer's weight, a Keras
            # variable (on Flax, the attribute rule reads the array already: `kernel[...].T`); a
            # bias may be None (`bias=False`), which the runtime's `optional_array` keeps
            function = (
                convert if value.attr.value == "weight" else runtime_name(ctx.target, "module_api", "optional_array")
            )
            args[index] = after.with_changes(value=cst.Call(ctx.expr_for(function), [cst.Arg(after.value)]))
            changed = True
        elif (
            isinstance(value, cst.Attribute)
            and isinstance(value.value, cst.Name)
            and value.value.value == "self"
            and value.attr.value in names
            and before.star == ""
            and isinstance(after.value, cst.Attribute)
        ):
            args[index] = after.with_changes(value=wrap(after.value))
            changed = True
        elif isinstance(value, cst.Name) and before.star == "" and isinstance(after.value, cst.Name):
            # `weight, bias = self.weight, self.bias` then `rearrange(bias, ...)` (g-mlp-pytorch)
            aliases = _variable_aliases(ctx, names) if aliases is None else aliases
            kind = aliases.get(value.value)
            if kind == "variable":
                args[index] = after.with_changes(value=wrap(after.value))
                changed = True
            elif kind == "mixed":  # `bias = bias[:, :n]` on one path: a variable or an array
                if convert is not None:
                    args[index] = after.with_changes(value=cst.Call(ctx.expr_for(convert), [cst.Arg(after.value)]))
                    changed = True
    return updated.with_changes(args=args) if changed else None


def _mapped_over(ctx: RuleContext, call: cst.Call) -> bool:
    """`map(f, (self.mem_k, self.mem_v))`: Python's own `map` (not a name the file binds)."""
    return (
        isinstance(call.func, cst.Name)
        and call.func.value == "map"
        and ctx.qualified_name(call.func) is None
        and "map" not in _file_functions(ctx) | _local_functions(ctx)
        and len(call.args) >= 2
    )


def _displays_as_arrays(
    ctx: RuleContext,
    original: cst.Call,
    updated: cst.Call,
    wrap: Callable[[cst.BaseExpression], cst.BaseExpression],
    owner: str,
) -> cst.Call | None:
    """rela-transformer's `map(lambda t: repeat(t, "n d -> b n d", b=b), (self.mem_k,
    self.mem_v))`: the function sees each element as torch's tensor, so a parameter or buffer in
    a tuple or list the call maps over is handed over as its array, as when passed directly."""
    analysis = analysis_for(ctx)
    names = analysis.params.get(owner, set()) | analysis.buffers.get(owner, set())
    names -= analysis.nullable_buffers.get(owner, set())
    args = list(updated.args)
    changed = False
    for index, (before, after) in enumerate(zip(original.args, updated.args, strict=True)):
        if index == 0 or not isinstance(before.value, cst.Tuple | cst.List):
            continue
        if not isinstance(after.value, type(before.value)) or len(after.value.elements) != len(before.value.elements):
            continue
        elements = list(after.value.elements)
        for position, element in enumerate(before.value.elements):
            value = element.value
            if (
                isinstance(element, cst.Element)
                and isinstance(value, cst.Attribute)
                and isinstance(value.value, cst.Name)
                and value.value.value == "self"
                and value.attr.value in names
                and isinstance(elements[position].value, cst.Attribute)
            ):
                elements[position] = elements[position].with_changes(value=wrap(elements[position].value))
                changed = True
        args[index] = after.with_changes(value=after.value.with_changes(elements=elements))
    return updated.with_changes(args=args) if changed else None


#: the variables of torch's layers that code reads by name
_LAYER_VARIABLES = frozenset({"weight", "bias"})


def _layer_variable(value: cst.BaseExpression, layers: dict[str, str]) -> bool:
    """`self.<layer>.weight` / `.bias` of a layer the class builds."""
    return (
        isinstance(value, cst.Attribute)
        and value.attr.value in _LAYER_VARIABLES
        and isinstance(value.value, cst.Attribute)
        and isinstance(value.value.value, cst.Name)
        and value.value.value.value == "self"
        and value.value.attr.value in layers
    )


def _variable_aliases(ctx: RuleContext, names: set[str]) -> dict[str, str | None]:
    """Local name -> "variable" when every binding of it in the function being converted is
    `self.<one of names>` (`bias = self.bias`, `weight, bias = self.weight, self.bias`), "mixed"
    when others only index it (`bias = bias[:, :n]` on one path: then it may be an array), None
    for a name also bound otherwise (a parameter, a loop, another value)."""
    function = ctx.enclosing_def()
    if function is None:
        return {}
    found: dict[str, str | None] = {}
    for param in (*function.params.params, *function.params.kwonly_params, *function.params.posonly_params):
        found[param.name.value] = None

    def kind(name: str, value: cst.BaseExpression | None) -> str | None:
        if (
            isinstance(value, cst.Attribute)
            and isinstance(value.value, cst.Name)
            and value.value.value == "self"
            and value.attr.value in names
        ):
            return "variable"
        if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and value.value.value == name:
            return "indexed"
        return None

    def bind(target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if isinstance(target, cst.Name):
            new = kind(target.value, value)
            old = found.get(target.value, "unbound")
            if old is None or new is None:
                found[target.value] = None
            elif old == "unbound":
                found[target.value] = "variable" if new == "variable" else None
            elif new == "indexed" or old == "mixed":
                found[target.value] = "mixed"
        elif isinstance(target, cst.Tuple | cst.List):
            values = value.elements if isinstance(value, cst.Tuple | cst.List) else None
            if values is not None and len(values) != len(target.elements):
                values = None
            for i, element in enumerate(target.elements):
                bind(element.value, values[i].value if values is not None else None)

    class _Bindings(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                bind(t.target, node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            bind(node.target, None)

        def visit_For(self, node: cst.For) -> None:
            bind(node.target, None)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            bind(node.target, node.value)

    function.body.visit(_Bindings())
    return found


def _dynamic_variable_read(ctx: RuleContext, original: cst.Call, updated: cst.Call, owner: str) -> cst.Call | None:
    """`getattr(self, f"threshold_{suffix}")` naming a parameter or buffer by a computed name
    (st-moe-pytorch's train and eval thresholds, then handed to einops): read as an array
    through the target's `as_array` (a variable's array, any other value as an array)."""
    analysis = analysis_for(ctx)
    names = analysis.params.get(owner, set()) | analysis.buffers.get(owner, set())
    names -= analysis.nullable_buffers.get(owner, set())
    convert = ctx.mappings.frameworks[ctx.target].as_array
    if not names or convert is None or _getattr_of_variable(original, names) is None:
        return None
    return cst.Call(ctx.expr_for(convert), [cst.Arg(updated)])


def _getattr_of_variable(value: cst.BaseExpression | None, names: set[str]) -> str | None:
    """`getattr(self, "threshold_train")` -> "variable"; `getattr(self, f"threshold_{suffix}")`,
    whose constant start begins a parameter or buffer name (st-moe-pytorch), -> "mixed" (it may
    name another attribute); anything else None."""
    if not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "getattr"
        and len(value.args) == 2
        and isinstance(value.args[0].value, cst.Name)
        and value.args[0].value.value == "self"
    ):
        return None
    name = value.args[1].value
    if isinstance(name, cst.SimpleString):
        return "variable" if name.evaluated_value in names else None
    if isinstance(name, cst.FormattedString) and name.parts and isinstance(name.parts[0], cst.FormattedStringText):
        start = name.parts[0].value
        return "mixed" if start and any(n.startswith(start) for n in names) else None
    return None


def bind_register_buffer(
    args: Sequence[cst.Arg],
) -> tuple[cst.BaseExpression, cst.BaseExpression, list[cst.Arg]] | None:
    """`register_buffer(name, tensor, persistent=True)` bound by torch's signature, positional or
    by keyword (lightly's `register_buffer("bank", tensor=..., persistent=False)`): (name,
    tensor, [persistent as a keyword]); None for star-arguments or what does not bind."""
    if any(a.star for a in args):
        return None
    names = ("name", "tensor", "persistent")
    bound: dict[str, cst.BaseExpression] = {}
    for position, arg in enumerate(args):
        key = arg.keyword.value if arg.keyword is not None else (names[position] if position < 3 else None)
        if key not in names or key in bound:
            return None
        bound[key] = arg.value
    if "name" not in bound or "tensor" not in bound:
        return None
    equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    extra = [cst.Arg(bound["persistent"], keyword=cst.Name("persistent"), equal=equal)] if "persistent" in bound else []
    return bound["name"], bound["tensor"], extra


def in_store_target(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Whether an element of a tuple or list display is part of an assignment or loop target."""
    while isinstance(node, cst.Element | cst.StarredElement | cst.Tuple | cst.List):
        parent = ctx.parent(node)
        if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.For) and parent.target is node):
            return True
        node = parent  # type: ignore[assignment]
    return False


def variable_metadata(ctx: RuleContext, original: cst.Assign, updated: cst.Assign) -> cst.Expr | None:
    """`self.A_log._no_weight_decay = True` (mambapy: a mark for the optimiser on a parameter)
    -> `self.A_log.set_metadata("_no_weight_decay", True)`: an nnx Variable takes other
    attributes as metadata only. Torch's own tensor attributes (`data`, `grad`, ...) are the
    other rules'."""
    if len(original.targets) != 1:
        return None
    target = original.targets[0].target
    if not (
        isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Attribute)
        and isinstance(target.value.value, cst.Name)
        and target.value.value.value == "self"
        and target.attr.value not in _TENSOR_ATTRIBUTES
    ):
        return None
    if attribute_kind(ctx, target.value, original) != "variable":
        return None
    new_target = updated.targets[0].target
    assert isinstance(new_target, cst.Attribute)
    name = cst.Arg(
        cst.SimpleString(f'"{target.attr.value}"'), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    )
    func = cst.Attribute(new_target.value, cst.Name("set_metadata"))
    return cst.Expr(cst.Call(func, [name, cst.Arg(updated.value)]))


_TENSOR_ATTRIBUTES = frozenset({"data", "grad", "requires_grad", "value", "shape", "dtype", "device", "T"})


def parameter_argument(ctx: RuleContext, original: cst.Attribute) -> bool:
    """Whether `self.<parameter>` is an argument that must reach the call as its array (Flax):
    JAX's jitted functions (`jax.nn.sigmoid`, what `torch.sigmoid(self.w)` becomes) refuse an
    nnx.Param (JAX no longer converts `__jax_array__` objects while tracing), and so does any
    such function inside a helper of the file the parameter is handed to (spikingjelly's
    `plif_multi_step(x_seq, v, self.w, ...)`). So: an argument of a torch function (not an
    in-place one, not `torch.nn.init`, not a layer or `nn.Parameter`) or of a function the file
    defines, outside constructors and initialisers (which may fill the parameter in place).
    Attributes that may hold None are left as written."""
    key = ctx.enclosing_function() or ""
    owner, _, method = key.partition(".")
    if _initialiser(method):
        return False
    analysis = analysis_for(ctx)
    name = original.attr.value
    if name not in analysis.params.get(owner, set()) or name in analysis.nullable_buffers.get(owner, set()):
        return False
    arg = ctx.parent(original)
    if isinstance(arg, cst.Attribute) and arg.value is original:
        return _tensor_method_call(ctx, arg)  # `self.beta.sigmoid()` -> `jax.nn.sigmoid(...)`
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call) or arg.star or call.func is original:  # type: ignore[union-attr]
        return False
    qualified = ctx.qualified_name(call.func)
    if qualified is not None:
        last = qualified.rsplit(".", 1)[-1]
        return (
            qualified.startswith("torch.")
            and not qualified.startswith(("torch.nn.init.", "torch.nn.Parameter", "torch.nn.parameter"))
            and not last.endswith("_")
            and not last[:1].isupper()
        )
    return _helper_function(ctx, call.func)


def _tensor_method_call(ctx: RuleContext, method: cst.Attribute) -> bool:
    """`self.<parameter>.sigmoid()`: a tensor method the op tables turn into a function of the
    target (block-recurrent-transformer's `self.learned_ema_beta.sigmoid()`); not an in-place
    one, which must keep the parameter."""
    name = method.attr.value
    call = ctx.parent(method)
    return (
        isinstance(call, cst.Call)
        and call.func is method
        and not name.endswith("_")
        and name in ctx.mappings.method_names.get("torch", ())
    )


def _helper_call(ctx: RuleContext, call: cst.Call, key: str) -> bool:
    """A call of a function the file defines, from a method that is no constructor or
    initialiser (which may fill the variable in place)."""
    method = key.partition(".")[2]
    if _initialiser(method):
        return False
    func = call.func
    while isinstance(func, cst.Attribute):  # `functional.plif_step(...)` of `from .. import functional`
        func = func.value
    return _helper_function(ctx, func) or ctx.module_alias(call.func)


def _helper_function(ctx: RuleContext, func: cst.BaseExpression) -> bool:
    """A function of the file (module level, or the package's through a relative import), or
    one the method defines inside itself (mega-pytorch's `apply_learned_ema_with_damping(x,
    self.alphas, ...)`): its code is converted beside the call and hands what it gets to the
    target's functions."""
    if not isinstance(func, cst.Name):
        return False
    return func.value in _file_functions(ctx) or func.value in _local_functions(ctx)


def _local_functions(ctx: RuleContext) -> frozenset[str]:
    """Names of the functions (and lambdas bound to a name) defined inside the method being
    converted."""
    method = ctx.enclosing_def()
    if method is None:
        return frozenset()

    def build() -> frozenset[str]:
        names: set[str] = set()

        class Defs(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                if node is not method:
                    names.add(node.name.value)

            def visit_Assign(self, node: cst.Assign) -> None:
                if isinstance(node.value, cst.Lambda):
                    names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))

        method.visit(Defs())
        return frozenset(names)

    return ctx.per_file(f"local-functions-{id(method)}", build)


def _file_functions(ctx: RuleContext) -> frozenset[str]:
    """Names of the functions the file defines at module level (classes aside), and the names
    its relative imports bind (the package's own functions and modules: spikingjelly's `from ..
    import functional`), whose code the conversion copies in beside the file's."""

    def build() -> frozenset[str]:
        tree, _ = ctx.module_ast()
        body = getattr(tree, "body", ())
        names = {s.name for s in body if isinstance(s, ast.FunctionDef)}
        for stmt in body:
            if isinstance(stmt, ast.ImportFrom) and stmt.level:
                names |= {a.asname or a.name for a in stmt.names if a.name != "*"}
        return frozenset(names)

    return ctx.per_file("module-functions", build)


def _initialiser(method: str) -> bool:
    """No method (module level), a constructor or an initialiser (`reset_parameters`,
    `_init_weights`): code that may fill a variable in place, which must keep the variable."""
    return not method or "init" in method or "reset" in method


def calls_a_user_class(ctx: RuleContext, call: cst.Call) -> bool:
    """Whether `call` builds a class of the user's code (a capitalised name the tables do not
    know: fair-esm's `RobertaLMHead(..., weight=self.embed_tokens.weight)`), which keeps what it
    is given: a parameter handed to it stays the variable, so both modules share it, as in
    torch, where a function gets the array."""
    name = dotted_name(call.func)
    if not name or not name.rsplit(".", 1)[-1][:1].isupper():
        return False
    return ctx.mappings.framework_of(ctx.qualified_name(call.func) or "") is None
