"""The library API: `transpile`, `transpile_file`, `transpile_paths`.

The CLI and the pre-commit hooks are thin layers over these functions. They never raise for
problems in the user's code (syntax errors, unreadable files): those come back as error
diagnostics in the result, so that a pipeline converting a tree gets one result per file.
They raise `PtranspileError` subclasses for bad arguments (unknown framework or policy,
malformed mapping tables).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst

from precision_transpiler.diagnostics import Diagnostic, Rewrite
from precision_transpiler.errors import UsageError
from precision_transpiler.files import ReadError, iter_python_files, read_source
from precision_transpiler.mappings import MappingSet, load_mappings
from precision_transpiler.mappings.model import FRAMEWORKS
from precision_transpiler.policy import resolve_policy

__all__ = ["TranspileResult", "transpile", "transpile_file", "transpile_paths"]


@dataclass(frozen=True)
class TranspileResult:
    """What transpiling one source gave.

    `code` is the converted source (the input unchanged when nothing applied or on errors),
    `changed` whether it differs from the input, `diagnostics` everything worth telling the user,
    `rewrites` every change made, with positions in the input.
    """

    path: str
    code: str
    original: str
    source_framework: str | None
    target_framework: str
    policy: str
    diagnostics: tuple[Diagnostic, ...] = ()
    rewrites: tuple[Rewrite, ...] = ()
    imports_added: tuple[str, ...] = ()
    skipped: str | None = None  # why the file was not processed (e.g. "empty file")

    @property
    def changed(self) -> bool:
        return self.code != self.original

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    @property
    def unsupported(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "unsupported")

    @property
    def ok(self) -> bool:
        """No errors and nothing unsupported."""
        return not self.errors and not self.unsupported

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "source": self.source_framework,
            "target": self.target_framework,
            "policy": self.policy,
            "changed": self.changed,
            "skipped": self.skipped,
            "imports_added": list(self.imports_added),
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "rewrites": [r.to_json() for r in self.rewrites],
        }


def _check_framework(value: str | None, option: str, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if value not in FRAMEWORKS:
        raise UsageError(f"unknown framework {value!r} for {option} (choose from {', '.join(FRAMEWORKS)})")


def transpile(
    source: str,
    *,
    to: str,
    from_: str | None = None,
    policy: str = "fp32",
    mappings: Sequence[str | os.PathLike[str]] | MappingSet = (),
    path: str = "<string>",
    device: str = "cpu",
) -> TranspileResult:
    """Convert Python source text written for one framework into another.

    `to`/`from_` are "torch", "jax", "tf" or "numpy" (`from_=None` detects the source).
    `policy` names a precision policy (see docs/policies.md); `mappings` adds table directories
    (or passes an already loaded MappingSet).
    """
    # Imported here so that `import precision_transpiler` stays cheap for --help.
    from precision_transpiler.rewrite.engine import EngineOptions, run_engine

    _check_framework(to, "to", allow_none=False)
    _check_framework(from_, "from", allow_none=True)
    policy_obj = resolve_policy(policy, device=device)
    table = mappings if isinstance(mappings, MappingSet) else load_mappings(mappings)

    def result(code: str, **kw: Any) -> TranspileResult:
        return TranspileResult(path=path, code=code, original=source, target_framework=to, policy=policy_obj.name, **kw)

    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return result(source, source_framework=from_, diagnostics=(_syntax_error(source, path, exc),))
    options = EngineOptions(target=to, source=from_, path=path, mappings=table)
    new_module, outcome = run_engine(module, source, options)
    code = new_module.code
    diagnostics = sorted(outcome.diagnostics, key=lambda d: (d.line, d.col, d.code, d.message))
    return result(
        code,
        source_framework=outcome.source,
        diagnostics=tuple(_dedupe(diagnostics)),
        rewrites=tuple(sorted(outcome.rewrites)),
        imports_added=tuple(outcome.imports_added),
    )


def _syntax_error(source: str, path: str, exc: cst.ParserSyntaxError) -> Diagnostic:
    """Python's own parser gives the most precise position and wording; use it when it agrees
    that the code is invalid (it only parses, nothing is executed)."""
    try:
        ast.parse(source, filename=path)
    except SyntaxError as err:
        return Diagnostic(path, err.lineno or 1, err.offset or 1, "error", "syntax-error", f"syntax error: {err.msg}")
    except (ValueError, RecursionError):
        pass
    message = exc.message.splitlines()[0] if exc.message else "invalid syntax"
    return Diagnostic(path, exc.raw_line, exc.raw_column + 1, "error", "syntax-error", f"syntax error: {message}")


def _dedupe(items: Iterable[Diagnostic]) -> list[Diagnostic]:
    seen: set[Diagnostic] = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def transpile_file(
    path: str | os.PathLike[str],
    *,
    to: str,
    from_: str | None = None,
    policy: str = "fp32",
    mappings: Sequence[str | os.PathLike[str]] | MappingSet = (),
    device: str = "cpu",
    skip_empty: bool = False,
) -> TranspileResult:
    """Transpile one file (read only: writing is the caller's choice)."""
    display = os.fspath(path)
    try:
        text = read_source(Path(path))
    except ReadError as exc:
        diag = Diagnostic(display, exc.line, 1, "error", exc.code, exc.message)
        return TranspileResult(display, "", "", from_, to, policy, diagnostics=(diag,), skipped=exc.message)
    if not text.strip() and skip_empty:
        return TranspileResult(display, text, text, from_, to, policy, skipped="empty file")
    if not text.strip():
        diag = Diagnostic(display, 1, 1, "error", "empty-file", "file is empty: nothing to transpile")
        return TranspileResult(display, text, text, from_, to, policy, diagnostics=(diag,), skipped="empty file")
    return transpile(text, to=to, from_=from_, policy=policy, mappings=mappings, path=display, device=device)


@dataclass
class _Job:
    to: str
    from_: str | None
    policy: str
    mapping_dirs: tuple[str, ...]
    device: str
    skip_empty: bool = False
    extras: dict[str, Any] = field(default_factory=dict)

    def __call__(self, item: tuple[Path, bool]) -> TranspileResult:
        path, from_walk = item
        return transpile_file(
            path,
            to=self.to,
            from_=self.from_,
            policy=self.policy,
            mappings=self.mapping_dirs,
            device=self.device,
            skip_empty=self.skip_empty or from_walk,
        )


def transpile_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    to: str,
    from_: str | None = None,
    policy: str = "fp32",
    mappings: Sequence[str | os.PathLike[str]] = (),
    device: str = "cpu",
    jobs: int = 1,
    skip_empty: bool = False,
    exclude: Sequence[str] = (),
) -> list[TranspileResult]:
    """Transpile files and directory trees (recursively, `*.py`), in parallel with `jobs > 1`.

    Results come back in a stable order (sorted paths). Empty files met while walking a
    directory are skipped; an empty file named explicitly is an error unless `skip_empty`.
    """
    _check_framework(to, "to", allow_none=False)
    _check_framework(from_, "from", allow_none=True)
    resolve_policy(policy, device=device)
    load_mappings(mappings)  # fail early, once, on malformed tables
    items = list(iter_python_files(paths, exclude=exclude))
    job = _Job(to, from_, policy, tuple(os.fspath(m) for m in mappings), device, skip_empty)
    if jobs > 1 and len(items) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(job, items, chunksize=max(1, len(items) // (jobs * 4))))
    return [job(item) for item in items]
