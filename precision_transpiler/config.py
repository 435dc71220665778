"""Project defaults from `[tool.ptranspile]` in the nearest pyproject.toml.

Command-line options override these. Unknown keys are an error (a typo must not be ignored).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from precision_transpiler.errors import UsageError

_KEYS: dict[str, type | tuple[type, ...]] = {
    "to": str,
    "from": str,
    "policy": str,
    "device": str,
    "mappings": list,
    "strict": bool,
    "jobs": int,
    "exclude": list,
    "skip-empty": bool,
    "nan-fallback": bool,
    "tolerance": (int, float),
    "fp32-tolerance": (int, float),
    "mixed-factor": (int, float),
    "calibrate-bn": bool,
    "seed": int,
    "max-input-mb": (int, float),
    "allow-torch": bool,
    "max-file-mb": (int, float),
}


@dataclass
class ProjectConfig:
    path: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path) -> ProjectConfig:
    path = find_pyproject(start)
    if path is None:
        return ProjectConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read [tool.ptranspile]: {exc}") from None
    section = data.get("tool", {}).get("ptranspile")
    if section is None:
        return ProjectConfig(path)
    if not isinstance(section, dict):
        raise UsageError(f"{path}: [tool.ptranspile] must be a table")
    values: dict[str, Any] = {}
    for key, value in section.items():
        expected = _KEYS.get(key)
        if expected is None:
            raise UsageError(f"{path}: [tool.ptranspile]: unknown key {key!r} (known: {', '.join(_KEYS)})")
        if not isinstance(value, expected) or (expected in (int, (int, float)) and isinstance(value, bool)):
            raise UsageError(f"{path}: [tool.ptranspile]: {key!r} has the wrong type")
        values[key] = value
    if "mappings" in values:  # relative to the pyproject's folder
        values["mappings"] = [str((path.parent / m).resolve()) for m in values["mappings"]]
    return ProjectConfig(path, values)
