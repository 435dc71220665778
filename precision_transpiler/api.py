"""The library API: `transpile`, `transpile_file`, `transpile_paths`.

The CLI and the pre-commit hooks are thin layers over these functions. They never raise for
problems in the user's code (syntax errors, unreadable files): those come back as error
diagnostics in the result, so that a pipeline converting a tree gets one result per file.
They raise `PtranspileError` subclasses for bad arguments (unknown framework or policy,
malformed mapping tables).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from precision_transpiler.detection import detect_file_framework, detect_framework
from precision_transpiler.diagnostics import Diagnostic, Rewrite
from precision_transpiler.errors import PtranspileError
from precision_transpiler.files import ReadError, iter_python_files, read_source_encoded
from precision_transpiler.mappings import MappingSet
from precision_transpiler.options import Options
from precision_transpiler.pipeline import announce, stage_hook

__all__ = [
    "Options",
    "TranspileResult",
    "convert_file",
    "convert_paths",
    "convert_source",
    "detect_file_framework",
    "detect_framework",
    "transpile",
    "transpile_file",
    "transpile_paths",
]


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
    precision: tuple[Any, ...] = ()  # PrecisionDecision for every layer/op the policy touched
    policy_info: dict[str, Any] | None = None
    # how the file is written back: "utf-8", "utf-8-sig" (a BOM) or a PEP 263 coding comment's
    encoding: str = "utf-8"
    # runtime="module": what the code imports from the runtime module beside it
    # (`_ptranspile_runtime_jax.py`, convert/runtime_module.py), which the caller writes
    runtime_names: tuple[str, ...] = ()

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
            "precision": [asdict(p) for p in self.precision],
            "policy_info": self.policy_info,
        }


def transpile(
    source: str,
    *,
    to: str,
    from_: str | Sequence[str] | None = None,
    policy: str = "fp32",
    mappings: Sequence[str | os.PathLike[str]] | MappingSet = (),
    path: str = "<string>",
    device: str = "auto",
    nan_fallback: bool = False,
    entry: str | None = None,
    prune_to_entry: bool = False,
    runtime: str = "inline",
) -> TranspileResult:
    """Convert Python source text written for one framework into another.

    `to`/`from_` are "torch", "jax", "tf" or "numpy" (`from_=None` detects the source; several,
    as "torch,jax" or a sequence, detect it among those and leave other files unchanged).
    A file with a `# ptranspile: skip-file` comment comes back unchanged, `skipped` saying why.
    `policy` names a precision policy (see docs/policies.md); `mappings` adds table directories
    (or passes an already loaded MappingSet). `prune_to_entry=True` with `entry` (a name or an
    expression such as "BertModel(BertConfig())") converts only the top-level definitions the
    entry reaches (convert/entry.py); UsageError when the file defines none of its names, and
    when one of the two comes without the other. Positions in the result always name lines of
    `source`, pruned or not.
    """
    options = Options.build(
        to=to, from_=from_, policy=policy, mappings=mappings, device=device, nan_fallback=nan_fallback,
        entry=entry, prune_to_entry=prune_to_entry, runtime=runtime,
    )  # fmt: skip
    return convert_source(source, options, path)


#: Sources at least this long are converted with fewer cyclic garbage collections (see below).
_LARGE_SOURCE = 128 * 1024
_LARGE_GEN0_THRESHOLD = 10_000


@contextlib.contextmanager
def _fewer_collections(size: int) -> Iterator[None]:
    """Raise the collector's first threshold while a large source is converted.

    A large file's syntax trees are millions of long-lived objects; with the default threshold
    (700 allocations) the collector traverses the young ones hundreds of thousands of times and
    the old ones over and over, a fifth of the conversion time of a 100 KB file. Trees hold no
    reference cycles to collect, so collecting less often costs little memory (about 15% more
    peak). Small sources keep the interpreter's settings."""
    if size < _LARGE_SOURCE:
        yield
        return
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], _LARGE_GEN0_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def convert_source(source: str, options: Options, path: str = "<string>") -> TranspileResult:
    """`transpile` with its options built: the pipeline over `source` (a large one with fewer
    garbage collections)."""
    # Imported here so that `import precision_transpiler` stays cheap for --help.
    from precision_transpiler.pipeline import convert_document

    policy = options.resolved_policy
    with _fewer_collections(len(source)):
        doc = convert_document(source, path, options.job(path))
    return TranspileResult(
        path=path,
        code=doc.result_code(),
        original=source,
        source_framework=doc.source_framework,
        target_framework=options.to,
        policy=policy.name,
        diagnostics=tuple(doc.diagnostics),
        rewrites=tuple(sorted(doc.rewrites)),
        imports_added=tuple(doc.imports_added),
        skipped=doc.skipped,
        precision=tuple(doc.precision),
        policy_info=None if doc.unchanged else policy.to_json(),
        runtime_names=doc.runtime_names,
    )


