"""What a Python expression is known to hold, read from its spelling alone.

`python_float`: a float literal (`0.5`, `-1e9`), `float(...)` (`float("-inf")`), a `math`
constant (`math.inf`, `math.nan`, `math.pi`, `math.e`, `math.tau`), a sign in front of one of
those, or arithmetic that meets one (`2 * 0.5`): Python makes a float of each, and torch infers
a floating dtype from it. `warnings_if_missing` uses it for the patterns' `unless_float`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from precision_transpiler.mappings.patterns import Pattern
    from precision_transpiler.rewrite.templates import Match

_MATH_FLOATS = frozenset({"math.inf", "math.nan", "math.pi", "math.e", "math.tau"})
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power, cst.Modulo, cst.FloorDivide)


def python_float(node: cst.CSTNode | None, qualified_name: Callable[[cst.CSTNode], str | None]) -> bool:
    """Whether `node` is a Python float, by its spelling (`qualified_name` resolves `math.inf`
    through the file's imports)."""
    if isinstance(node, cst.Float):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus | cst.Plus):
        return python_float(node.expression, qualified_name)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
        # a float with a number stays a float (with a tensor it is a tensor: not a fill value)
        return python_float(node.left, qualified_name) or python_float(node.right, qualified_name)
    if isinstance(node, cst.Call):
        return isinstance(node.func, cst.Name) and node.func.value == "float"
    if isinstance(node, cst.Attribute | cst.Name):
        return qualified_name(node) in _MATH_FLOATS
    return False


def warnings_if_missing(
    match: Match, target: Pattern, qualified_name: Callable[[cst.CSTNode], str | None]
) -> dict[str, str]:
    """The `warn_if_missing` of the matched pattern and of the target pattern (the target's win),
    less those of a pattern one of whose `unless_float` arguments is a Python float in `match`
    (its warnings are about integer values)."""
    found: dict[str, str] = {}
    for pattern in (match.pattern, target):
        if not any(python_float(match.bindings.get(name), qualified_name) for name in pattern.unless_float):
            found.update(pattern.warn_if_missing)
    return found
