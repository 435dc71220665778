"""Diagnostics and rewrite records: what the transpiler says about a file.

Every message carries a position so that editors and CI logs can jump to it; `format()` gives
the compiler-style line (`model.py:12:5: unsupported: ...`) the CLI prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "unsupported", "warning", "note"]


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One finding. `line` and `col` are 1-based; `code` is a stable identifier for filtering."""

    path: str
    line: int
    col: int
    severity: Severity
    code: str
    message: str

    def format(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.severity}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, order=True)
class Rewrite:
    """One change the transpiler made: where, by which rule, and the code before and after."""

    line: int
    col: int
    rule: str
    before: str
    after: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