def transpile_file(
    path: str | os.PathLike[str],
    *,
    to: str,
    from_: str | Sequence[str] | None = None,
    policy: str = "fp32",
    mappings: Sequence[str | os.PathLike[str]] | MappingSet = (),
    device: str = "auto",
    skip_empty: bool = False,
    nan_fallback: bool = False,
    entry: str | None = None,
    prune_to_entry: bool = False,
    max_file_mb: float | None = None,
    runtime: str = "inline",
) -> TranspileResult:
    """Transpile one file (read only: writing is the caller's choice).

    A file larger than `max_file_mb` megabytes (10**6 bytes; None: no limit) is not read: the
    result is a `file-too-large` error, `skipped` saying why. Conversion takes time and memory
    in proportion to a file's size (seconds and about 100 MB per 100 KB), so a user is told at
    once rather than left waiting minutes for a generated file nobody meant to convert."""
    options = Options.build(
        to=to, from_=from_, policy=policy, mappings=mappings, device=device, nan_fallback=nan_fallback,
        entry=entry, prune_to_entry=prune_to_entry, skip_empty=skip_empty, max_file_mb=max_file_mb,
        runtime=runtime,
    )  # fmt: skip
    return convert_file(path, options)


def convert_file(path: str | os.PathLike[str], options: Options, *, from_walk: bool = False) -> TranspileResult:
    """`transpile_file` with its options built (`from_walk`: found walking a directory, where an
    empty file is skipped, not an error)."""
    display = os.fspath(path)
    to, policy, source = options.to, options.policy, options.single_source

    def refused(diag: Diagnostic | None, skipped: str, text: str = "", encoding: str = "utf-8") -> TranspileResult:
        diagnostics = (diag,) if diag is not None else ()
        return TranspileResult(display, text, text, source, to, policy, diagnostics, skipped=skipped, encoding=encoding)

    if options.max_file_mb is not None:
        too_large = _over_limit(Path(path), options.max_file_mb)
        if too_large is not None:
            return refused(Diagnostic(display, 0, 0, "error", "file-too-large", too_large), too_large)
    announce("reading")
    try:
        text, encoding = read_source_encoded(Path(path))
    except ReadError as exc:
        return refused(Diagnostic(display, exc.line, 1, "error", exc.code, exc.message), exc.message)
    if not text.strip():
        if options.skip_empty or from_walk:
            return refused(None, "empty file", text, encoding)
        diag = Diagnostic(display, 1, 1, "error", "empty-file", "file is empty: nothing to transpile")
        return refused(diag, "empty file", text, encoding)
    converted = convert_source(text, options, display)
    return converted if encoding == "utf-8" else replace(converted, encoding=encoding)


