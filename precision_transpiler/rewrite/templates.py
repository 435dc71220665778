"""Matching and emitting the mapping tables' patterns (their language: mappings/patterns.py).

* **matching** a call in the user's code against a pattern binds its placeholders to the user's
  expressions (framework names are compared by their resolved qualified name, so aliases do not
  matter);
* **emitting** target code replaces the placeholders by the (already converted) bound
  expressions and qualified names by the file's own aliases.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import libcst as cst

from precision_transpiler.mappings.patterns import (
    LITERAL_NODES,
    NOT_LITERAL,
    ArgList,
    Pattern,
    literal_value,
    make_arg,
    same_value,
)
from precision_transpiler.rewrite.placement import RANKS as _RANKS
from precision_transpiler.rewrite.placement import rank as _rank
from precision_transpiler.runtime import PACKAGE
from precision_transpiler.syntax import code_of, dotted_name

#: Runtime definitions are emitted and matched like framework symbols: by qualified name, through
#: the file's imports (the converter later copies their definitions into the converted file).
SHIM_PACKAGE = PACKAGE

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
    #: variadic parameters (`{*shape}`, `{**kwargs}`) -> the user's arguments they took. The
    #: binding of such a parameter is the single argument's value, or a made-up tuple of them.
    sequences: dict[str, list[cst.Arg]] = field(default_factory=dict)
    #: parameters bound to the pattern's `{name=literal}` default because the call left them out
    defaulted: set[str] = field(default_factory=set)
    #: `**mapping` arguments of a call whose pattern names its keywords but takes no `{**name}`
    #: (`torch.zeros(n, **dd)`, dd holding device and dtype): the rule forwards what the target takes
    spread: list[cst.Arg] = field(default_factory=list)
    #: keyword -> the pattern keyword it stands for (the source framework's `keyword_aliases`)
    keyword_aliases: Mapping[str, str] = field(default_factory=dict)

    def is_synthetic(self, name: str) -> bool:
        """Whether the binding of `name` is made up (a default, a tuple of several arguments),
        not a node of the user's code: such nodes have no position to report at."""
        if name in self.defaulted:
            return True
        args = self.sequences.get(name)
        return args is not None and not any(a.value is self.bindings.get(name) for a in args)


def _normal(node: cst.CSTNode) -> str:
    return re.sub(r"\s+", "", code_of(node))


def is_qualified(dotted: str, roots: frozenset[str]) -> bool:
    """Whether a dotted name in a pattern is a framework (or shim) symbol, matched and emitted
    by qualified name, rather than code that must appear as written."""
    return dotted.split(".", 1)[0] in roots or dotted.startswith(SHIM_PACKAGE + ".")


def match_pattern(
    pattern: Pattern,
    node: cst.CSTNode,
    qualified_name: QualifiedNameOf,
    roots: frozenset[str],
    keyword_aliases: Mapping[str, str] | None = None,
) -> Match | None:
    """Match `node` (an original, metadata-carrying node) against `pattern`; `keyword_aliases`:
    the keywords the source framework takes for others (torch's `axis` for `dim`)."""
    match = Match(pattern, {}, [], keyword_aliases=keyword_aliases or {})
    if _match(pattern, pattern.expr, node, match, qualified_name, roots):
        return match
    return None


def _match(
    pattern: Pattern,
    tpl: cst.CSTNode,
    node: cst.CSTNode,
    m: Match,
    qn: QualifiedNameOf,
    roots: frozenset[str],
) -> bool:
    if isinstance(tpl, cst.Name) and tpl.value in pattern.placeholders:
        if not isinstance(node, cst.BaseExpression):
            return False
        name = pattern.placeholders[tpl.value].name
        if name in m.bindings:  # a repeated placeholder must bind the same expression
            return _normal(m.bindings[name]) == _normal(node)
        m.bindings[name] = node
        return True
    dotted = dotted_name(tpl)
    if dotted is not None and is_qualified(dotted, roots):
        if qn(node) == dotted:
            m.owned.append(node)
            return True
        return False
    if isinstance(tpl, cst.Attribute):
        return (
            isinstance(node, cst.Attribute)
            and node.attr.value == tpl.attr.value
            and _match(pattern, tpl.value, node.value, m, qn, roots)
        )
    if isinstance(tpl, cst.Call):
        if not isinstance(node, cst.Call):
            return False
        if not _match(pattern, tpl.func, node.func, m, qn, roots):
            return False
        return _match_args(pattern, tpl, node, m, qn, roots)
    if isinstance(tpl, cst.BooleanOperation | cst.BinaryOperation):
        return (
            type(node) is type(tpl)
            and type(node.operator) is type(tpl.operator)  # type: ignore[attr-defined]
            and _match(pattern, tpl.left, node.left, m, qn, roots)  # type: ignore[attr-defined]
            and _match(pattern, tpl.right, node.right, m, qn, roots)  # type: ignore[attr-defined]
        )
    if isinstance(tpl, cst.Comparison):
        return (
            isinstance(node, cst.Comparison)
            and len(node.comparisons) == len(tpl.comparisons)
            and _match(pattern, tpl.left, node.left, m, qn, roots)
            and all(
                type(a.operator) is type(b.operator) and _match(pattern, a.comparator, b.comparator, m, qn, roots)
                for a, b in zip(tpl.comparisons, node.comparisons, strict=True)
            )
        )
    if isinstance(tpl, cst.SimpleString) and isinstance(node, cst.SimpleString):
        return tpl.evaluated_value == node.evaluated_value  # 'a' and "a" are the same argument
    if isinstance(tpl, LITERAL_NODES) and isinstance(node, (*LITERAL_NODES, cst.Name)):
        # constants compare by value: `dim=-1` matches `dim = -1`, `1.0` matches `1.`
        value = literal_value(tpl)
        if value is not NOT_LITERAL:
            return same_value(value, literal_value(node))
    return _normal(tpl) == _normal(node)


