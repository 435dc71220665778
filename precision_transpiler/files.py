"""Reading, finding and writing files safely.

Input files are only ever read here; writing goes through `write_atomic`, which writes a
temporary file beside the target and renames it over, so an interrupted run never leaves a
half-written file and an input is never truncated.
"""

from __future__ import annotations

import codecs
import contextlib
import fnmatch
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

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


# PEP 263: a comment on line 1 or 2 (line 2 only after a blank or comment line 1)
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_BLANK_OR_COMMENT = re.compile(rb"^[ \t\f]*(?:[#\r]|$)")


class ReadError(Exception):
    """A file that cannot be used as Python source."""

    def __init__(self, code: str, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line


def read_source(path: Path) -> str:
    """Read a Python file as text; raise ReadError for missing, unreadable, binary or undecodable."""
    return read_source_encoded(path)[0]


def read_source_encoded(path: Path) -> tuple[str, str]:
    """The text of a Python file and the encoding to write it back with (see `decode_source`)."""
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
    return decode_source(data)


def decode_source(data: bytes) -> tuple[str, str]:
    """Decode Python source bytes as Python does: UTF-8, or the encoding of a PEP 263 coding
    comment. Returns the text (without a UTF-8 BOM) and the codec that writes it back byte for
    byte: `utf-8-sig` when the source starts with a BOM, the declared encoding otherwise."""
    if b"\x00" in data:
        raise ReadError("binary-file", "binary file (contains NUL bytes), not Python source")
    bom = data.startswith(codecs.BOM_UTF8)
    body = data[len(codecs.BOM_UTF8) :] if bom else data
    encoding = "utf-8"
    first, second = [*body.split(b"\n", 2), b"", b""][:2]
    cookie = _CODING.match(first) or (_CODING.match(second) if _BLANK_OR_COMMENT.match(first) else None)
    if cookie is not None:
        name = cookie.group(1).decode("ascii")
        try:
            declared = codecs.lookup(name).name
        except LookupError:
            raise ReadError("unknown-encoding", f"unknown encoding {name!r} in the coding comment") from None
        if declared != "utf-8":
            if bom:
                raise ReadError("unknown-encoding", f"a UTF-8 BOM and the coding comment {name!r} disagree")
            encoding = name
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        if encoding == "utf-8":
            raise ReadError("not-utf8", f"not valid UTF-8 (byte 0x{body[exc.start]:02x})", line) from None
        raise ReadError("bad-encoding", f"not valid {encoding} (byte 0x{body[exc.start]:02x})", line) from None
    if bom:
        encoding = "utf-8-sig"  # writes the BOM back
    return text, encoding


GENERATED_RUNTIME = re.compile(r"^_ptranspile_runtime_\w+\.py$")


def iter_python_files(
    paths: Iterable[str | os.PathLike[str]], exclude: Sequence[str] = ()
) -> Iterator[tuple[Path, bool]]:
    """Yield (path, found_by_walking) for files and `*.py` under directories, sorted.

    Paths that do not exist are yielded too, so the caller reports them as errors and goes on.
    The runtime modules ptranspile writes beside its outputs (`_ptranspile_runtime_jax.py`,
    `--runtime module`) are not inputs: they are generated whole, never converted.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found: list[Path] = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                for name in files:
                    if name.endswith(".py") and not GENERATED_RUNTIME.match(name):
                        found.append(Path(root) / name)
            for file in sorted(found):
                if not _excluded(file, exclude):
                    yield file, True
        elif not _excluded(path, exclude) and not GENERATED_RUNTIME.match(path.name):
            yield path, False


def _excluded(path: Path, patterns: Sequence[str]) -> bool:
    text = path.as_posix()
    return any(fnmatch.fnmatch(text, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


def write_atomic(path: Path, text: str | bytes, encoding: str = "utf-8") -> None:
    """Write `text` (encoded with `encoding`) or bytes to `path` atomically, keeping the existing
    file's permissions.

    A symbolic link is followed: its target is replaced, the link stays. Only regular files are
    replaced: `-o /dev/null` or a named pipe is written to in place (a rename over a device node
    would replace the device itself). Text that `encoding` cannot represent raises
    UnicodeEncodeError before anything is written; the temporary file is removed whatever stops
    the write (an error, Ctrl-C)."""
    data = text if isinstance(text, bytes) else text.encode(encoding)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_file():
        with open(path, "wb") as fh:
            fh.write(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = path.stat().st_mode & 0o7777
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with open(fd, "wb") as fh:
            fh.write(data)
        if mode is None:  # a new file: what open() would give it (mkstemp makes it 0600)
            umask = os.umask(0o022)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def overwritten_input(output: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> str | None:
    """The input (as given) that writing `output` would replace, or None. Only an existing
    output can be an input; a link is followed, as `write_atomic` follows it."""
    target = Path(output)
    if not target.exists():
        return None
    for given in inputs:
        path = Path(given)
        if path.exists() and target.resolve() == path.resolve():
            return os.fspath(given)
    return None


def refuse_overwriting_inputs(
    option: str, output: str | os.PathLike[str] | None, inputs: Iterable[str | os.PathLike[str]]
) -> None:
    """UsageError when `option OUTPUT` would replace one of `inputs`: checked before anything
    runs or is written, so a mistyped report path never costs a model file."""
    from precision_transpiler.errors import UsageError

    if output is None:
        return
    hit = overwritten_input(output, inputs)
    if hit is not None:
        raise UsageError(f"{option} {os.fspath(output)} would overwrite the input {hit}")


@contextlib.contextmanager
def cannot_write_as_error(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an OSError while writing `path` into one WriteError line naming `path` (not the
    temporary file beside it, nor the parent directory that could not be made)."""
    from precision_transpiler.errors import WriteError

    try:
        yield
    except FileExistsError as exc:  # making the parent directory: something there is a file
        raise WriteError(f"{os.fspath(path)}: cannot write: {exc.filename} is not a directory") from None
    except OSError as exc:
        raise WriteError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None


def write_report(path: str | os.PathLike[str], text: str) -> None:
    """Write a report (JSON, HTML, a generated test) as UTF-8, whatever the locale, atomically
    (`write_atomic`); a path that cannot be written is one WriteError line.

    Under a locale Python cannot decode a file name in (LC_ALL=C without UTF-8 mode), the name
    arrives with surrogate escapes; `surrogateescape` writes its original bytes back, where a
    strict codec would refuse the whole report."""
    with cannot_write_as_error(path):
        write_atomic(Path(path), text.encode("utf-8", "surrogateescape"))


def package_parts(path: Path) -> list[str]:
    """The packages a module file sits in, outermost first (`["facenet_pytorch", "models"]` for
    facenet_pytorch/models/mtcnn.py): folders with `__init__.py`, and folders without it inside
    a package (namespace portions, PEP 420: facenet_pytorch's `models/`), which Python imports as
    packages just the same. Empty for a file outside any package."""
    parts: list[str] = []
    folder = path.absolute().parent  # `Path("mod.py").parent` is `.`, whose parent is itself
    while folder.parent != folder and ((folder / "__init__.py").is_file() or _namespace_portion(folder)):
        parts.insert(0, folder.name)
        folder = folder.parent
    return parts


def _namespace_portion(folder: Path) -> bool:
    """A folder without `__init__.py`, named as a module can be, inside a regular package."""
    current = folder
    while current.name.isidentifier() and current.parent != current:
        current = current.parent
        if (current / "__init__.py").is_file():
            return True
    return False
