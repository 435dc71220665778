"""Adding and removing imports after conversion, in one pass that keeps the file's layout.

Why not LibCST's AddImportsVisitor/RemoveImportsVisitor: each re-runs scope analysis and
deep-copies the tree, which tripled transpile time on 1,000-line files (benchmarks/), and the
remover drops the blank lines and comments above a removed import. This editor needs no
metadata: the converter has already resolved names, so "unused" only needs the set of names
the converted module still mentions.

Contract:
* a source-framework name is removed from its import when it is not used any more (a name used
  anywhere, even shadowed, keeps it: removal errs on the side of keeping); the other names of a
  multi-name import stay (`import os, torch` -> `import os`), and an import left empty goes;
* new imports go where the first top-level import line lost a name: in its place when the whole
  line went (same blank lines and comments above it), before the code of a line such as
  `import torch; x = torch.half`, after what remains of `import os, torch`. Not there when module
  code above that place already uses a new name; then, and when no top-level import changed,
  after the module's leading import block;
* a block emptied by removals gets `pass` (also `if c: import torch` -> `if c: pass`);
* statements in `keep` (`# ptranspile: skip`) are left exactly as they are.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterable, Sequence

import libcst as cst

from precision_transpiler.syntax import dotted_name as get_full_name_for_node
from precision_transpiler.syntax import is_docstring, is_import_statement


def used_names(code: str) -> set[str]:
    """Identifiers the code mentions outside import statements, comments and strings.

    Tokenizing the generated text is ~10x cheaper than another tree traversal. A name right
    after a `.` is an attribute, not a use of an import (`precision_transpiler.runtime.flax.
    losses.CrossEntropyLoss` does not keep `from torch.nn import CrossEntropyLoss`)."""
    names: set[str] = set()
    after_dot = False
    in_import = False
    at_line_start = True
    after_colon = False  # `if c: import torch`: a statement can start after a `:`
    in_all = False  # inside `__all__ = [...]`: its strings name re-exported imports
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            kind = tok.type
            if in_all and kind == tokenize.STRING:
                value = tok.string.strip("\"'")
                if value.isidentifier():
                    names.add(value)
            if kind == tokenize.STRING:
                names |= _fstring_names(tok.string)
            if kind in (tokenize.NEWLINE, tokenize.ENDMARKER) or (kind == tokenize.OP and tok.string == ";"):
                # `import torch; x = jnp.float16`: a `;` starts a statement as a new line does
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
            elif after_colon and kind == tokenize.NAME and tok.string in ("import", "from"):
                in_import = True  # `import` and `from` are keywords: after `:` only a statement
            if kind == tokenize.NAME and not in_import and not after_dot:
                names.add(tok.string)
            after_dot = kind == tokenize.OP and tok.string == "."
            after_colon = kind == tokenize.OP and tok.string == ":"
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - generated code always tokenizes
        pass
    return names


def _fstring_names(literal: str) -> set[str]:
    """Names the `{}` of an f-string mention (`f"{nnx.Param}"` uses nnx): before Python 3.12 the
    tokenizer gives an f-string as one string token, so its expressions are read here."""
    prefix = literal[: len(literal) - len(literal.lstrip("bBfFrRuU"))]
    if "f" not in prefix.lower() or "{" not in literal:
        return set()
    try:
        tree = ast.parse(literal, mode="eval")
    except SyntaxError:  # pragma: no cover - a token of code that parsed
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


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
    """Remove unused imports of `remove_roots`, add `additions` (module, alias) pairs.

    `keep` holds the ids of statements to leave exactly as they are (`# ptranspile: skip`)."""

    def __init__(
        self,
        remove_roots: Iterable[str],
        additions: Sequence[tuple[str, str]],
        used: set[str],
        keep: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__()
        self.remove_roots = frozenset(remove_roots)
        self.additions = list(additions)
        self.aliases = frozenset(a.split(".")[0] for _, a in self.additions)
        self.used = used
        self.keep = keep
        self.removed: list[str] = []
        self._placed = False

    # -- removal -------------------------------------------------------------------------------

    def _removable(self, module: str) -> bool:
        """`module` is one of `remove_roots` or under one: a top-level package (`torch`) or a
        dotted module (`einops.layers.torch`, the torch part of a framework-neutral library)."""
        return any(module == r or module.startswith(r + ".") for r in self.remove_roots)

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
        gone = []
        for alias in names:
            module = _module_of(small, alias)
            local = _local_name(alias, is_from)
            if self._removable(module) and local is not None and local not in self.used:
                gone.append(local)
                continue
            keep.append(alias)
        if not gone:
            return small
        if not keep:
            self.removed.append(cst.Module([]).code_for_node(small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)))
            return None
        self.removed.extend(gone)
        if isinstance(small, cst.ImportFrom) and small.lpar is not None and isinstance(names[-1].comma, cst.Comma):
            # `from torch import (\n    a,\n    b,  # note\n)`: one name a line, each keeps its own
            # comma and comment; the new last one takes the indentation of the `)` line
            last, closing = keep[-1].comma, names[-1].comma.whitespace_after
            if (
                keep[-1] is not names[-1]
                and isinstance(last, cst.Comma)
                and isinstance(last.whitespace_after, cst.ParenthesizedWhitespace)
                and isinstance(closing, cst.ParenthesizedWhitespace)
            ):
                after = last.whitespace_after.with_changes(indent=closing.indent, last_line=closing.last_line)
                keep[-1] = keep[-1].with_changes(comma=last.with_changes(whitespace_after=after))
            return small.with_changes(names=keep)
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if is_from and isinstance(small, cst.ImportFrom) and small.lpar is not None and len(keep) == 1:
            return small.with_changes(names=keep, lpar=None, rpar=None)
        return small.with_changes(names=keep)

    def _trim_all(self, body: Sequence[cst.BaseSmallStatement]) -> list[cst.BaseSmallStatement] | None:
        """`body` with imports trimmed; None when nothing changed."""
        kept = [t for s in body if (t := self._trim(s)) is not None]
        if len(kept) == len(body) and all(a is b for a, b in zip(kept, body, strict=True)):
            return None
        if kept:
            kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return kept

    def _edit_body(self, body: Sequence[cst.BaseStatement], top: bool) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        carry: list[cst.EmptyLine] = []
        dropped = False
        for stmt in body:
            if (
                isinstance(stmt, cst.SimpleStatementLine)
                and id(stmt) not in self.keep
                and any(isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body)
            ):
                kept = self._trim_all(stmt.body)
                if kept is not None and not kept:
                    dropped = True
                    carry.extend(stmt.leading_lines)
                    if top and self._can_place(out):
                        out.extend(self._new_lines(carry))
                        carry = []
                    continue
                if kept is not None:
                    stmt = stmt.with_changes(body=kept)
                    if top and self._can_place(out):
                        if all(isinstance(s, cst.Import | cst.ImportFrom) for s in kept):
                            # `import os, torch` -> `import os`, the new imports after it
                            out.append(_with_carried_lines(stmt, carry) if carry else stmt)
                            carry = []
                            out.extend(self._new_lines([]))
                            continue
                        # `import torch; x = torch.half`: the new imports go before the code
                        out.extend(self._new_lines([*carry, *stmt.leading_lines]))
                        carry = []
                        stmt = stmt.with_changes(leading_lines=[])
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

    def _can_place(self, before: list[cst.BaseStatement]) -> bool:
        """Whether the new imports may go after the statements `before`: not yet placed, and none
        of those statements uses a new name (module code above the place of a removed import
        that needs the new import: `if c:\n    import torch\n    y = torch.half` first)."""
        if self._placed or not self.additions:
            return False
        code = [s for s in before if not _is_import_line(s) and not is_docstring(s)]
        return not code or not (used_names(cst.Module(body=code).code) & self.aliases)

    def _new_lines(self, leading: list[cst.EmptyLine]) -> list[cst.BaseStatement]:
        self._placed = True
        lines: list[cst.BaseStatement] = [_import_line(m, a) for m, a in self.additions]
        if lines and leading:
            lines[0] = lines[0].with_changes(leading_lines=leading)
        return lines

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Imports are statements: never descend into expressions, nor into statements to keep.
        if isinstance(node, cst.BaseExpression | cst.SimpleStatementLine | cst.Decorator | cst.Parameters):
            return False
        if id(node) in self.keep:
            return False
        return super().on_visit(node)

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body = self._edit_body(updated_node.body, top=False)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        return updated_node.with_changes(body=body)

    def leave_Try(
        self, original_node: cst.Try, updated_node: cst.Try
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement] | cst.RemovalSentinel:
        """`try: import torch / except ImportError: raise ...` whose imports all went: a `try`
        whose body only passes never runs its handlers, so it goes, its `else` and `finally`
        bodies staying in its place."""
        if not (_only_passes(updated_node.body) and not _only_passes(original_node.body)):
            return updated_node
        kept = [
            stmt
            for block in (updated_node.orelse, updated_node.finalbody)
            if block is not None
            for stmt in block.body.body
            if not _only_passes(cst.IndentedBlock(body=[stmt]))
        ]
        if not kept:
            return cst.RemovalSentinel.REMOVE
        kept[0] = kept[0].with_changes(leading_lines=updated_node.leading_lines)
        return cst.FlattenSentinel(kept)

    def leave_SimpleStatementSuite(
        self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite
    ) -> cst.SimpleStatementSuite:
        """`if c: import torch` (the block on the line of its header)."""
        if not any(isinstance(s, cst.Import | cst.ImportFrom) for s in updated_node.body):
            return updated_node
        kept = self._trim_all(updated_node.body)
        if kept is None:
            return updated_node
        return updated_node.with_changes(body=kept or [cst.Pass()])

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body = self._edit_body(updated_node.body, top=True)
        if self.additions and not self._placed:
            index = after_leading_imports(body)
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


def after_leading_imports(body: list[cst.BaseStatement], *, blocks: bool = False) -> int:
    """Index after the docstring and the leading run of import lines; with `blocks`, import-only
    `try:`/`if TYPE_CHECKING:` blocks count too (syntax.is_import_statement), so that code put
    there follows an `import torch`-like line after such a block (timm's vision_transformer.py)."""
    index = 0
    if body and is_docstring(body[0]):
        index = 1
    last_import = None
    i = index
    is_import = is_import_statement if blocks else _is_import_line
    while i < len(body) and is_import(body[i]):
        last_import = i
        i += 1
    return index if last_import is None else last_import + 1


def edit_imports(
    tree: cst.Module,
    remove_roots: Iterable[str],
    additions: Sequence[tuple[str, str]],
    keep: frozenset[int] = frozenset(),
) -> tuple[cst.Module, list[str], list[str], str]:
    """Apply the contract above; returns the new module, the imports removed, those added, and
    the new module's code.

    Additions whose alias the converted code does not use (emitted, then dropped again) are skipped.
    `keep`: ids of statements of `tree` left exactly as they are (`# ptranspile: skip`).
    The module is printed once, statement by statement, to read the names it uses; a top-level
    statement the edit leaves as it is (one without imports is not even visited) keeps its text,
    so the edited module's code costs only the statements the edit changed.
    """
    texts = {id(stmt): tree.code_for_node(stmt) for stmt in tree.body}
    used = used_names(module_code(tree, texts))
    wanted = [(m, a) for m, a in additions if a.split(".")[0] in used]
    untouched = frozenset(
        id(stmt)
        for stmt in tree.body
        if isinstance(stmt, cst.BaseCompoundStatement) and "import" not in texts[id(stmt)]
    )
    editor = ImportEditor(remove_roots, wanted, used, keep | untouched)
    added = [m if a == m else f"{m} as {a}" for m, a in wanted]
    edited = tree.visit(editor)
    kept = {id(stmt): (stmt, texts[id(stmt)]) for stmt in tree.body}
    reused = {id(stmt): kept[id(stmt)][1] for stmt in edited.body if id(stmt) in kept and kept[id(stmt)][0] is stmt}
    return edited, editor.removed, added, module_code(edited, reused)


def module_code(module: cst.Module, texts: dict[int, str]) -> str:
    """`module.code`, taking the code of the top-level statements whose ids `texts` holds from
    there (printed earlier) and printing the others."""
    newline = module.default_newline
    parts = [module.code_for_node(line) for line in module.header]
    parts += [texts[id(stmt)] if id(stmt) in texts else module.code_for_node(stmt) for stmt in module.body]
    parts += [module.code_for_node(line) for line in module.footer]
    code = "".join(parts)
    if module.has_trailing_newline:
        return code or newline
    return code[: -len(newline)] if code.endswith(newline) else code


def _only_passes(block: cst.BaseSuite) -> bool:
    """Whether a block holds nothing but `pass` statements."""
    statements = block.body if isinstance(block, cst.IndentedBlock) else [block]
    return all(
        isinstance(stmt, cst.SimpleStatementLine | cst.SimpleStatementSuite)
        and all(isinstance(small, cst.Pass) for small in stmt.body)
        for stmt in statements
    )
