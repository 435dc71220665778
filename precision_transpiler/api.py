"""The library API: `transpile`, `transpile_file`, `transpile_paths`.

The CLI and the pre-commit hooks are thin layers over these functions. They never raise for
problems in the user's code (syntax errors, unreadable files): those come back as error
diagnostics in the result, so that a pipeline converting a tree gets one result per file.
They raise `PtranspileError` subclasses for bad arguments (unknown framework or policy,
malformed mapping tables).
"""

from __future__ import annotations

import ast
import contextlib
import gc
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import libcst as cst

from precision_transpiler.diagnostics import Diagnostic, Rewrite
from precision_transpiler.errors import UsageError
from precision_transpiler.files import ReadError, iter_python_files, read_source_encoded
from precision_transpiler.mappings import MappingSet, load_mappings
from precision_transpiler.mappings.model import FRAMEWORKS
from precision_transpiler.policy import resolve_policy
from precision_transpiler.rewrite.import_editor import _after_leading_imports

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
    precision: tuple[Any, ...] = ()  # PrecisionDecision for every layer/op the policy touched
    policy_info: dict[str, Any] | None = None
    # how the file is written back: "utf-8", "utf-8-sig" (a BOM) or a PEP 263 coding comment's
    encoding: str = "utf-8"

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


def _check_entry(entry: str | None, prune_to_entry: bool) -> None:
    """Pruning is asked for explicitly: `entry` alone changes nothing in a conversion (it is what
    verification builds), so it is refused rather than ignored."""
    if prune_to_entry and not entry:
        raise UsageError("prune_to_entry=True needs entry= (the name or expression whose reach is kept)")
    if entry and not prune_to_entry:
        raise UsageError(
            f"entry={entry!r} alone changes nothing in a conversion: pass prune_to_entry=True to convert only "
            "the top-level definitions it reaches"
        )


def _newline(source: str) -> str:
    """The line ending most lines of `source` use ("\\n" when there are none or on a tie)."""
    crlf = source.count("\r\n")
    counts = {"\n": source.count("\n") - crlf, "\r\n": crlf, "\r": source.count("\r") - crlf}
    return max(counts, key=lambda k: (counts[k], k == "\n"))


def _with_newline(code: str, newline: str) -> str:
    """`code` with every line ending `newline` (a raw line break in Python source always ends a
    line: the tokenizer reads a CR LF or CR inside a string literal as LF)."""
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    return code if newline == "\n" else code.replace("\n", newline)


def _check_framework(value: str | Sequence[str] | None, option: str, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    for name in _source_list(value) or ("",) if option == "from" else (value,):
        if name not in FRAMEWORKS:
            raise UsageError(f"unknown framework {name!r} for {option} (choose from {', '.join(FRAMEWORKS)})")


def _source_list(from_: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """The source frameworks `from_` names: "torch", "torch,numpy" or ("torch", "jax"); None for
    any. One name is the file's source; with several, the source is detected among them and a
    file written for none of them is left unchanged (with a `source-not-selected` note)."""
    if from_ is None:
        return None
    names = from_.split(",") if isinstance(from_, str) else list(from_)
    return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))


def _single_source(from_: str | Sequence[str] | None) -> str | None:
    sources = _source_list(from_)
    return sources[0] if sources and len(sources) == 1 else None


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
    _standalone: bool = True,
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
    from precision_transpiler.rewrite.depth import TooDeep, check_depth, with_deep_stack

    def refused(line: int, message: str) -> TranspileResult:
        diag = Diagnostic(path, line, 1, "error", "too-deep", message)
        return TranspileResult(path, source, source, _single_source(from_), to, policy, diagnostics=(diag,))

    def work() -> TranspileResult:
        return _transpile(
            source, to=to, from_=from_, policy=policy, mappings=mappings, path=path, device=device,
            nan_fallback=nan_fallback, entry=entry, prune_to_entry=prune_to_entry, _standalone=_standalone,
        )  # fmt: skip

    try:
        check_depth(source)  # before LibCST's native parser, which crashes the process on deep nesting
        with _fewer_collections(len(source)):
            return with_deep_stack(work)
    except TooDeep as exc:
        return refused(exc.line, exc.message)
    except RecursionError:
        return refused(1, "an expression nests too deeply to convert; split it into several statements")


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


