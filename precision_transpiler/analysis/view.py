"""What the analyses ask of the file being converted.

The rule engine's `RuleContext` (rewrite/context.py) provides all of it; the analyses name only
this protocol, so that they depend on the tables and on LibCST, never on the engine or the rules
that use them.
"""

from __future__ import annotations

from typing import Any, Protocol

import libcst as cst

from precision_transpiler.diagnostics import Severity
from precision_transpiler.mappings.model import MappingSet


class FileView(Protocol):
    """The file being converted, as seen from the node being visited."""

    mappings: MappingSet

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        """The imported qualified name a dotted Name/Attribute chain refers to here, else None."""
        ...

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """Parent of an original node on the path being visited (None for other nodes)."""
        ...

    def code(self, node: cst.CSTNode) -> str: ...

    def is_dtype_like(self, node: cst.CSTNode) -> bool: ...

    def enclosing_function(self) -> str | None:
        """ "func" or "Class.method" of the top-level function or method being visited."""
        ...

    def enclosing_def(self) -> cst.FunctionDef | None: ...

    def in_def_body(self) -> bool:
        """Whether the node is in the body of `enclosing_function`'s def (its parameters in scope)."""

    def module_ast(self) -> tuple[Any, dict[str, str | None]]:
        """The file's `ast` tree (None if it does not parse) and its module-level bindings."""
        ...

    def per_file(self, key: str, build: Any) -> Any:
        """A value computed once per converted file."""
        ...

    def diagnose(self, node: cst.CSTNode, severity: Severity, code: str, message: str) -> None: ...
