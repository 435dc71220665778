"""Reading, finding and writing files safely.

Input files are only ever read here; writing goes through `write_atomic`, which writes a
temporary file beside the target and renames it over, so an interrupted run never leaves a
half-written file and an input is never truncated.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

_SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "node_modules",
        "build",
        "dist",
        ".eggs",
    }
)


class ReadError(Exception):
    """A file that cannot be used as Python source."""

    def __init__(self, code: str, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line


def read_source(path: Path) -> str:
    """Read a Python file as text; raise ReadError for missing, unreadable, binary or non-UTF-8."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ReadError("missing-file", "no such file") from None
    except IsADirectoryError:
        raise ReadError("is-directory", "is a directory") from None
    except PermissionError:
        raise ReadError("unreadable-file", "permission denied") from None
    except OSError as exc:
        raise ReadError("unreadable-file", f"cannot read: {exc.strerror}") from None
    if b"\x00" in data:
        raise ReadError("binary-file", "binary file (contains NUL bytes), not Python source")
    try:
        text = data.decode("utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ReadError("not-utf8", f"not valid UTF-8 (byte 0x{data[exc.start]:02x})", line) from None
    return text


def iter_python_files(
    paths: Iterable[str | os.PathLike[str]], exclude: Sequence[str] = ()
) -> Iterator[tuple[Path, bool]]:
    """Yield (path, found_by_walking) for files and `*.py` under directories, sorted.

    Paths that do not exist are yielded too, so the caller reports them as errors and goes on.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found: list[Path] = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                for name in files:
                    if name.endswith(".py"):
                        found.append(Path(root) / name)
            for file in sorted(found):
                if not _excluded(file, exclude):
                    yield file, True
        elif not _excluded(path, exclude):
            yield path, False


def _excluded(path: Path, patterns: Sequence[str]) -> bool:
    text = path.as_posix()
    return any(fnmatch.fnmatch(text, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write `text` (or bytes) to `path` atomically, keeping the existing file's permissions.

    Only regular files are replaced: `-o /dev/null` or a named pipe is written to in place (a
    rename over a device node would replace the device itself)."""
    binary = isinstance(text, bytes)

    def opened(target: int | Path) -> Any:
        if binary:
            return open(target, "wb")
        return open(target, "w", encoding="utf-8", newline="")

    if path.exists() and not path.is_file():
        with opened(path) as fh:
            fh.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with opened(fd) as fh:
            fh.write(text)
        if mode is None:  # a new file: what open() would give it (mkstemp makes it 0600)
            umask = os.umask(0o022)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
