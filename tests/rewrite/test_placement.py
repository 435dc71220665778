"""A rule's replacement fitted into the place of the node it replaces (rewrite/placement.py).

A replacement that binds looser than its position needs is parenthesized: a torch function
passed as a value becomes a lambda, and `func is torch.cat` must not read as `func is lambda`.
A replacement inside an f-string's `{}` is written so that Python 3.11 reads it: no quote of an
enclosing f-string (strings are re-quoted), no top-level lambda; when that cannot be done the
user's expression stays and is reported. Code no rule touched comes out as written.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

import libcst as cst
import numpy as np
import pytest

from precision_transpiler import transpile
from precision_transpiler.rewrite.placement import fit_position

# ----------------------------------------------------------------------------------------------
# fit_position: every operand position, every loosely binding replacement
# ----------------------------------------------------------------------------------------------

#: `X` marks the position; each is valid Python with X a name
POSITIONS = (
    "a is X",
    "X is a",
    "a < X < b",
    "X + 1",
    "1 - X",
    "X * 2",
    "X ** 2",
    "2 ** X",
    "-X",
    "not X",
    "X.attr",
    "X[0]",
    "a[X]",
    "X(1)",
    "f(X, 1)",
    "f(k=X, j=1)",
    "[X, 1]",
    "(X, 1)",
    "{X: 1}",
    "{1: X}",
    "{X}",
    "[*X]",
    "a if X else b",
    "X if a else b",
    "a if b else X",
    "[y for y in X]",
    "[y for y in z if X]",
    "[X for y in z]",
    "a and X",
    "X or a",
    "lambda: X",
    "x = X",
    "return X",
    'f"{X}"',
)

#: replacements that bind looser than a name, and a name (which never needs parentheses)
REPLACEMENTS = ("lambda t, d=0: g(t, d)", "p if q else r", "a or b", "a and b", "not a", "a == b",
                "a | b", "a + b", "a * b", "-a", "a ** b", "(y := 1)", "a, b", "1", "name")  # fmt: skip


class _Substitute(cst.CSTTransformer):
    """Replace the name `X` by `replacement`, fitted to its place as the engine does."""

    def __init__(self, replacement: cst.BaseExpression) -> None:
        super().__init__()
        self.replacement = replacement
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        self.stack.pop()
        if isinstance(original_node, cst.Name) and original_node.value == "X":
            return fit_position(self.stack[-1], original_node, self.replacement)
        return updated_node


class _FlatBoolOps(ast.NodeTransformer):
    """`(a or b) or c` and `a or b or c`: one value, which ast spells differently."""

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.BoolOp:
        self.generic_visit(node)
        values: list[ast.expr] = []
        for value in node.values:
            same = isinstance(value, ast.BoolOp) and type(value.op) is type(node.op)
            values.extend(value.values if same else [value])  # type: ignore[attr-defined]
        node.values = values
        return node


def _tree(code: str) -> str:
    return ast.dump(_FlatBoolOps().visit(ast.parse(code)))


def _wrapped(code: str) -> str:
    return f"def _():\n    {code}\n" if code.startswith("return") else code + "\n"


def _as_written(replacement: str) -> cst.BaseExpression:
    """The replacement as a rule builds it: without parentheses of its own."""
    return cst.parse_expression(replacement).with_changes(lpar=[], rpar=[])


@pytest.mark.parametrize("position", POSITIONS)
def test_a_replacement_parses_as_one_operand_wherever_it_stands(position: str) -> None:
    module = cst.parse_module(_wrapped(position))
    for replacement in REPLACEMENTS:
        try:
            expected = _tree(_wrapped(position.replace("X", f"({replacement})")))
        except SyntaxError:
            continue  # not valid Python even parenthesized (a walrus as a comprehension's iterable)
        fitted = module.visit(_Substitute(_as_written(replacement))).code
        assert _tree(fitted) == expected, fitted


@pytest.mark.parametrize(
    ("position", "replacement", "expected"),
    [
        ("a is X", "name", "a is name"),  # an atom stands anywhere as it is
        ("f(X, 1)", "lambda: 0", "f(lambda: 0, 1)"),  # a lambda is a whole argument
        ("x = X", "a if b else c", "x = a if b else c"),
        ("a + X", "a * b", "a + a * b"),
        ("X - 1", "a - b", "a - b - 1"),  # left-associative
        ("a if b else X", "c if d else e", "a if b else c if d else e"),
    ],
)
def test_parentheses_only_where_needed(position: str, replacement: str, expected: str) -> None:
    fitted = cst.parse_module(position + "\n").visit(_Substitute(_as_written(replacement))).code
    assert fitted == expected + "\n"


# ----------------------------------------------------------------------------------------------
# Conversions: torch functions as values, requires_grad in an f-string
# ----------------------------------------------------------------------------------------------

FUNCTION_VALUES = textwrap.dedent(
    """
    import torch


    def same(func):
        return func is torch.cat


    def pick(flag):
        return torch.cat if flag else torch.stack


    fns = [torch.cat, torch.stack]
    table = {torch.cat: 1}


    def run(xs, flag):
        return pick(flag)(xs), fns[1](xs), pick(not flag)(xs)


    def others():  # parsed, not run: a converted function is never torch.cat itself
        return [fn for fn in fns if fn is not torch.cat]
    """
)


def _code(source: str, target: str) -> str:
    result = transpile(source, to=target)
    assert result.ok, [d.format() for d in result.diagnostics]
    ast.parse(result.code)  # what converted code is: valid Python
    return result.code


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_function_values_are_parenthesized_operands(target: str) -> None:
    code = _code(FUNCTION_VALUES, target)
    assert "func is (lambda tensors, dim=0: " in code
    assert "return (lambda tensors, dim=0: " in code and ") if flag else lambda tensors, dim=0: " in code
    assert "fns = [lambda tensors, dim=0: " in code  # a list element needs none
    assert "fn is not (lambda tensors, dim=0: " in code


def _namespace(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(code, "converted.py", "exec"), namespace)
    return namespace


def _run_function_values(code: str, array: Any) -> list[np.ndarray]:
    ns = _namespace(code)
    xs = [array(np.arange(6, dtype=np.float32).reshape(2, 3)), array(np.ones((2, 3), np.float32))]
    assert ns["same"](len) is False and len(ns["table"]) == 1
    return [np.asarray(r) for r in ns["run"](xs, True)]


@pytest.mark.needs_torch
@pytest.mark.needs_jax
def test_function_values_run_as_torch_on_jax() -> None:
    import jax.numpy as jnp
    import torch

    expected = _run_function_values(FUNCTION_VALUES, torch.from_numpy)
    got = _run_function_values(_code(FUNCTION_VALUES, "jax"), jnp.asarray)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)


@pytest.mark.needs_torch
@pytest.mark.needs_tf
def test_function_values_run_as_torch_on_keras() -> None:
    import keras
    import torch

    expected = _run_function_values(FUNCTION_VALUES, torch.from_numpy)
    got = _run_function_values(_code(FUNCTION_VALUES, "tf"), keras.ops.convert_to_tensor)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)


GRAD_TEXT = 'import torch\n\n\ndef f(t):\n    return f"grad={t.requires_grad}"\n'


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("tf", "return f\"grad={getattr(t, 'trainable', False)}\""),
        ("jax", 'return f"grad={isinstance(t, nnx.Param)}"'),
    ],
)
def test_a_replacement_in_an_fstring_avoids_its_quotes(target: str, expected: str) -> None:
    code = _code(GRAD_TEXT, target)
    assert expected in code
    assert "from flax import nnx" in code or target != "jax"  # a name in an f-string is a use


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("f'grad={t.requires_grad}'", "f'grad={getattr(t, \"trainable\", False)}'"),  # already free
        # three quotes end it, one does not
        ('f"""grad={t.requires_grad}"""', 'f"""grad={getattr(t, "trainable", False)}"""'),
        # nested: the inner f-string's quote is taken, the outer one's three are not
        (
            'f"""{", ".join(f"\'{t.requires_grad}\'" for t in ts)}"""',
            'f"""{", ".join(f"\'{getattr(t, \'trainable\', False)}\'" for t in ts)}"""',
        ),
        ('rf"{t.requires_grad!r:>8}"', "rf\"{getattr(t, 'trainable', False)!r:>8}\""),
        # a lambda at the top of `{}` would start a format spec
        ('f"{torch.cat}"', 'f"{(lambda tensors, dim=0: keras.ops.concatenate(tensors, axis=dim))}"'),
    ],
)
def test_fstring_forms(source: str, expected: str) -> None:
    code = _code(f"import torch\n\n\ndef f(t):\n    return {source}\n", "tf")
    assert expected in code


def test_an_fstring_that_cannot_hold_the_replacement_keeps_the_users_expression() -> None:
    # inside f"{f'...'}" neither quote is free for the "trainable" string
    source = "import torch\n\n\ndef f(t):\n    return f\"{f'{t.requires_grad}'}\"\n"
    result = transpile(source, to="tf")
    ast.parse(result.code)
    assert "return f\"{f'{t.requires_grad}'}\"" in result.code
    [report] = [d for d in result.diagnostics if d.code == "unsupported-construct"]
    assert "t.requires_grad inside an f-string" in report.message
    assert "# ptranspile: unsupported: t.requires_grad inside an f-string" in result.code


@pytest.mark.needs_torch
@pytest.mark.parametrize(
    "target", [pytest.param("jax", marks=pytest.mark.needs_jax), pytest.param("tf", marks=pytest.mark.needs_tf)]
)
def test_the_fstring_runs_as_torch(target: str) -> None:
    import torch

    expected = _namespace(GRAD_TEXT)["f"](torch.zeros(2))
    got = _namespace(_code(GRAD_TEXT, target))["f"](np.zeros(2, np.float32))
    assert got == expected == "grad=False"


# ----------------------------------------------------------------------------------------------
# No-ops: what no rule replaced comes out as written
# ----------------------------------------------------------------------------------------------

UNTOUCHED = textwrap.dedent(
    """
    def g(func, d, width, flag):
        a = func is (lambda: 1)
        b = f"{d['k']!r:>{width}}" + f'{d["k"]}' + f\"\"\"{d["k"]}\"\"\"
        c = f"{(lambda: 1)()} {flag if d else width} {(y := 2)}"
        e = [func, len] if flag else {func: 1}
        return a, b, c, e, (-width) ** 2, not (flag or d)
    """
)


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_code_no_rule_touched_is_unchanged(target: str) -> None:
    source = "import torch\n\nx = torch.float32\n" + UNTOUCHED
    result = transpile(source, to=target)
    assert result.ok and not result.unsupported
    assert UNTOUCHED in result.code
