"""The defaults the documentation states for command-line options are the commands' own.

A default is recognised in these forms, after the option on the same line (a table row, a
paragraph unwrapped, a `#` comment of a code block): ``(default `X`)``, ``(default: X)``,
``(default X)``, ``, default X``, ``Default: `X` ``, and ``X (default)`` where X is in backticks or
one of the option's choices. The commands' defaults are argparse's, or, for options that
`[tool.ptranspile]` can set too (whose argparse default is None), the table the commands read
(`cli.OPTION_DEFAULTS`, `cli_verify.verification_defaults()`)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from precision_transpiler.cli import OPTION_DEFAULTS, build_parser
from precision_transpiler.cli_verify import build_verify_parser, verification_defaults
from precision_transpiler.cli_weights import build_weights_parser
from tests.docs_examples import PAGES, REPO

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
VALUE = r"(?:`(?P<{0}q>[^`]+)`|(?P<{0}w>[\w.+-]+{1}))"
LIST = r"(?:, [\w.+-]+)*(?: and [\w.+-]+)?"  # `(default: torch, jax and tf)`
FORMS = re.compile(
    "|".join(
        (
            r"\(default:? " + VALUE.format("a", LIST),
            r", default " + VALUE.format("b", ""),
            r"\bDefault: " + VALUE.format("c", LIST),
            r"(?:`(?P<dq>[^`]+)`|(?P<dw>[\w.+-]+)) (?=\(default\b)",
        )
    )
)


def _known() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """option -> the defaults its commands give it; option -> its choices."""
    defaults: dict[str, set[str]] = {}
    choices: dict[str, set[str]] = {}
    for build in (build_parser, build_verify_parser, build_weights_parser):
        for action in build()._actions:
            for option in action.option_strings:
                if action.choices:
                    choices.setdefault(option, set()).update(map(str, action.choices))
                if action.default not in (None, False, argparse.SUPPRESS) and not isinstance(action.default, list):
                    defaults.setdefault(option, set()).add(_normal(str(action.default)))
    for name, value in {**OPTION_DEFAULTS, **verification_defaults()}.items():
        defaults.setdefault(f"--{name}", set()).add(_normal(str(value)))
    return defaults, choices


def _normal(value: str) -> str:
    """`torch, jax and tf` -> `torch,jax,tf`; `5.0` -> `5`; `1e-05` -> `1e-05`."""
    value = re.sub(r",? and |, ", ",", value.strip().rstrip(".,;:"))
    try:
        number = float(value)
    except ValueError:
        return value
    return f"{number:g}"


def _segments(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every table row, and of every paragraph or run of `#` comments unwrapped."""
    start, lines = 0, []
    for number, line in enumerate([*text.splitlines(), ""], 1):
        if not line.strip() or line.startswith("|") or line.startswith("```"):
            if lines:
                yield start, " ".join(lines)
            lines = []
            if line.startswith("|"):
                yield number, line
            continue
        if not lines:
            start = number
        lines.append(re.sub(r"^\s*#\s*", "", line).strip())


def documented_defaults() -> Iterator[tuple[str, str, str]]:
    """(where, option, value) for every default the pages state."""
    _, choices = _known()
    for page in PAGES:
        for line, segment in _segments((REPO / page).read_text(encoding="utf-8")):
            for match in FORMS.finditer(segment):
                before = OPTION.findall(segment[: match.start()])
                if not before:
                    continue
                option = before[-1]
                quoted = next((match[g] for g in ("aq", "bq", "cq", "dq") if match[g]), None)
                bare = next((match[g] for g in ("aw", "bw", "cw", "dw") if match[g]), None)
                if bare is not None and match["dw"] and bare not in choices.get(option, ()):
                    continue  # `the reverse (default)`: prose, not a value
                if quoted is not None and quoted.startswith("-"):
                    continue  # `--other-option` (default ...): another option's default
                yield f"{page}:{line}", option, quoted if quoted is not None else bare


def test_some_defaults_are_recognised() -> None:
    found = {(option, _normal(value)) for _, option, value in documented_defaults()}
    assert ("--device", "auto") in found
    assert ("--policy", "fp32") in found
    assert ("--jobs", "1") in found


def test_documented_defaults_are_the_commands() -> None:
    defaults, _ = _known()
    wrong = []
    for where, option, value in documented_defaults():
        if option not in defaults:
            continue  # an option whose default is decided case by case (`--policy-out`, `--key`)
        shown = _normal(value)
        if shown not in defaults[option] and not any(shown.startswith(f"{d} ") for d in defaults[option]):
            wrong.append(f"{where}: {option} default {value!r}, but the commands' is {sorted(defaults[option])}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("| `--device {auto,cpu}` | where it runs (default `auto`: it decides) |", ("--device", "auto")),
        ("device = 'gpu'  # --device: cpu (default), gpu or tpu", ("--device", "cpu")),
        ("`-j N`, `--jobs N` | files in `N` processes (default 1) |", ("--jobs", "1")),
        ("with `--seed`, default 0, so", ("--seed", "0")),
    ],
)
def test_forms(text: str, expected: tuple[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text(text + "\n", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.PAGES", ("page.md",))
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert [(o, _normal(v)) for _, o, v in documented_defaults()] == [expected]
