"""Containers that remember the YAML line of each key/item (filled by `yaml_lines`)."""

from __future__ import annotations

from typing import Any


class LineDict(dict[str, Any]):
    """A dict that knows the 1-based line of each key (`lines[key]`) and of itself (`line`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines: dict[str, int] = {}
        self.line = 0


class LineList(list[Any]):
    """A list that knows the 1-based line of each item (`lines[i]`) and of itself (`line`)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.lines: list[int] = []
        self.line = 0
