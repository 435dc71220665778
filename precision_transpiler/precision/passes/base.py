"""What every policy pass shares: the traversal path, name resolution, positions, decisions,
and the nodes of the generated block.

A pass is a LibCST transformer over one module of its framework. It must only insert things
named `_ptranspile_*`/`_PTRANSPILE_*` (so `strip` can undo them) and record a
`PrecisionDecision` for every layer or op it touches (for `--report`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from precision_transpiler.precision.policy import Policy, Precision
from precision_transpiler.rewrite.calls import parenthesize_generators
from precision_transpiler.rewrite.names import NameResolver
from precision_transpiler.rewrite.positions import PositionFinder
from precision_transpiler.rewrite.skips import scan_skips
from precision_transpiler.runtime import PACKAGE, runtime_name
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
        self.used: set[str] = set()  # the generated `_ptranspile_*` names written into the code

    def helper(self, name: str) -> cst.Name:
        """A generated name written into the code; the generated block binds the ones used."""
        self.used.add(name)
        return cst.Name(name)

    def island(self, expr: cst.BaseExpression) -> cst.Call:
        """`_ptranspile_fp32(expr)`: the generated helper that puts an op's input in float32."""
        return cst.Call(func=self.helper("_ptranspile_fp32"), args=[cst.Arg(value=expr)])

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


# -- the generated block ----------------------------------------------------------------------
#
# The block holds only what is the file's own: the `_PTRANSPILE_*` constants the pass writes into
# layer calls, and short bindings of `_ptranspile_*` names to runtime definitions
# (precision_transpiler/runtime/<framework>/policy.py), named by their qualified names as rules
# name runtime definitions, so that the VendorRuntime stage copies or imports them. Its few
# statements are built as nodes: nothing is parsed per conversion.

BEGIN = '# ptranspile: begin precision policy "{name}" (generated; `ptranspile --policy fp32` removes it)'
_LINE = 120  # a call longer than this (runtime names read as in the output) puts one argument a line
_RUNTIME_NAME = re.compile(re.escape(PACKAGE) + r"\.[\w.]*\.(\w+)")


@dataclass(frozen=True)
class Code:
    """A generated expression written as code: a dotted name (`jnp.float32`), or anything `literal`
    should not quote."""

    dotted: str


def ref(dotted: str) -> cst.BaseExpression:
    """`a.b.c` as a node."""
    first, *rest = dotted.split(".")
    node: cst.BaseExpression = cst.Name(first)
    for part in rest:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def item(name: str, index: int) -> cst.Subscript:
    """`name[index]`."""
    return cst.Subscript(cst.Name(name), [cst.SubscriptElement(cst.Index(cst.Integer(str(index))))])


def policy_ref(target: str, name: str) -> cst.BaseExpression:
    """A definition of the target's policy runtime (`runtime/<framework>/policy.py`)."""
    return ref(runtime_name(target, "policy", name))


def literal(value: object, *, nested: bool = False) -> cst.BaseExpression:
    """A node for a constant: strings in double quotes (inside tuples and dicts as `repr` writes
    them), bools, None, numbers, tuples, dicts; `Code` and nodes as they are."""
    if isinstance(value, cst.BaseExpression):
        return value
    if isinstance(value, Code):
        return ref(value.dotted)
    if isinstance(value, str):
        return cst.SimpleString(repr(value) if nested else json.dumps(value, ensure_ascii=False))
    if value is None or isinstance(value, bool):
        return cst.Name(str(value))
    if isinstance(value, int) and value >= 0:
        return cst.Integer(str(value))
    if isinstance(value, tuple):
        elements = [cst.Element(literal(v, nested=True)) for v in value]
        if len(elements) == 1:
            elements = [elements[0].with_changes(comma=cst.Comma())]
        return cst.Tuple(elements)
    if isinstance(value, dict):
        return cst.Dict([cst.DictElement(literal(k, nested=True), literal(v, nested=True)) for k, v in value.items()])
    raise TypeError(f"no literal for {value!r}")


