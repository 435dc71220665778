"""The conversion pipeline: one `Document` through an explicit, ordered list of stages.

Every conversion runs the same PREPARE stages first, then the stages its plan names once the
source framework is known (it is detected while rewriting), then one finishing stage:

    PREPARE (Parse ... RewriteSymbols) -> PLANS[(source, target)] -> Finish

`PLANS` below is the one place that says what runs for a pair of frameworks (docs/architecture.md
shows it, and its test keeps that copy true).
A file whose source is not detected gets the target's own plan (a policy within one framework).
A sibling module that a converted model imports is converted by the same pipeline
(`InlineSiblings` runs it with `Job.standalone` false: rewrite and drop orphaned imports only).

A `Document` (document.py) holds the current code as a tree or as text, whichever the last
stage produced, and converts between them only when a stage asks for the other: stages that
work on trees hand trees on, and a parse happens only at a boundary where a stage really needed
text.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import libcst as cst

from precision_transpiler.diagnostics import Diagnostic
from precision_transpiler.document import Document
from precision_transpiler.mappings import MappingSet
from precision_transpiler.runtime import imports_torch_semantics
from precision_transpiler.syntax import python_ast

if TYPE_CHECKING:
    from precision_transpiler.convert.siblings import Diagnostics
    from precision_transpiler.precision.policy import Policy

__all__ = ["PLANS", "Document", "Job", "Stage", "announce", "plan_for", "run_pipeline", "stage_hook"]


@dataclass(frozen=True)
class Job:
    """What one conversion was asked to do (the same for every stage)."""

    to: str
    sources: tuple[str, ...] | None  # the source frameworks asked for; None: detect among all
    policy: Policy
    table: MappingSet
    path: str = "<string>"
    nan_fallback: bool = False
    entry: str | None = None
    prune_to_entry: bool = False
    standalone: bool = True  # False for a sibling module converted for the file that imports it
    log_rewrites: bool = True  # False where nobody reads the rewrite log (a sibling's conversion)
    runtime: str = "inline"  # "module": runtime definitions imported from the module beside the output

    @property
    def single_source(self) -> str | None:
        return self.sources[0] if self.sources and len(self.sources) == 1 else None


class Stage(Protocol):
    """One step of the pipeline: reads and updates the document (`doc.done` ends the run).
    `label` is what a progress display shows while it runs (None: nothing worth showing).
    `works_on` says which form of the code it reads and hands on: "tree", "text" (a stage that
    changed nothing hands the tree on, `Document.update_code`) or "nothing"."""

    name: ClassVar[str]
    label: ClassVar[str | None]
    works_on: ClassVar[str]

    def run(self, doc: Document, job: Job) -> None: ...


# -- the stages every conversion runs -----------------------------------------------------------


class Parse:
    """Parse the input; a syntax error is the file's only diagnostic (Python's own wording)."""

    name = "parse"
    label = "parsing"
    works_on = "tree"

    def run(self, doc: Document, job: Job) -> None:
        try:
            doc.tree()
        except cst.ParserSyntaxError as exc:
            doc.diagnostics.append(_syntax_error(doc.original, job.path, exc))
            doc.source_framework = job.single_source
            doc.unchanged, doc.done = True, True


class ReadRuntimeImports:
    """A file converted earlier with `--runtime module` imports its runtime definitions from the
    module beside it: those imports become imports from the runtime package
    (convert/runtime_module.py), so that a policy pass sees the torch-semantics definitions as
    such; the plan's VendorRuntime stage writes them back as the job asks (module or copies)."""

    name = "read-runtime-imports"
    label = None
    works_on = "text"

    def run(self, doc: Document, job: Job) -> None:
        if f"_ptranspile_runtime_{job.to} import" not in doc.source:
            return  # (converted for another target: converting it further reports its own lines)
        from precision_transpiler.convert.runtime_module import read_runtime_imports

        code = read_runtime_imports(doc.source)
        if code != doc.source:
            doc.source = code
            doc.set_code(code)
            doc.inlined_runtime, doc.torch_semantics = True, imports_torch_semantics(code)


