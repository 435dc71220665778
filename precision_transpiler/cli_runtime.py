"""`--runtime module|inline` on the command line: where converted files' runtime definitions go.

`module` (the default when files are written to `-o OUT`, and for `--in-place`, `--check` and
`--diff` on several files or a folder): each converted file imports the definitions it uses from
one module beside it (convert/runtime_module.py), written once per folder after the files.
`inline` (the default for stdout and for a single file converted in place, checked or diffed):
every file carries its own copy and runs on its own, as a single converted file should.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from precision_transpiler.api import TranspileResult

MODES = ("module", "inline")


def add_runtime_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime",
        choices=MODES,
        help="where the runtime definitions of files converted to jax or tf go: module (default when writing "
        "with -o, or several files in place) writes them once into _ptranspile_runtime_jax.py / "
        "_ptranspile_runtime_tf.py beside the outputs, which import from it; inline (default for stdout and a "
        "single file in place) copies them into every file",
    )


def runtime_mode(args: argparse.Namespace) -> str:
    """The mode asked for, else the default for where the outputs go."""
    if getattr(args, "runtime", None):
        return str(args.runtime)
    if args.output:
        return "module"
    paths = [p for p in args.paths if p != "-"]
    if not (args.in_place or args.check or args.diff):
        return "inline"
    several = len(paths) > 1 or any(Path(p).is_dir() for p in paths)
    # a file written with the runtime beside it stays so when it is converted in place again
    return "module" if several or any(_imports_runtime_module(Path(p)) for p in paths) else "inline"


def _imports_runtime_module(path: Path) -> bool:
    """The file imports a runtime module written beside it (`--runtime module`)."""
    from precision_transpiler.convert.runtime_module import imports_runtime_module

    try:
        return imports_runtime_module(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False


@dataclass
class RuntimeNeeds:
    """The runtime module each output folder needs: names by (folder, target)."""

    names: dict[tuple[Path, str], set[str]] = field(default_factory=dict)

    def add(self, folder: Path, target: str, names: Sequence[str]) -> None:
        self.names.setdefault((folder, target), set()).update(names)


def split_results(
    results: list[TranspileResult], targets: list[Path | None], mode: str
) -> tuple[list[TranspileResult], RuntimeNeeds]:
    """`results` as they are written (`module` mode, for results written to a file), and what
    each output folder's runtime module must hold. Converted with `runtime="module"`, a result
    already imports its runtime (its `runtime_names`; made relative in a package); one whose
    runtime was copied in all the same (a converted file converted again) has it taken out."""
    from precision_transpiler.convert.runtime_module import RUNTIME_MODULES, is_package, split_runtime

    needs = RuntimeNeeds()
    if mode != "module":
        return results, needs
    written = {t for t in targets if t is not None}
    split: list[TranspileResult] = []
    for result, target in zip(results, targets, strict=True):
        to = result.target_framework
        if target is None or result.errors or to not in RUNTIME_MODULES:
            split.append(result)
            continue
        relative = is_package(target.parent, written)
        code, names = result.code, result.runtime_names
        if names and relative:
            module = RUNTIME_MODULES[to]
            code = code.replace(f"\nfrom {module} import ", f"\nfrom .{module} import ", 1)
        elif not names:
            done = split_runtime(result.code, to, relative=relative)
            if done is None:
                split.append(result)
                continue
            code, names = done.code, done.names
        needs.add(target.parent, to, names)
        split.append(dataclasses.replace(result, code=code, runtime_names=names))
    return split, needs


def provided_modules(needs: RuntimeNeeds) -> dict[str, str]:
    """The runtime modules as they will be written, by module name (verification imports the
    converted file before anything is written)."""
    from precision_transpiler.convert.runtime_module import RUNTIME_MODULES, plan_module

    return {
        RUNTIME_MODULES[target]: plan_module(folder, target, names).text
        for (folder, target), names in needs.names.items()
    }


def write_runtime_modules(
    needs: RuntimeNeeds, write: Callable[[str, str, Path], bool], err: Callable[[str], None]
) -> list[str]:
    """Write each folder's runtime module (merged, under the folder's lock, with what is there);
    returns the modules not written."""
    from precision_transpiler.convert.runtime_module import locked, plan_module

    unwritten = []
    for (folder, target), names in sorted(needs.names.items()):
        with locked(folder):
            planned = plan_module(folder, target, names)
            if planned.gone:
                err(
                    f"{planned.path}: earlier outputs here import {', '.join(planned.gone)}, which this version's "
                    "runtime no longer defines: convert those files again"
                )
            if planned.stale:
                print(
                    f"ptranspile: note: {planned.path} was written by another ptranspile version or edited: "
                    "written again from this version's runtime",
                    file=sys.stderr,
                )
            if planned.changes and not write(planned.text, "utf-8", planned.path):
                unwritten.append(str(planned.path))
    return unwritten


def report_runtime_changes(needs: RuntimeNeeds, *, diff: bool, quiet: bool) -> int:
    """For --check/--diff: the runtime modules that writing would change (a diff, or a line
    each); returns how many."""
    from precision_transpiler.convert.runtime_module import plan_module

    changed = 0
    for (folder, target), names in sorted(needs.names.items()):
        planned = plan_module(folder, target, names)
        if not planned.changes:
            continue
        changed += 1
        if diff:
            before = planned.path.read_text(encoding="utf-8") if planned.path.is_file() else ""
            sys.stdout.writelines(
                difflib.unified_diff(
                    before.splitlines(keepends=True),
                    planned.text.splitlines(keepends=True),
                    fromfile=f"a/{planned.path}",
                    tofile=f"b/{planned.path}",
                )
            )
        elif not quiet:
            print(f"would change: {planned.path}", file=sys.stderr)
    return changed


def split_for(
    args: argparse.Namespace,
    results: list[TranspileResult],
    from_stdin: bool,
    plan: Callable[[], list[tuple[TranspileResult, Path | None]]],
) -> tuple[list[TranspileResult], RuntimeNeeds]:
    """split_results for the command's outputs: `plan()` gives where `-o` or `--in-place` writes
    each result; --check and --diff compare with the inputs themselves."""
    if from_stdin:
        targets: list[Path | None] = [None] * len(results)
    elif args.output or args.in_place:
        planned = {id(r): t for r, t in plan()}
        targets = [planned.get(id(r)) for r in results]
    elif args.check or args.diff:
        targets = [Path(r.path) for r in results]
    else:
        targets = [None] * len(results)
    return split_results(results, targets, runtime_mode(args))


def as_written(
    args: argparse.Namespace, result: TranspileResult, target: Path | None, options: Any, split: Callable[..., Any]
) -> tuple[TranspileResult, RuntimeNeeds | None]:
    """(result, runtime needs) as `-o` writes it: verification runs that code, its runtime module
    given (`options.modules`) as it will be written."""
    if target is None or result.errors:
        return result, None
    (result,), needs = split(args, [result], False, 1)
    options.modules = provided_modules(needs)
    return result, needs
