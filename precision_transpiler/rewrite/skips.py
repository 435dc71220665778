"""Opt-out comments: `# ptranspile: skip` on a statement's line, `# ptranspile: skip-file`.

* `# ptranspile: skip` at the end of a line (or on any line of a multi-line statement) leaves the
  statement on that line exactly as written. On the header line of a compound statement (`def`,
  `class`, `if`, `for`, `with`, `try`, their decorators, an `elif`) it leaves the whole statement,
  body included, as written. A `;`-separated line is one statement here.
* `# ptranspile: skip-file` on a line of its own, not indented, anywhere in the file, leaves the
  whole file unchanged.

Only comments count (never strings), and only these exact words after `ptranspile:`: the
comments ptranspile itself writes (`# ptranspile: unsupported: ...`, `# ptranspile: begin
precision policy ...`, ...) never start with `skip`, so converting an output again finds the
same markers and leaves the same statements alone.

The scan is free for files that do not mention `ptranspile` (a substring test). Otherwise it
tokenizes the file for its comments and pairs LibCST statements with `ast` statements (which
know their lines) in one walk.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

SKIP = "# ptranspile: skip"
SKIP_FILE = "# ptranspile: skip-file"
_MARKER = re.compile(r"#\s*ptranspile:\s*(skip-file|skip)(?![\w-])")
_TRIVIA = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


@dataclass
class SkipScan:
    """The opt-out comments of one module."""

    file_line: int | None = None  # line of a valid `# ptranspile: skip-file`
    statements: dict[int, tuple[int, int]] = field(default_factory=dict)  # id(CST statement) -> (line, col)
    stray: list[tuple[int, int, str]] = field(default_factory=list)  # (line, col, why) markers that apply to nothing

    @property
    def skip_ids(self) -> frozenset[int]:
        return frozenset(self.statements)


def marker_in(comment: str) -> str | None:
    """`skip` or `skip-file` when the comment text holds that marker, else None."""
    match = _MARKER.search(comment)
    return match.group(1) if match else None


def scan_skips(module: cst.Module, source: str) -> SkipScan:
    scan = SkipScan()
    if "ptranspile" not in source or not _MARKER.search(source):
        return scan
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        tree = ast.parse(source)
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError):
        return scan
    code_lines: set[int] = set()
    for tok in tokens:
        if tok.type not in _TRIVIA:
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    markers: dict[int, int] = {}  # line -> column of a `# ptranspile: skip`
    for tok in tokens:
        kind = marker_in(tok.string) if tok.type == tokenize.COMMENT else None
        line, col = tok.start
        if kind == "skip-file":
            if col == 0 and line not in code_lines:
                scan.file_line = scan.file_line or line
            else:
                scan.stray.append((line, col + 1, "`# ptranspile: skip-file` works on a line of its own, not indented"))
        elif kind == "skip":
            markers[line] = col + 1
    if not markers:
        return scan
    lines = source.splitlines()
    used: set[int] = set()
    for stmt, first, last, simple in _statements(list(module.body), tree.body):
        # a marker on a code line of the statement, or on a comment line inside a simple one
        hits = [n for n in markers if first <= n <= last and (n in code_lines or (simple and first < n < last))]
        if hits:
            used.update(hits)
            text = lines[first - 1] if first - 1 < len(lines) else ""
            scan.statements[id(stmt)] = (first, len(text) - len(text.lstrip()) + 1)
    for line, col in sorted(markers.items()):
        if line in used:
            continue
        if line in code_lines:
            why = "`# ptranspile: skip` on this line applies to nothing: put it on the statement's first line"
        else:
            why = "`# ptranspile: skip` applies to the statement on its own line, and this line has none"
        scan.stray.append((line, col, why))
    return scan


def _statements(
    cst_body: Sequence[cst.CSTNode], ast_body: Sequence[ast.stmt]
) -> Iterator[tuple[cst.CSTNode, int, int, bool]]:
    """(LibCST statement, first line, last line that marks it, simple?) for every statement: a
    simple statement line's whole extent, a compound statement's header."""
    index = 0
    for item in cst_body:
        if isinstance(item, cst.SimpleStatementLine):
            group = ast_body[index : index + len(item.body)]
            index += len(item.body)
            if group:
                yield item, group[0].lineno, max(s.end_lineno or s.lineno for s in group), True
            continue
        if index >= len(ast_body):
            return
        node = ast_body[index]
        index += 1
        decorators = getattr(node, "decorator_list", None) or []
        first = min([node.lineno, *(d.lineno for d in decorators)])
        inner = list(_blocks(item, node))
        if not inner:  # `if c: x = 1` (the body on the header's line): the statement is its header
            yield item, first, node.end_lineno or node.lineno, False
            continue
        if isinstance(node, ast.Match):
            body_start = node.cases[0].pattern.lineno if node.cases else node.lineno + 1
        else:
            body_start = node.body[0].lineno if getattr(node, "body", None) else node.lineno + 1
        yield item, first, max(first, body_start - 1), False
        for cst_block, ast_block in inner:
            yield from _statements(cst_block, ast_block)


def _blocks(node: cst.CSTNode, tree: ast.stmt) -> Iterator[tuple[list[cst.CSTNode], list[ast.stmt]]]:
    """The (LibCST, ast) statement lists of a compound statement's indented blocks."""

    def block(suite: object) -> list[cst.CSTNode] | None:
        return list(suite.body) if isinstance(suite, cst.IndentedBlock) else None

    if isinstance(node, cst.Match):
        for case, ast_case in zip(node.cases, getattr(tree, "cases", []), strict=False):
            if (case_body := block(case.body)) is not None:
                yield case_body, list(ast_case.body)
        return
    body = block(getattr(node, "body", None))
    if body is None:
        return
    yield body, list(getattr(tree, "body", []))
    orelse = getattr(node, "orelse", None)
    if isinstance(orelse, cst.If):  # elif: a statement of its own, with its own header line
        yield [orelse], list(getattr(tree, "orelse", []))
    elif orelse is not None and (else_body := block(orelse.body)) is not None:
        yield else_body, list(getattr(tree, "orelse", []))
    if isinstance(node, cst.Try | cst.TryStar):
        for handler, ast_handler in zip(node.handlers, getattr(tree, "handlers", []), strict=False):
            if (handler_body := block(handler.body)) is not None:
                yield handler_body, list(ast_handler.body)
        if node.finalbody is not None and (final := block(node.finalbody.body)) is not None:
            yield final, list(getattr(tree, "finalbody", []))
