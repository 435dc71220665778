"""Pass `rngs` on to module classes copied from sibling modules (torch -> Flax NNX).

The torch-modules rule (rules/torch_modules_jax.py) threads `rngs` through the calls a module's
constructor or a builder makes to module classes and builders *of its own file*. A class that
the file imports from a sibling module is not known to it when the file is converted; the
sibling is converted and copied in afterwards (convert/siblings/), and its constructor takes
`rngs` too. Left so, `TransformerBlock.__init__` called `MLPBlock(hidden, mlp_dim)` without
them: every copied block made `nnx.Rngs(0)` of its own, so all twelve blocks of a ViT started
from the same initial weights and drew the same dropout masks, silently unlike torch's.

After copying, this pass reads the whole output with `ast`: the classes whose `__init__` (or a
base's, in the output) takes a keyword-only `rngs`, and the functions that take one, are the
callees; a call to one of them by name, inside a function that has `rngs` itself, that passes
no `rngs` and no `**kwargs`, gets `rngs=rngs`. Edits are made in the text at ast positions
(the output is large: no LibCST parse), and nothing else changes.
"""

from __future__ import annotations

import ast

from precision_transpiler.convert.import_lines import char_column, line_offsets, splice_spans
from precision_transpiler.syntax import python_ast


def thread_sibling_rngs(code: str) -> str:
    """`code` with `rngs=rngs` added to calls of rngs-taking classes and builders made inside
    functions that have `rngs`."""
    if "rngs" not in code:
        return code
    try:
        tree = python_ast(code)
    except SyntaxError:
        return code
    callees = _rngs_callees(tree)
    if not callees:
        return code
    given = _builders_take_rngs(code, tree, callees)
    if given != code:
        code, tree = given, python_ast(given)
        callees = _rngs_callees(tree)
    lines = code.splitlines(keepends=True)
    offsets = line_offsets(lines)
    edits: list[tuple[int, int, str]] = []
    seen: set[int] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or not _has_rngs(function.args):
            continue
        # its body only: defaults and decorators run where the `def` is, without its `rngs`
        for node in (n for statement in function.body for n in ast.walk(statement)):
            if (
                not isinstance(node, ast.Call)
                or id(node) in seen
                or not isinstance(node.func, ast.Name)
                or node.func.id not in callees
                or any(k.arg in (None, "rngs") for k in node.keywords)  # passes rngs, or **kwargs
                or any(isinstance(a, ast.GeneratorExp) for a in node.args)
                or node.end_lineno is None
                or node.end_col_offset is None
            ):
                continue
            seen.add(id(node))
            edits.append(_rngs_argument(code, lines, offsets, node))
    if not edits:
        return code
    threaded = splice_spans(code, edits)
    try:
        ast.parse(threaded)
    except SyntaxError:  # a form this pass did not foresee: the calls stay as the rule left them
        return code
    return threaded


def _rngs_argument(code: str, lines: list[str], offsets: list[int], call: ast.Call) -> tuple[int, int, str]:
    """The edit adding `rngs=rngs` to `call`: after its last argument, or before its `)` when
    it has none or ends in a comma (comments between are skipped)."""

    def offset(line: int, column: int) -> int:
        return offsets[line - 1] + char_column(lines[line - 1], column)

    assert call.end_lineno is not None and call.end_col_offset is not None
    close = offset(call.end_lineno, call.end_col_offset) - 1  # the `)`
    arguments = [*call.args, *call.keywords]
    if not arguments:
        return close, close, "rngs=rngs"
    last = max(arguments, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
    end = offset(last.end_lineno or call.end_lineno, last.end_col_offset or 0)
    between = "\n".join(part.split("#", 1)[0] for part in code[end:close].split("\n"))
    if "," in between:
        line_start = offsets[call.end_lineno - 1]
        if not code[line_start:close].strip():  # `)` on a line of its own: a line like the arguments'
            argument_line = lines[(last.end_lineno or call.end_lineno) - 1]
            indent = argument_line[: len(argument_line) - len(argument_line.lstrip())]
            return line_start, line_start, f"{indent}rngs=rngs,\n"
        return close, close, "rngs=rngs" if code[:close].endswith(" ") else " rngs=rngs"
    return end, end, ", rngs=rngs"


def _builders_take_rngs(code: str, tree: ast.Module, callees: set[str]) -> str:
    """`code` with `*, rngs=None` given to each top-level function of the file that builds a
    copied layer but takes no `rngs` (pytorchcv's `poly_res_b_block()` returns the copied
    `conv1x1_block(...)`; the module it is handed to calls `res_block(rngs=rngs)`), and to the
    functions calling those in turn. Optional, like every converted constructor's: callers that
    pass none keep working."""
    functions = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and not _has_rngs(node.args) and node.args.kwarg is None
    }
    builders: set[str] = set()
    known = set(callees)
    while True:
        found = {
            name
            for name, function in functions.items()
            if name not in builders
            and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in known
                for statement in function.body
                for n in ast.walk(statement)
            )
        }
        if not found:
            break
        builders |= found
        known |= found
    lines = code.splitlines(keepends=True)
    offsets = line_offsets(lines)
    edits = [edit for name in sorted(builders) if (edit := _rngs_parameter(code, lines, offsets, functions[name]))]
    if not edits:
        return code
    given = splice_spans(code, edits)
    try:
        ast.parse(given)
    except SyntaxError:
        return code
    return given


def _rngs_parameter(
    code: str, lines: list[str], offsets: list[int], function: ast.FunctionDef
) -> tuple[int, int, str] | None:
    """The edit adding a keyword-only `rngs=None` after `function`'s last parameter (or into its
    empty parentheses)."""
    args = function.args
    last = max(
        [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs, *args.defaults,
         *[d for d in args.kw_defaults if d is not None]],
        key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0),
        default=None,
    )  # fmt: skip
    if last is None:
        start = offsets[function.lineno - 1] + char_column(lines[function.lineno - 1], function.col_offset)
        opening = code.find("(", code.find(function.name, start))
        return (opening + 1, opening + 1, "*, rngs=None") if opening > 0 else None
    if last.end_lineno is None or last.end_col_offset is None:
        return None
    end = offsets[last.end_lineno - 1] + char_column(lines[last.end_lineno - 1], last.end_col_offset)
    starred = args.vararg is not None or bool(args.kwonlyargs)
    return end, end, ", rngs=None" if starred else ", *, rngs=None"


def _has_rngs(arguments: ast.arguments) -> bool:
    return any(a.arg == "rngs" for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs))


def _rngs_callees(tree: ast.Module) -> set[str]:
    """Top-level classes whose constructor takes a keyword-only `rngs` (their own `__init__`, or
    the first base in the output that has one) and top-level functions that take one."""
    callees: set[str] = set()
    classes: dict[str, ast.ClassDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
            a.arg == "rngs" for a in node.args.kwonlyargs
        ):
            callees.add(node.name)
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
    for name in classes:
        if _constructor_takes_rngs(name, classes, set()):
            callees.add(name)
    return callees


def _constructor_takes_rngs(name: str, classes: dict[str, ast.ClassDef], visiting: set[str]) -> bool:
    if name in visiting or name not in classes:
        return False
    visiting.add(name)
    node = classes[name]
    init = next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
    if init is not None:
        return any(a.arg == "rngs" for a in init.args.kwonlyargs)
    return any(
        isinstance(base, ast.Name) and _constructor_takes_rngs(base.id, classes, visiting) for base in node.bases
    )
