"""What every policy pass shares: the traversal path, name resolution, positions, decisions,
and the generated helper block.

A pass is a LibCST transformer over one module of its framework. It must only insert things
named `_ptranspile_*`/`_PTRANSPILE_*` (so `strip` can undo them) and record a
`PrecisionDecision` for every layer or op it touches (for `--report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from precision_transpiler.precision.policy import Policy, Precision
from precision_transpiler.rewrite.calls import parenthesize_generators
from precision_transpiler.rewrite.names import NameResolver
from precision_transpiler.rewrite.positions import PositionFinder
from precision_transpiler.rewrite.skips import scan_skips
from precision_transpiler.syntax import dotted_name


@dataclass(frozen=True)
class PrecisionDecision:
    """One layer or op the policy touched, for --report."""

    line: int
    col: int
    where: str  # Class.method or function
    op: str  # the code that was touched (e.g. self.LayerNorm, F.softmax)
    op_class: str
    param: str
    compute: str
    output: str
    rule: str
    action: str  # "autocast region", "fp32 island", ...


class PolicyPass(cst.CSTTransformer):
    """Base class: keeps the path from the module to the current node (`stack`)."""

    def __init__(self, policy: Policy, module: cst.Module, source: str) -> None:
        super().__init__()
        self.policy = policy
        self.names = NameResolver(module, source)
        self.positions = PositionFinder(module, source)
        self.decisions: list[PrecisionDecision] = []
        self.stack: list[cst.CSTNode] = []
        # statements under `# ptranspile: skip` (rewrite/skips.py): left exactly as written
        self.skipped = scan_skips(module, source).skip_ids

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Import | cst.ImportFrom):
            return False
        self.stack.append(node)
        if id(node) in self.skipped:
            return False
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        if id(original_node) in self.skipped:
            self.stack.pop()
            return original_node
        result = super().on_leave(original_node, updated_node)
        if not isinstance(original_node, cst.Import | cst.ImportFrom):
            self.stack.pop()
        return result  # type: ignore[return-value]

    def qualified(self, node: cst.BaseExpression) -> str | None:
        """Qualified name of a dotted expression at the current position (None otherwise)."""
        if dotted_name(node) is None:
            return None
        return self.names.qualified_name(node, [*self.stack, node])

    def decide(
        self, node: cst.CSTNode, op: str, op_class: str, decision: Precision, action: str, where: str | None = None
    ) -> None:
        line, col = self.positions.find(node, self.stack)
        if where is None:
            where = next(
                (n.name.value for n in reversed(self.stack) if isinstance(n, cst.FunctionDef | cst.ClassDef)),
                "<module>",
            )
        self.decisions.append(
            PrecisionDecision(
                line, col, where, op, op_class, decision.param, decision.compute, decision.output, decision.rule, action
            )
        )


def auto_device(policy: Policy) -> bool:
    """Whether the generated code decides the compute dtype where it runs (`--device auto` and a
    policy with a low-precision dtype) rather than taking the one resolved here."""
    return policy.device == "auto" and bool(policy.requested)


def device_dtype_exprs(policy: Policy, compute: str, param: str, binding: str) -> tuple[str, str]:
    """The generated expressions for the compute and parameter dtypes: `compute`/`param` as
    given, or under `--device auto` the decision `binding` (for the parameters too when the
    policy stores them in low precision)."""
    if not auto_device(policy):
        return compute, param
    return binding, binding if policy.param != "float32" else param


def with_device_helpers(code: str, policy: Policy, shim_module: str, function: str, binding: str) -> str:
    """A helper block for `--device auto`: after its leading comment lines, the decision helpers
    copied from the real runtime modules (`runtime/device.py` and its framework half,
    `shim_module`: "flax.device", "keras.device" or "torch.device") and `binding =
    function("half")`, decided once, when the converted module is imported. Other policies'
    blocks are returned as they are."""
    if not auto_device(policy):
        return code
    from precision_transpiler.convert.vendor import shim_source

    lines = code.lstrip("\n").splitlines(keepends=True)
    head = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    decided = f'{binding} = {function}("{policy.requested}")  # where this runs decides (--device auto)\n'
    device = shim_source(shim_module, [function]) + "\n\n" + decided
    return "".join(lines[:head]) + device + "".join(lines[head:])


def island(expr: cst.BaseExpression) -> cst.Call:
    """`_ptranspile_fp32(expr)`: the generated helper that puts an op's input in float32."""
    return cst.Call(func=cst.Name("_ptranspile_fp32"), args=[cst.Arg(value=expr)])


def helper_statements(code: str) -> list[cst.BaseStatement]:
    """Parse a generated helper block; its first statement carries two blank lines and the
    `# ptranspile: begin precision policy` comment."""
    module = cst.parse_module(code.lstrip("\n"))
    body = list(module.body)
    lines = [cst.EmptyLine(), cst.EmptyLine(), *[ln for ln in module.header if ln.comment is not None]]
    body[0] = body[0].with_changes(leading_lines=lines)
    return body


def chooses_dtype(args: Sequence[cst.Arg], names: tuple[str, ...] = ("dtype",)) -> bool:
    """Whether a call sets its dtype itself: a `dtype=` keyword, or a `**mapping` that may hold
    one (timm's `nn.Linear(4, 8, **dd)` with `dd = {'device': device, 'dtype': dtype}`: adding
    `dtype=` beside it is a TypeError when `dd` has the key)."""
    return any((a.keyword is not None and a.keyword.value in names) or a.star == "**" for a in args)


def append_keywords(args: list[cst.Arg], extra: list[tuple[str, str]]) -> list[cst.Arg]:
    """Append `key=NAME` arguments; the last one takes over the call's trailing comma (if any)
    and the space before its closing parenthesis (a line break, when the user put `)` on a line
    of its own), so that `precision.strip` can give both back exactly."""
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    trailing: cst.Comma | cst.MaybeSentinel = cst.MaybeSentinel.DEFAULT
    separator: cst.Comma = space
    closing: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace("")
    if args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):
            trailing = last.comma
            if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
                separator = args[-2].comma
        closing = last.whitespace_after_arg
        args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    new = [
        cst.Arg(
            keyword=cst.Name(k),
            value=cst.Name(v),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            comma=separator,
        )
        for k, v in extra
    ]
    new[-1] = new[-1].with_changes(comma=trailing, whitespace_after_arg=closing)
    return parenthesize_generators([*args, *new])
