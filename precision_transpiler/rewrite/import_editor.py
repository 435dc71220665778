"""Adding and removing imports after conversion, in one pass that keeps the file's layout.

Why not LibCST's AddImportsVisitor/RemoveImportsVisitor: each re-runs scope analysis and
deep-copies the tree, which tripled transpile time on 1,000-line files (benchmarks/), and the
remover drops the blank lines and comments above a removed import. This editor needs no
metadata: the converter has already resolved names, so "unused" only needs the set of names
the converted module still mentions.

Contract:
* an import of a source-framework module is removed when none of its local names is used any
  more (a name used anywhere, even shadowed, keeps it: removal errs on the side of keeping);
* new imports replace the first removed top-level import line (same place, same blank lines and
  comments above it), or else go after the module's leading import block;
* a block emptied by removals gets `pass`.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Iterable, Sequence

import libcst as cst

from precision_transpiler.rewrite.templates import dotted_name as get_full_name_for_node


def used_names(code: str) -> set[str]:
    """Identifiers the code mentions outside import statements, comments and strings.

    Tokenizing the generated text is ~10x cheaper than another tree traversal. A name right
    after a `.` is an attribute, not a use of an import (`precision_transpiler.shims.flax_nn.
    CrossEntropyLoss` does not keep `from torch.nn import CrossEntropyLoss`)."""
    names: set[str] = set()
    after_dot = False
    in_import = False
    at_line_start = True
    in_all = False  # inside `__all__ = [...]`: its strings name re-exported imports
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            kind = tok.type
            if in_all and kind == tokenize.STRING:
                value = tok.string.strip("\"'")
                if value.isidentifier():
                    names.add(value)
            if kind in (tokenize.NEWLINE, tokenize.ENDMARKER):
                in_import = False
                in_all = False
                at_line_start = True
                continue
            if kind in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                continue
            if at_line_start:
                at_line_start = False
                in_import = kind == tokenize.NAME and tok.string in ("import", "from")
                in_all = kind == tokenize.NAME and tok.string == "__all__"
            if kind == tokenize.NAME and not in_import and not after_dot:
                names.add(tok.string)
            after_dot = kind == tokenize.OP and tok.string == "."
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - generated code always tokenizes
        pass
    return names


def _local_name(alias: cst.ImportAlias, is_from: bool) -> str | None:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    full = get_full_name_for_node(alias.name)
    if full is None:
        return None
    return full if is_from else full.split(".")[0]


def _module_of(small: cst.Import | cst.ImportFrom, alias: cst.ImportAlias) -> str:
    if isinstance(small, cst.ImportFrom):
        return get_full_name_for_node(small.module) or "" if small.module is not None else ""
    return get_full_name_for_node(alias.name) or ""


def _import_line(module: str, alias: str) -> cst.SimpleStatementLine:
    parent, _, last = module.rpartition(".")
    if alias == module:
        code = f"import {module}"
    elif parent and alias == last:
        code = f"from {parent} import {last}"  # `from flax import nnx`, as the projects write it
    else:
        code = f"import {module} as {alias}"
    return cst.parse_statement(code + "\n")  # type: ignore[return-value]


class ImportEditor(cst.CSTTransformer):
    """Remove unused imports of `remove_roots`, add `additions` (module, alias) pairs."""

    def __init__(self, remove_roots: Iterable[str], additions: Sequence[tuple[str, str]], used: set[str]) -> None:
        super().__init__()
        self.remove_roots = frozenset(remove_roots)
        self.additions = list(additions)
        self.used = used
        self.removed: list[str] = []
        self._placed = False

    # -- removal -------------------------------------------------------------------------------

    def _trim(self, small: cst.BaseSmallStatement) -> cst.BaseSmallStatement | None:
        """The import with unused source-framework names dropped (None if nothing is left)."""
        if not isinstance(small, cst.Import | cst.ImportFrom) or (
            isinstance(small, cst.ImportFrom)
            and (small.relative or small.module is None or isinstance(small.names, cst.ImportStar))
        ):
            return small
        is_from = isinstance(small, cst.ImportFrom)
        names = small.names
        assert not isinstance(names, cst.ImportStar)
        keep = []
        for alias in names:
            module = _module_of(small, alias)
            local = _local_name(alias, is_from)
            if module.split(".")[0] in self.remove_roots and local is not None and local not in self.used:
                self.removed.append(cst.Module([]).code_for_node(small) if len(names) == 1 else local)
                continue
            keep.append(alias)
        if len(keep) == len(names):
            return small
        if not keep:
            return None
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if is_from and isinstance(small, cst.ImportFrom) and small.lpar is not None and len(keep) == 1:
            return small.with_changes(names=keep, lpar=None, rpar=None)
        return small.with_changes(names=keep)

    def _edit_body(self, body: Sequence[cst.BaseStatement], top: bool) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        carry: list[cst.EmptyLine] = []
        dropped = False
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
            ):
                kept = [t for s in stmt.body if (t := self._trim(s)) is not None]
                if not kept:
                    dropped = True
                    carry.extend(stmt.leading_lines)
                    if top and not self._placed and self.additions:
                        out.extend(self._new_lines(carry))
                        carry = []
                    continue
                if len(kept) != len(stmt.body):
                    kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                    stmt = stmt.with_changes(body=kept)
            if carry:
                stmt = _with_carried_lines(stmt, carry)
                carry = []
            if top and not out and dropped and hasattr(stmt, "leading_lines"):
                # The file's first lines went away: do not start it with blank lines.
                lines = list(stmt.leading_lines)
                while lines and lines[0].comment is None:
                    lines.pop(0)
                stmt = stmt.with_changes(leading_lines=lines)
            out.append(stmt)
        return out

    def _new_lines(self, leading: list[cst.EmptyLine]) -> list[cst.BaseStatement]:
        self._placed = True
        lines: list[cst.BaseStatement] = [_import_line(m, a) for m, a in self.additions]
        if lines and leading:
            lines[0] = lines[0].with_changes(leading_lines=leading)
        return lines

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Imports are statements: never descend into expressions.
        if isinstance(node, cst.BaseExpression | cst.SimpleStatementLine | cst.Decorator | cst.Parameters):
            return False
        return super().on_visit(node)

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body = self._edit_body(updated_node.body, top=False)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        return updated_node.with_changes(body=body)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body = self._edit_body(updated_node.body, top=True)
        if self.additions and not self._placed:
            index = _after_leading_imports(body)
            if index < len(body) and not _is_import_line(body[index]):
                # Separate the new import block from the code after it, PEP 8 style.
                following = body[index]
                own = list(getattr(following, "leading_lines", ()))
                if not own or own[0].comment is not None:
                    blank = 2 if isinstance(following, cst.FunctionDef | cst.ClassDef) else 1
                    body[index] = following.with_changes(leading_lines=[cst.EmptyLine()] * blank + own)
            body[index:index] = self._new_lines([])
        return updated_node.with_changes(body=body)


def _with_carried_lines(stmt: cst.BaseStatement, carry: list[cst.EmptyLine]) -> cst.BaseStatement:
    own = list(getattr(stmt, "leading_lines", ()))
    lines = [*carry, *own] if any(line.comment is not None for line in carry) else own or carry
    return stmt.with_changes(leading_lines=lines)  # type: ignore[return-value]


def _is_import_line(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
    )


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def _after_leading_imports(body: list[cst.BaseStatement]) -> int:
    """Index after the docstring and the leading run of import lines."""
    index = 0
    if body and _is_docstring(body[0]):
        index = 1
    last_import = None
    i = index
    while i < len(body) and _is_import_line(body[i]):
        last_import = i
        i += 1
    return index if last_import is None else last_import + 1


def edit_imports(
    tree: cst.Module, remove_roots: Iterable[str], additions: Sequence[tuple[str, str]]
) -> tuple[cst.Module, list[str], list[str]]:
    """Apply the contract above; returns the new module, the imports removed and those added.

    Additions whose alias the converted code does not use (emitted, then dropped again) are skipped.
    """
    used = used_names(tree.code)
    wanted = [(m, a) for m, a in additions if a.split(".")[0] in used]
    editor = ImportEditor(remove_roots, wanted, used)
    added = [m if a == m else f"{m} as {a}" for m, a in wanted]
    return tree.visit(editor), editor.removed, added