def _over_limit(path: Path, max_file_mb: float) -> str | None:
    """Why `path` is not converted under the size limit, or None (also when it cannot be
    stat'ed: reading it reports that)."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size <= max_file_mb * 1_000_000:
        return None
    mb = size / 1_000_000
    shown = f"{mb:,.1f}" if mb >= 1 else f"{mb:.3g}"
    return f"{shown} MB is over the {max_file_mb:g} MB limit (--max-file-mb)"


@dataclass(frozen=True)
class _Job:
    """One file of `transpile_paths` (picklable: worker processes run it)."""

    options: Options

    def __call__(self, item: tuple[Path, bool]) -> TranspileResult:
        """One file's result. A bug of ours while converting it (an exception that is no
        PtranspileError) is that file's error, so that every other file of the run still gets
        its own verdict; bad arguments (PtranspileError) still end the run."""
        path, _ = item
        try:
            return self._convert(item)
        except PtranspileError:
            raise
        except Exception as exc:
            return self.failed(path, f"internal error: {type(exc).__name__}: {exc}"[:300])

    def failed(self, path: Path, message: str) -> TranspileResult:
        """The result of a file whose conversion failed on a bug of ours: its one error."""
        display = os.fspath(path)
        diag = Diagnostic(display, 1, 1, "error", "internal-error", f"{message} (please report this)")
        options = self.options
        return TranspileResult(display, "", "", None, options.to, options.policy, diagnostics=(diag,), skipped=message)

    def _convert(self, item: tuple[Path, bool]) -> TranspileResult:
        path, from_walk = item
        return convert_file(path, self.options, from_walk=from_walk)

    @property
    def in_this_process(self) -> bool:
        """A MappingSet the caller built is used as is, in this process (not sent to workers)."""
        return isinstance(self.options.mappings, MappingSet)


def transpile_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    to: str,
    from_: str | Sequence[str] | None = None,
    policy: str = "fp32",
    mappings: Sequence[str | os.PathLike[str]] | MappingSet = (),
    device: str = "auto",
    jobs: int = 1,
    skip_empty: bool = False,
    exclude: Sequence[str] = (),
    nan_fallback: bool = False,
    entry: str | None = None,
    prune_to_entry: bool = False,
    max_file_mb: float | None = None,
    runtime: str = "inline",
    progress: Any = None,
) -> list[TranspileResult]:
    """Transpile files and directory trees (recursively, `*.py`), in parallel with `jobs > 1`.

    Results come back in a stable order: the arguments' order, each directory's files sorted.
    Empty files met while walking a directory are skipped; an empty file named explicitly is an
    error unless `skip_empty`. With `jobs > 1` and table directories, files are converted in
    worker processes; a loaded MappingSet is used in this process. Files over `max_file_mb`
    are skipped with an error (see `transpile_file`). `progress` (a
    `precision_transpiler.progress.ConversionProgress`, or anything with its `begin(total)`,
    `start(path)`, `stage(name)`, `done(path)` and `close()`) is told what happens; stages only
    when files are converted in this process.
    """
    options = Options.build(
        to=to, from_=from_, policy=policy, mappings=mappings, device=device, nan_fallback=nan_fallback,
        entry=entry, prune_to_entry=prune_to_entry, skip_empty=skip_empty, max_file_mb=max_file_mb,
        runtime=runtime,
    )  # fmt: skip
    return convert_paths(paths, options, jobs=jobs, exclude=exclude, progress=progress)


def convert_paths(
    paths: Iterable[str | os.PathLike[str]],
    options: Options,
    *,
    jobs: int = 1,
    exclude: Sequence[str] = (),
    progress: Any = None,
) -> list[TranspileResult]:
    """`transpile_paths` with its options built (what the command line calls)."""
    items = list(iter_python_files(paths, exclude=exclude))
    job = _Job(options)
    if progress is not None:
        return _with_progress(job, items, jobs, progress)
    if jobs > 1 and len(items) > 1 and not job.in_this_process:
        return list(_in_workers(job, items, jobs))
    return [job(item) for item in items]


def _in_workers(job: _Job, items: list[tuple[Path, bool]], jobs: int) -> Iterator[TranspileResult]:
    """`job`'s results over `items` from `jobs` worker processes, in the items' order.

    A worker that dies (a native crash: a C extension's segmentation fault, which no `except`
    catches) breaks the pool. The files from the first one without a result on are then taken
    one at a time, each alone in a fresh process, until the one that crashes: that file's result
    is its error, and the rest of the run goes on in a new pool."""
    from concurrent.futures.process import BrokenProcessPool

    done = 0
    while done < len(items):
        rest = items[done:]
        try:
            with _pool(jobs) as pool:
                for result in pool.map(job, rest, chunksize=max(1, len(rest) // (jobs * 4))):
                    yield result
                    done += 1
        except BrokenProcessPool:
            while done < len(items):
                result = _alone(job, items[done])
                yield result
                done += 1
                if result.skipped and result.skipped.startswith(_CRASHED):
                    break  # the file that crashed the pool: the others go back to a pool


_CRASHED = "internal error: the converter's process crashed"


def _pool(jobs: int) -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from precision_transpiler.workers import watch_parent

    return ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("fork"),
        initializer=watch_parent,  # a killed parent leaves no worker behind
        initargs=(os.getpid(),),
    )


def _alone(job: _Job, item: tuple[Path, bool]) -> TranspileResult:
    """`job(item)` in a process of its own: a native crash is that file's error."""
    from concurrent.futures.process import BrokenProcessPool

    with _pool(1) as pool:
        try:
            return pool.submit(job, item).result()
        except BrokenProcessPool:
            return job.failed(item[0], f"{_CRASHED} on this file (a native crash, most likely in the parser)")


def _with_progress(job: _Job, items: list[tuple[Path, bool]], jobs: int, progress: Any) -> list[TranspileResult]:
    """transpile_paths' loop, telling `progress` about each file done and, when files are
    converted in this process, about each stage of the one under way."""
    results: list[TranspileResult] = []
    progress.begin(len(items))
    try:
        if jobs > 1 and len(items) > 1 and not job.in_this_process:
            for (path, _), result in zip(items, _in_workers(job, items, jobs), strict=True):
                results.append(result)
                progress.done(os.fspath(path))
            return results
        with stage_hook(progress.stage):
            for item in items:
                progress.start(os.fspath(item[0]))
                results.append(job(item))
                progress.done(os.fspath(item[0]))
            return results
    finally:
        progress.close()
