"""Edit the top-level imports of a large file by its lines, without parsing it with LibCST.

Copying sibling modules (convert/siblings/) and redirecting library imports
(convert/library_imports.py) run once per round over the growing output: a converted segmentation
model with its encoders reaches ~18,000 lines in ~10 rounds. Each round only edits `from ...
import ...` lines and inserts copied code after the file's imports, yet parsing the whole file
with LibCST every round cost more than converting the siblings. Here Python's `ast` (an order of
magnitude faster) finds the statements and their lines; only the import statements edited are
parsed with LibCST (so their comments and layout survive); the rest of the text is spliced as is.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import libcst as cst


@dataclass(frozen=True)
class FromImport:
    """A top-level `from M import a, b` alone on its lines: `start`/`end` are 0-based line
    indexes (end exclusive) and `statement` the LibCST node of those lines."""

    start: int
    end: int
    statement: cst.SimpleStatementLine

    @property
    def node(self) -> cst.ImportFrom:
        node = self.statement.body[0]
        assert isinstance(node, cst.ImportFrom)
        return node


def lone_statement(lines: list[str], node: ast.stmt, siblings: list[ast.stmt]) -> cst.SimpleStatementLine | None:
    """The LibCST node of `node`, a simple statement alone on its lines among `siblings` (the
    body it is in; `lines` are the file's, with line endings), parsed without its indentation;
    None when it shares a line with another statement."""
    index = next((i for i, s in enumerate(siblings) if s is node), None)
    if index is None or node.end_lineno is None:
        return None
    if index and (siblings[index - 1].end_lineno or 0) >= node.lineno:
        return None  # `x = 1; from a import b`
    if index + 1 < len(siblings) and siblings[index + 1].lineno <= node.end_lineno:
        return None  # `from a import b; x = 1`
    chunk = lines[node.lineno - 1 : node.end_lineno]
    indent = chunk[0][: node.col_offset] if chunk[0][: node.col_offset].isspace() else ""
    if not chunk[0].startswith(indent):
        return None
    text = "".join(line[len(indent) :] if line.startswith(indent) else line for line in chunk)
    try:
        statement = cst.parse_statement(text if text.endswith("\n") else text + "\n")
    except cst.ParserSyntaxError:
        return None
    return statement if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None


def lone_from_imports(code: str, tree: ast.Module) -> list[FromImport]:
    """The top-level `from` imports of `code` (`tree` is its ast) that share their lines with no
    other statement; star imports and `from . import` are included."""
    lines = code.splitlines(keepends=True)
    found: list[FromImport] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            statement = lone_statement(lines, node, tree.body)
            if statement is not None:
                found.append(FromImport(node.lineno - 1, node.end_lineno or node.lineno, statement))
    return found


def render(statement: cst.BaseStatement, indent: str = "") -> str:
    """The source of one statement, with its line ending, each line indented by `indent`."""
    code = cst.Module(body=[statement]).code
    return "".join(indent + line for line in code.splitlines(keepends=True)) if indent else code


def line_offsets(lines: list[str]) -> list[int]:
    """The character offset in the text at which each of `lines` (with their endings) starts,
    and the text's length last."""
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return offsets


def char_column(line: str, byte_column: int) -> int:
    """ast's UTF-8 byte column on `line` as a character index."""
    return len(line.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore"))


def splice_spans(code: str, edits: list[tuple[int, int, str]]) -> str:
    """`code` with character spans `[start, end)` replaced (spans do not overlap)."""
    pieces: list[str] = []
    position = 0
    for start, end, text in sorted(edits):
        pieces += [code[position:start], text]
        position = end
    pieces.append(code[position:])
    return "".join(pieces)


def splice(code: str, edits: dict[tuple[int, int], str]) -> str:
    """`code` with the line ranges (0-based, end exclusive) replaced by the given text ("" drops
    them and the blank lines right above)."""
    if not edits:
        return code
    lines = code.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for (start, end), text in sorted(edits.items(), reverse=True):
        if not text:  # blank lines above go with a dropped statement, as with LibCST's leading lines
            while start > 0 and not lines[start - 1].strip():
                start -= 1
        lines[start:end] = [text] if text else []
    return "".join(lines)


def is_import_node(node: ast.stmt) -> bool:
    """syntax.is_import_statement on an ast statement: an import, or a `try` / `if TYPE_CHECKING:`
    block that only imports."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.Try):
        blocks = [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
    elif isinstance(node, ast.If) and not node.orelse and ast.unparse(node.test).endswith("TYPE_CHECKING"):
        blocks = [node.body]
    else:
        return False
    return all(isinstance(s, ast.Import | ast.ImportFrom | ast.Pass) for block in blocks for s in block)


_COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Try,
    ast.With,
    ast.AsyncWith,
    ast.Match,
)


def after_imports(tree: ast.Module, *, leading_only: bool) -> int:
    """The 0-based line index after the file's imports, where copied code and the imports it
    needs go. `leading_only`: after the run of imports (and simple statements among them) at the
    top of the file, stopping at the first compound statement after them; otherwise after the
    last top-level import anywhere. 0 when there is none (and no docstring)."""
    body = tree.body
    index = 0
    for i, node in enumerate(body):
        if is_import_node(node) or (index == i and i and node.lineno == body[i - 1].end_lineno):
            # an import, or a statement on the line of the import before it (`from einops import
            # rearrange; has_einops = True`, convert/import_helpers.py): the line stays whole
            index = i + 1
        elif not leading_only:
            continue
        elif i == 0 and isinstance(node, ast.Expr):
            index = 1  # the docstring
        elif index or isinstance(node, _COMPOUND):
            break
    if not index:
        return first_line(tree)
    return body[index - 1].end_lineno or 0


def first_line(tree: ast.Module) -> int:
    """The line index of the first statement (0 for an empty module), decorators included."""
    if not tree.body:
        return 0
    first = tree.body[0]
    return min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", []))]) - 1


def insert_lines(code: str, at: int, text: str) -> str:
    """`code` with `text` (whole lines) inserted before 0-based line `at`."""
    lines = code.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join([*lines[:at], text if text.endswith("\n") else text + "\n", *lines[at:]])


def import_bindings_of(statement: cst.Import | cst.ImportFrom | str) -> set[str]:
    """What each name of an import binds (`import collections.abc` as `import collections`)."""
    code = statement if isinstance(statement, str) else cst.Module(body=[cst.SimpleStatementLine([statement])]).code
    node = ast.parse(code).body[0]
    if isinstance(node, ast.Import):
        return {f"import {a.name} as {a.asname}" if a.asname else f"import {a.name.split('.')[0]}" for a in node.names}
    assert isinstance(node, ast.ImportFrom)
    source = "." * node.level + (node.module or "")
    return {f"from {source} import {a.name}" + (f" as {a.asname}" if a.asname else "") for a in node.names}


def import_as(statement: str, local: str) -> str:
    """`from keras import ops` -> `from keras import ops as _ptshim_ops` (one name)."""
    node = ast.parse(statement).body[0]
    node.names[0].asname = local  # type: ignore[attr-defined]
    return ast.unparse(node) + "\n"


@functools.lru_cache(maxsize=2)
def output_tree(code: str) -> ast.Module:
    """`ast.parse(code)` of the output being built, remembered for its last two texts: the stages
    of a round (module imports as names, namespaces, library redirects, the round itself) read
    the same text one after another, and a 30,000-line output costs most of a second to parse.
    A tree is read, never changed. Raises SyntaxError as ast.parse does."""
    return ast.parse(code)