class PruneToEntry:
    """With `--prune-to-entry`, blank out the top-level definitions the entry does not reach
    (convert/entry.py): their lines stay, so positions still name the input's lines."""

    name = "prune-to-entry"
    label = None
    works_on = "text"

    def run(self, doc: Document, job: Job) -> None:
        if not (job.entry and job.prune_to_entry):
            return
        from precision_transpiler.convert.entry import prune_source

        doc.pruned = prune_source(doc.source, job.entry, job.path)
        doc.source = doc.pruned.source
        doc.set_code(doc.source)


class SplitInplaceChains:
    """torch code chains in-place methods (`idx[1:].mul_(n).add_(e)`): each link becomes its own
    statement on the same line, which the in-place rule converts (convert/inplace_chains.py)."""

    name = "split-inplace-chains"
    label = None
    works_on = "tree"

    def run(self, doc: Document, job: Job) -> None:
        if job.to not in ("jax", "tf") or (job.sources is not None and "torch" not in job.sources):
            return
        from precision_transpiler.analysis.tensors import inplace_index
        from precision_transpiler.convert.inplace_chains import may_have_chains, split_inplace_chains
        from precision_transpiler.syntax import IMPORTS_TORCH

        if not may_have_chains(doc.source) or not IMPORTS_TORCH.search(doc.source):
            return
        tree = split_inplace_chains(doc.tree(), inplace_index(job.table).keys())
        if tree is not None:
            doc.set_tree(tree)
            doc.source = doc.code()  # what the rules convert, on the input's lines


class StaticImports:
    """Library helpers that import a module named by a string (monai's `optional_import`,
    `importlib.import_module`) become the import statements they perform when the module is
    the source framework's (convert/import_helpers.py), so the tables convert what they bind.
    Star imports of the file's package get the imports they bring spelled out on their line
    (`math`, `nn` through geffnet's `from .efficientnet_builder import *`), as copied siblings do."""

    name = "static-imports"
    label = None
    works_on = "tree"

    def run(self, doc: Document, job: Job) -> None:
        if job.to not in ("jax", "tf") or (job.sources is not None and "torch" not in job.sources):
            return  # within one framework (a policy alone) the helpers stay as written
        if job.standalone:  # (a sibling's text comes spelled out: convert/siblings/rounds.py)
            from precision_transpiler.convert.siblings.resolve import expand_file_star_imports

            if (expanded := expand_file_star_imports(doc.source, job.path)) != doc.source:
                doc.source = expanded
                doc.set_code(expanded)
        if job.path and "import" in doc.source:  # torch names imported through the package
            from precision_transpiler.convert.torch_reexports import resolve_torch_reexports

            def convertible(name: str) -> bool:
                return job.table.converts(name, "torch", job.to)

            if (tree := resolve_torch_reexports(doc.tree(), job.path, convertible)) is not None:
                doc.set_tree(tree)
                doc.source = doc.code()
        source = job.table.frameworks["torch"]
        if not source.import_helpers or "import" not in doc.source:
            return
        from precision_transpiler.convert.import_helpers import static_imports

        roots = frozenset(m.split(".")[0] for m in (*source.roots, *source.companions))
        tree = static_imports(doc.tree(), source.import_helpers, roots, job.path)
        if tree is not None:
            doc.set_tree(tree)
            doc.source = doc.code()  # what the rules convert, on the input's lines


