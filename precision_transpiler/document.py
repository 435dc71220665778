"""The document a conversion passes through the pipeline (pipeline.py): the input as given, the
current code as a tree or text (whichever the last stage produced, converted on demand), and
what the stages found on the way.
"""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from precision_transpiler.diagnostics import Diagnostic, Rewrite

__all__ = ["Document"]


class Document:
    """One source on its way through the pipeline.

    `original` is the input with "\\n" line endings and no BOM: every position reported names its
    lines. The current code is a tree or text (`tree()`/`code()` convert on demand and keep
    both until the next change). `precision` decisions name lines of `precision_lines` (the text
    a policy pass saw); `Finish` maps them onto the lines of `original`.
    """

    def __init__(self, given: str, path: str) -> None:
        self.given = given  # as the caller passed it: returned byte for byte when nothing changes
        self.bom = "\ufeff" if given.startswith("\ufeff") else ""
        self.newline = _newline(given)
        self.original = _without_indent_form_feeds(_with_newline(given[len(self.bom) :], "\n"))
        self.path = path
        self.source = self.original  # what the rewrite stage converts (pruned or not)
        self._tree: cst.Module | None = None
        self._code: str | None = self.original
        self.source_framework: str | None = None
        self.diagnostics: list[Diagnostic] = []
        self.rewrites: list[Rewrite] = []
        self.imports_added: list[str] = []
        self.precision: list[Any] = []
        self.precision_lines: str | None = None  # the text `precision` decisions name lines of
        self.skipped: str | None = None
        self.unchanged = False  # comes back exactly as given (skipped, not a selected source, refused)
        self.pruned: Any = None  # convert.entry.Pruned when --prune-to-entry kept part of the file
        self.precision_on_output = False  # decisions name the output's lines (a model conversion's)
        self.done = False  # a stage decided the result: the remaining stages do not run
        self.runtime_names: tuple[str, ...] = ()  # imported from the runtime module (Job.runtime "module")
        self.inlined_runtime = False  # the input's runtime definitions were read back (`source`)
        self.torch_semantics = False  # ... and so the input is a model converted from torch
        # (runtime definitions besides a precision policy's: runtime.imports_torch_semantics)

    def tree(self) -> cst.Module:
        if self._tree is None:
            assert self._code is not None
            self._tree = cst.parse_module(self._code)
        return self._tree

    def code(self) -> str:
        if self._code is None:
            assert self._tree is not None
            self._code = self._tree.code
        return self._code

    def set_tree(self, tree: cst.Module, code: str | None = None) -> None:
        """The current code becomes `tree` (`code`: its text, when the caller printed it)."""
        self._tree, self._code = tree, code

    def set_code(self, code: str) -> None:
        self._tree, self._code = None, code

    def update_code(self, code: str) -> None:
        """`set_code` for a stage that worked on the text: unchanged text keeps the tree (no
        parse for the next stage that works on it)."""
        if code != self.code():
            self.set_code(code)

    def held_code(self) -> str | None:
        """The current code's text if the document holds it (None: only the tree; no print)."""
        return self._code

    def mentions(self, dotted: str) -> bool:
        """Whether the current code may name `dotted` (a package): in its text, when the document
        holds it, else as a name of the tree (asking prints nothing)."""
        if self._code is not None:
            return dotted in self._code
        root = dotted.split(".")[0]
        found: list[bool] = []

        class _Finder(cst.CSTVisitor):
            def visit_Name(self, node: cst.Name) -> None:
                if node.value == root:
                    found.append(True)

        self.tree().visit(_Finder())
        return bool(found)

    def result_code(self) -> str:
        """What the caller gets: the input as given when unchanged, else one line ending
        throughout (the input's) and its BOM back."""
        code = self.original if self.unchanged else self.code()
        if code in (self.given, self.original):
            return self.given
        return self.bom + _with_newline(code, self.newline)

    def note(self, severity: str, code: str, message: str, line: int = 1, col: int = 1) -> None:
        self.diagnostics.append(Diagnostic(self.path, line, col, severity, code, message))  # type: ignore[arg-type]


def _newline(source: str) -> str:
    """The line ending most lines of `source` use ("\\n" when there are none or on a tie)."""
    crlf = source.count("\r\n")
    counts = {"\n": source.count("\n") - crlf, "\r\n": crlf, "\r": source.count("\r") - crlf}
    return max(counts, key=lambda k: (counts[k], k == "\n"))


_INDENT_FORM_FEED = re.compile(r"^[ \t\f]*\f", re.MULTILINE)


def _without_indent_form_feeds(code: str) -> str:
    """`code` without the form feeds in lines' leading whitespace. Python's tokenizer resets the
    indentation column at a form feed (what precedes it does not count); LibCST instead takes it
    into the indentation and then writes blocks that do not parse. Dropping the leading
    whitespace up to the last form feed keeps the indentation Python sees."""
    return _INDENT_FORM_FEED.sub("", code) if "\f" in code else code


def _with_newline(code: str, newline: str) -> str:
    """`code` with every line ending `newline` (a raw line break in Python source always ends a
    line: the tokenizer reads a CR LF or CR inside a string literal as LF)."""
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    return code if newline == "\n" else code.replace("\n", newline)
