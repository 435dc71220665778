"""Diagnostics and rewrite records: what the transpiler says about a file.

Every message carries a position so that editors and CI logs can jump to it; `format()` gives
the compiler-style line (`model.py:12:5: unsupported: ...`) the CLI prints, `format_github()`
a GitHub Actions workflow command (`--output-format github`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "unsupported", "warning", "note"]

# severity -> GitHub Actions workflow command (an annotation of that level)
_GITHUB_COMMANDS = {"error": "error", "unsupported": "error", "warning": "warning", "note": "notice"}


def github_annotation(
    level: str, message: str, *, path: str, title: str, line: int | None = None, col: int | None = None
) -> str:
    """`::LEVEL file=PATH,line=L,col=C,title=TITLE::MESSAGE`, escaped as the runner expects
    (`%`, CR, LF in the message; also `:` and `,` in property values)."""

    def prop(value: object) -> str:
        return _escape_data(str(value)).replace(":", "%3A").replace(",", "%2C")

    props = [f"file={prop(path)}"]
    if line is not None:
        props.append(f"line={line}")
    if col is not None:
        props.append(f"col={col}")
    props.append(f"title={prop(title)}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


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

    def format_github(self) -> str:
        """The diagnostic as a GitHub Actions annotation: errors and unsupported constructs are
        `::error`, warnings `::warning`, notes `::notice`; the title names the severity."""
        return github_annotation(
            _GITHUB_COMMANDS[self.severity],
            self.message,
            path=self.path,
            line=self.line or None,
            col=self.col or None,
            title=f"ptranspile {self.severity}",
        )

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