class RewriteSymbols:
    """The rule engine (rewrite/engine.py): detect the source framework, map symbols, ops and
    layers through the tables, edit the imports."""

    name = "rewrite"
    label = "converting"
    works_on = "tree"

    def run(self, doc: Document, job: Job) -> None:
        from precision_transpiler.convert.module_imports import module_aliases_of
        from precision_transpiler.rewrite.engine import EngineOptions, run_engine
        from precision_transpiler.rules import active_rules

        options = EngineOptions(
            target=job.to,
            source=job.single_source or self._through_package(doc, job),
            path=job.path,
            mappings=job.table,
            allowed=job.sources if job.sources and len(job.sources) > 1 else None,
            log_rewrites=job.log_rewrites,
            module_aliases=module_aliases_of(job.path),
        )
        tree, outcome = run_engine(doc.tree(), doc.source, options, active_rules())
        doc.diagnostics.extend(outcome.diagnostics)
        if outcome.unchanged:  # skipped by a comment, or not written for one of the sources asked for
            doc.skipped, doc.unchanged, doc.done = outcome.skipped, True, True
            return
        doc.source_framework = outcome.source
        doc.rewrites.extend(outcome.rewrites)
        doc.imports_added.extend(outcome.imports_added)
        doc.set_tree(tree, outcome.code)
        if doc.pruned is not None:
            self._finish_pruned(doc, job)

    @staticmethod
    def _through_package(doc: Document, job: Job) -> str | None:
        """The framework of a file that imports none itself but builds on its package's modules
        (detection.detect_file_framework), said in a note; None when its own imports tell (or nothing
        does)."""
        if job.sources is not None or not job.standalone or not job.path or not Path(job.path).is_file():
            return None
        from precision_transpiler.detection import detect_file_framework

        framework, module = detect_file_framework(job.path, doc.source, job.table)
        if module is None or framework is None:
            return None
        doc.note(
            "note",
            "framework-through-package",
            f"imports no framework itself: converted as {framework} code, the framework of the package "
            f"module it builds on ({module.name})",
        )
        return framework

    @staticmethod
    def _finish_pruned(doc: Document, job: Job) -> None:
        from precision_transpiler.convert.entry import finish_pruned, prune_imports

        pruned = doc.pruned
        doc.set_code(finish_pruned(prune_imports(doc.code(), pruned.import_names)))
        dropped = ""
        if pruned.dropped:
            more = ", ..." if len(pruned.dropped) > 8 else ""
            dropped = f" ({', '.join(pruned.dropped[:8])}{more})"
        doc.note(
            "note",
            "entry-pruned",
            f"--entry {job.entry}: converted {len(pruned.kept)} top-level definitions it reaches; "
            f"left out {len(pruned.dropped)}{dropped}",
        )


# -- policies within one framework --------------------------------------------------------------


class UnvendorRuntime:
    """A model converted from torch earlier carries copies of runtime definitions (convert/vendor.py):
    before a policy within its framework runs, they become imports from the runtime package again,
    so that the policy pass sees them as the torch-semantics layers they are; the plan's
    VendorRuntime stage writes them back, the one place runtime code is copied. A file without a
    policy to apply or strip keeps its copies as they are."""

    name = "unvendor-runtime"
    label = None
    works_on = "text"

    def run(self, doc: Document, job: Job) -> None:
        if job.policy.is_full_precision and not re.search(r"_ptranspile_|_PTRANSPILE_", doc.source):
            return
        from precision_transpiler.convert.unvendor import unvendor
        from precision_transpiler.convert.vendor import MARKER

        if MARKER not in doc.source:
            return
        code = unvendor(doc.code(), job.to)
        if code is not None:
            doc.source = code  # the policy's decisions name its lines: Finish maps them onto the input's
            doc.set_code(code)
            doc.inlined_runtime, doc.torch_semantics = True, imports_torch_semantics(code)


