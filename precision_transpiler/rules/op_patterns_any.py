"""Operations from the YAML op tables: `x.half()` -> `x.astype(jnp.float16)`, `tf.cast(x, d)` ->
`x.to(d)`, `torch.finfo(t)` -> `jnp.finfo(t)`, ...

For each call or attribute in the source, the rule tries the source framework's patterns of
every op (mappings/ops/*.yaml). On a match it checks the bound arguments (a `dtype` parameter
must look like a dtype, a `device` one like a device: so `x.to("cuda")` is never read as a
cast), then emits the first target pattern that can express exactly those arguments.
Arguments the target cannot express are dropped only when the table says they may be
(`drop:`), with a note; otherwise the call is reported as unsupported.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from precision_transpiler.analysis.torch_models import analysis_for, random_source, warn_process_random
from precision_transpiler.mappings.model import MappingSet, OpSpec
from precision_transpiler.mappings.patterns import (
    NOT_LITERAL,
    ArgList,
    Pattern,
    literal_node,
    literal_value,
    same_value,
)
from precision_transpiler.rewrite.context import RuleContext, string_value
from precision_transpiler.rewrite.python_numbers import warnings_if_missing
from precision_transpiler.rewrite.templates import ATOMS, Match, emit_pattern, match_pattern, parenthesize
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.rules.op_arguments import LITERALS, STRICT_KINDS, STRINGS, kind_mismatch, receiver_params
from precision_transpiler.rules.op_lambdas import lambda_body, lambda_parameters, star_call
from precision_transpiler.rules.op_references import function_reference, is_torch_initialiser
from precision_transpiler.syntax import dotted_name


@register
class OpPatterns(Rule):
    name = "op-pattern"
    summary = "Rewrite operations (casts, finfo, tensor functions and methods, ...) through the op tables."
    EXAMPLES = (
        Example("import torch\ny = x.half()\n", "import jax.numpy as jnp\ny = x.astype(jnp.float16)\n", to="jax"),
        Example(
            "import torch\ny = x.float()\n",
            "import tensorflow as tf\ny = tf.cast(x, tf.float32)\n",
            to="tf",
        ),
        Example(
            "import tensorflow as tf\ny = tf.cast(x, tf.bfloat16)\n",
            "import torch\ny = x.to(torch.bfloat16)\n",
            to="torch",
        ),
        Example(
            "import torch\ny = x.to(device, torch.float16)\n",
            "import jax.numpy as jnp\ny = x.astype(jnp.float16)\n",
            to="jax",
            diagnostics=("device",),
        ),
        Example(
            # what `spec` is the code does not say: the runtime's torch_to decides when it runs
            "import torch\ny = x.to(spec)\n",
            "import precision_transpiler\ny = precision_transpiler.runtime.flax.tensor.torch_to(x, spec)\n",
            to="jax",
            vendored=False,
        ),
        Example(
            "import torch\nm = torch.finfo(torch.float16).max\n",
            "import jax.numpy as jnp\nm = jnp.finfo(jnp.float16).max\n",
            to="jax",
        ),
        Example(
            "import jax.numpy as jnp\nok = jnp.issubdtype(x.dtype, jnp.floating)\n",
            "ok = x.is_floating_point()\n",
            to="torch",
        ),
        Example(
            "import torch\ntorch.set_default_dtype(torch.float64)\n",
            'import jax\njax.config.update("jax_enable_x64", True)\n',
            to="jax",
        ),
        Example(
            "import torch\ny = (a + b).half()\n",
            "import tensorflow as tf\ny = tf.cast((a + b), tf.float16)\n",
            to="tf",
        ),
        # variadic arguments: `x.view(a, b)` and `x.view(s)` alike
        Example(
            "import torch\na = x.view(b, -1).transpose(0, 1)\nc = x.view(shape)\n",
            "import jax.numpy as jnp\na = jnp.swapaxes(x.reshape((b, -1)), 0, 1)\nc = x.reshape(shape)\n",
            to="jax",
        ),
        # defaults that differ: torch's std is unbiased, jnp's ddof is 0
        Example(
            "import torch\ns = x.std(), x.std(1, unbiased=False)\n",
            "import jax.numpy as jnp\ns = jnp.std(x, ddof=1), jnp.std(x, axis=1)\n",
            to="jax",
        ),
        # constants: torch's GELU is exact unless told otherwise, JAX's is not
        Example(
            'import torch.nn.functional as F\ny = F.gelu(x), F.gelu(x, approximate="tanh")\n',
            "import jax\ny = jax.nn.gelu(x, approximate=False), jax.nn.gelu(x, approximate=True)\n",
            to="jax",
        ),
        # a string method of the same name is not a tensor call
        Example('import torch\nparts = line.split(",")\n', None, to="jax"),
        # random draws (`draws: true`, mappings/ops/random_ops.yaml): JAX takes the key source in
        # reach, the builder's rngs while building layers ...
        Example(
            "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self, d):\n"
            "        super().__init__()\n        self.token = nn.Parameter(torch.randn(1, 1, d))\n",
            "from flax import nnx\nimport precision_transpiler\n\n\n"
            "class Net(precision_transpiler.runtime.flax.modules.TorchModule):\n"
            "    def __init__(self, d, *, rngs: nnx.Rngs | None = None):\n        if rngs is None:\n"
            "            rngs = nnx.Rngs(0)\n        super().__init__()\n"
            "        self.token = nnx.Param(precision_transpiler.runtime.flax.rng.torch_randn("
            "1, 1, d, rngs=rngs))\n",
            to="jax",
            vendored=False,
        ),
        # ... the module's own stream in its methods (its `__init__` makes it) ...
        Example(
            "import torch\nimport torch.nn as nn\n\n\nclass Noise(nn.Module):\n    def __init__(self, s):\n"
            "        super().__init__()\n        self.s = s\n\n    def forward(self, x):\n"
            "        return x + self.s * torch.randn_like(x)\n",
            "from flax import nnx\nimport precision_transpiler\n\n\n"
            "class Noise(precision_transpiler.runtime.flax.modules.TorchModule):\n"
            "    def __init__(self, s, *, rngs: nnx.Rngs | None = None):\n        if rngs is None:\n"
            "            rngs = nnx.Rngs(0)\n"
            "        self.torch_rng = precision_transpiler.runtime.flax.rng.random_stream(rngs)\n"
            "        super().__init__()\n        self.s = s\n\n    def __call__(self, x):\n"
            "        return x + self.s * precision_transpiler.runtime.flax.rng.torch_randn_like(x, rngs=self)\n",
            to="jax",
            vendored=False,
        ),
        # ... and in a free function the runtime's process-wide keys, with a warning
        Example(
            "import torch\n\n\ndef noise(x):\n    return x + torch.randn(3)\n",
            "import precision_transpiler\n\n\ndef noise(x):\n"
            "    return x + precision_transpiler.runtime.flax.rng.torch_randn(3)\n",
            to="jax",
            vendored=False,
            diagnostics=("process-wide keys",),
        ),
        # Keras draws from its global SeedGenerator
        Example(
            "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self, d):\n"
            "        super().__init__()\n        self.token = nn.Parameter(torch.randn(1, 1, d))\n",
            "import precision_transpiler\n\n\nclass Net(precision_transpiler.runtime.keras.modules.TorchModule):\n"
            "    def __init__(self, d):\n        super().__init__()\n        self.token = "
            "precision_transpiler.runtime.keras.module_api.Parameter("
            "precision_transpiler.runtime.keras.rng.torch_randn(1, 1, d))\n",
            to="tf",
            vendored=False,
        ),
    )

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        return self._rewrite(ctx, original)

    def leave_Attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        if _is_store(ctx, original):
            return None  # `self.device = x.device`: the target names an attribute, it reads no tensor
        parent = ctx.parent(original)
        if isinstance(parent, cst.Call) and parent.func is original:
            # the callee of a method call (`x.is_floating_point()`): the call's patterns, not an
            # attribute's (`{dtype}.is_floating_point`, a torch.dtype's property)
            return self._reference(ctx, original)
        return self._rewrite(ctx, original) or self._reference(ctx, original)

    def leave_Name(self, ctx: RuleContext, original: cst.Name, updated: cst.Name) -> cst.BaseExpression | None:
        return self._reference(ctx, original)

    def _reference(self, ctx: RuleContext, original: cst.Name | cst.Attribute) -> cst.BaseExpression | None:
        """A torch function passed around, not called (`activation=F.relu`, `act = torch.tanh`):
        the target function, when an op maps a call of it taking one tensor to a call of one
        function taking that tensor alone (`torch.nn.functional.relu({x:input}, ...)` ->
        `jax.nn.relu({x})`), so the reference is called as the original was."""
        parent = ctx.parent(original)
        if isinstance(parent, cst.Call) and parent.func is original:
            return None
        if isinstance(parent, cst.Attribute) and parent.value is original:
            return None  # a prefix of a longer name (`F` of `F.relu`)
        if not ctx.is_outermost_name(original) or _is_store(ctx, original):
            return None
        qualified = ctx.qualified_name(original)
        if qualified is None or ctx.mappings.framework_of(qualified) != ctx.source:
            return None
        target = function_reference(ctx, qualified)
        if target is None:
            if _type_position(ctx, original):
                return None  # `device: torch.device | None`: a type, not a callable to wrap
            new = self._reference_lambda(ctx, original, qualified)
            if new is None:
                return None
            ctx.consume([original])
            ctx.record(self.name, original, new)
            return new
        new = ctx.expr_for(target)
        if is_torch_initialiser(qualified):
            ctx.diagnose(
                original,
                "note",
                "init-dropped",
                f"`{ctx.code(original)}` passed as a value: calling it leaves the tensor as it is "
                "(initialisation is not converted; load the torch weights into the converted model)",
            )
        ctx.consume([original])
        ctx.record(self.name, original, new)
        return new

    def _reference_lambda(
        self, ctx: RuleContext, original: cst.Name | cst.Attribute, qualified: str
    ) -> cst.Lambda | None:
        """`partial(torch.cat, dim=-1)`: a torch function passed around whose target call takes
        its arguments otherwise (`jnp.concatenate(tensors, axis=dim)`): a lambda with the torch
        parameters of the op's one call pattern, its body the converted call
        (`lambda tensors, dim=0: jnp.concatenate(tensors, axis=dim)`; `partial(torch.clamp,
        min=-1.0, max=1.0)` with `lambda input, min=None, max=None: ...`). None when no single
        function pattern names it or the call does not convert."""
        found = [
            (op, pattern)
            for op, pattern in _index(ctx.mappings, ctx.source).get(("function", qualified), ())
            if not pattern.emit_only and pattern.method_name is None
        ]
        if len(found) != 1:
            return None
        op, pattern = found[0]
        holders = [p for p in pattern.placeholders.values() if not p.variadic and not p.keywords]
        if len(holders) != len(pattern.placeholders) or all(p.optional for p in holders):
            return None  # a function of nothing required (`torch.Size`) is a type, not a callable
        names = [p.keyword or p.name for p in holders]  # torch's own keywords: callers may use them
        text = lambda_parameters(names, holders)

        def call_with(given: list[str]) -> cst.Call:
            args = ", ".join(f"{n}={n}" for n in given)
            return cst.ensure_type(cst.parse_expression(f"{qualified}({args})"), cst.Call)

        body = lambda_body(ctx, op, pattern, (names, holders), call_with, qualified, original, self._emit)
        if body is None:
            return None
        return cst.ensure_type(cst.parse_expression(f"lambda {text}: None"), cst.Lambda).with_changes(body=body)

    def leave_Comparison(
        self, ctx: RuleContext, original: cst.Comparison, updated: cst.Comparison
    ) -> cst.BaseExpression | None:
        return self._rewrite(ctx, original)

    def leave_BooleanOperation(
        self, ctx: RuleContext, original: cst.BooleanOperation, updated: cst.BooleanOperation
    ) -> cst.BaseExpression | None:
        return self._rewrite(ctx, original)

    # ------------------------------------------------------------------------------------------

    def _rewrite(self, ctx: RuleContext, original: cst.CSTNode) -> cst.BaseExpression | None:
        roots = ctx.mappings.all_roots
        aliases = ctx.mappings.frameworks[ctx.source].keyword_aliases
        foreign = False
        for op, pattern in _candidates(ctx.mappings, ctx.source, original, ctx):
            match = match_pattern(pattern, original, ctx.qualified_name, roots, aliases)
            if match is None and isinstance(original, cst.Call):
                starred = star_call(ctx, op, pattern, original, self._emit)
                if starred is not None:
                    ctx.consume([original.func] if pattern.method_name is None else [])
                    ctx.record(self.name, original, starred)
                    return starred
            if match is None:
                continue
            mismatch = kind_mismatch(ctx, op, match, method=pattern.method_name is not None, anchor=original)
            if mismatch is not None:
                foreign = foreign or (mismatch.foreign and pattern.method_name is not None)
                continue
            replacement = self._emit(ctx, op, match, original)
            if replacement is None:
                return None
            ctx.consume(match.owned)
            ctx.record(self.name, original, replacement)
            return replacement
        if isinstance(original, cst.Call) and (foreign or _not_a_tensor_call(ctx, original)):
            # `s.split(",")`, `"a b".split()`, `s.split()`: a method of the same name on a string
            # (or list, dict): not a tensor call, so not an unsupported one either.
            ctx.consume([original])
        return None

    def _emit(self, ctx: RuleContext, op: OpSpec, match: Match, original: cst.CSTNode) -> cst.BaseExpression | None:
        targets = op.patterns.get(ctx.target, ())
        known = _known_values(ctx, op, match)
        bound = set(match.bindings) | set(match.pattern.bind)
        for target in targets:
            if any(p not in known or not same_value(known[p], value) for p, value in target.bind.items()):
                continue
            usable = target.params | set(target.bind)
            dropped = bound - usable
            if dropped - op.drop or target.required - bound:
                continue
            if any(not _duplicable(match.bindings.get(p)) for p in target.repeated):
                continue  # the pattern repeats a value: only safe for names, not calls
            values = _values(ctx, op, match, target, known, original)
            if values is None:
                continue
            try:
                replacement = emit_pattern(target, values, ctx.expr_for, ctx.mappings.all_roots)
            except KeyError:
                continue
            if match.spread:
                replacement = _forward_spread(ctx, op, match, target, replacement)
                if replacement is None:
                    continue
            if op.draws and ctx.target == "jax" and ctx.source != ctx.target:
                replacement = _with_key_source(ctx, op, replacement, original)
            for name in set(match.bindings) - target.params:
                for node in _user_nodes(match, name):
                    ctx.retract_under(node)
            quiet = match.defaulted | set(match.pattern.bind) | receiver_params(match.pattern)
            for name in sorted(dropped - quiet):
                ctx.diagnose(
                    _anchor(match, name, original),
                    "note",
                    "dropped-argument",
                    f"argument '{name}' of {op.name} has no equivalent in {ctx.target} and was dropped",
                )
            if ctx.source != ctx.target:
                for message in (op.warn, target.warn):
                    if message:
                        self._warn(ctx, op, original, "semantics-differ", message)
                # the op's own, and the source's and target's patterns' (one framework's inference)
                missing = {**op.warn_if_missing, **warnings_if_missing(match, target, ctx.qualified_name)}
                for name, message in missing.items():
                    if name not in bound or name in match.defaulted:
                        self._warn(ctx, op, original, "implicit-dtype", message)
            return _fit_parentheses(ctx, original, replacement)
        ctx.unsupported(original, _no_target_message(ctx, op, match), "unsupported-op")
        ctx.consume(match.owned)  # reported once, as the whole call
        return None

    def _warn(self, ctx: RuleContext, op: OpSpec, node: cst.CSTNode, code: str, message: str) -> None:
        if op.once:
            said: set[tuple[str, str]] = self.__dict__.setdefault("_said", set())  # one rule object per file
            if (op.name, message) in said:
                return
            said.add((op.name, message))
        ctx.diagnose(node, "warning", code, message)


def _with_key_source(
    ctx: RuleContext, op: OpSpec, replacement: cst.BaseExpression, original: cst.CSTNode
) -> cst.BaseExpression:
    """`rngs=<key source>` appended to a drawing op's JAX call (mappings/ops/random_ops.yaml):
    JAX has no global generator, so the call draws from what is in reach (random_source)."""
    source = random_source(ctx)
    if source is None or not isinstance(replacement, cst.Call):
        warn_process_random(ctx, original, op.name)
        return replacement
    args = list(replacement.args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    args.append(cst.Arg(cst.Name(source), keyword=cst.Name("rngs"), equal=equal))
    return replacement.with_changes(args=args)


def _keyword_params(pattern: Pattern, *, written: bool) -> dict[str, str]:
    """Keyword -> parameter of the placeholders of the pattern's outer call that can be passed by
    keyword (`written`: only those the pattern itself passes by keyword)."""
    call = pattern.expr
    if not isinstance(call, cst.Call):
        return {}
    found = {}
    for arg in call.args:
        if isinstance(arg.value, cst.Name) and arg.value.value in pattern.placeholders:
            ph = pattern.placeholders[arg.value.value]
            if not (ph.variadic or ph.keywords) and (arg.keyword is not None or (ph.keyword and not written)):
                found[arg.keyword.value if arg.keyword is not None else ph.keyword] = ph.name
    return found


def _forward_spread(
    ctx: RuleContext, op: OpSpec, match: Match, target: Pattern, replacement: cst.BaseExpression
) -> cst.BaseExpression | None:
    """`torch.zeros(n, **dd)` -> `jnp.zeros((n,), **torch_kwargs(dd, {"dtype": "dtype"}, ("device",)))`:
    what the mapping holds is known only when it runs, so a runtime helper renames the keys the
    target's call takes by keyword, drops those the op drops (device), and refuses, at run time,
    one the target cannot take (None values pass: torch's default). None when the target is no
    call that could take them."""
    if not isinstance(replacement, cst.Call) or not isinstance(target.expr, cst.Call):
        return None
    source = _keyword_params(match.pattern, written=False)
    taken = {param: keyword for keyword, param in _keyword_params(target, written=True).items()}
    keep = {kw: taken[param] for kw, param in source.items() if param in taken}
    drop = tuple(sorted(kw for kw, param in source.items() if kw not in keep and param in op.drop))
    helper = ctx.expr_for("precision_transpiler.runtime.common.torch_kwargs")
    args = list(replacement.args)
    for arg in match.spread:
        pairs = ", ".join(f'"{key}": "{value}"' for key, value in keep.items())
        dropped = ", ".join(f'"{key}"' for key in drop) + ("," if len(drop) == 1 else "")
        call = cst.parse_expression(f"f(_, {{{pairs}}}, ({dropped}))")
        assert isinstance(call, cst.Call)
        forwarded = call.with_changes(func=helper, args=[cst.Arg(arg.value), *call.args[1:]])
        args.append(cst.Arg(forwarded, star="**"))
    return replacement.with_changes(args=args)


def _no_target_message(ctx: RuleContext, op: OpSpec, match: Match) -> str:
    if not op.patterns.get(ctx.target):
        reason = op.unsupported.get(ctx.target)
        if reason:
            pattern = match.pattern
            func = pattern.expr.func if isinstance(pattern.expr, cst.Call) else None
            called = f".{pattern.method_name}(...)" if pattern.method_name else dotted_name(func) if func else None
            return f"{called or op.name} has no mapping to {ctx.target}: {reason}"
        return f"{op.name} ({match.pattern.text}) has no mapping to {ctx.target}"
    return f"{op.name} with these arguments has no equivalent in {ctx.target}"


def _known_values(ctx: RuleContext, op: OpSpec, match: Match) -> dict[str, object]:
    """What is statically known about the bound arguments, for target `bind` constants: the
    canonical dtype of a `dtype` parameter, the value of a literal argument (`approximate="tanh"`,
    `dim=1`, an absent argument's default), and the source pattern's own `bind`."""
    known: dict[str, object] = dict(match.pattern.bind)
    for name, node in match.bindings.items():
        if op.params.get(name) == "dtype":
            canon = ctx.dtype_of(node)
            if canon is not None:
                known.setdefault(name, canon)
            continue
        value = literal_value(node)
        if value is not NOT_LITERAL:
            known.setdefault(name, value)
    return known


def _user_nodes(match: Match, name: str) -> list[cst.CSTNode]:
    """The user's nodes a parameter was bound to (none for a default)."""
    if name in match.defaulted:
        return []
    if name in match.sequences:
        return [a.value for a in match.sequences[name]]
    node = match.bindings.get(name)
    return [] if node is None else [node]


def _anchor(match: Match, name: str, original: cst.CSTNode) -> cst.CSTNode:
    """Where to report something about a parameter: its argument, else the whole call."""
    nodes = _user_nodes(match, name)
    return nodes[0] if nodes else original


def _values(
    ctx: RuleContext,
    op: OpSpec,
    match: Match,
    target: Pattern,
    known: dict[str, object],
    original: cst.CSTNode,
) -> dict[str, cst.BaseExpression | ArgList] | None:
    """Converted expressions for the target's placeholders (None if one cannot be built).

    A value the user did not write (the source pattern's default or `bind` constant) that equals
    the target placeholder's own default is left out: the target's default says the same."""
    as_string = {ph.name for ph in target.placeholders.values() if ph.as_string}
    values: dict[str, cst.BaseExpression | ArgList] = {}
    for name in target.params:
        node = match.bindings.get(name)
        is_dtype = op.params.get(name) == "dtype"
        written = node is not None and name not in match.defaulted
        if name in match.sequences:
            values[name] = _arg_list(ctx, match, name)
        elif name in as_string:
            canon = known.get(name)
            if not isinstance(canon, str):
                return None
            values[name] = cst.SimpleString(f'"{ctx.mappings.dtype_string(ctx.target, canon) or canon}"')
        elif node is None:
            if name in match.pattern.bind:
                constant = match.pattern.bind[name]
                if is_dtype:
                    expr = ctx.dtype_expr(str(constant), at=original)
                    if expr is None:
                        return None
                    values[name] = expr
                else:
                    values[name] = literal_node(constant)
        elif is_dtype and string_value(node) is not None:
            expr = ctx.convert_dtype_string(node)
            if expr is None:
                return None
            values[name] = expr
        else:
            values[name] = ctx.updated(node) if written else node  # type: ignore[assignment]
        default = target.defaults.get(name)
        value = values.get(name)
        if (
            default is not None
            and not written
            and isinstance(value, cst.BaseExpression)
            and same_value(literal_value(value), literal_value(default))
        ):
            del values[name]
    return values


def _arg_list(ctx: RuleContext, match: Match, name: str) -> ArgList:
    """A variadic parameter's arguments, converted. Arguments bound to `{*name}` become
    positional (`x.view(size=s)` is `x.view(s)`); those bound to `{**name}` keep their keywords."""
    ph = next(p for p in match.pattern.placeholders.values() if p.name == name)
    args = []
    for arg in match.sequences[name]:
        value = ctx.updated(arg.value)
        if ph.keywords:
            args.append(arg.with_changes(value=value, comma=cst.MaybeSentinel.DEFAULT))
        else:
            args.append(
                cst.Arg(value=value, star="*" if arg.star == "*" else "")  # type: ignore[arg-type]
            )
    return ArgList(tuple(args))


_NEEDS_ATOM = (
    cst.Attribute,
    cst.Subscript,
    cst.UnaryOperation,
    cst.BinaryOperation,
    cst.BooleanOperation,
    cst.Comparison,
    cst.Await,
)


def _is_store(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Whether `node` is (an element of) an assignment or `del` target."""
    child, parent = node, ctx.parent(node)
    while isinstance(parent, cst.Element | cst.StarredElement | cst.Tuple | cst.List):
        child, parent = parent, ctx.parent(parent)
    if isinstance(parent, cst.AssignTarget | cst.Del):
        return True
    return isinstance(parent, cst.AugAssign | cst.AnnAssign) and parent.target is child


def _fit_parentheses(ctx: RuleContext, original: cst.CSTNode, replacement: cst.BaseExpression) -> cst.BaseExpression:
    """Keep the user's parentheses where they still mean something; add them only where the
    replacement would otherwise bind differently (`not x.is_floating_point()` -> `not (a or b)`)."""
    lpar = getattr(original, "lpar", ())
    atomic = parenthesize(replacement) is replacement
    original_atomic = isinstance(original, ATOMS)
    if lpar and not replacement.lpar and not (atomic and not original_atomic):
        return replacement.with_changes(lpar=lpar, rpar=original.rpar)  # type: ignore[attr-defined]
    if lpar or atomic:
        return replacement
    parent = ctx.parent(original)
    if isinstance(parent, _NEEDS_ATOM) or (isinstance(parent, cst.Call) and parent.func is original):
        return parenthesize(replacement)
    return replacement


def _duplicable(node: cst.BaseExpression | None) -> bool:
    return node is None or isinstance(node, cst.Name | cst.Attribute)


def _not_a_tensor_call(ctx: RuleContext, call: cst.Call) -> bool:
    """A method call no pattern matched that cannot be a tensor method call: its receiver is a
    literal (`"a b".split()`) or the module itself (`self.relu(h)`), it passes fewer arguments
    than every pattern of that method needs
    (`line.split()`), or a string where no pattern of that method takes one (`s.split(sep=",")`).
    Such calls are left alone without an `unsupported` report."""
    func = call.func
    if not isinstance(func, cst.Attribute) or ctx.qualified_name(func) is not None:
        return False
    info = _method_info(ctx.mappings, ctx.source).get(func.attr.value)
    if info is None:
        return False
    min_args, takes_strings = info
    if _not_a_tensor(func.value) or _layer_attribute(ctx, func.value) or ctx.module_alias(func.value):
        return True
    if not any(a.star for a in call.args) and len(call.args) < min_args:
        return True
    return not takes_strings and any(isinstance(a.value, STRINGS) for a in call.args)


def _layer_attribute(ctx: RuleContext, receiver: cst.BaseExpression) -> bool:
    """`self.skip` where the class assigns it a torch layer (`nn.quantized.FloatFunctional()`,
    whose `add`/`mul` are the layer's own methods, not tensor ones)."""
    if not (isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name)):
        return False
    key = ctx.enclosing_function()
    if receiver.value.value != "self" or key is None or "." not in key:
        return False
    return receiver.attr.value in analysis_for(ctx).layer_attrs.get(key.split(".")[0], {})


def _method_info(mappings: MappingSet, source: str) -> dict[str, tuple[int, bool]]:
    """Method name -> (fewest arguments any of its patterns needs, whether any takes a string)."""
    cache = mappings.caches.setdefault("op-pattern-methods", {})
    if source in cache:
        return cache[source]
    info: dict[str, tuple[int, bool]] = {}
    for op in mappings.ops.values():
        for pattern in op.patterns.get(source, ()):
            name = pattern.method_name
            if name is None or pattern.emit_only:
                continue
            needs = pattern.argument_params
            receiver = dotted_name(pattern.expr.func.value)  # type: ignore[attr-defined]
            params = {p for p in needs if p}
            strings = any(
                op.params.get(ph.name, "any") not in STRICT_KINDS
                for ident, ph in pattern.placeholders.items()
                if ph.name in params and ident != receiver
            ) or any(isinstance(a.value, STRINGS) for a in pattern.expr.args)  # type: ignore[attr-defined]
            count = sum(needs.values())
            old = info.get(name)
            info[name] = (count, strings) if old is None else (min(old[0], count), old[1] or strings)
    cache[source] = info
    return info


def _type_position(ctx: RuleContext, node: cst.CSTNode) -> bool:
    """Whether `node` is read as a type: in an annotation (`device: torch.device | None`), or the
    class argument of `isinstance`/`issubclass`."""
    child, parent = node, ctx.parent(node)
    while parent is not None and not isinstance(parent, cst.BaseStatement | cst.BaseSmallStatement):
        if isinstance(parent, cst.Annotation):
            return True
        if (
            isinstance(parent, cst.Call)
            and isinstance(parent.func, cst.Name)
            and parent.func.value in ("isinstance", "issubclass")
            and len(parent.args) > 1
            and parent.args[1] is child
        ):
            return True
        child, parent = parent, ctx.parent(parent)
    return False


def _candidates(
    mappings: MappingSet, source: str, node: cst.CSTNode, ctx: RuleContext
) -> Iterator[tuple[OpSpec, Pattern]]:
    index = _index(mappings, source)
    if isinstance(node, cst.Call):
        func = node.func
        keys = []
        qualified = ctx.qualified_name(func)
        if (
            isinstance(func, cst.Attribute)
            and not _not_a_tensor(func.value)
            and (qualified is None or not _is_module(ctx, qualified, func.value))
            and not ctx.module_alias(func.value)
        ):
            keys.append(("method", func.attr.value))
        if qualified is not None:
            keys.append(("function", qualified))
    elif isinstance(node, cst.Attribute):
        keys = [("attribute", node.attr.value)]
    elif isinstance(node, cst.BooleanOperation):
        keys = [("boolean", type(node.operator).__name__)]
    elif isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        keys = [("comparison", type(node.comparisons[0].operator).__name__)]
    else:
        return
    for key in keys:
        yield from index.get(key, ())


def _not_a_tensor(receiver: cst.BaseExpression) -> bool:
    """Receivers whose methods are never tensor methods: literals (`"a b".split()`), and the
    module or class itself (`self.norm(x)`, `self.relu(h)`, `super().forward(x)` call layers,
    not `Tensor.norm`)."""
    if isinstance(receiver, LITERALS):
        return True
    if isinstance(receiver, cst.Name):
        return receiver.value in ("self", "cls")
    return isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super"


def _is_module(ctx: RuleContext, qualified: str, receiver: cst.BaseExpression) -> bool:
    """`F` in `F.softmax(x)`, `os.path` in `os.path.split(p)`: a framework module, or a chain
    rooted at a plain `import x`, names a module, whose functions are not tensor methods."""
    if ctx.mappings.framework_of(qualified) is not None:
        return True
    root = receiver
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return False
    qualified = ctx.qualified_name(root)
    return qualified is not None and "." not in qualified


def _index(mappings: MappingSet, source: str) -> dict[tuple[str, str], list[tuple[OpSpec, Pattern]]]:
    """Source patterns keyed by what a node must look like to possibly match them."""
    cache = mappings.caches.setdefault("op-pattern-index", {})
    if source in cache:
        return cache[source]
    index: dict[tuple[str, str], list[tuple[OpSpec, Pattern]]] = {}
    for op in mappings.ops.values():
        for pattern in op.patterns.get(source, ()):
            if pattern.is_bare or pattern.emit_only:
                continue
            expr = pattern.expr
            if isinstance(expr, cst.Call):
                if pattern.method_name is not None:
                    index.setdefault(("method", pattern.method_name), []).append((op, pattern))
                else:
                    name = dotted_name(expr.func)
                    if name is not None:
                        index.setdefault(("function", name), []).append((op, pattern))
            elif isinstance(expr, cst.Attribute):
                index.setdefault(("attribute", expr.attr.value), []).append((op, pattern))
            elif isinstance(expr, cst.BooleanOperation):
                index.setdefault(("boolean", type(expr.operator).__name__), []).append((op, pattern))
            elif isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
                key = ("comparison", type(expr.comparisons[0].operator).__name__)
                index.setdefault(key, []).append((op, pattern))
    # Most specific first: `tf.cast(tf.convert_to_tensor(d, dtype_hint=t), t)` is as_tensor,
    # not a cast of a convert_to_tensor call.
    for entries in index.values():
        entries.sort(key=lambda entry: -_size(entry[1].expr))
    cache[source] = index
    return index


def _size(node: cst.CSTNode) -> int:
    count = 0

    class _Count(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            nonlocal count
            count += 1
            return True

    node.visit(_Count())
    return count
