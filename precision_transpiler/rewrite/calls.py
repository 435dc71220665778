"""Keep calls valid when arguments are added to them.

A generator expression may be a call's bare argument only when it is the only one
(`dict((k, 1) for k in keys)`); a rule or a policy pass that adds an argument (`rngs=rngs`,
`dtype=...`) must give it parentheses of its own, or the output does not parse.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst


def parenthesize_generators(args: Sequence[cst.Arg]) -> list[cst.Arg]:
    """`args`, with every bare generator expression parenthesized when there is more than one."""
    if len(args) < 2:
        return list(args)
    return [
        arg.with_changes(value=arg.value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        if isinstance(arg.value, cst.GeneratorExp) and not arg.value.lpar
        else arg
        for arg in args
    ]


def with_valid_args(call: cst.Call) -> cst.Call:
    """`call` with `parenthesize_generators` applied to its arguments (itself when unchanged)."""
    args = parenthesize_generators(call.args)
    if all(new is old for new, old in zip(args, call.args, strict=True)):
        return call
    return call.with_changes(args=args)