class _PolicyStage:
    """Apply the precision policy with `function` of precision/apply.py. Within one framework it
    runs for every policy (fp32 strips what an earlier run inserted); on a torch model being
    converted (`model`) only for a file itself, not for a sibling, and only for a policy."""

    name: ClassVar[str]
    label: ClassVar[str | None] = None  # announced when there is a policy to apply
    works_on: ClassVar[str] = "tree"  # (and the text the document holds: the pass's positions)
    function: ClassVar[str]
    model: ClassVar[bool] = False

    def run(self, doc: Document, job: Job) -> None:
        if self.model and (not job.standalone or job.policy.is_full_precision):
            return
        from precision_transpiler.precision import apply as policies

        if not job.policy.is_full_precision:
            announce("applying the precision policy")
        seen = doc.code()
        apply = getattr(policies, self.function_for(doc))
        tree, precision = apply(doc.tree(), seen, job.policy, job.table, job.nan_fallback)
        doc.set_tree(tree)
        if precision:
            doc.precision, doc.precision_lines = precision, seen
        if job.standalone:
            from precision_transpiler.precision.overrides import CODE, unmatched_class_overrides

            for message in unmatched_class_overrides(job.policy, seen, doc.source):
                doc.note("warning", CODE, message)

    def function_for(self, doc: Document) -> str:
        return self.function


class TorchPolicy(_PolicyStage):
    name = "torch-policy"
    function = "apply_torch_policy"


class KerasPolicy(_PolicyStage):
    """Keras code, or a model converted to Keras from torch (whose runtime definitions
    UnvendorRuntime or ReadRuntimeImports read back): then the pass converting from torch applies."""

    name = "keras-policy"
    function = "apply_keras_policy"

    def function_for(self, doc: Document) -> str:
        return "apply_keras_torch_policy" if doc.torch_semantics else self.function


class FlaxPolicy(_PolicyStage):
    """Flax NNX code, or a model converted to Flax from torch (the same pass applies to both)."""

    name = "flax-policy"
    function = "apply_flax_policy"


class PolicyNotApplied:
    """Policies apply within one framework and when converting torch models: say so otherwise."""

    name = "policy-not-applied"
    label = None
    works_on = "nothing"

    def run(self, doc: Document, job: Job) -> None:
        if not job.policy.is_full_precision:
            doc.note(
                "unsupported",
                "policy-not-applied",
                f"precision policy {job.policy.name!r} is not applied when converting "
                f"{doc.source_framework or 'this code'} to {job.to} yet (policies apply within one framework)",
            )


# -- torch models converted to Flax NNX or Keras ------------------------------------------------


class ResolveFeatureDetection:
    """A feature-detection `try: import torch.fft ... except ImportError:` whose guarded code the
    rules converted becomes that code (convert/feature_detection.py): the converted module does
    not import torch for it, and the fallback for an older torch goes, with what was said of it.
    An `if` that imports an optional torch extension (`if is_xformers_available(): import
    xformers`) becomes its `else`."""

    name = "resolve-feature-detection"
    label = None
    works_on = "tree"

    def run(self, doc: Document, job: Job) -> None:
        from precision_transpiler.analysis.load_imports import TORCH_ROOTS
        from precision_transpiler.convert import feature_detection as found

        def convertible(name: str) -> bool:
            return job.table.converts(name, "torch", job.to)

        tree, resolved = found.resolve_feature_detection(doc.tree(), TORCH_ROOTS, doc.original, convertible)
        packages = job.table.surfaces["torch"].packages if "torch" in job.table.surfaces else frozenset()
        tree, branches = found.resolve_accelerator_branches(tree, packages, doc.original)
        if not resolved + branches:
            return
        doc.set_tree(tree)
        for item in resolved + branches:
            span = item.fallback_lines
            if span is not None:
                doc.diagnostics[:] = [
                    d for d in doc.diagnostics if not (span[0] <= d.line <= span[1] and d.severity != "note")
                ]
            doc.note("note", "feature-detection-resolved", item.message, item.line)


class DropOrphanedImports:
    """Imports the conversion left unused (their users were rewritten) go (convert/cleanup.py)."""

    name = "drop-orphaned-imports"
    label = "cleaning up imports"
    works_on = "text"

    def run(self, doc: Document, job: Job) -> None:
        from precision_transpiler.convert.cleanup import drop_orphaned_imports

        doc.update_code(drop_orphaned_imports(doc.source, doc.code()))


