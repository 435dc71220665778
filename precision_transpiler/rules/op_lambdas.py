"""Torch calls that become lambdas over torch's own parameters, for op-pattern
(rules/op_patterns_any.py): a torch function passed around as a value whose target call takes
its arguments otherwise (`partial(torch.clamp, min=-1.0, max=1.0)`), and a call given positional
arguments unpacked from a sequence (`mag.clamp(*self.magnitude_range)`), whose parameters are
filled only at run time. The lambda's body is the op's converted call; where the target picks its
call by which optional arguments were given, one body per case, chosen at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import libcst as cst

from precision_transpiler.analysis.tensors import known_tensor
from precision_transpiler.mappings.model import OpSpec
from precision_transpiler.mappings.patterns import Pattern, Placeholder
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rewrite.templates import Match, match_pattern
from precision_transpiler.rules.op_arguments import kind_mismatch

#: op-pattern's emitter: the converted call for a match (None when no target pattern fits)
Emit = Callable[[RuleContext, OpSpec, Match, cst.CSTNode], "cst.BaseExpression | None"]


def lambda_parameters(names: list[str], holders: list[Placeholder]) -> str:
    """A lambda's parameter list with torch's names and defaults; an optional parameter without
    a default takes None, torch's "not given" for it (`torch.clamp`'s `min` and `max`)."""
    return ", ".join(
        f"{n}={p.default}" if p.default is not None else f"{n}=None" if p.optional else n
        for n, p in zip(names, holders, strict=True)
    )


#: methods Python's own sequences and mappings have (`split`, `index`, `count`, `copy`, ...): called
#: with `*` arguments on a receiver not known to be a tensor, they may be the str's or list's
BUILTIN_METHODS = frozenset(n for t in (str, bytes, list, tuple, dict, set) for n in dir(t) if not n.startswith("_"))


def lambda_body(
    ctx: RuleContext,
    op: OpSpec,
    pattern: Pattern,
    params: tuple[list[str], list[Placeholder]],
    call_with: Callable[[list[str]], cst.Call],
    qualified: str | None,
    original: cst.CSTNode,
    emit: Emit,
) -> cst.BaseExpression | None:
    """The converted call over a lambda's parameters. Where the target picks its call by which
    optional arguments torch was given (Keras' clamp: `maximum` for `min` alone, `minimum` for
    `max` alone, both for both) and the lambda's None stands for "not given", one body per
    case, chosen at run time (`A if min is not None and max is not None else B if ...`)."""
    names, holders = params
    unset = [n for n, p in zip(names, holders, strict=True) if p.optional and p.default is None]
    subsets = [tuple(unset)]
    if len(op.patterns.get(ctx.target, ())) > 1 and len(unset) <= 2:
        subsets += [c for k in range(len(unset) - 1, -1, -1) for c in combinations(unset, k)]
    bodies: list[tuple[tuple[str, ...], cst.BaseExpression]] = []
    targets = op.patterns.get(ctx.target, ())
    for present in subsets:
        given = [n for n in names if n not in unset or n in present]
        absent = {p.name for n, p in zip(names, holders, strict=True) if n not in given}
        bound = {p.name for p in pattern.placeholders.values()} - absent | set(pattern.bind)
        if present != subsets[0] and not any(t.required <= bound for t in targets):
            continue  # no target call for this case (clamp with neither bound): torch refuses it too
        call = call_with(given)
        match = match_pattern(pattern, call, lambda node, c=call: qualified if node is c.func else None, frozenset())
        method = pattern.method_name is not None
        body = None
        if match is not None and kind_mismatch(ctx, op, match, method=method, anchor=original) is None:
            body = emit(ctx, op, match, original)
        if body is None and present == subsets[0]:
            return None  # every argument given does not convert: nothing does
        if body is not None:
            bodies.append((present, body))
    result = bodies[-1][1]
    if len({ctx.code(body) for _, body in bodies}) == 1:
        return result
    for present, body in reversed(bodies[:-1]):
        test = " and ".join(f"{n} is {'not ' if n in present else ''}None" for n in unset)
        result = cst.IfExp(test=cst.parse_expression(test), body=body, orelse=result)
    return result


def star_call(ctx: RuleContext, op: OpSpec, pattern: Pattern, original: cst.Call, emit: Emit) -> cst.Call | None:
    """`x.clamp(*self.bounds)`, `torch.clamp(y, *bounds)`: positional arguments unpacked from
    a sequence fill torch's parameters only at run time, so the call goes through a lambda
    with those parameters, its body the converted call (`(lambda min=None, max=None:
    jnp.clip(x, min=min, max=max))(*self.bounds)`); the user's arguments are passed to it as
    written. Optional parameters without a default take None (torch's "not given" for
    them). None unless a positional `*` argument is there and the pattern has plain,
    positional parameters only; a method that Python's str, list or dict also has, only on a
    receiver known to be a tensor."""
    if not any(a.star == "*" for a in original.args) or not isinstance(pattern.expr, cst.Call):
        return None
    receiver = pattern.expr.func.value if pattern.method_name is not None else None  # type: ignore[attr-defined]
    slots = [a.value for a in pattern.expr.args]
    if any(not isinstance(v, cst.Name) or v.value not in pattern.placeholders for v in slots):
        return None
    holders = [pattern.placeholders[v.value] for v in slots]  # type: ignore[attr-defined]
    if any(p.variadic or p.keywords for p in holders):
        return None
    names = [p.keyword or p.name for p in holders]
    if (
        receiver is not None
        and pattern.method_name in BUILTIN_METHODS
        and not (isinstance(original.func, cst.Attribute) and known_tensor(ctx, original.func.value, original))
    ):
        return None  # `s.split(*seps)`: arguments known only at run time cannot tell a str's method
    text = lambda_parameters(names, holders)

    def call_with(given: list[str]) -> cst.Call:
        return original.with_changes(args=[cst.Arg(cst.Name(n), keyword=cst.Name(n)) for n in given])

    qualified = ctx.qualified_name(original.func)
    body = lambda_body(ctx, op, pattern, (names, holders), call_with, qualified, original, emit)
    if body is None:
        return None
    lam = cst.ensure_type(cst.parse_expression(f"lambda {text}: None"), cst.Lambda).with_changes(body=body)
    args = [a.with_changes(value=ctx.updated(a.value)) for a in original.args]
    return cst.Call(func=lam.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]), args=args)