def _arg_keyword(pattern: Pattern, arg: cst.Arg) -> str | None:
    if arg.keyword is not None:
        return arg.keyword.value
    if isinstance(arg.value, cst.Name) and arg.value.value in pattern.placeholders:
        ph = pattern.placeholders[arg.value.value]
        return None if ph.keywords else ph.keyword
    return None


def _match_args(
    pattern: Pattern,
    tpl: cst.Call,
    node: cst.Call,
    m: Match,
    qn: QualifiedNameOf,
    roots: frozenset[str],
) -> bool:
    params = list(tpl.args)
    specs = [
        pattern.placeholders.get(a.value.value) if isinstance(a.value, cst.Name) else None  # type: ignore[union-attr]
        for a in params
    ]
    var_index = next((i for i, ph in enumerate(specs) if ph is not None and ph.variadic), None)
    kw_index = next((i for i, ph in enumerate(specs) if ph is not None and ph.keywords), None)
    # positional arguments fill the pattern's arguments in order, up to a `{*name}`
    positional_slots = var_index if var_index is not None else len(params) - (kw_index is not None)
    index_of = {kw: i for i, a in enumerate(params) if (kw := _arg_keyword(pattern, a)) is not None}
    for alias, name in m.keyword_aliases.items():  # torch takes NumPy's spelling too: `x.sum(axis=1)`
        if name in index_of and alias not in index_of:
            index_of[alias] = index_of[name]
    assigned: dict[int, cst.Arg] = {}
    rest: list[cst.Arg] = []  # for `{*name}`
    extra: list[cst.Arg] = []  # for `{**name}`
    position = 0
    for arg in node.args:
        if (
            arg.star == "**"
            and kw_index is None
            and index_of
            and isinstance(arg.value, cst.Name | cst.Attribute | cst.Call | cst.Dict | cst.Subscript)
        ):
            # `**dd`, `**to(x)` (routing-transformer), `**{"dtype": x.dtype}`: forwarded through
            # the runtime's `torch_kwargs`, evaluated once where torch evaluated it
            m.spread.append(arg)
        elif arg.star == "**" or (arg.keyword is not None and arg.keyword.value not in index_of):
            if kw_index is None:
                return False
            extra.append(arg)
        elif arg.keyword is None:  # positional, or `*args`
            if position >= positional_slots:
                if var_index is None:
                    return False
                rest.append(arg)
            elif arg.star:
                return False  # `*args` could fill any number of the pattern's positions
            else:
                assigned[position] = arg
            position += 1
        else:
            index = index_of[arg.keyword.value]
            if index in assigned or (index == var_index and rest):
                return False
            assigned[index] = arg
    for index, tpl_arg in enumerate(params):
        value = tpl_arg.value
        ph = specs[index]
        if ph is not None and ph.keywords:
            if extra:
                m.sequences[ph.name] = extra
                m.bindings[ph.name] = cst.Tuple([cst.Element(a.value) for a in extra])
            continue
        if ph is not None and ph.variadic and index not in assigned:
            if rest:
                m.sequences[ph.name] = rest
                m.bindings[ph.name] = ArgList(tuple(rest)).as_expression()
            elif extra and kw_index is not None and not ph.optional:
                # A pass-through (`f({*args}, {**kwargs})`) called with keywords only, as in
                # `F.scaled_dot_product_attention(query=q, key=k, value=v)`: the arguments are
                # all in `{**kwargs}`, and `{*args}` is bound to none so the target's `{*args}`
                # is emitted as nothing rather than the call being left unconverted.
                m.sequences[ph.name] = []
                m.bindings[ph.name] = ArgList(()).as_expression()
            elif not ph.optional:
                return False
            continue
        if index not in assigned:
            if ph is not None and ph.may_be_absent:
                if ph.default is not None:
                    m.bindings[ph.name] = pattern.defaults[ph.name]
                    m.defaulted.add(ph.name)
                continue
            return False
        if not _match(pattern, value, assigned[index].value, m, qn, roots):
            return False
        if ph is not None:
            if ph.variadic:
                m.sequences[ph.name] = [assigned[index]]
            if assigned[index].keyword is not None:
                m.by_keyword.add(ph.name)
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
    values: Mapping[str, cst.BaseExpression | ArgList],
    expr_for: ExprFor,
    roots: frozenset[str],
) -> cst.BaseExpression:
    """Build target code. `values` maps parameter names to (already converted) expressions, or to
    argument lists for parameters the source bound variadically.

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
        values: Mapping[str, cst.BaseExpression | ArgList],
        expr_for: ExprFor,
        roots: frozenset[str],
    ) -> None:
        super().__init__()
        self.pattern = pattern
        self.values = values
        self.expr_for = expr_for
        self.roots = roots
        self.by_keyword = self._after_a_gap()

    def _after_a_gap(self) -> set[int]:
        """Positional placeholder arguments that follow a left-out one: emitted by keyword, since
        `torch_normalize(x, {p=2.0}, {dim=1})` without p must say `torch_normalize(x, dim=-1)`."""
        found: set[int] = set()
        for group in self.pattern.positional_groups:
            gap = False
            for arg, name in group:
                if self.values.get(name) is None:
                    gap = True
                elif gap:
                    found.add(id(arg))
        return found

    def _value(self, ident: str) -> cst.BaseExpression | ArgList | None:
        return self.values.get(self.pattern.placeholders[ident].name)

    def _framework_dotted(self, node: cst.CSTNode) -> str | None:
        dotted = dotted_name(node)
        if dotted is not None and is_qualified(dotted, self.roots):
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
            if isinstance(value, ArgList):
                return value.as_expression()
            # An unbound optional placeholder is removed together with its Arg (leave_Arg).
            return updated_node if value is None else value
        dotted = self._framework_dotted(original_node)
        if dotted is not None:
            return self.expr_for(dotted)
        return updated_node

    def _operand(self, original: cst.BaseExpression, updated: cst.BaseExpression, rank: int) -> cst.BaseExpression:
        """A placeholder's value used as an operand binding at `rank`: parenthesized when it binds
        looser (`{beta} * {input}` with input `a + b` is `beta * (a + b)`)."""
        if isinstance(original, cst.Name) and original.value in self.pattern.placeholders:
            if not updated.lpar and _rank(updated) < rank:
                return updated.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return updated

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        rank = _rank(original_node)
        power = isinstance(original_node.operator, cst.Power)
        return updated_node.with_changes(
            left=self._operand(original_node.left, updated_node.left, rank + 1 if power else rank),
            right=self._operand(original_node.right, updated_node.right, rank if power else rank + 1),
        )

    def leave_UnaryOperation(
        self, original_node: cst.UnaryOperation, updated_node: cst.UnaryOperation
    ) -> cst.BaseExpression:
        rank = _rank(original_node)
        return updated_node.with_changes(
            expression=self._operand(original_node.expression, updated_node.expression, rank)
        )

    def leave_Comparison(self, original_node: cst.Comparison, updated_node: cst.Comparison) -> cst.BaseExpression:
        rank = _RANKS["comparison"] + 1
        targets = [
            c.with_changes(comparator=self._operand(o.comparator, c.comparator, rank))
            for o, c in zip(original_node.comparisons, updated_node.comparisons, strict=True)
        ]
        return updated_node.with_changes(
            left=self._operand(original_node.left, updated_node.left, rank), comparisons=targets
        )

    def leave_BooleanOperation(
        self, original_node: cst.BooleanOperation, updated_node: cst.BooleanOperation
    ) -> cst.BaseExpression:
        rank = _rank(original_node)
        return updated_node.with_changes(
            left=self._operand(original_node.left, updated_node.left, rank),
            right=self._operand(original_node.right, updated_node.right, rank + 1),
        )

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        return updated_node.with_changes(value=self._operand(original_node.value, updated_node.value, _RANKS["atom"]))

    def leave_Arg(
        self, original_node: cst.Arg, updated_node: cst.Arg
    ) -> cst.Arg | cst.FlattenSentinel[cst.Arg] | cst.RemovalSentinel:
        value = original_node.value
        if isinstance(value, cst.Name) and value.value in self.pattern.placeholders:
            bound = self._value(value.value)
            if bound is None:
                return cst.RemoveFromParent()
            ph = self.pattern.placeholders[value.value]
            if ph.variadic or ph.keywords:
                args = bound.spread() if isinstance(bound, ArgList) else [make_arg(bound)]
                if not ph.keywords:  # keyword arguments bound to `{*name}` become positional
                    args = [a.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT) for a in args]
                return cst.FlattenSentinel(args) if args else cst.RemoveFromParent()
            if id(original_node) in self.by_keyword:
                return make_arg(updated_node.value, keyword=cst.Name(ph.keyword))
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        updated_node = updated_node.with_changes(
            func=self._operand(original_node.func, updated_node.func, _RANKS["atom"])  # `(lambda a: a)(x)`
        )
        # Removed or spread arguments can leave a trailing comma, or none between two: tidy up.
        args = list(updated_node.args)
        if not args:
            return updated_node
        fixed = [a if not isinstance(a.comma, cst.MaybeSentinel) else a.with_changes(comma=_COMMA) for a in args[:-1]]
        last = args[-1]
        if not isinstance(last.comma, cst.MaybeSentinel):
            last = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(args=[*fixed, last])


_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
