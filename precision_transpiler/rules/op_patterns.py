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

from precision_transpiler.mappings.model import MappingSet, OpSpec
from precision_transpiler.rewrite.context import RuleContext, string_value
from precision_transpiler.rewrite.templates import (
    ATOMS,
    Match,
    Pattern,
    dotted_name,
    emit_pattern,
    match_pattern,
    parenthesize,
)
from precision_transpiler.rules.base import Example, Rule, register


@register
class OpPatterns(Rule):
    name = "op-pattern"
    summary = "Rewrite dtype operations (casts, finfo, default dtype, ...) through the op tables."
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
            "import torch\ny = x.to(spec)\n",
            "# ptranspile: unsupported: .to(...) call could not be converted to jax: "
            "no pattern matches its arguments\ny = x.to(spec)\n",
            to="jax",
            diagnostics=("unsupported",),
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
    )

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        return self._rewrite(ctx, original)

    def leave_Attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        return self._rewrite(ctx, original)

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
        for op, pattern in _candidates(ctx.mappings, ctx.source, original, ctx):
            match = match_pattern(pattern, original, ctx.qualified_name, roots)
            if match is None:
                continue
            # A framework function says what the call is; a method name may be overloaded
            # (`x.to(dtype)` vs `x.to(device)`), so only method patterns check argument kinds.
            if pattern.method_name is not None and _kind_mismatch(ctx, op, match) is not None:
                continue
            replacement = self._emit(ctx, op, match, original)
            if replacement is None:
                return None
            ctx.consume(match.owned)
            ctx.record(self.name, original, replacement)
            return replacement
        return None

    def _emit(self, ctx: RuleContext, op: OpSpec, match: Match, original: cst.CSTNode) -> cst.BaseExpression | None:
        targets = op.patterns.get(ctx.target, ())
        known = {**match.pattern.bind}
        for name, node in match.bindings.items():
            canon = ctx.dtype_of(node) if op.params.get(name) == "dtype" else None
            if canon is not None:
                known.setdefault(name, canon)
        bound = set(match.bindings) | set(match.pattern.bind)
        for target in targets:
            if any(known.get(p) != value for p, value in target.bind.items()):
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
            for name in set(match.bindings) - target.params:
                ctx.retract_under(match.bindings[name])
            for name in sorted(dropped):
                ctx.diagnose(
                    match.bindings.get(name, original),
                    "note",
                    "dropped-argument",
                    f"argument '{name}' of {op.name} has no equivalent in {ctx.target} and was dropped",
                )
            for message in (op.warn, target.warn):
                if message and ctx.source != ctx.target:
                    ctx.diagnose(original, "warning", "semantics-differ", message)
            for name, message in op.warn_if_missing.items():
                if name not in bound and ctx.source != ctx.target:
                    ctx.diagnose(original, "warning", "implicit-dtype", message)
            return _fit_parentheses(ctx, original, replacement)
        ctx.unsupported(original, _no_target_message(ctx, op, match), "unsupported-op")
        ctx.consume(match.owned)  # reported once, as the whole call
        return None


def _no_target_message(ctx: RuleContext, op: OpSpec, match: Match) -> str:
    if not op.patterns.get(ctx.target):
        return f"{op.name} ({match.pattern.text}) has no mapping to {ctx.target}"
    return f"{op.name} with these arguments has no equivalent in {ctx.target}"


def _values(
    ctx: RuleContext,
    op: OpSpec,
    match: Match,
    target: Pattern,
    known: dict[str, str],
    original: cst.CSTNode,
) -> dict[str, cst.BaseExpression] | None:
    """Converted expressions for the target's placeholders (None if one cannot be built)."""
    as_string = {ph.name for ph in target.placeholders.values() if ph.as_string}
    values: dict[str, cst.BaseExpression] = {}
    for name in target.params:
        node = match.bindings.get(name)
        is_dtype = op.params.get(name) == "dtype"
        if name in as_string:
            canon = known.get(name)
            if canon is None:
                return None
            values[name] = cst.SimpleString(f'"{ctx.mappings.dtype_string(ctx.target, canon) or canon}"')
        elif node is None:
            if name in match.pattern.bind and is_dtype:
                expr = ctx.dtype_expr(match.pattern.bind[name], at=original)
                if expr is None:
                    return None
                values[name] = expr
        elif is_dtype and string_value(node) is not None:
            expr = ctx.convert_dtype_string(node)
            if expr is None:
                return None
            values[name] = expr
        else:
            values[name] = ctx.updated(node)  # type: ignore[assignment]
    return values


_NEEDS_ATOM = (
    cst.Attribute,
    cst.Subscript,
    cst.UnaryOperation,
    cst.BinaryOperation,
    cst.BooleanOperation,
    cst.Comparison,
    cst.Await,
)


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


def _kind_mismatch(ctx: RuleContext, op: OpSpec, match: Match) -> str | None:
    """Why a bound argument does not fit its parameter kind (None when all fit)."""
    for name, node in match.bindings.items():
        if name in match.by_keyword:
            continue  # `device=dev` says what it is
        kind = op.params.get(name, "any")
        if kind == "dtype" and not ctx.is_dtype_like(node):
            return f"argument {ctx.code(node)!r} does not look like a dtype (a dtype symbol, string or *dtype name)"
        if kind == "device" and not ctx.is_device_like(node):
            return f"argument {ctx.code(node)!r} does not look like a device"
    return None


def _candidates(
    mappings: MappingSet, source: str, node: cst.CSTNode, ctx: RuleContext
) -> Iterator[tuple[OpSpec, Pattern]]:
    index = _index(mappings, source)
    if isinstance(node, cst.Call):
        func = node.func
        keys = []
        if isinstance(func, cst.Attribute):
            keys.append(("method", func.attr.value))
        qualified = ctx.qualified_name(func)
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


def _index(mappings: MappingSet, source: str) -> dict[tuple[str, str], list[tuple[OpSpec, Pattern]]]:
    """Source patterns keyed by what a node must look like to possibly match them."""
    cache = mappings.caches.setdefault("op-pattern-index", {})
    if source in cache:
        return cache[source]
    index: dict[tuple[str, str], list[tuple[OpSpec, Pattern]]] = {}
    for op in mappings.ops.values():
        for pattern in op.patterns.get(source, ()):
            if pattern.is_bare:
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
