"""The rewrite engine: one LibCST transformer that runs every registered rule in one traversal.

Rules live one per file in `precision_transpiler/rules/`; the caller hands them over in the
order they are offered a node (`rules.active_rules()`), so the engine knows none of them.
Running them in a single pass keeps transpiling fast (name resolution is computed once), while
each rule stays small. The engine owns what is common to all rules: framework detection,
bookkeeping of original -> converted nodes and of each node's ancestors, reporting symbols that
nothing converted, marking them in the output, and fixing up imports at the end
(`import_editor`).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import libcst as cst

from precision_transpiler.analysis.tensors import held_object, known_tensor
from precision_transpiler.diagnostics import Diagnostic, Rewrite, Severity
from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.rewrite.calls import with_valid_args
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rewrite.import_editor import edit_imports
from precision_transpiler.rewrite.imports import ImportNamer
from precision_transpiler.rewrite.names import NameResolver
from precision_transpiler.rewrite.placement import fit_fstring_expression, fit_position
from precision_transpiler.rewrite.positions import PositionFinder
from precision_transpiler.rewrite.skips import scan_skips
from precision_transpiler.syntax import code_of

MARKER = "# ptranspile:"
SKIPPED_BY_COMMENT = "`# ptranspile: skip-file` comment"  # EngineResult.skipped of such a file

_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.ExceptHandler, cst.ExceptStarHandler)
DL_FRAMEWORKS = ("torch", "jax", "tf")


@dataclass
class EngineOptions:
    """`source` None: detected, among the frameworks of `allowed` (None: among all of them)."""

    target: str
    source: str | None
    path: str
    mappings: MappingSet
    allowed: tuple[str, ...] | None = None
    #: keep the log of rewrites (where, which rule, before/after): its positions and code cost
    #: more than the conversion of a large sibling module whose log nobody reads
    log_rewrites: bool = True
    #: the module's top-level names bound to module objects of its package (`from pkg.utils
    #: import torchutils`), given its `ast` tree: their functions are not tensor methods
    #: (`torchutils.tile(x, 2)`). Found from files by the caller (convert/module_imports.py)
    module_aliases: Callable[[ast.Module], Collection[str]] | None = None


class EngineRule(Protocol):
    """What the engine asks of a rule (rules/base.py has the contract): whether it has anything to
    do for the file, and its `leave_<NodeType>(ctx, original, updated)` methods, found by name."""

    def applies(self, ctx: RuleContext) -> bool: ...


@dataclass
class _Candidate:
    node: cst.CSTNode
    message: str
    code: str


@dataclass
class EngineResult:
    source: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    imports_added: list[str] = field(default_factory=list)
    imports_removed: list[str] = field(default_factory=list)
    # The file must come back exactly as it was: skipped by a comment (`skipped` says so), or
    # written for a framework that is not among the allowed sources.
    unchanged: bool = False
    skipped: str | None = None
    code: str | None = None  # the new module's code, when the import edit printed it anyway


def run_engine(
    module: cst.Module, source: str, options: EngineOptions, rules: Sequence[Callable[[], EngineRule]]
) -> tuple[cst.Module, EngineResult]:
    """Convert `module` (parsed from `source`) with `rules` (rule classes, in the order they are
    offered a node); returns the new module and what happened."""
    transformer = Transpiler(options, module, source, rules)
    new_module = module.visit(transformer)
    result = transformer.result
    if transformer.namer is not None and options.source is not None:
        additions = list(transformer.namer.pending)
        info = options.mappings.frameworks[options.source]
        roots = (*info.roots, *info.companions)
        new_module, removed, added, result.code = edit_imports(new_module, roots, additions, transformer.skips.skip_ids)
        result.imports_added = added
        result.imports_removed = removed
    return new_module, result


class Transpiler(cst.CSTTransformer):
    """Convert one module from `options.source` to `options.target` (source detected if None)."""

    def __init__(
        self, options: EngineOptions, module: cst.Module, source: str, rules: Sequence[Callable[[], EngineRule]]
    ) -> None:
        super().__init__()
        self.options = options
        self.rules = rules
        self.result = EngineResult(source=options.source)
        self.updated_nodes: dict[cst.CSTNode, cst.CSTNode] = {}
        self.consumed: set[cst.CSTNode] = set()
        self.stack: list[cst.CSTNode] = []
        self.positions = PositionFinder(module, source)
        self.names = NameResolver(module, source)
        self.namer: ImportNamer | None = None
        self.ctx: RuleContext | None = None
        self._active = False
        self._candidates: dict[cst.CSTNode, list[_Candidate]] = {}
        self._orphans: list[_Candidate] = []
        self._diagnostic_nodes: list[tuple[cst.CSTNode, Diagnostic]] = []
        self._handlers: dict[type, list[Callable[..., cst.CSTNode | None]]] = {}
        self.skips = scan_skips(module, source)
        self._skipped = self.skips.statements  # id(statement) -> (line, col): left as written

    # -- setup ---------------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> bool:
        options = self.options
        if self._opt_out():
            return False
        detected = detect_source(self.names, options.mappings)
        if options.source is None and options.allowed is not None:
            chosen = detect_source(self.names, options.mappings, among=options.allowed)
            if chosen is None and detected is not None:
                label = "NumPy-only file" if detected == "numpy" else f"{detected} code"
                self.result.diagnostics.append(
                    Diagnostic(
                        options.path,
                        1,
                        1,
                        "note",
                        "source-not-selected",
                        f"{label} left unchanged: the source frameworks are {', '.join(options.allowed)} "
                        f"(pass --from {detected} to convert it)",
                    )
                )
                self.result.unchanged = True
                return False
            detected = chosen
        if options.source is None:
            options.source = detected
            self.result.source = options.source
        elif detected is not None and detected != options.source and detected in DL_FRAMEWORKS:
            counts = self._framework_counts()
            if not counts.get(options.source):
                self.result.diagnostics.append(
                    Diagnostic(
                        options.path,
                        1,
                        1,
                        "warning",
                        "source-mismatch",
                        f"--from {options.source}, but the file uses {detected} and no {options.source} "
                        "imports: nothing of it is converted",
                    )
                )
        if options.source is None or options.source == options.target:
            return False
        mappings = options.mappings
        taken = frozenset(self.names.module_bindings)
        self.namer = ImportNamer(node, mappings, frozenset(mappings.frameworks[options.source].roots), taken)
        self.ctx = RuleContext(self, mappings, self.namer)
        by_name: dict[str, list[Callable[..., cst.CSTNode | None]]] = {}
        for rule_cls in self.rules:
            rule = rule_cls()
            if not rule.applies(self.ctx):
                continue
            for attr in dir(rule):
                if attr.startswith("leave_"):
                    by_name.setdefault(attr[len("leave_") :], []).append(getattr(rule, attr))
        for name, handlers in by_name.items():
            self._handlers[getattr(cst, name)] = handlers
        self._active = True
        return True

    def _opt_out(self) -> bool:
        """Report the opt-out comments; True when the whole file is skipped."""
        path = self.options.path
        for line, col, why in self.skips.stray:
            self.result.diagnostics.append(Diagnostic(path, line, col, "warning", "skip-comment-ignored", why))
        if self.skips.file_line is None:
            return False
        self.result.diagnostics.append(
            Diagnostic(path, self.skips.file_line, 1, "note", "skipped-file", "file skipped: `# ptranspile: skip-file`")
        )
        self.result.unchanged = True
        self.result.skipped = SKIPPED_BY_COMMENT
        return True

    def _framework_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for qualified in self.names.module_bindings.values():
            fw = self.options.mappings.framework_of(qualified) if qualified else None
            if fw is not None:
                counts[fw] = counts.get(fw, 0) + 1
        return counts

    # -- traversal -----------------------------------------------------------------------------

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Import | cst.ImportFrom):
            return False
        if self._skipped and id(node) in self._skipped:
            # `# ptranspile: skip`: no rule sees the statement, nothing in it is reported or marked
            line, col = self._skipped[id(node)]
            self.result.diagnostics.append(
                Diagnostic(self.options.path, line, col, "note", "skipped", "left as written: `# ptranspile: skip`")
            )
            return False
        if not super().on_visit(node):
            return False
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        if not self._active or isinstance(original_node, cst.Import | cst.ImportFrom):
            return updated_node
        if self._skipped and id(original_node) in self._skipped:
            return updated_node  # not visited: the original statement, exactly
        ctx = self.ctx
        assert ctx is not None
        updated: cst.CSTNode = updated_node
        replaced = False
        for handler in self._handlers.get(type(original_node), ()):
            result = handler(ctx, original_node, updated)
            if result is not None:
                updated = with_valid_args(result) if isinstance(result, cst.Call) else result
                if isinstance(updated, cst.BaseExpression) and len(self.stack) > 1:
                    updated = fit_position(self.stack[-2], original_node, updated)
                replaced = True
                break
        if not replaced and isinstance(original_node, cst.Name | cst.Attribute | cst.Call):
            self._check_unconverted(original_node)
        if isinstance(original_node, cst.FormattedStringExpression):
            updated = self._fit_fstring(original_node, updated)
        if isinstance(original_node, _STATEMENTS):
            updated = self._attach_markers(original_node, updated)
        if updated is not original_node:
            self.updated_nodes[original_node] = updated
        if isinstance(original_node, cst.Module):
            self._flush_orphans()
        self.stack.pop()
        return updated

    def _fit_fstring(self, original: cst.FormattedStringExpression, updated: cst.CSTNode) -> cst.CSTNode:
        """The `{}` of an f-string whose expression a rule converted, written so that Python 3.11
        reads it (rewrite/placement.py); the user's expression, reported, when it cannot be."""
        if not isinstance(updated, cst.FormattedStringExpression) or updated.expression.deep_equals(
            original.expression
        ):
            return updated  # LibCST rebuilds every node it leaves: the same code is no conversion
        enclosing = [n for n in self.stack[:-1] if isinstance(n, cst.FormattedString)]
        fitted = fit_fstring_expression(updated, enclosing)
        if fitted is not None:
            return fitted
        self.add_candidate(
            original.expression,
            f"{code_of(original.expression)} inside an f-string: its conversion "
            f"`{code_of(updated.expression)}` cannot be written inside these quotes before Python 3.12 "
            "(give the value a name before the f-string)",
            "unsupported-construct",
        )
        return updated.with_changes(expression=original.expression)

    def parent_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The parent of a node on the current path from the root (None if not on it)."""
        stack = self.stack
        for i in range(len(stack) - 1, 0, -1):
            if stack[i] is node:
                return stack[i - 1]
        return None

    # -- unsupported symbols -------------------------------------------------------------------

    def _check_unconverted(self, node: cst.Name | cst.Attribute | cst.Call) -> None:
        ctx = self.ctx
        assert ctx is not None
        source = self.options.source or ""
        target = self.options.target
        mappings = self.options.mappings
        if isinstance(node, cst.Call):
            func = node.func
            if not isinstance(func, cst.Attribute) or ctx.qualified_name(func) is not None:
                return
            if func.attr.value in mappings.method_names.get(source, ()) and not held_object(ctx, func.value, node):
                self.add_candidate(
                    node,
                    f".{func.attr.value}(...) call could not be converted to {target}: "
                    "no pattern matches its arguments",
                    "unsupported-call",
                )
            elif source != target and _unmapped_tensor_method(ctx, mappings, source, node, func):
                name = func.attr.value
                reason = mappings.surfaces[source].outside_model(f"Tensor.{name}")
                self.add_candidate(
                    node,
                    f"{ctx.code(func.value)}.{name}(...): the tensor method {name} has no mapping to {target}"
                    + (f": {reason}" if reason else ""),
                    "unsupported-method",
                )
            return
        if not ctx.is_outermost_name(node):
            return
        qualified = ctx.qualified_name(node)
        if qualified is None or mappings.framework_of(qualified) != source:
            return
        surface = mappings.surfaces.get(source)
        reason = surface.outside_model(qualified) if surface is not None else None
        self.add_candidate(
            node, f"{qualified} has no mapping to {target}" + (f": {reason}" if reason else ""), "unsupported-symbol"
        )

    def add_candidate(self, node: cst.CSTNode, message: str, code: str) -> None:
        # one line: messages quote source code, which may span lines, and become `#` comments
        candidate = _Candidate(node, " ".join(message.split()), code)
        owner = self._owner(node)
        if owner is None:
            self._orphans.append(candidate)
        else:
            self._candidates.setdefault(owner, []).append(candidate)

    def _owner(self, node: cst.CSTNode) -> cst.CSTNode | None:
        for ancestor in reversed(self.stack):
            if isinstance(ancestor, _STATEMENTS):
                return ancestor
        return None

    def _live(self, candidates: list[_Candidate]) -> list[_Candidate]:
        return [c for c in candidates if c.node not in self.consumed]

    def _attach_markers(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        candidates = self._live(self._candidates.pop(original, []))
        if not candidates or not hasattr(updated, "leading_lines"):
            for candidate in candidates:
                self._report(candidate)
            return updated
        existing = {line.comment.value for line in updated.leading_lines if line.comment}
        lines = list(updated.leading_lines)
        seen: set[str] = set()
        for candidate in candidates:
            self._report(candidate)
            text = f"{MARKER} unsupported: {candidate.message}"
            if text not in existing and text not in seen:
                lines.append(cst.EmptyLine(indent=True, comment=cst.Comment(text)))
                seen.add(text)
        return updated.with_changes(leading_lines=lines)

    def _flush_orphans(self) -> None:
        for candidate in self._live(self._orphans):
            self._report(candidate)
        for pending in self._candidates.values():
            for candidate in self._live(pending):
                self._report(candidate)

    def _report(self, candidate: _Candidate) -> None:
        self.add_diagnostic(candidate.node, "unsupported", candidate.code, candidate.message)

    # -- bookkeeping ---------------------------------------------------------------------------

    def add_diagnostic(self, node: cst.CSTNode, severity: Severity, code: str, message: str) -> None:
        line, col = self.position(node)
        diagnostic = Diagnostic(self.options.path, line, col, severity, code, " ".join(message.split()))
        self.result.diagnostics.append(diagnostic)
        self._diagnostic_nodes.append((node, diagnostic))

    def retract_under(self, subtree: cst.CSTNode) -> None:
        """Forget diagnostics about nodes inside `subtree`: the subtree was dropped from the output
        (e.g. a dtype argument that became a constant), so what was said about it no longer holds."""
        if not self._diagnostic_nodes:
            return
        inside = _subtree_ids(subtree)
        gone = [d for n, d in self._diagnostic_nodes if id(n) in inside and d.severity != "unsupported"]
        if gone:
            self._diagnostic_nodes = [(n, d) for n, d in self._diagnostic_nodes if d not in gone]
            self.result.diagnostics = [d for d in self.result.diagnostics if d not in gone]

    def record_rewrite(self, rule: str, original: cst.CSTNode, replacement: cst.CSTNode) -> None:
        if not self.options.log_rewrites:
            return
        line, col = self.position(original)
        self.result.rewrites.append(Rewrite(line, col, rule, code_of(original), code_of(replacement)))

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """1-based line and column of an original node."""
        return self.positions.find(node, self.stack)


def _subtree_ids(node: cst.CSTNode) -> set[int]:
    ids: set[int] = set()

    class _Collect(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            ids.add(id(n))
            return True

    node.visit(_Collect())
    return ids


def detect_source(names: NameResolver, mappings: MappingSet, among: tuple[str, ...] | None = None) -> str | None:
    """The framework a module is written for: the deep-learning framework whose imports it
    uses most (counting references); NumPy only when it imports no deep-learning framework.
    `among` restricts the choice to those frameworks (`--from torch,numpy`)."""
    counts: Counter[str] = Counter()
    for local, references in names.reference_counts().items():
        qualified = names.module_bindings.get(local)
        fw = mappings.framework_of(qualified) if qualified else None
        if fw is not None and (among is None or fw in among):
            counts[fw] += 1 + references
    dl = [(counts[fw], fw) for fw in DL_FRAMEWORKS if counts[fw]]
    if dl:
        return max(dl)[1]
    return "numpy" if counts["numpy"] else None


#: method names Python's own types have too (`d.values()`, `s.split()`, `xs.index(v)`): a call of
#: one is a tensor method call only where the receiver is known to be a tensor
_PYTHON_METHODS = frozenset(n for t in (dict, list, set, str, tuple, bytes, int, float) for n in dir(t))


def _unmapped_tensor_method(
    ctx: RuleContext, mappings: MappingSet, source: str, call: cst.Call, func: cst.Attribute
) -> bool:
    """A call of a method of the source framework's tensors that no table maps (any pattern,
    the in-place table's included) and no rule converted: `h.kthvalue(2)` on a known tensor,
    or an in-place method (`mask.logical_not_()`) on a receiver that is not the module itself.
    Names the framework's modules also have (`float`, `to`) count only on known tensors."""
    surface = mappings.surfaces.get(source)
    name = func.attr.value
    if surface is None or name not in surface.tensor_methods or name in _handled_methods(mappings, source):
        return False
    receiver = func.value
    if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
        return False
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super":
        return False
    if known_tensor(ctx, receiver, call):
        return True
    return name.endswith("_") and name not in surface.module_methods and name not in _PYTHON_METHODS


def _handled_methods(mappings: MappingSet, source: str) -> frozenset[str]:
    """Method names some pattern of `source` has, emit-only ones (the in-place table) included."""
    key = f"handled-methods:{source}"
    if key not in mappings.caches:
        mappings.caches[key] = frozenset(
            p.method_name for op in mappings.ops.values() for p in op.patterns.get(source, ()) if p.method_name
        )
    return mappings.caches[key]