def _transpile(
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
    _standalone: bool = True,
) -> TranspileResult:
    # Imported here so that `import precision_transpiler` stays cheap for --help.
    from precision_transpiler.rewrite.engine import EngineOptions, run_engine

    _check_framework(to, "to", allow_none=False)
    _check_framework(from_, "from", allow_none=True)
    _check_entry(entry, prune_to_entry)
    policy_obj = resolve_policy(policy, device=device)
    table = mappings if isinstance(mappings, MappingSet) else load_mappings(mappings)

    def result(code: str, **kw: Any) -> TranspileResult:
        # unchanged: byte for byte; changed: one line ending throughout (the input's), its BOM back
        unchanged = code in (source_as_given, original_source)
        code = source_as_given if unchanged else bom + _with_newline(code, newline)
        return TranspileResult(
            path=path, code=code, original=source_as_given, target_framework=to, policy=policy_obj.name, **kw
        )

    # The conversion sees "\n" line endings and no BOM; the result gets the input's back.
    source_as_given = source
    bom = "\ufeff" if source.startswith("\ufeff") else ""
    newline = _newline(source)
    source = _with_newline(source[len(bom) :], "\n")
    original_source = source

    _stage("parsing")
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return result(source, source_framework=_single_source(from_), diagnostics=(_syntax_error(source, path, exc),))
    pruned = None
    if entry and prune_to_entry:
        from precision_transpiler.convert.entry import prune_source

        pruned = prune_source(source, entry, path)
        source = pruned.source
        module = cst.parse_module(source)
    sources = _source_list(from_)
    options = EngineOptions(
        target=to,
        source=_single_source(sources),
        path=path,
        mappings=table,
        allowed=sources if sources and len(sources) > 1 else None,
    )
    _stage("converting")
    new_module, outcome = run_engine(module, source, options)
    if outcome.unchanged:  # skipped by a comment, or not written for one of the sources asked for
        return result(
            original_source, source_framework=None, diagnostics=tuple(outcome.diagnostics), skipped=outcome.skipped
        )
    if pruned is not None:
        from precision_transpiler.convert.entry import finish_pruned, prune_imports

        new_module = cst.parse_module(finish_pruned(prune_imports(new_module.code, pruned.import_names)))
        outcome.diagnostics.append(
            Diagnostic(
                path,
                1,
                1,
                "note",
                "entry-pruned",
                f"--entry {entry}: converted {len(pruned.kept)} top-level definitions it reaches; "
                f"left out {len(pruned.dropped)}"
                + (
                    f" ({', '.join(pruned.dropped[:8])}{', ...' if len(pruned.dropped) > 8 else ''})"
                    if pruned.dropped
                    else ""
                ),
            )
        )
    precision: list[Any] = []
    policed = new_module.code  # what a policy within one framework sees
    if to == "torch" and outcome.source in ("torch", None):
        new_module, precision = _apply_torch_policy(new_module, policy_obj, table, nan_fallback)
    elif to == "tf" and outcome.source in ("tf", None):
        new_module, precision = _apply_keras_policy_converted(new_module, policy_obj, table, nan_fallback)
    elif to == "jax" and outcome.source in ("jax", None):
        new_module, precision = _apply_flax_policy_converted(new_module, policy_obj, table, nan_fallback)
    elif to in ("jax", "tf") and outcome.source == "torch":
        pass  # model conversion: the Flax or Keras policy is applied to the converted code below
    elif not policy_obj.is_full_precision:
        outcome.diagnostics.append(
            Diagnostic(
                path,
                1,
                1,
                "unsupported",
                "policy-not-applied",
                f"precision policy {policy_obj.name!r} is not applied when converting "
                f"{outcome.source or 'this code'} to {to} yet (policies apply within one framework)",
            )
        )
    if precision and pruned is not None:  # a policy within one framework saw the pruned code
        precision = _follow_lines(precision, policed, original_source)
    code = new_module.code
    if to in ("jax", "tf") and outcome.source == "torch":  # model conversion (Flax NNX or Keras)
        from precision_transpiler.convert.cleanup import drop_orphaned_imports
        from precision_transpiler.convert.vendor import vendor_shims

        _stage("cleaning up imports")
        code = drop_orphaned_imports(source, code)
        if _standalone:  # the file itself, not a sibling being converted for it
            _stage("copying in sibling modules")
            code = _inline_siblings(path, code, table, outcome.diagnostics, to)
            unpoliced = code
            if not policy_obj.is_full_precision:
                _stage("applying the precision policy")
            if to == "jax" and not policy_obj.is_full_precision:
                converted, precision = _apply_flax_policy(cst.parse_module(code), policy_obj, table, nan_fallback)
                code = converted.code
            elif to == "tf" and not policy_obj.is_full_precision:
                converted, precision = _apply_keras_torch_policy(
                    cst.parse_module(code), policy_obj, table, nan_fallback
                )
                code = converted.code
            _stage("copying in shims")
            code, missing = vendor_shims(code)
            if precision:  # decisions name lines of the converted code before the policy and the copy-in
                precision = _follow_lines(precision, unpoliced, code)
            for symbol in missing:
                outcome.diagnostics.append(
                    Diagnostic(
                        path, 1, 1, "error", "missing-shim", f"{symbol} is named by a mapping table but not defined"
                    )
                )
    diagnostics = sorted(outcome.diagnostics, key=lambda d: (d.line, d.col, d.code, d.message))
    return result(
        code,
        source_framework=outcome.source,
        diagnostics=tuple(_dedupe(diagnostics)),
        rewrites=tuple(sorted(outcome.rewrites)),
        imports_added=tuple(outcome.imports_added),
        precision=tuple(precision),
        policy_info=policy_obj.to_json(),
    )


