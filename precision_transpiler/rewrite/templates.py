"""Patterns: Python expressions with placeholders, used both to recognise and to emit code.

A mapping table writes `tensorflow.cast({x}, {dtype})`. The same text is parsed once into a
LibCST expression and then serves two purposes:

* **matching** a call in the user's code, binding `x` and `dtype` to the user's expressions
  (framework names are compared by their resolved qualified name, so aliases do not matter);
* **emitting** target code, with placeholders replaced by the (already converted) bound
  expressions and qualified names replaced by the file's own aliases.

Placeholder syntax: `{name}`, `{name:keyword}` (the argument's keyword in this framework differs
from the op's parameter name), `{name?}` (optional), `{name!str}` (emit as a string literal).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

_PLACEHOLDER = re.compile(r"\{(?P<name>[A-Za-z_]\w*)(?::(?P<kw>[A-Za-z_]\w*))?(?P<opt>\?)?(?P<str>!str)?\}")
_PREFIX = "__ptph_"

_EMPTY = cst.Module([])


def code_of(node: cst.CSTNode) -> str:
    """Source text of a node (without the surrounding file's formatting context)."""
    return _EMPTY.code_for_node(node)


def dotted_name(node: cst.CSTNode) -> str | None:
    """`a.b.c` for a Name/Attribute chain, None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


@dataclass(frozen=True)
class Placeholder:
    """One `{...}` in a pattern."""

    name: str  # the op's parameter name
    keyword: str  # keyword of the argument in this framework's spelling
    optional: bool
    as_string: bool


@dataclass(frozen=True)
class Pattern:
    """A parsed pattern. `expr` holds placeholders as Names `__ptph_<i>__`."""

    text: str
    expr: cst.BaseExpression
    placeholders: Mapping[str, Placeholder]  # placeholder identifier -> spec
    bind: Mapping[str, str] = field(default_factory=dict)  # constants the pattern implies
    warn: str | None = None  # said (as a warning) whenever this pattern is emitted

    @property
    def params(self) -> set[str]:
        return {p.name for p in self.placeholders.values()}

    @property
    def required(self) -> set[str]:
        return {p.name for p in self.placeholders.values() if not p.optional}

    @cached_property
    def repeated(self) -> set[str]:
        """Parameters the pattern uses more than once (their value is duplicated when emitted)."""
        counts: dict[str, int] = {}

        class _V(cst.CSTVisitor):
            def visit_Name(self, node: cst.Name) -> None:
                counts[node.value] = counts.get(node.value, 0) + 1

        self.expr.visit(_V())
        return {ph.name for ident, ph in self.placeholders.items() if counts.get(ident, 0) > 1}

    @property
    def is_bare(self) -> bool:
        """A pattern that is one placeholder (`{x}`) is emit-only: it would match anything."""
        return isinstance(self.expr, cst.Name) and self.expr.value in self.placeholders

    @property
    def method_name(self) -> str | None:
        """`astype` for `{x}.astype(...)`: the method a receiver-style pattern calls."""
        expr = self.expr
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if _root_placeholder(expr.func.value, self.placeholders):
                return expr.func.attr.value
        return None


def _root_placeholder(node: cst.BaseExpression, placeholders: Mapping[str, Placeholder]) -> bool:
    return isinstance(node, cst.Name) and node.value in placeholders


def parse_pattern(text: str, bind: Mapping[str, str] | None = None, warn: str | None = None) -> Pattern:
    """Parse a pattern; raises ValueError with a readable reason."""
    placeholders: dict[str, Placeholder] = {}

    def repl(m: re.Match[str]) -> str:
        name = m.group("name")
        for ident, known in placeholders.items():  # a repeated placeholder is the same value
            if known.name == name and not m.group("kw") and not m.group("opt") and not m.group("str"):
                return ident
        ident = f"{_PREFIX}{len(placeholders)}__"
        placeholders[ident] = Placeholder(
            name=name,
            keyword=m.group("kw") or name,
            optional=bool(m.group("opt")),
            as_string=bool(m.group("str")),
        )
        return ident

    body = _PLACEHOLDER.sub(repl, text)
    if "{" in body or "}" in body:
        raise ValueError(f"malformed placeholder in pattern {text!r}")
    try:
        expr = cst.parse_expression(body)
    except cst.ParserSyntaxError as exc:
        raise ValueError(f"pattern {text!r} is not a Python expression: {exc.message}") from None
    pattern = Pattern(text=text, expr=expr, placeholders=placeholders, bind=dict(bind or {}), warn=warn)
    for ident, ph in placeholders.items():
        if ph.optional and not _is_call_argument(expr, ident):
            raise ValueError(f"optional placeholder {{{ph.name}?}} must be a call argument in {text!r}")
    return pattern


def _is_call_argument(expr: cst.BaseExpression, ident: str) -> bool:
    found = False

    class _V(cst.CSTVisitor):
        def visit_Arg(self, node: cst.Arg) -> None:
            nonlocal found
            if isinstance(node.value, cst.Name) and node.value.value == ident:
                found = True

    expr.visit(_V())
    return found


# ----------------------------------------------------------------------------------------------
# Matching


QualifiedNameOf = Callable[[cst.CSTNode], str | None]


@dataclass
class Match:
    """Result of matching a pattern: parameter -> the user's (original) expression."""

    pattern: Pattern
    bindings: dict[str, cst.BaseExpression]
    owned: list[cst.CSTNode]  # user nodes matched by the pattern's fixed framework names
    by_keyword: set[str] = field(default_factory=set)  # parameters the user passed by keyword


def _normal(node: cst.CSTNode) -> str:
    return re.sub(r"\s+", "", code_of(node))


def match_pattern(
    pattern: Pattern, node: cst.CSTNode, qualified_name: QualifiedNameOf, roots: frozenset[str]
) -> Match | None:
    """Match `node` (an original, metadata-carrying node) against `pattern`."""
    bindings: dict[str, cst.BaseExpression] = {}
    owned: list[cst.CSTNode] = []
    by_keyword: set[str] = set()
    if _match(pattern, pattern.expr, node, bindings, owned, qualified_name, roots, by_keyword):
        return Match(pattern, bindings, owned, by_keyword)
    return None


def _match(
    pattern: Pattern,
    tpl: cst.CSTNode,
    node: cst.CSTNode,
    bindings: dict[str, cst.BaseExpression],
    owned: list[cst.CSTNode],
    qn: QualifiedNameOf,
    roots: frozenset[str],
    by_keyword: set[str],
) -> bool:
    if isinstance(tpl, cst.Name) and tpl.value in pattern.placeholders:
        if not isinstance(node, cst.BaseExpression):
            return False
        name = pattern.placeholders[tpl.value].name
        if name in bindings:  # a repeated placeholder must bind the same expression
            return _normal(bindings[name]) == _normal(node)
        bindings[name] = node
        return True
    dotted = dotted_name(tpl)
    if dotted is not None and dotted.split(".", 1)[0] in roots:
        if qn(node) == dotted:
            owned.append(node)
            return True
        return False
    if isinstance(tpl, cst.Attribute):
        return (
            isinstance(node, cst.Attribute)
            and node.attr.value == tpl.attr.value
            and _match(pattern, tpl.value, node.value, bindings, owned, qn, roots, by_keyword)
        )
    if isinstance(tpl, cst.Call):
        if not isinstance(node, cst.Call):
            return False
        if not _match(pattern, tpl.func, node.func, bindings, owned, qn, roots, by_keyword):
            return False
        return _match_args(pattern, tpl, node, bindings, owned, qn, roots, by_keyword)
    if isinstance(tpl, cst.BooleanOperation | cst.BinaryOperation):
        return (
            type(node) is type(tpl)
            and type(node.operator) is type(tpl.operator)  # type: ignore[attr-defined]
            and _match(pattern, tpl.left, node.left, bindings, owned, qn, roots, by_keyword)  # type: ignore[attr-defined]
            and _match(pattern, tpl.right, node.right, bindings, owned, qn, roots, by_keyword)  # type: ignore[attr-defined]
        )
    if isinstance(tpl, cst.Comparison):
        return (
            isinstance(node, cst.Comparison)
            and len(node.comparisons) == len(tpl.comparisons)
            and _match(pattern, tpl.left, node.left, bindings, owned, qn, roots, by_keyword)
            and all(
                type(a.operator) is type(b.operator)
                and _match(pattern, a.comparator, b.comparator, bindings, owned, qn, roots, by_keyword)
                for a, b in zip(tpl.comparisons, node.comparisons, strict=True)
            )
        )
    if isinstance(tpl, cst.SimpleString) and isinstance(node, cst.SimpleString):
        return tpl.evaluated_value == node.evaluated_value  # 'a' and "a" are the same argument
    return _normal(tpl) == _normal(node)


def _arg_keyword(pattern: Pattern, arg: cst.Arg) -> str | None:
    if arg.keyword is not None:
        return arg.keyword.value
    if isinstance(arg.value, cst.Name) and arg.value.value in pattern.placeholders:
        return pattern.placeholders[arg.value.value].keyword
    return None


def _match_args(
    pattern: Pattern,
    tpl: cst.Call,
    node: cst.Call,
    bindings: dict[str, cst.BaseExpression],
    owned: list[cst.CSTNode],
    qn: QualifiedNameOf,
    roots: frozenset[str],
    by_keyword: set[str],
) -> bool:
    params = list(tpl.args)
    index_of = {kw: i for i, a in enumerate(params) if (kw := _arg_keyword(pattern, a)) is not None}
    assigned: dict[int, cst.Arg] = {}
    for position, arg in enumerate(node.args):
        if arg.star:
            return False
        if arg.keyword is None:
            if position >= len(params) or position in assigned:
                return False
            assigned[position] = arg
        else:
            index = index_of.get(arg.keyword.value)
            if index is None or index in assigned:
                return False
            assigned[index] = arg
    for index, tpl_arg in enumerate(params):
        value = tpl_arg.value
        is_placeholder = isinstance(value, cst.Name) and value.value in pattern.placeholders
        if index not in assigned:
            if is_placeholder and pattern.placeholders[value.value].optional:
                continue
            return False
        if not _match(pattern, value, assigned[index].value, bindings, owned, qn, roots, by_keyword):
            return False
        if assigned[index].keyword is not None and is_placeholder:
            by_keyword.add(pattern.placeholders[value.value].name)
    return True


# ----------------------------------------------------------------------------------------------
# Emitting


ExprFor = Callable[[str], cst.BaseExpression]

ATOMS = (
    cst.Name,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)


def parenthesize(node: cst.BaseExpression) -> cst.BaseExpression:
    """Wrap `node` in parentheses unless it already binds tighter than attribute access."""
    if node.lpar or isinstance(node, ATOMS):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def emit_pattern(
    pattern: Pattern,
    values: Mapping[str, cst.BaseExpression],
    expr_for: ExprFor,
    roots: frozenset[str],
) -> cst.BaseExpression:
    """Build target code. `values` maps parameter names to (already converted) expressions.

    Raises KeyError when a required placeholder has no value.
    """
    missing = pattern.required - set(values)
    if missing:
        raise KeyError(", ".join(sorted(missing)))
    return pattern.expr.visit(_Emitter(pattern, values, expr_for, roots))  # type: ignore[return-value]


class _Emitter(cst.CSTTransformer):
    def __init__(
        self,
        pattern: Pattern,
        values: Mapping[str, cst.BaseExpression],
        expr_for: ExprFor,
        roots: frozenset[str],
    ) -> None:
        super().__init__()
        self.pattern = pattern
        self.values = values
        self.expr_for = expr_for
        self.roots = roots

    def _value(self, ident: str) -> cst.BaseExpression | None:
        return self.values.get(self.pattern.placeholders[ident].name)

    def _framework_dotted(self, node: cst.CSTNode) -> str | None:
        dotted = dotted_name(node)
        if dotted is not None and dotted.split(".", 1)[0] in self.roots:
            return dotted
        return None

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return self._framework_dotted(node) is None

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        dotted = self._framework_dotted(original_node)
        if dotted is not None:
            return self.expr_for(dotted)
        if isinstance(original_node.value, cst.Name) and original_node.value.value in self.pattern.placeholders:
            return updated_node.with_changes(value=parenthesize(updated_node.value))
        return updated_node

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        if original_node.value in self.pattern.placeholders:
            value = self._value(original_node.value)
            # An unbound optional placeholder is removed together with its Arg (leave_Arg).
            return updated_node if value is None else value
        dotted = self._framework_dotted(original_node)
        if dotted is not None:
            return self.expr_for(dotted)
        return updated_node

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg | cst.RemovalSentinel:
        value = original_node.value
        if isinstance(value, cst.Name) and value.value in self.pattern.placeholders:
            if self._value(value.value) is None:
                return cst.RemoveFromParent()
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        # Removing optional args can leave a trailing comma on the last one: tidy it.
        if updated_node.args:
            last = updated_node.args[-1]
            if not isinstance(last.comma, cst.MaybeSentinel):
                args = [*updated_node.args[:-1], last.with_changes(comma=cst.MaybeSentinel.DEFAULT)]
                return updated_node.with_changes(args=args)
        return updated_node
