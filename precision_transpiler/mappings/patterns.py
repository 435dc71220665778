"""The pattern language of the mapping tables: Python expressions with placeholders, used both
to recognise and to emit code (matching and emitting: rewrite/templates.py).

A mapping table writes `tensorflow.cast({x}, {dtype})`. The same text is parsed once into a
LibCST expression and then serves two purposes:

* **matching** a call in the user's code, binding `x` and `dtype` to the user's expressions
  (framework names are compared by their resolved qualified name, so aliases do not matter);
* **emitting** target code, with placeholders replaced by the (already converted) bound
  expressions and qualified names replaced by the file's own aliases.

Placeholder syntax: `{name}`, `{name:keyword}` (the argument's keyword in this framework differs
from the op's parameter name), `{name?}` (optional), `{name!str}` (emit as a string literal),
`{name=literal}` (optional, with the value it has when absent), `{*name}` (all remaining
positional arguments: `x.view(a, b)` and `x.view((a, b))` alike; at least one, unless the call's
keyword arguments go to a `{**name}` beside it) and `{**name}` (all keyword arguments no other
placeholder takes, passed through).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from precision_transpiler.syntax import code_of

_PLACEHOLDER = re.compile(
    r"\{(?P<star>\*{1,2})?(?P<name>[A-Za-z_]\w*)(?::(?P<kw>[A-Za-z_]\w*))?"
    r"(?:=(?P<default>[^{}]+?))?(?P<opt>\?)?(?P<str>!str)?\}"
)
_PREFIX = "__ptph_"


@dataclass(frozen=True)
class Placeholder:
    """One `{...}` in a pattern."""

    name: str  # the op's parameter name
    keyword: str  # keyword of the argument in this framework's spelling
    optional: bool
    as_string: bool
    #: `{name=literal}`: the parameter's value when the argument is absent (Python literal text)
    default: str | None = None
    #: `{*name}`: takes every remaining positional argument
    variadic: bool = False
    #: `{**name}`: takes every keyword argument no other placeholder takes
    keywords: bool = False

    @property
    def may_be_absent(self) -> bool:
        return self.optional or self.default is not None or self.keywords


#: Placeholder values that are argument lists (`{*shape}`, `{**kwargs}`) rather than one expression.
@dataclass(frozen=True)
class ArgList:
    """The user's arguments bound to a variadic placeholder, already converted.

    Emitted as several arguments where the target pattern spreads them (`{*name}`, `{**name}`),
    and as one expression elsewhere: the single argument itself, or a tuple of them, so
    `x.view(a, b)` becomes `x.reshape((a, b))` and `x.view(shape)` becomes `x.reshape(shape)`."""

    args: tuple[cst.Arg, ...]

    def as_expression(self) -> cst.BaseExpression:
        positional = [a for a in self.args if a.star != "**"]
        if len(positional) == 1 and not positional[0].star:
            return positional[0].value
        elements: list[cst.BaseElement] = [
            cst.StarredElement(a.value) if a.star == "*" else cst.Element(a.value) for a in positional
        ]
        return cst.Tuple(elements)

    def spread(self) -> list[cst.Arg]:
        """The arguments one by one; a single tuple or list display is spread into its items."""
        if len(self.args) == 1 and not self.args[0].star and self.args[0].keyword is None:
            value = self.args[0].value
            if isinstance(value, cst.Tuple | cst.List) and not value.lpar[1:]:
                return [
                    make_arg(e.value, star="*" if isinstance(e, cst.StarredElement) else "") for e in value.elements
                ]
        return [make_arg(a.value, keyword=a.keyword, star=a.star) for a in self.args]


_NO_SPACE = cst.SimpleWhitespace("")


def make_arg(value: cst.BaseExpression, keyword: cst.Name | None = None, star: str = "") -> cst.Arg:
    """A fresh argument (commas are left to the code generator)."""
    if keyword is None:
        return cst.Arg(value=value, star=star)  # type: ignore[arg-type]
    equal = cst.AssignEqual(whitespace_before=_NO_SPACE, whitespace_after=_NO_SPACE)
    return cst.Arg(value=value, keyword=keyword, equal=equal)


class _NotLiteral:
    def __repr__(self) -> str:
        return "NOT_LITERAL"


#: What `literal_value` returns for an expression that is not a Python literal.
NOT_LITERAL: object = _NotLiteral()


def literal_value(node: cst.CSTNode) -> object:
    """The value of a literal expression (`1`, `-1`, `"tanh"`, `True`, `None`, `(0, 1)`), else
    NOT_LITERAL. Used to compare arguments with table constants (`bind`, defaults)."""
    if isinstance(node, cst.Name):
        return {"True": True, "False": False, "None": None}.get(node.value, NOT_LITERAL)
    if not isinstance(node, LITERAL_NODES):
        return NOT_LITERAL
    try:
        return ast.literal_eval(code_of(node))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return NOT_LITERAL


LITERAL_NODES = (
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.UnaryOperation,
    cst.Tuple,
    cst.List,
)


def same_value(a: object, b: object) -> bool:
    """Literal equality as a table means it: 1 == 1.0, but True is not 1 and "1" is not 1;
    YAML lists equal tuples."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def literal_node(value: object) -> cst.BaseExpression:
    """Code for a table constant (a `bind` value or a default)."""
    if isinstance(value, str):
        return cst.SimpleString('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return cst.parse_expression(repr(value))


@dataclass(frozen=True)
class Pattern:
    """A parsed pattern. `expr` holds placeholders as Names `__ptph_<i>__`."""

    text: str
    expr: cst.BaseExpression
    placeholders: Mapping[str, Placeholder]  # placeholder identifier -> spec
    bind: Mapping[str, object] = field(default_factory=dict)  # constants the pattern implies
    warn: str | None = None  # said (as a warning) whenever this pattern is emitted
    #: parameter -> warning said when this pattern is emitted without that argument: beside the
    #: op's own `warn_if_missing`, for a concern of this target only (JAX's int32 without x64)
    warn_if_missing: Mapping[str, str] = field(default_factory=dict)
    #: parameters that, when one of them is a Python float, silence that `warn_if_missing`: a
    #: warning about integer values (`torch.full(s, float("-inf"))` is float32 in both frameworks)
    unless_float: tuple[str, ...] = ()
    #: used only to emit code: source code is never read with it (`{x}.shape` for `x.size()`)
    emit_only: bool = False

    @property
    def params(self) -> set[str]:
        return {p.name for p in self.placeholders.values()}

    @property
    def required(self) -> set[str]:
        return {p.name for p in self.placeholders.values() if not p.may_be_absent}

    @cached_property
    def defaults(self) -> dict[str, cst.BaseExpression]:
        """Parameter -> its `{name=literal}` default, parsed."""
        return {p.name: cst.parse_expression(p.default) for p in self.placeholders.values() if p.default is not None}

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

    @property
    def function_name(self) -> str | None:
        """`torch.argmax` for `torch.argmax({x:input}, ...)`: the function a call pattern calls."""
        expr = self.expr
        if isinstance(expr, cst.Call) and self.method_name is None:
            parts: list[str] = []
            node: cst.BaseExpression = expr.func
            while isinstance(node, cst.Attribute):
                parts.append(node.attr.value)
                node = node.value
            if isinstance(node, cst.Name) and node.value not in self.placeholders:
                return ".".join([node.value, *reversed(parts)])
        return None

    @cached_property
    def positional_groups(self) -> tuple[tuple[tuple[cst.Arg, str], ...], ...]:
        """Per call whose positional placeholders include one that may be absent: those
        arguments and their parameters, in order (emission writes the ones after a left-out one
        by keyword). Empty for most patterns, so emitting them costs nothing."""
        groups: list[tuple[tuple[cst.Arg, str], ...]] = []
        placeholders = self.placeholders

        class _V(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                group = []
                for arg in node.args:
                    ph = placeholders.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
                    if arg.keyword is None and ph is not None and not (ph.variadic or ph.keywords):
                        group.append((arg, ph.name))
                names = [placeholders_by_name[name] for _, name in group]
                if any(ph.may_be_absent for ph in names[:-1]):
                    groups.append(tuple(group))

        placeholders_by_name = {ph.name: ph for ph in placeholders.values()}
        self.expr.visit(_V())
        return tuple(groups)

    @cached_property
    def argument_params(self) -> dict[str, int]:
        """For a call pattern: parameter -> how many arguments it needs at least (0 when it may
        be absent), plus `""` -> the number of constant arguments. The receiver is not counted."""
        expr = self.expr
        needs: dict[str, int] = {"": 0}
        if not isinstance(expr, cst.Call):
            return needs
        for arg in expr.args:
            ph = self.placeholders.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
            if ph is None:
                needs[""] += 1
            else:
                needs[ph.name] = 0 if ph.may_be_absent else 1
        return needs


def _root_placeholder(node: cst.BaseExpression, placeholders: Mapping[str, Placeholder]) -> bool:
    return isinstance(node, cst.Name) and node.value in placeholders


def parse_pattern(
    text: str,
    bind: Mapping[str, object] | None = None,
    warn: str | None = None,
    *,
    emit_only: bool = False,
    warn_if_missing: Mapping[str, str] | None = None,
    unless_float: Sequence[str] = (),
) -> Pattern:
    """Parse a pattern; raises ValueError with a readable reason."""
    placeholders: dict[str, Placeholder] = {}

    def repl(m: re.Match[str]) -> str:
        name = m.group("name")
        plain = not any(m.group(g) for g in ("star", "kw", "default", "opt", "str"))
        for ident, known in placeholders.items():  # a repeated placeholder is the same value
            if known.name == name and plain:
                return ident
        star = m.group("star") or ""
        default = m.group("default")
        if star and (default is not None or (m.group("opt") and star == "**") or m.group("str")):
            raise ValueError(f"placeholder {m.group(0)} in {text!r}: a variadic placeholder takes no default or !str")
        if default is not None:
            try:
                ast.literal_eval(default.strip())
            except (ValueError, SyntaxError):
                raise ValueError(
                    f"default of {{{name}}} in {text!r} must be a Python literal, got {default!r}"
                ) from None
            default = default.strip()
        ident = f"{_PREFIX}{len(placeholders)}__"
        placeholders[ident] = Placeholder(
            name=name,
            keyword=m.group("kw") or name,
            optional=bool(m.group("opt")),
            as_string=bool(m.group("str")),
            default=default,
            variadic=star == "*",
            keywords=star == "**",
        )
        return ident

    body = _PLACEHOLDER.sub(repl, text)
    if "{" in body or "}" in body:
        raise ValueError(f"malformed placeholder in pattern {text!r}")
    try:
        expr = cst.parse_expression(body)
    except cst.ParserSyntaxError as exc:
        raise ValueError(f"pattern {text!r} is not a Python expression: {exc.message}") from None
    pattern = Pattern(
        text=text,
        expr=expr,
        placeholders=placeholders,
        bind=dict(bind or {}),
        warn=warn,
        emit_only=emit_only,
        warn_if_missing=dict(warn_if_missing or {}),
        unless_float=tuple(unless_float),
    )
    names = [ph.name for ph in placeholders.values()]
    for ident, ph in placeholders.items():
        if ph.variadic or ph.keywords:
            if names.count(ph.name) > 1:
                raise ValueError(f"variadic placeholder {{{ph.name}}} may appear only once in {text!r}")
            _check_variadic_position(expr, ident, ph, placeholders, text)
        elif (ph.optional or ph.default is not None) and not _is_call_argument(expr, ident):
            what = "optional placeholder" if ph.optional else "placeholder with a default"
            raise ValueError(f"{what} {{{ph.name}}} must be a call argument in {text!r}")
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


def _check_variadic_position(
    expr: cst.BaseExpression, ident: str, ph: Placeholder, placeholders: Mapping[str, Placeholder], text: str
) -> None:
    """`{*name}` must be the last positional argument of its call, `{**name}` the last argument."""
    problem = f"{'{*' if ph.variadic else '{**'}{ph.name}}} must be a call argument"
    calls: list[cst.Call] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if any(isinstance(a.value, cst.Name) and a.value.value == ident for a in node.args):
                calls.append(node)

    expr.visit(_V())
    if not calls:
        raise ValueError(f"{problem} in {text!r}")
    args = calls[0].args
    index = next(i for i, a in enumerate(args) if isinstance(a.value, cst.Name) and a.value.value == ident)
    if args[index].keyword is not None or args[index].star:
        raise ValueError(f"{problem} written without a keyword or star in {text!r}")
    later = args[index + 1 :]
    if ph.keywords and later:
        raise ValueError(f"{{**{ph.name}}} must be the last argument in {text!r}")
    for arg in later:  # only keyword arguments and a `{**name}` may follow `{*name}`
        other = placeholders.get(arg.value.value) if isinstance(arg.value, cst.Name) else None
        if ph.variadic and arg.keyword is None and not (other is not None and other.keywords):
            raise ValueError(f"{{*{ph.name}}} must be the last positional argument in {text!r}")