def _follow_lines(decisions: list[Any], before: str, after: str) -> list[Any]:
    """Decisions with their lines moved from `before` to `after`, a version of the same code with
    blocks inserted (policy helpers, decorators, shims copied in), import lines taken out and some
    lines edited (`dtype=` added): lines are matched, and an edited line keeps its distance to
    the last matched line above it."""
    import bisect
    import difflib
    import re
    from dataclasses import replace

    moved: dict[int, int] = {}
    old_lines = before.splitlines()
    shim = re.compile(r"precision_transpiler\.shims\.\w+\.")  # copied in: the bare name remains
    matcher = difflib.SequenceMatcher(None, [shim.sub("", t) for t in old_lines], after.splitlines(), autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            if old_lines[block.a + k].strip():  # a blank line matches anywhere: not evidence
                moved[block.a + k + 1] = block.b + k + 1
    known = sorted(moved)

    def follow(line: int) -> int:
        while 0 < line < len(old_lines) and not old_lines[line - 1].strip():
            line += 1  # a definition's position can be its leading blank lines
        if line in moved:
            return moved[line]
        i = bisect.bisect_left(known, line) - 1
        return line if i < 0 else moved[known[i]] + (line - known[i])

    return [replace(d, line=follow(d.line)) for d in decisions]


def _inline_siblings(path: str, code: str, table: MappingSet, diagnostics: list[Diagnostic], target: str) -> str:
    """Copy converted definitions from sibling modules the file imports (convert/siblings.py),
    converted to `target` ("jax" or "tf")."""
    from precision_transpiler.convert.siblings import inline_siblings

    def convert(sibling_source: str, sibling_path: str) -> tuple[str, list[tuple[int, int, str, str, str]]]:
        sibling = transpile(
            sibling_source, to=target, from_="torch", mappings=table, path=sibling_path, _standalone=False
        )
        return sibling.code, [(d.line, d.col, d.severity, d.code, d.message) for d in sibling.diagnostics]

    from precision_transpiler.convert.library_imports import redirect_library_imports

    redirected: list[str] = []

    def redirect(text: str) -> str:
        text, names = redirect_library_imports(path, text, table.layer_symbols, target)
        redirected.extend(names)
        return text

    code = redirect(code)
    # names with a counterpart in this target are imported from it (redirect), not converted
    known = frozenset(symbol for symbol, targets in table.layer_symbols.items() if target in targets)
    code, report = inline_siblings(path, code, convert, redirect=redirect, known=known)
    if redirected:
        diagnostics.append(
            Diagnostic(
                path,
                1,
                1,
                "note",
                "library-counterparts",
                f"imported from their {'Flax' if target == 'jax' else 'Keras'} counterparts "
                "(mappings/layers/transformers.yaml): " + ", ".join(dict.fromkeys(redirected)),
            )
        )
    for sibling_path, line, col, severity, code_, message in report.diagnostics:
        diagnostics.append(Diagnostic(sibling_path, line, col, severity, code_, message))  # type: ignore[arg-type]
    if report.skipped:
        diagnostics.append(
            Diagnostic(
                path,
                1,
                1,
                "warning",
                "siblings-not-converted",
                "left imported, not converted (too large to copy in; their modules import torch): "
                + ", ".join(dict.fromkeys(report.skipped)),
            )
        )
    if report.inlined:
        diagnostics.append(
            Diagnostic(path, 1, 1, "note", "siblings-inlined", "converted and copied in: " + ", ".join(report.inlined))
        )
    return code


def _apply_keras_policy(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to Keras layers (the helper block
    depends on what the pass found: subclassed layers, models to check for NaN)."""
    from precision_transpiler.precision import keras_policy as kp

    return _apply_layer_policy(
        module,
        policy,
        lambda module, source: kp.KerasPolicyPass(policy, table, module, source, nan_fallback),
        lambda done: kp.helper_block(policy, table, nan_fallback, done.needs_runtime),
        [("keras", "keras")],
    )


def _apply_keras_torch_policy(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to torch code converted to Keras
    (precision/keras_torch_policy.py: torch's model.to + autocast semantics)."""
    from precision_transpiler.precision import keras_torch_policy as ktp

    return _apply_layer_policy(
        module,
        policy,
        lambda module, source: ktp.KerasTorchPolicyPass(policy, table, module, source),
        lambda done: ktp.helper_block(policy, table, nan_fallback, done.layer_dtypes()),
        [("keras", "keras")],
    )


def _apply_keras_policy_converted(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """_apply_keras_policy, or for a model converted from torch (it has copied-in torch-semantics
    shims) the pass converting from torch applies, with the shims taken out for it and copied in
    again after it: applying a policy again to such an output changes nothing."""
    from precision_transpiler.convert.vendor import unvendor, vendor_shims

    unvendored = unvendor(module.code, "tf")
    if unvendored is None:
        return _apply_keras_policy(module, policy, table, nan_fallback)
    policed, precision = _apply_keras_torch_policy(cst.parse_module(unvendored), policy, table, nan_fallback)
    code, _ = vendor_shims(policed.code)
    if precision:  # decisions name lines of the code the pass was given: the given code's lines
        precision = _follow_lines(precision, unvendored, module.code)
    return cst.parse_module(code), precision


def _apply_flax_policy(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to Flax NNX layers."""
    from precision_transpiler.precision import flax_policy as fp

    return _apply_layer_policy(
        module,
        policy,
        lambda module, source: fp.FlaxPolicyPass(policy, table, module, source),
        lambda done: fp.helper_block(policy, nan_fallback, done.layer_dtypes()),
        [("jax", "jax"), ("jax.numpy", "jnp")],
    )


def _apply_flax_policy_converted(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """_apply_flax_policy, for a model converted from torch too: its copied-in shims are taken
    out for the pass (so that it sees them as the torch-semantics layers they are) and copied in
    again after it, as converting from torch does: applying a policy again changes nothing."""
    from precision_transpiler.convert.vendor import unvendor, vendor_shims

    # fp32 on a file a policy was applied to: stripping must not take an import the copied-in
    # shims need (the policy's marked `jnp` import can be their only one)
    inserted = "_ptranspile_" in module.code or "_PTRANSPILE_" in module.code
    unvendored = unvendor(module.code, "jax") if inserted or not policy.is_full_precision else None
    if unvendored is None:
        return _apply_flax_policy(module, policy, table, nan_fallback)
    policed, precision = _apply_flax_policy(cst.parse_module(unvendored), policy, table, nan_fallback)
    code, _ = vendor_shims(policed.code)
    if precision:  # decisions name lines of the code the pass was given: the given code's lines
        precision = _follow_lines(precision, unvendored, module.code)
    return cst.parse_module(code), precision


def _apply_layer_policy(
    module: cst.Module, policy: Any, make_pass: Any, helpers: Any, imports: list[tuple[str, str]]
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, run the pass `make_pass(module, source)` makes, and
    put `helpers(the pass, after its run)` after the leading imports when it decided anything."""
    from precision_transpiler.precision.strip import strip_inserted

    given = module.code
    if "_ptranspile_" in given or "_PTRANSPILE_" in given:
        module, _ = strip_inserted(module)
    if policy.is_full_precision:
        return module, []
    policy_pass = make_pass(module, module.code)
    seen = module.code
    module = module.visit(policy_pass)
    if not policy_pass.decisions:
        return module, []
    body = list(module.body)
    index = _after_leading_imports(body)
    body[index:index] = helpers(policy_pass)
    decisions = policy_pass.decisions
    if seen != given:  # an earlier run's insertions were stripped: name the given code's lines
        decisions = _follow_lines(decisions, seen, given)
    return _with_helper_imports(module.with_changes(body=body), imports), decisions


def _with_helper_imports(module: cst.Module, wanted: list[tuple[str, str]]) -> cst.Module:
    """Add the imports the generated helpers use (marked, so stripping removes exactly them)."""
    from precision_transpiler.precision.strip import marked_import
    from precision_transpiler.rewrite.imports import _module_imports

    available = _module_imports(module)
    missing = [marked_import(m, a) for m, a in wanted if available.get(m) != a]
    if not missing:
        return module
    body = list(module.body)
    index = _after_leading_imports(body)
    body[index:index] = missing
    return module.with_changes(body=body)


def _apply_torch_policy(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` (nothing more for fp32)."""
    from precision_transpiler.precision.torch_policy import TorchPolicyPass, helper_block

    return _apply_layer_policy(
        module,
        policy,
        lambda module, source: TorchPolicyPass(policy, table, module, source, nan_fallback),
        lambda done: helper_block(policy, table, nan_fallback),
        [("torch", "torch")],
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
    from_: str | Sequence[str] | None = None,
    policy: str = "fp32",
    mappings: Sequence[str | os.PathLike[str]] | MappingSet = (),
    device: str = "auto",
    skip_empty: bool = False,
    nan_fallback: bool = False,
    entry: str | None = None,
    prune_to_entry: bool = False,
    max_file_mb: float | None = None,
) -> TranspileResult:
    """Transpile one file (read only: writing is the caller's choice).

    A file larger than `max_file_mb` megabytes (10**6 bytes; None: no limit) is not read: the
    result is a `file-too-large` error, `skipped` saying why. Conversion takes time and memory
    in proportion to a file's size (seconds and about 100 MB per 100 KB), so a user is told at
    once rather than left waiting minutes for a generated file nobody meant to convert."""
    _check_framework(to, "to", allow_none=False)
    _check_framework(from_, "from", allow_none=True)
    _check_entry(entry, prune_to_entry)
    resolve_policy(policy, device=device)
    display = os.fspath(path)
    if max_file_mb is not None:
        too_large = _over_limit(Path(path), max_file_mb)
        if too_large is not None:
            diag = Diagnostic(display, 0, 0, "error", "file-too-large", too_large)
            return TranspileResult(
                display, "", "", _single_source(from_), to, policy, diagnostics=(diag,), skipped=too_large
            )
    _stage("reading")
    try:
        text, encoding = read_source_encoded(Path(path))
    except ReadError as exc:
        diag = Diagnostic(display, exc.line, 1, "error", exc.code, exc.message)
        return TranspileResult(
            display, "", "", _single_source(from_), to, policy, diagnostics=(diag,), skipped=exc.message
        )
    if not text.strip() and skip_empty:
        return TranspileResult(
            display, text, text, _single_source(from_), to, policy, skipped="empty file", encoding=encoding
        )
    if not text.strip():
        diag = Diagnostic(display, 1, 1, "error", "empty-file", "file is empty: nothing to transpile")
        return TranspileResult(
            display,
            text,
            text,
            _single_source(from_),
            to,
            policy,
            diagnostics=(diag,),
            skipped="empty file",
            encoding=encoding,
        )
    converted = transpile(
        text,
        to=to,
        from_=from_,
        policy=policy,
        mappings=mappings,
        path=display,
        device=device,
        nan_fallback=nan_fallback,
        entry=entry,
        prune_to_entry=prune_to_entry,
    )
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


#: Called with the name of each stage a conversion enters ("parsing", "converting", ...); set by
#: `transpile_paths(progress=...)` for the command line's progress display. A plain global, not a
#: context variable: with_deep_stack may run the conversion in another thread.
_stage_hook: Callable[[str], None] | None = None


def _stage(name: str) -> None:
    if _stage_hook is not None:
        _stage_hook(name)


@dataclass
class _Job:
    to: str
    from_: str | Sequence[str] | None
    policy: str
    mapping_dirs: tuple[str, ...]
    device: str
    skip_empty: bool = False
    nan_fallback: bool = False
    loaded: MappingSet | None = None
    entry: str | None = None
    prune_to_entry: bool = False
    max_file_mb: float | None = None

    def __call__(self, item: tuple[Path, bool]) -> TranspileResult:
        path, from_walk = item
        return transpile_file(
            path,
            to=self.to,
            from_=self.from_,
            policy=self.policy,
            mappings=self.loaded if self.loaded is not None else self.mapping_dirs,
            device=self.device,
            skip_empty=self.skip_empty or from_walk,
            nan_fallback=self.nan_fallback,
            entry=self.entry,
            prune_to_entry=self.prune_to_entry,
            max_file_mb=self.max_file_mb,
        )


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
    _check_framework(to, "to", allow_none=False)
    _check_framework(from_, "from", allow_none=True)
    _check_entry(entry, prune_to_entry)
    resolve_policy(policy, device=device)
    loaded = mappings if isinstance(mappings, MappingSet) else load_mappings(mappings)  # fail early, once
    items = list(iter_python_files(paths, exclude=exclude))
    dirs = () if isinstance(mappings, MappingSet) else tuple(os.fspath(m) for m in mappings)
    # Directories are reloaded (from the fork-inherited cache) in workers; a MappingSet the
    # caller built is used as is, in this process.
    job = _Job(
        to,
        from_,
        policy,
        dirs,
        device,
        skip_empty,
        nan_fallback,
        mappings if isinstance(mappings, MappingSet) else None,
        entry,
        prune_to_entry,
        max_file_mb,
    )
    del loaded
    if progress is not None:
        return _with_progress(job, items, jobs, progress)
    if jobs > 1 and len(items) > 1 and job.loaded is None:
        return list(_in_workers(job, items, jobs))
    return [job(item) for item in items]


def _in_workers(job: _Job, items: list[tuple[Path, bool]], jobs: int) -> Iterator[TranspileResult]:
    """`job`'s results over `items` from `jobs` worker processes, in the items' order."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from precision_transpiler.workers import watch_parent

    with ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=multiprocessing.get_context("fork"),
        initializer=watch_parent,  # a killed parent leaves no worker behind
        initargs=(os.getpid(),),
    ) as pool:
        yield from pool.map(job, items, chunksize=max(1, len(items) // (jobs * 4)))


def _with_progress(job: _Job, items: list[tuple[Path, bool]], jobs: int, progress: Any) -> list[TranspileResult]:
    """transpile_paths' loop, telling `progress` about each file done and, when files are
    converted in this process, about each stage of the one under way."""
    global _stage_hook
    results: list[TranspileResult] = []
    progress.begin(len(items))
    try:
        if jobs > 1 and len(items) > 1 and job.loaded is None:
            for (path, _), result in zip(items, _in_workers(job, items, jobs), strict=True):
                results.append(result)
                progress.done(os.fspath(path))
            return results
        before, _stage_hook = _stage_hook, progress.stage
        try:
            for item in items:
                progress.start(os.fspath(item[0]))
                results.append(job(item))
                progress.done(os.fspath(item[0]))
            return results
        finally:
            _stage_hook = before
    finally:
        progress.close()


def detect_framework(source: str, mappings: Sequence[str | os.PathLike[str]] | MappingSet = ()) -> str | None:
    """The framework a module is written for ("torch", "jax", "tf", "numpy"), from its imports;
    None when it uses none (or does not parse). Static, like everything in transpiling."""
    from precision_transpiler.rewrite.depth import TooDeep, check_depth
    from precision_transpiler.rewrite.engine import detect_source
    from precision_transpiler.rewrite.names import NameResolver

    try:
        check_depth(source)  # LibCST's parser would crash the process
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, TooDeep):
        return None
    table = mappings if isinstance(mappings, MappingSet) else load_mappings(mappings)
    return detect_source(NameResolver(module, source), table)