#: Sibling modules converted in this process, by (tables, target, NaN fallback, path, source
#: text): a sibling's conversion depends on nothing else (no policy, no entry, no copying of its
#: own), and converting several models of one library (or one package's files) reads the same
#: siblings again; torch-geometric's models share ~80 modules. The tables are held with the
#: result, so a key's `id` cannot name another table later. Least recently used go first.
_CONVERTED_SIBLINGS: OrderedDict[tuple[int, str, bool, str, str], tuple[MappingSet, str, tuple[Any, ...]]] = (
    OrderedDict()
)
_SIBLINGS_REMEMBERED = 512


class InlineSiblings:
    """Definitions the file imports from sibling modules are converted (by this pipeline) and
    copied in; names with a counterpart in the target library are imported from it instead
    (convert/siblings/, convert/library_imports.py)."""

    name = "inline-siblings"
    label = "copying in sibling modules"
    works_on = "text"

    def run(self, doc: Document, job: Job) -> None:
        if not job.standalone:
            return
        from precision_transpiler.convert.library_imports import redirect_library_imports
        from precision_transpiler.convert.siblings import inline_siblings

        def convert(sibling_source: str, sibling_path: str) -> tuple[str, Diagnostics]:
            key = (id(job.table), job.to, job.nan_fallback, sibling_path, sibling_source)
            remembered = _CONVERTED_SIBLINGS.get(key)
            if remembered is not None and remembered[0] is job.table:
                _CONVERTED_SIBLINGS.move_to_end(key)
                return remembered[1], list(remembered[2])
            sibling_job = replace(
                job, sources=("torch",), policy=_full_precision(), path=sibling_path, entry=None,
                prune_to_entry=False, standalone=False, log_rewrites=False,
            )  # fmt: skip
            sibling = convert_document(sibling_source, sibling_path, sibling_job)
            diagnostics = [(d.line, d.col, d.severity, d.code, d.message) for d in sibling.diagnostics]
            _CONVERTED_SIBLINGS[key] = (job.table, sibling.result_code(), tuple(diagnostics))
            while len(_CONVERTED_SIBLINGS) > _SIBLINGS_REMEMBERED:
                _CONVERTED_SIBLINGS.popitem(last=False)
            return sibling.result_code(), diagnostics

        redirected: list[str] = []

        def redirect(text: str) -> str:
            text, names = redirect_library_imports(job.path, text, job.table.layer_symbols, job.to)
            redirected.extend(names)
            return text

        code = redirect(doc.code())
        # names with a counterpart in this target are imported from it (redirect), not converted
        known = frozenset(symbol for symbol, targets in job.table.layer_symbols.items() if job.to in targets)
        # torch libraries of other distributions are converted like siblings, except what the tables map
        table = job.table
        mapped = table.all_roots | {s.split(".")[0] for s in (*table.layers, *table.layer_symbols)}
        code, report = inline_siblings(job.path, code, convert, redirect=redirect, known=known, mapped=mapped)
        doc.update_code(code)
        if redirected:
            library = "Flax" if job.to == "jax" else "Keras"
            doc.note(
                "note",
                "library-counterparts",
                f"imported from their {library} counterparts (mappings/layers/transformers.yaml): "
                + ", ".join(dict.fromkeys(redirected)),
            )
        for sibling_path, line, col, severity, code_, message in report.diagnostics:
            doc.diagnostics.append(Diagnostic(sibling_path, line, col, severity, code_, message))  # type: ignore[arg-type]
        if report.skipped:
            doc.note(
                "warning",
                "siblings-not-converted",
                "left imported, not converted (library classes and large helpers that use no torch themselves; "
                "their modules import torch): " + ", ".join(dict.fromkeys(report.skipped)),
            )
        if report.over_budget:
            from precision_transpiler.convert.siblings import BUDGET

            doc.note(
                "unsupported",
                "siblings-over-budget",
                f"left imported, not converted: copying them would pass {BUDGET} lines of sibling code (torch code "
                "left imported fails in the converted model; convert a smaller entry with --entry --prune-to-entry): "
                + ", ".join(dict.fromkeys(report.over_budget)),
            )
        if report.unfinished:
            doc.note(
                "warning",
                "siblings-not-converted",
                f"copying sibling definitions stopped after {report.unfinished} rounds: imports of copied code "
                "that the rounds did not reach stay imported, unconverted",
            )
        if report.inlined:
            doc.note("note", "siblings-inlined", "converted and copied in: " + ", ".join(report.inlined))


