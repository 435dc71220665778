"""The rewrite engine: one LibCST codemod that runs every registered rule in one traversal.

Rules live one per file in `precision_transpiler/rules/`. Running them in a single pass keeps
transpiling fast (name resolution is computed once), while each rule stays small. The engine
owns what is common to all rules: framework detection, bookkeeping of original -> converted
nodes, reporting symbols that nothing converted, marking them in the output, and dropping
imports of the source framework that are no longer used.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import Codemod, CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import (
    ImportAssignment,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)

from precision_transpiler.diagnostics import Diagnostic, Rewrite, Severity
from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rewrite.imports import ImportNamer
from precision_transpiler.rewrite.templates import code_of
from precision_transpiler.rewrite.tidy_imports import RemoveImportsKeepingLayout
from precision_transpiler.rules import active_rules
from precision_transpiler.rules.base import Rule

MARKER = "# ptranspile:"

_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.ExceptHandler, cst.ExceptStarHandler)
DL_FRAMEWORKS = ("torch", "jax", "tf")


@dataclass
class EngineOptions:
    target: str
    source: str | None
    path: str
    mappings: MappingSet


@dataclass
class _Candidate:
    node: cst.CSTNode
    message: str
    code: str
    owner: cst.CSTNode | None


@dataclass
class EngineResult:
    source: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    imports_added: list[str] = field(default_factory=list)


class TranspileCommand(VisitorBasedCodemodCommand):
    """Convert one module from `options.source` to `options.target` (source detected if None)."""

    DESCRIPTION = "Convert framework symbols between torch, JAX, TensorFlow and NumPy."
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider, ParentNodeProvider, ScopeProvider)

    def __init__(self, context: CodemodContext, options: EngineOptions) -> None:
        super().__init__(context)
        self.options = options
        self.result = EngineResult(source=options.source)
        self.updated_nodes: dict[cst.CSTNode, cst.CSTNode] = {}
        self.consumed: set[cst.CSTNode] = set()
        self._candidates: dict[cst.CSTNode, list[_Candidate]] = {}
        self._orphans: list[_Candidate] = []
        self._diagnostic_nodes: list[tuple[cst.CSTNode, Diagnostic]] = []
        self._handlers: dict[str, list[Callable[..., cst.CSTNode | None]]] = {}
        self._rules: list[Rule] = []
        self.ctx: RuleContext | None = None

    # -- entry ---------------------------------------------------------------------------------

    def transform_module(self, tree: cst.Module) -> cst.Module:
        # Like CodemodCommand.transform_module, but removal keeps the file's layout.
        tree = Codemod.transform_module(self, tree)
        if AddImportsVisitor.CONTEXT_KEY in self.context.scratch:
            tree = AddImportsVisitor(self.context).transform_module(tree)
        if RemoveImportsVisitor.CONTEXT_KEY in self.context.scratch:
            tree = RemoveImportsKeepingLayout(self.context).transform_module(tree)
        return tree

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        if self.options.source is None:
            self.options.source = detect_source(self, tree, self.options.mappings)
            self.result.source = self.options.source
        source = self.options.source
        if source is None or source == self.options.target:
            return tree
        mappings = self.options.mappings
        scope = self.get_metadata(ScopeProvider, tree, None)
        taken = frozenset(a.name for a in scope.assignments) if scope is not None else frozenset()
        namer = ImportNamer(tree, self.context, mappings, frozenset(mappings.frameworks[source].roots), taken)
        self.ctx = RuleContext(self, mappings, namer)
        self._rules = [rule() for rule in active_rules() if rule().applies(self.ctx)]
        for rule in self._rules:
            for attr in dir(rule):
                if attr.startswith("leave_"):
                    self._handlers.setdefault(attr, []).append(getattr(rule, attr))
        new_tree = tree.visit(self)
        namer.schedule_imports(new_tree)
        self.result.imports_added = list(namer.added)
        return new_tree

    # -- traversal -----------------------------------------------------------------------------

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Import | cst.ImportFrom):
            self._schedule_import_removal(node)
            return False
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        updated = super().on_leave(original_node, updated_node)
        assert self.ctx is not None
        replaced = False
        if isinstance(updated, cst.CSTNode):
            for handler in self._handlers.get(f"leave_{type(original_node).__name__}", ()):
                result = handler(self.ctx, original_node, updated)
                if result is not None:
                    updated = result
                    replaced = True
                    break
        if not replaced and isinstance(original_node, cst.Name | cst.Attribute | cst.Call):
            self._check_unconverted(original_node)
        if isinstance(original_node, _STATEMENTS) and isinstance(updated, cst.CSTNode):
            updated = self._attach_markers(original_node, updated)
        if isinstance(updated, cst.CSTNode):
            self.updated_nodes[original_node] = updated
        if isinstance(original_node, cst.Module):
            self._flush_orphans()
        return updated  # type: ignore[return-value]

    # -- unsupported symbols -------------------------------------------------------------------

    def _check_unconverted(self, node: cst.Name | cst.Attribute | cst.Call) -> None:
        ctx = self.ctx
        assert ctx is not None
        source = self.options.source
        target = self.options.target
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and ctx.qualified_name(func) is None:
                method = func.attr.value
                if method in self.options.mappings.method_names.get(source or "", ()):
                    self.add_candidate(
                        node,
                        f".{method}(...) call could not be converted to {target}: "
                        "no pattern matches its arguments",
                        "unsupported-call",
                    )
            return
        if not ctx.is_outermost_name(node):
            return
        qualified = ctx.qualified_name(node)
        if qualified is None or self.options.mappings.framework_of(qualified) != source:
            return
        self.add_candidate(node, f"{qualified} has no mapping to {target}", "unsupported-symbol")

    def add_candidate(self, node: cst.CSTNode, message: str, code: str) -> None:
        owner = self._owner(node)
        candidate = _Candidate(node, message, code, owner)
        if owner is None:
            self._orphans.append(candidate)
        else:
            self._candidates.setdefault(owner, []).append(candidate)

    def _owner(self, node: cst.CSTNode) -> cst.CSTNode | None:
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, _STATEMENTS):
            try:
                current = self.get_metadata(ParentNodeProvider, current)
            except KeyError:
                return None
        return current

    def _live(self, candidates: list[_Candidate]) -> list[_Candidate]:
        return [c for c in candidates if c.node not in self.consumed]

    def _attach_markers(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        candidates = self._live(self._candidates.pop(original, []))
        if not candidates:
            return updated
        existing = {line.comment.value for line in updated.leading_lines if line.comment}  # type: ignore[attr-defined]
        lines = list(updated.leading_lines)  # type: ignore[attr-defined]
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
        assert self.ctx is not None
        line, col = self.ctx.position(node)
        diagnostic = Diagnostic(self.options.path, line, col, severity, code, message)
        self.result.diagnostics.append(diagnostic)
        self._diagnostic_nodes.append((node, diagnostic))

    def retract_under(self, subtree: cst.CSTNode) -> None:
        """Forget diagnostics about nodes inside `subtree`: the subtree was dropped from the output
        (e.g. a dtype argument that became a constant), so what was said about it no longer holds."""
        inside = _subtree_ids(subtree)
        gone = [d for n, d in self._diagnostic_nodes if id(n) in inside and d.severity != "unsupported"]
        if gone:
            self._diagnostic_nodes = [(n, d) for n, d in self._diagnostic_nodes if d not in gone]
            self.result.diagnostics = [d for d in self.result.diagnostics if d not in gone]

    def record_rewrite(self, rule: str, original: cst.CSTNode, replacement: cst.CSTNode) -> None:
        assert self.ctx is not None
        line, col = self.ctx.position(original)
        self.result.rewrites.append(Rewrite(line, col, rule, code_of(original), code_of(replacement)))

    def _schedule_import_removal(self, node: cst.Import | cst.ImportFrom) -> None:
        source = self.options.source
        if source is None:
            return
        roots = set(self.options.mappings.frameworks[source].roots)
        if isinstance(node, cst.ImportFrom):
            if node.relative or node.module is None:
                return
            names = [get_full_name_for_node(node.module) or ""]
        else:
            names = [get_full_name_for_node(alias.name) or "" for alias in node.names]
        if any(name.split(".")[0] in roots for name in names):
            RemoveImportsVisitor.remove_unused_import_by_node(self.context, node)


def _subtree_ids(node: cst.CSTNode) -> set[int]:
    ids: set[int] = set()

    class _Collect(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            ids.add(id(n))
            return True

    node.visit(_Collect())
    return ids


def detect_source(command: TranspileCommand, tree: cst.Module, mappings: MappingSet) -> str | None:
    """The framework a module is written for: the deep-learning framework whose imports it
    uses most (counting references); NumPy only when it imports no deep-learning framework."""
    counts: Counter[str] = Counter()
    scopes = command.context.wrapper.resolve(ScopeProvider).values() if command.context.wrapper else ()
    seen: set[int] = set()
    for scope in scopes:
        if scope is None or id(scope) in seen:
            continue
        seen.add(id(scope))
        for assignment in scope.assignments:
            if not isinstance(assignment, ImportAssignment):
                continue
            for qualified in assignment.scope.get_qualified_names_for(assignment.name):
                fw = mappings.framework_of(qualified.name)
                if fw is not None:
                    counts[fw] += 1 + len(assignment.references)
                    break
    dl = [(counts[fw], fw) for fw in DL_FRAMEWORKS if counts[fw]]
    if dl:
        return max(dl)[1]
    return "numpy" if counts["numpy"] else None
