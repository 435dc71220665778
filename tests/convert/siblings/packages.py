"""Small packages written to a test's folder: the sibling modules copying reads are real files."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_package(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (path below `root` -> source, dedented) and an `__init__.py` in each
    folder that lacks one; returns `root`."""
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    for folder in {(root / relative).parent for relative in files}:
        while folder != root.parent and folder != root:
            if not (folder / "__init__.py").exists():
                (folder / "__init__.py").write_text("", encoding="utf-8")
            folder = folder.parent
    return root


def unchanged(source: str, path: str) -> tuple[str, list[tuple[int, int, str, str, str]]]:
    """A sibling "converted" to itself: what is copied is the sibling's own text."""
    return source, []