class ThreadSiblingRngs:
    """Calls to module classes copied from sibling modules pass `rngs` on where the caller has
    them (convert/siblings/rngs.py): the rule threads them through the file's own classes only."""

    name = "thread-sibling-rngs"
    label = None
    works_on = "text"

    def run(self, doc: Document, job: Job) -> None:
        if not job.standalone:
            return
        from precision_transpiler.convert.siblings.rngs import thread_sibling_rngs

        doc.update_code(thread_sibling_rngs(doc.code()))


class LocalizeTorchImports:
    """torch imports that only function bodies still use (a checkpoint-download method) move
    into those functions (convert/local_imports.py): the converted model loads without torch."""

    name = "localize-torch-imports"
    label = None
    works_on = "tree"

    def run(self, doc: Document, job: Job) -> None:
        if not job.standalone:
            return
        from precision_transpiler.convert.local_imports import localize_imports, torch_roots

        original = job.path if job.path and not job.path.startswith("<") else None
        roots = torch_roots(doc.code(), original) if doc.mentions("import") else frozenset()
        tree, moved = localize_imports(doc.tree(), roots) if roots else (None, [])
        if tree is not None and moved:
            doc.set_tree(tree)
            self._say_moved(doc, moved)
        self._say_left(doc, job, {item.statement for item in moved})

    @staticmethod
    def _say_left(doc: Document, job: Job, said: set[str]) -> None:
        from precision_transpiler.convert.local_imports import torch_at_load, torch_when_called

        original = job.path if job.path and not job.path.startswith("<") else None
        code = doc.code()
        for line, message in torch_at_load(code, doc.original, original):
            doc.note("warning", "torch-at-load", message, line)
        for severity, line, message in torch_when_called(code, doc.original, original, said):
            doc.note(severity, "torch-when-called", message, line)

    @staticmethod
    def _say_moved(doc: Document, moved: list) -> None:
        from precision_transpiler.convert.local_imports import moved_messages

        for severity, message, line in moved_messages(doc.original, moved):
            doc.note(severity, "import-localized", message, line)


class FlaxModelPolicy(_PolicyStage):
    """The policy on a torch model converted to Flax NNX, as torch would run it."""

    name = "flax-model-policy"
    function = "apply_flax_policy"
    model = True


class KerasModelPolicy(_PolicyStage):
    """The policy on a torch model converted to Keras, as torch would run it (model.to and
    autocast semantics)."""

    name = "keras-model-policy"
    function = "apply_keras_torch_policy"
    model = True


