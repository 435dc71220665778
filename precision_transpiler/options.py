"""What a conversion is asked to do, as one frozen object validated once.

The library calls (`transpile`, `transpile_file`, `transpile_paths`), the command line and the
pre-commit hooks (which run the command line) all build an `Options` and hand it down; nothing
below re-checks or re-spells the options. Building one raises `UsageError` (or `PolicyError`, a
`PtranspileError` too) for bad values, before any file is read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from precision_transpiler.errors import UsageError
from precision_transpiler.mappings import MappingSet, load_mappings
from precision_transpiler.mappings.model import FRAMEWORKS

RUNTIMES = ("inline", "module")

if TYPE_CHECKING:
    from precision_transpiler.pipeline import Job
    from precision_transpiler.precision.policy import Policy


@dataclass(frozen=True)
class Options:
    """A conversion's options (see `transpile` for each one's meaning). Build with `build`."""

    to: str
    sources: tuple[str, ...] | None = None  # the source frameworks asked for; None: detect among all
    policy: str = "fp32"
    mappings: tuple[str, ...] | MappingSet = ()  # extra table directories, or a loaded MappingSet
    device: str = "auto"
    nan_fallback: bool = False
    entry: str | None = None
    prune_to_entry: bool = False
    skip_empty: bool = False
    max_file_mb: float | None = None
    runtime: str = "inline"  # or "module": runtime definitions imported from a module beside the output

    @classmethod
    def build(
        cls,
        *,
        to: str,
        from_: str | Sequence[str] | None = None,
        policy: str = "fp32",
        mappings: Sequence[str | os.PathLike[str]] | MappingSet = (),
        device: str = "auto",
        nan_fallback: bool = False,
        entry: str | None = None,
        prune_to_entry: bool = False,
        skip_empty: bool = False,
        max_file_mb: float | None = None,
        runtime: str = "inline",
    ) -> Options:
        """Options from the library's keyword arguments, validated: UsageError for an unknown
        framework or device, an entry without pruning (or the other way round), a size limit
        that is not positive; PolicyError for a policy that does not resolve."""
        if to not in FRAMEWORKS:
            raise UsageError(f"unknown framework {to!r} for to (choose from {', '.join(FRAMEWORKS)})")
        sources = source_list(from_)
        for name in sources or (("",) if from_ is not None else ()):
            if name not in FRAMEWORKS:
                raise UsageError(f"unknown framework {name!r} for from (choose from {', '.join(FRAMEWORKS)})")
        if prune_to_entry and not entry:
            raise UsageError("prune_to_entry=True needs entry= (the name or expression whose reach is kept)")
        if entry and not prune_to_entry:
            raise UsageError(
                f"entry={entry!r} alone changes nothing in a conversion: pass prune_to_entry=True to convert only "
                "the top-level definitions it reaches"
            )
        if runtime not in RUNTIMES:
            raise UsageError(f"unknown runtime {runtime!r} (choose from {', '.join(RUNTIMES)})")
        if max_file_mb is not None and max_file_mb <= 0:
            raise UsageError("max_file_mb must be positive")
        tables = mappings if isinstance(mappings, MappingSet) else tuple(os.fspath(m) for m in mappings)
        options = cls(
            to, sources, policy, tables, device, nan_fallback, entry, prune_to_entry, skip_empty, max_file_mb, runtime
        )
        options.resolved_policy  # noqa: B018 -- resolved (and so checked) once, here
        options.table  # noqa: B018 -- tables loaded (and checked) once, here
        return options

    @cached_property
    def resolved_policy(self) -> Policy:
        from precision_transpiler.precision.policy import resolve_policy

        return resolve_policy(self.policy, device=self.device)

    @cached_property
    def table(self) -> MappingSet:
        return self.mappings if isinstance(self.mappings, MappingSet) else load_mappings(self.mappings)

    @property
    def single_source(self) -> str | None:
        return self.sources[0] if self.sources and len(self.sources) == 1 else None

    def job(self, path: str) -> Job:
        """The pipeline's job for converting the file (or text) named `path`."""
        from precision_transpiler.pipeline import Job

        return Job(
            to=self.to,
            sources=self.sources,
            policy=self.resolved_policy,
            table=self.table,
            path=path,
            nan_fallback=self.nan_fallback,
            entry=self.entry,
            prune_to_entry=self.prune_to_entry,
            runtime=self.runtime,
        )

    def __getstate__(self) -> dict[str, object]:
        """Pickled (for worker processes) without what they load again themselves."""
        state = dict(self.__dict__)
        state.pop("table", None)
        return state


def source_list(from_: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """The source frameworks `from_` names: "torch", "torch,numpy" or ("torch", "jax"); None for
    any. One name is the file's source; with several, the source is detected among them and a
    file written for none of them is left unchanged (with a `source-not-selected` note)."""
    if from_ is None:
        return None
    names = from_.split(",") if isinstance(from_, str) else list(from_)
    return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))