def call(func: cst.BaseExpression, *args: object, **kwargs: object) -> cst.Call:
    """`func(args..., key=value...)` of literals."""
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    nodes = [cst.Arg(literal(a), comma=comma) for a in args]
    nodes += [
        cst.Arg(
            literal(v),
            keyword=cst.Name(k),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            comma=comma,
        )
        for k, v in kwargs.items()
    ]
    if nodes:
        nodes[-1] = nodes[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return cst.Call(func=func, args=nodes)


def assign(target: str, value: object, comment: str | None = None) -> cst.SimpleStatementLine:
    """`target = value`, a call too long for one line written one argument a line."""
    node = literal(value)
    stmt = _assign(target, node, comment)
    if isinstance(node, cst.Call) and len(_RUNTIME_NAME.sub(r"\1", _code(stmt))) > _LINE:
        stmt = _assign(target, _one_argument_a_line(node), comment)
    return stmt


def _assign(target: str, value: cst.BaseExpression, comment: str | None) -> cst.SimpleStatementLine:
    trailing = cst.TrailingWhitespace()
    if comment is not None:
        trailing = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(comment))
    return cst.SimpleStatementLine(
        body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(target))], value=value)], trailing_whitespace=trailing
    )


def _one_argument_a_line(node: cst.Call) -> cst.Call:
    def newline(indent: str) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(last_line=cst.SimpleWhitespace(indent))

    args = [a.with_changes(comma=cst.Comma(whitespace_after=newline("    "))) for a in node.args]
    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=newline("")))
    return node.with_changes(args=args, whitespace_before_args=newline("    "))


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def auto_device(policy: Policy) -> bool:
    """Whether the generated code decides the compute dtype where it runs (`--device auto` and a
    policy with a low-precision dtype) rather than taking the one resolved here."""
    return policy.device == "auto" and bool(policy.requested)


def device_dtype_exprs(policy: Policy, compute: object, param: object, decided: object) -> tuple[object, object]:
    """The generated expressions for the compute and parameter dtypes: `compute`/`param` as
    given, or under `--device auto` the `decided` one (for the parameters too when the policy
    stores them in low precision)."""
    if not auto_device(policy):
        return compute, param
    return decided, decided if policy.param != "float32" else param


def device_statements(policy: Policy, target: str, binding: str) -> list[cst.SimpleStatementLine]:
    """Under `--device auto`: `binding = device_compute_dtype("half")` (the target's, decided once,
    when the converted module is imported) and `_PTRANSPILE_DECISION`, the decision made, where
    verification reads it. Nothing for other policies."""
    if not auto_device(policy):
        return []
    decide = call(policy_ref(target, "device_compute_dtype"), policy.requested)
    return [
        assign(binding, decide, "# where this runs decides (--device auto)"),
        assign("_PTRANSPILE_DECISION", ref(runtime_name(None, "device", "COMPUTE_DECISIONS"))),
    ]


def bindings(target: str, table: dict[str, str], used: set[str]) -> list[cst.SimpleStatementLine]:
    """`name = what` for each generated name of `table` the pass used: `what` a name of the block
    (`_ptranspile_policy.layer`: a method of the file's policy object) or a definition of the
    target's policy runtime (`fp32_island`)."""
    return [
        assign(name, Code(what) if what.startswith("_ptranspile_") else policy_ref(target, what))
        for name, what in table.items()
        if name in used
    ]


def policy_block(
    name: str, statements: Sequence[cst.SimpleStatementLine], comments: Sequence[str] = ()
) -> list[cst.BaseStatement]:
    """The block: two blank lines and the `# ptranspile: begin precision policy` comment (and
    `comments`) before its first statement."""
    lines = [
        cst.EmptyLine(),
        cst.EmptyLine(),
        *[cst.EmptyLine(comment=cst.Comment(c)) for c in (BEGIN.format(name=name), *comments)],
    ]
    body: list[cst.BaseStatement] = list(statements)
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