class VendorRuntime:
    """Copy the runtime definitions the output uses into it, so that it runs on its own
    (convert/vendor.py), or with `Job.runtime` "module" import them from the runtime module
    beside the output (convert/runtime_module.py); a name a table emits that no runtime module
    defines is an error."""

    name = "vendor-runtime"
    label = "copying in runtime definitions"
    works_on = "tree"

    def run(self, doc: Document, job: Job) -> None:
        if not job.standalone:
            return
        from precision_transpiler.convert.runtime_module import RUNTIME_MODULES
        from precision_transpiler.convert.vendor import PACKAGE, import_runtime_tree, vendor_tree
        from precision_transpiler.linemap import follow_lines

        if not doc.mentions(PACKAGE):
            return
        before, text = doc.tree(), doc.held_code()
        if job.runtime == "module" and job.to in RUNTIME_MODULES:
            tree, doc.runtime_names, missing = import_runtime_tree(before, RUNTIME_MODULES[job.to], text)
        else:
            tree, missing = vendor_tree(before, text)
        if tree is not before:
            doc.set_tree(tree)
        # a converted model's decisions name lines of the code the policy saw: now of the code with the
        # copy-in; within one framework they keep naming the input's lines (Finish maps them there)
        if doc.precision and doc.source_framework != job.to:
            code = doc.code()
            doc.precision = follow_lines(doc.precision, doc.precision_lines or code, code)
            doc.precision_lines, doc.precision_on_output = code, True
        for symbol in missing:
            doc.note("error", "missing-shim", f"{symbol} is named by a mapping table but not defined")


# -- the plan table -----------------------------------------------------------------------------

PREPARE: tuple[type[Stage], ...] = (
    Parse, ReadRuntimeImports, PruneToEntry, SplitInplaceChains, StaticImports, RewriteSymbols
)  # fmt: skip

PLANS: dict[tuple[str, str], tuple[type[Stage], ...]] = {
    ("torch", "torch"): (UnvendorRuntime, TorchPolicy, VendorRuntime),
    ("tf", "tf"): (UnvendorRuntime, KerasPolicy, VendorRuntime),
    ("jax", "jax"): (UnvendorRuntime, FlaxPolicy, VendorRuntime),
    ("torch", "jax"): (
        ResolveFeatureDetection,
        DropOrphanedImports,
        InlineSiblings,
        ThreadSiblingRngs,
        LocalizeTorchImports,
        FlaxModelPolicy,
        VendorRuntime,
    ),
    ("torch", "tf"): (
        ResolveFeatureDetection,
        DropOrphanedImports,
        InlineSiblings,
        LocalizeTorchImports,
        KerasModelPolicy,
        VendorRuntime,
    ),
}
OTHERWISE: tuple[type[Stage], ...] = (PolicyNotApplied, VendorRuntime)


def plan_for(source: str | None, target: str) -> tuple[type[Stage], ...]:
    """The stages after RewriteSymbols for `source` (None: not detected, the target's own plan)."""
    return PLANS.get((source or target, target), OTHERWISE)


def run_pipeline(doc: Document, job: Job) -> Document:
    """Run PREPARE, the plan for the detected source, and Finish over `doc`."""
    for stage in PREPARE:
        _run(stage, doc, job)
        if doc.done:
            return _finish(doc)
    for stage in plan_for(doc.source_framework, job.to):
        _run(stage, doc, job)
        if doc.done:
            break
    return _finish(doc)


def _run(stage: type[Stage], doc: Document, job: Job) -> None:
    if stage.label is not None:
        announce(stage.label)
    stage().run(doc, job)


#: Told the label of each stage a conversion enters ("parsing", "converting", ...) while
#: `stage_hook` is active (the command line's progress display). A plain global, not a context
#: variable: with_deep_stack may run the conversion in another thread.
_stage_hook: Callable[[str], None] | None = None


def announce(label: str) -> None:
    """Tell the active stage hook (if any) that a conversion entered `label`."""
    if _stage_hook is not None:
        _stage_hook(label)


@contextlib.contextmanager
def stage_hook(hook: Callable[[str], None]) -> Iterator[None]:
    """Call `hook(label)` as conversions run within the block enter their stages."""
    global _stage_hook
    before, _stage_hook = _stage_hook, hook
    try:
        yield
    finally:
        _stage_hook = before


