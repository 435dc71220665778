"""Fitting a rule's replacement into the place of the node it replaces.

A rule builds its replacement without looking at where the node stands, and a replacement can
bind looser than what it replaces: a torch function passed as a value becomes a lambda
(`func is torch.cat` -> `func is lambda tensors, dim=0: ...`, which reads as `func is lambda`
followed by nonsense), an attribute becomes a conditional expression. The engine hands every
replacement to `fit_position`, which parenthesizes it when its position needs an operand that
binds tighter (Python's operator precedence, the language reference's table).

Inside an f-string's `{}` Python 3.11 has more rules: the expression may not use the f-string's
own quote character, nor a backslash, nor (in a one-line f-string) a line break, and a top-level
lambda or walrus would be read as a format spec. `fit_fstring_expression` rewrites the converted
expression of a `{}` to follow them (strings re-quoted with the other quote kind, parentheses
where needed); when no spelling of the expression can follow them it says so, and the engine
keeps the user's expression and reports it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

import libcst as cst

from precision_transpiler.syntax import code_of

# Python's operator precedence, loosest first (the language reference's table). A walrus binds
# loosest of all (it needs parentheses nearly everywhere); a bare tuple (`a, b`) only stands
# where a statement takes a whole expression list.
RANKS = {"walrus": -2, "tuple": -1, "lambda": 0, "if": 1, "or": 2, "and": 3, "not": 4, "comparison": 5, "atom": 20}
_BITWISE_OR = 6  # also the loosest operand of `*` in a display (`[*a | b]`)
_UNARY = 12  # -x, +x, ~x
_AWAIT = 14
_BINARY_RANKS: dict[type, int] = {
    cst.BitOr: _BITWISE_OR,
    cst.BitXor: 7,
    cst.BitAnd: 8,
    cst.LeftShift: 9,
    cst.RightShift: 9,
    cst.Add: 10,
    cst.Subtract: 10,
    cst.Multiply: 11,
    cst.Divide: 11,
    cst.FloorDivide: 11,
    cst.Modulo: 11,
    cst.MatrixMultiply: 11,
    cst.Power: 13,
}


def rank(node: cst.BaseExpression) -> int:
    """How tightly `node` binds (higher binds tighter); parenthesized nodes are atoms."""
    if getattr(node, "lpar", None):
        return RANKS["atom"]
    return _binding(node)


def _binding(node: cst.CSTNode) -> int:
    """How tightly the operator of `node` binds, whatever parentheses it has."""
    if isinstance(node, cst.Lambda):
        return RANKS["lambda"]
    if isinstance(node, cst.IfExp):
        return RANKS["if"]
    if isinstance(node, cst.BooleanOperation):
        return RANKS["or"] if isinstance(node.operator, cst.Or) else RANKS["and"]
    if isinstance(node, cst.UnaryOperation):
        return RANKS["not"] if isinstance(node.operator, cst.Not) else _UNARY
    if isinstance(node, cst.Comparison):
        return RANKS["comparison"]
    if isinstance(node, cst.BinaryOperation):
        return _BINARY_RANKS[type(node.operator)]
    if isinstance(node, cst.Await):
        return _AWAIT
    if isinstance(node, cst.NamedExpr | cst.Yield):
        return RANKS["walrus"]
    if isinstance(node, cst.Tuple):
        return RANKS["tuple"]
    return RANKS["atom"]


#: statement parts that take an expression list: a bare tuple stands there as it is
_LISTS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Expr, cst.For)


def needed_rank(parent: cst.CSTNode, child: cst.CSTNode) -> int:
    """The loosest binding an expression may have to stand as `child` of `parent` without
    parentheses (`parent` is the original node, `child` one of its original children)."""
    atom = RANKS["atom"]
    if isinstance(parent, cst.Attribute | cst.Subscript):
        return atom if parent.value is child else RANKS["lambda"]
    if isinstance(parent, cst.Call):
        return atom if parent.func is child else RANKS["lambda"]
    if isinstance(parent, cst.Await):
        return atom
    if isinstance(parent, cst.UnaryOperation | cst.BinaryOperation | cst.BooleanOperation):
        return _operand_rank(parent, child)
    if isinstance(parent, cst.Comparison | cst.ComparisonTarget):
        return RANKS["comparison"] + 1  # `(a < b) < c` is not `a < b < c`
    if isinstance(parent, cst.IfExp):
        return RANKS["lambda"] if parent.orelse is child else RANKS["or"]
    if isinstance(parent, cst.StarredElement):
        return _BITWISE_OR
    if isinstance(parent, cst.CompFor | cst.CompIf):
        return RANKS["or"]  # `for x in (a if c else b)`, `if (lambda: x)`
    if isinstance(parent, cst.FormattedStringExpression):
        return RANKS["if"]  # `f"{lambda: x}"`: the `:` would start a format spec
    if isinstance(parent, _LISTS):
        return RANKS["tuple"]
    return RANKS["lambda"]


def _operand_rank(parent: cst.UnaryOperation | cst.BinaryOperation | cst.BooleanOperation, child: cst.CSTNode) -> int:
    own = _binding(parent)
    if isinstance(parent, cst.UnaryOperation):
        return own
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Power):
        return _AWAIT if parent.left is child else _UNARY  # `(-a) ** b`, `a ** -b`
    return own if parent.left is child else own + 1  # left-associative: `a - (b - c)`


def fit_position(parent: cst.CSTNode, original: cst.CSTNode, replacement: cst.BaseExpression) -> cst.BaseExpression:
    """`replacement`, parenthesized when standing where `original` stood in `parent` would
    otherwise change how it parses (`func is (lambda ...)`, `(a if c else b).shape`)."""
    if replacement.lpar:
        return replacement
    if isinstance(replacement, cst.Integer) and isinstance(parent, cst.Attribute) and parent.value is original:
        return _parenthesized(replacement)  # `1.real` is a malformed number
    if rank(replacement) < needed_rank(parent, original):
        return _parenthesized(replacement)
    return replacement


def _parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


# ----------------------------------------------------------------------------------------------
# f-strings


class _NoSpelling(Exception):
    """The expression cannot be written inside the f-string (Python 3.11's rules)."""


def fit_fstring_expression(
    node: cst.FormattedStringExpression, enclosing: Sequence[cst.FormattedString]
) -> cst.FormattedStringExpression | None:
    """`node` (a `{}` whose expression a rule converted) written so that Python 3.11 reads it
    inside the f-strings `enclosing` it (outermost first), or None when that cannot be done.

    Before Python 3.12 an f-string is first read as a plain string literal, so its `{}` may not
    hold its own quote character, nor a backslash, nor a line break when it is on one line; and
    a top-level `:` (a lambda, a walrus) or a leading `{` (a dict or set display: `{{` is a
    literal brace) changes what the braces mean."""
    quotes = [s.quote for s in enclosing]
    try:
        expression = node.expression.visit(_Requote(frozenset(quotes)))
    except _NoSpelling:
        return None
    assert isinstance(expression, cst.BaseExpression)
    text = code_of(expression)
    if not expression.lpar and (rank(expression) < RANKS["if"] or text.startswith("{")):
        expression = _parenthesized(expression)
        text = f"({text})"
    if "\\" in text or ("\n" in text and any(len(q) == 1 for q in quotes)) or any(q in text for q in quotes):
        return None
    # what the constructive steps above do not cover (a comment in the expression, say)
    # the interpreter itself checks; on 3.12 and later this accepts what 3.11 would refuse,
    # but there the rules above already made it valid for 3.11
    probe = "{" + text + "}"
    for quote in reversed(quotes):
        probe = "{f" + quote + probe + quote + "}"
    try:
        ast.parse(probe[1:-1], mode="eval")
    except SyntaxError:
        return None
    return node.with_changes(expression=expression)


class _Requote(cst.CSTTransformer):
    """String literals re-quoted with a quote that no enclosing f-string takes: inside `f"..."`
    no `"` at all, inside a triple-quoted f-string no string with the same three quotes. An
    f-string inside the expression adds its own (new) quote to those its `{}` may not use."""

    def __init__(self, enclosing: frozenset[str]) -> None:
        super().__init__()
        self.enclosing = [enclosing]

    def _taken(self, quote: str) -> bool:
        return any(q == quote or (len(q) == 1 and q == quote[0]) for q in self.enclosing[-1])

    def _free_quote(self, quote: str, body: str) -> str:
        """`quote`, or the same quote in the other character when the first is taken."""
        if not self._taken(quote):
            return quote
        other = ("'" if quote[0] == '"' else '"') * len(quote)
        if self._taken(other) or other[0] in body or "\\" in body:
            raise _NoSpelling
        return other

    def leave_SimpleString(self, original_node: cst.SimpleString, updated_node: cst.SimpleString) -> cst.SimpleString:
        quote = self._free_quote(updated_node.quote, updated_node.raw_value)
        if quote == updated_node.quote:
            return updated_node
        return updated_node.with_changes(value=f"{updated_node.prefix}{quote}{updated_node.raw_value}{quote}")

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        self.enclosing.append(self.enclosing[-1] | {self._free_quote(node.quote, _text(node))})
        return True

    def leave_FormattedString(
        self, original_node: cst.FormattedString, updated_node: cst.FormattedString
    ) -> cst.FormattedString:
        self.enclosing.pop()
        quote = self._free_quote(updated_node.quote, _text(updated_node))
        if quote == updated_node.quote:
            return updated_node
        return updated_node.with_changes(start=f"{updated_node.prefix}{quote}", end=quote)


def _text(node: cst.FormattedString) -> str:
    return "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