def convert_document(given: str, path: str, job: Job) -> Document:
    """`run_pipeline` on a new Document of `given`, with inputs too deep for LibCST refused in one
    line (rewrite/depth.py): its native parser crashes the process on them, and its visitors
    recurse. A run that ran out of stack is retried on a deep stack from a new Document: the
    first may have changed its own (rewrites, imports added, diagnostics) before it failed."""
    from precision_transpiler.rewrite.depth import TooDeep, check_depth, with_deep_stack

    def refuse(line: int, message: str) -> Document:
        refused = Document(given, path)
        refused.diagnostics = [Diagnostic(job.path, line, 1, "error", "too-deep", message)]
        refused.source_framework, refused.unchanged = job.single_source, True
        return refused

    try:
        check_depth(Document(given, path).original)  # before LibCST's native parser, which crashes on deep nesting
        return with_deep_stack(lambda: run_pipeline(Document(given, path), job))
    except TooDeep as exc:
        return refuse(exc.line, exc.message)
    except RecursionError:
        return refuse(1, "an expression nests too deeply to convert; split it into several statements")


def _finish(doc: Document) -> Document:
    """Decisions onto the input's lines, diagnostics sorted and without repeats; converted code
    that Python cannot parse is never handed out (see `_check_parses`)."""
    _check_parses(doc)
    if doc.precision and (doc.pruned is not None or doc.inlined_runtime) and not doc.precision_on_output:
        from precision_transpiler.linemap import follow_lines

        # a policy within one framework saw the pruned code: name the input's lines
        doc.precision = follow_lines(doc.precision, doc.precision_lines or doc.source, doc.original)
    doc.diagnostics = _dedupe(sorted(doc.diagnostics, key=lambda d: (d.line, d.col, d.code, d.message)))
    return doc


def _check_parses(doc: Document) -> None:
    """Converted code must parse: when a stage produced code that does not (a bug of ours), the
    file is reported as an error at the converted line and comes back unchanged, so that nothing
    invalid is written. Python's own parser decides (it only parses; nothing runs)."""
    if doc.unchanged:
        return
    code = doc.code()
    if code == doc.original:
        return
    try:
        python_ast(code)
    except SyntaxError as err:
        if "too many nested parentheses" in (err.msg or ""):
            # valid input (a long chain such as `x.float().float()...`) whose converted form
            # nests calls deeper than Python's parser allows: the user can split it
            doc.note(
                "error",
                "too-deep",
                f"the converted code nests brackets deeper than Python allows (converted line {err.lineno}); "
                "split the expression into several statements; the file is left as it is",
            )
            doc.unchanged, doc.precision = True, []
            return
        doc.note(
            "error",
            "invalid-output",
            f"internal error: the converted code does not parse (converted line {err.lineno}: {err.msg}); "
            "the file is left as it is (please report this)",
        )
        doc.unchanged = True
        doc.precision = []
    except (ValueError, RecursionError, MemoryError):
        pass  # beyond what Python's parser takes (null bytes, depth): the depth guard reports such input


def _full_precision() -> Any:
    from precision_transpiler.precision.policy import resolve_policy

    return resolve_policy("fp32")


def _syntax_error(source: str, path: str, exc: cst.ParserSyntaxError) -> Diagnostic:
    """Python's own parser gives the most precise position and wording; use it when it agrees
    that the code is invalid (it only parses, nothing is executed)."""
    try:
        ast.parse(source, filename=path)
    except SyntaxError as err:
        return Diagnostic(path, err.lineno or 1, err.offset or 1, "error", "syntax-error", f"syntax error: {err.msg}")
    except (ValueError, RecursionError, MemoryError):
        pass  # CPython's parser gives up on some deep invalid input (MemoryError): LibCST's message
    message = exc.message.splitlines()[0] if exc.message else "invalid syntax"
    return Diagnostic(path, exc.raw_line, exc.raw_column + 1, "error", "syntax-error", f"syntax error: {message}")


def _dedupe(items: Sequence[Diagnostic]) -> list[Diagnostic]:
    return list(dict.fromkeys(items))
