"""The rounds of sibling copying: each phase in its turn, until nothing more comes in.

A round first turns the output's module imports of siblings into `from` imports
(convert/module_imports.py), then reads its top-level `from` imports (`splice.output_imports`);
for each import of a sibling module (resolve.py) it converts the sibling, takes what the file
needs from it (extract.py) and puts it in, dropping the names from the import (splice.py).
What the copies import in turn is the next round's work, so copies arrive in rounds, each
above the last; when a round changes nothing, left-out methods that the output now reaches
come back into their classes, and finally the definitions are ordered so that each runs after
what it needs (order.py). `Round` holds what the steps of one round share; each step is one
method.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from precision_transpiler.analysis.load_imports import torch_distribution
from precision_transpiler.convert.class_reach import used_names
from precision_transpiler.convert.import_lines import output_tree
from precision_transpiler.convert.module_imports import module_imports_as_names, module_namespaces
from precision_transpiler.convert.siblings.extract import (
    RUNS_GENERATED_CODE,
    extract_definitions,
    imports_inside,
    model_names,
    postpones_annotations,
    torch_bindings,
    uses_torch,
)
from precision_transpiler.convert.siblings.order import copies_line, order_definitions
from precision_transpiler.convert.siblings.resolve import (
    Locate,
    dotted,
    expand_star_imports,
    import_bindings,
    imports_a_sibling,
    locator,
    package_imports_torch,
    package_of,
    parsed_source,
    reexport_sources,
    star_imports_as_names,
    top_level_definitions,
    top_level_names,
)
from precision_transpiler.convert.siblings.splice import (
    MARKER,
    FromImport,
    drop_imported,
    insert_block,
    insert_imports,
    left_out_comment,
    output_imports,
    postpone_annotations,
    rename_clashing_definitions,
    rename_definitions,
    rename_shadowing_helpers,
    resolve_clashes,
    restore_left_out,
)
from precision_transpiler.files import ReadError, read_source

#: Lines of converted sibling code one file may take in (after unreached methods are left out).
#: diffusers' `get_down_block` dispatches on block names to every block class of its module, and
#: its attention module names every processor class: UNet2DConditionModel needs ~27,000 lines,
#: AutoencoderKL ~33,000 (its Downsample2D left imported past a budget of 30,000 broke the
#: model). What is left imported past the budget is reported as unsupported, since a torch class
#: left imported breaks the converted model: the budget is a guard against runaway copies only.
BUDGET = 60000


#: Non-model helpers are copied in only below this many lines (with what they use).
SMALL_HELPER = 200
#: the severities of a copied definition's diagnostics that the converting file reports
_SAID = ("error", "unsupported", "warning")


@dataclass
class SiblingReport:
    inlined: list[str] = field(default_factory=list)  # "module.name"
    #: every class copied in so far, qualified (what was asked for and what it took along): a
    #: class is copied once (library code checks identity); a function or global copied twice is
    #: harmless, and stays with the statements that set it (`if _onnx_available: ...`)
    copied: set[str] = field(default_factory=set)
    skipped: list[str] = field(default_factory=list)  # torch-free helpers and library classes: left imported
    over_budget: list[str] = field(default_factory=list)  # over the budget: left imported
    lines: int = 0
    diagnostics: list[tuple[str, int, int, str, str, str]] = field(
        default_factory=list
    )  # path, line, col, sev, code, msg
    #: copied classes with methods left out: class name -> (the sibling file, its module name)
    trimmed: dict[str, tuple[Path, str]] = field(default_factory=dict)
    #: the number of rounds when copying stopped before everything copied code imports was in
    unfinished: int = 0
    #: definitions copies took under a name of their own, a different one of the output having
    #: theirs: module -> {name there: name in the output} (later copies of the module follow)
    renamed: dict[str, dict[str, str]] = field(default_factory=dict)


Diagnostics = list[tuple[int, int, str, str, str]]  # line, col, severity, code, message
Convert = Callable[[str, str], tuple[str, Diagnostics]]


def inline_siblings(
    path: str,
    code: str,
    convert: Convert,
    *,
    max_rounds: int = 40,
    redirect: Callable[[str], str] | None = None,
    known: frozenset[str] = frozenset(),
    mapped: frozenset[str] | None = None,
    budget: int = BUDGET,
) -> tuple[str, SiblingReport]:
    """Inline sibling definitions that `code` (the converted text of `path`) imports.

    `convert(source, path)` converts a sibling module (without copying shims) and returns its
    code and diagnostics (line, col, severity, code, message). With `mapped` (the top-level
    packages the tables map), torch libraries of other distributions are taken in too."""
    report = SiblingReport()
    file = Path(path)
    if not file.is_file():
        return code, report
    cache: dict[Path, tuple[str, Diagnostics]] = {}
    for _ in range(max_rounds):
        if redirect is not None:  # library infrastructure copied code imports (library_imports.py)
            code = redirect(code)
        new_code = one_round(file, code, convert, cache, report, budget, known=known, mapped=mapped)
        if new_code == code:
            # what later copies call on a class copied earlier (a base whose subclasses came in
            # later rounds: torch-geometric's `Aggregation.reduce`) comes back into it
            new_code = restore_left_out(code, report.trimmed, cache)
            if new_code == code:
                break
        code = new_code
    else:
        report.unfinished = max_rounds  # imports copied code still needs stay as they are: said
    if report.inlined:
        code = order_definitions(code)  # a base copied in a later round lands above its own base
    return code, report


def one_round(
    file: Path,
    code: str,
    convert: Convert,
    cache: dict[Path, tuple[str, Diagnostics]],
    report: SiblingReport,
    budget: int = BUDGET,
    known: frozenset[str] = frozenset(),
    mapped: frozenset[str] | None = None,
) -> str:
    """`code` with what its sibling imports name copied in once (what the copies import is left
    to the next round)."""
    locate = locator(file, mapped)
    code = module_imports_as_names(code, locate)  # `made_module.MADE` -> `MADE`, imported by name
    code = module_namespaces(code, locate)  # `vars(aggr)` of `import pkg.aggr as aggr`: a namespace
    code, unresolved = star_imports_as_names(code, file, locate)  # `from .config import *`: the names used
    for module in unresolved:
        report_unresolved_star(file, module, report)
    if not imports_a_sibling(file, code, locate):
        return code  # no import of a sibling: nothing to do, without parsing a large file
    parsed = output_tree(code)
    state = Round(file, code, convert, cache, report, budget, known, locate, parsed)
    for index, found in enumerate(state.lone):
        state.take(index, found)
    return state.finish()


def report_unresolved_star(file: Path, module: str, report: SiblingReport) -> None:
    """Say where the original file star-imports `module`, whose names could not be read: the
    import stays as written, and runs that module (and what it imports) when the output loads."""
    line, col = 1, 1
    try:
        for node in parsed_source(read_source(file)).body:
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                line, col = node.lineno, node.col_offset + 1
                if module.endswith(node.module or "."):
                    break
    except (ReadError, SyntaxError):
        pass
    message = f"`from {module} import *` left as written: the names it binds could not be read from its module"
    entry = (str(file), line, col, "warning", "star-import-not-resolved", message)
    if entry not in report.diagnostics:
        report.diagnostics.append(entry)


class _Merged(dict):
    """Bindings handed to resolve_clashes: what it adds also goes to `bound`, the round's own."""

    def __init__(self, own: dict[str, str], bound: dict[str, str]) -> None:
        super().__init__(own)
        self._bound = bound

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        self._bound[key] = value

    def setdefault(self, key: str, default: str) -> str:  # type: ignore[override]
        if key not in self:
            self[key] = default
        return self[key]


@dataclass
class Sibling:
    """A sibling module one import of the output names, as read."""

    path: Path
    name: str  # its dotted module name
    text: str  # its source (star imports spelled out once `expand` ran)
    tree: ast.Module  # the tree of `text`
    wanted: list[tuple[str, str]]  # (name in the sibling, local name in the output)

    def expand(self) -> None:
        """Spell out what star imports bring (`nn` from `import *`): the converter needs it."""
        self.text = expand_star_imports(self.text, self.tree, self.path, self.name)
        self.tree = parsed_source(self.text)

    def plain_python(self, own: str = "") -> bool:
        """No torch (after re-exports were followed): it can stay imported, unless it runs code
        it generates (torch-geometric's template loader), which converted code must refuse
        (rules/torch_generated_code_model.py), or, in the file's own package (top-level `own`),
        imports modules of its package inside functions (a registry's factory returning a layer
        class). A library that does not need torch stays imported whatever its functions import
        (beartype.typing's lazy module `__getattr__`)."""
        if "torch" in self.text or RUNS_GENERATED_CODE.search(self.text) or self.torch_package():
            return False
        return self.name.split(".")[0] != own or not imports_inside(self.text, self.name, self.tree)

    def torch_package(self) -> bool:
        """Whether the module's top-level package is a distribution that requires torch (kornia),
        or a package `__init__.py` above it imports torch (geffnet's): importing any module of
        it runs that `__init__`, so what the output needs from it is copied, however plain
        (analysis/load_imports.py)."""
        return torch_distribution(self.name.split(".")[0]) is not None or package_imports_torch(self.path)

    def qualified(self, name: str) -> str:
        return f"{self.name}.{name}"


@dataclass
class Round:
    """One round of copying over the output `code` (`parsed`, its tree): the steps each import
    goes through, and what they gather for `finish` to put in."""

    file: Path
    code: str
    convert: Convert
    cache: dict[Path, tuple[str, Diagnostics]]
    report: SiblingReport
    budget: int
    known: frozenset[str]
    locate: Locate
    parsed: ast.Module
    blocks: list[str] = field(default_factory=list)
    removals: dict[int, set[str]] = field(default_factory=dict)  # index in `lone` -> local names no longer imported
    extra_imports: list[str] = field(default_factory=list)
    redirected: bool = False
    postponed: bool = False

    def __post_init__(self) -> None:
        self.defined = top_level_names(self.parsed)
        self.reached = frozenset(used_names([self.parsed]))  # what copied classes must keep
        self.bound = import_bindings(self.parsed.body)  # local name -> import line, to catch clashes
        self.definitions = top_level_definitions(self.parsed)  # what copies must not replace
        self.added: dict[str, ast.stmt] = {}  # what this round's blocks define so far
        self.lone: list[FromImport] = output_imports(self.code, self.parsed)  # the import lines, parsed alone

    def remove(self, index: int, local: str) -> None:
        self.removals.setdefault(index, set()).add(local)

    def take(self, index: int, found: FromImport) -> None:
        """Copy what the import `found` (the `index`th lone import) names from its sibling."""
        sibling = self.read(found.node)
        if sibling is None:
            return
        self.follow_reexports(index, sibling)
        sibling.expand()
        if sibling.plain_python(next(iter(package_of(self.file)), "")):
            return
        kept = set(self.report.skipped)
        self.rebind_copied(index, sibling)
        candidates = [
            (name, local)
            for name, local in sibling.wanted
            if name in top_level_definitions(sibling.tree)
            and local not in self.defined
            and sibling.qualified(name) not in self.known
            and sibling.qualified(name) not in kept
        ]
        hidden = [
            name
            for name, local in sibling.wanted
            if name not in top_level_definitions(sibling.tree)
            and local not in self.defined
            and sibling.qualified(name) not in kept
            and _bound_under_block(sibling.tree, name) is not None
        ]
        if hidden:
            # the conversion may have resolved the block (a torch feature probed under `try`,
            # convert/feature_detection.py): what it binds at top level then is a candidate
            if sibling.path not in self.cache:
                self.cache[sibling.path] = self.convert(sibling.text, str(sibling.path))
            resolved = top_level_definitions(parsed_source(self.cache[sibling.path][0]))
            candidates += [(n, local) for n, local in sibling.wanted if n in hidden and n in resolved]
            hidden = [name for name in hidden if name not in resolved]
        if hidden:  # bound only under `if`/`try` there: left imported, and said
            self.report.skipped += [sibling.qualified(name) for name in hidden]
            self.report_left(sibling, hidden)
        if not candidates:
            return
        if self.report.lines >= self.budget:
            self.report.over_budget += [sibling.qualified(name) for name, _ in candidates]
            return
        if sibling.path not in self.cache:
            self.cache[sibling.path] = self.convert(sibling.text, str(sibling.path))
        take = self.choose(sibling, candidates, kept)
        if take:
            self.copy(index, sibling, take, kept)

    def read(self, imp: cst.ImportFrom) -> Sibling | None:
        """The sibling module `imp` imports from, or None when it names none (or cannot be read:
        its import stays as written)."""
        if isinstance(imp.names, cst.ImportStar):
            return None
        level = len(imp.relative)
        dotted_module = dotted(imp.module) if imp.module is not None else None
        if not level and not dotted_module:
            return None
        path, name = self.locate(level, dotted_module)
        if path is None or path.resolve() == self.file.resolve():
            return None
        try:
            text = read_source(path)  # as Python reads it: UTF-8, a BOM or a coding comment
        except ReadError:
            return None
        wanted = [
            (a.name.value, a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else a.name.value)
            for a in imp.names
            if isinstance(a.name, cst.Name)
        ]
        return Sibling(path, name, text, parsed_source(text), wanted)

    def follow_reexports(self, index: int, sibling: Sibling) -> None:
        """`from ..ops import StochasticDepth` where ops/__init__.py re-exports it from
        `.stochastic_depth`: imported from where it is defined instead (the next round copies
        it)."""
        package = sibling.name if sibling.path.name == "__init__.py" else sibling.name.rsplit(".", 1)[0]
        reexports = reexport_sources(sibling.tree, package, sibling.path)
        for name, local in sibling.wanted:
            if name in reexports and name not in top_level_definitions(sibling.tree) and local not in self.defined:
                alias = f" as {local}" if local != name else ""
                self.extra_imports.append(f"from {reexports[name]} import {name}{alias}")
                self.remove(index, local)
                self.redirected = True
            elif name in reexports and local in self.defined and f"{reexports[name]}.{name}" in self.report.inlined:
                # re-exported by the package, copied from its module in an earlier round: the
                # import would bind the original above the copy (a subclass copied below would
                # derive from the torch class)
                self.remove(index, local)
                self.redirected = True

    def bound_or_defined(self) -> dict[str, str]:
        """`self.bound`, with the names the output defines itself (not as copies) as bindings no
        import is: a copy importing `apply_rotary_pos_emb` from local_attention beside
        performer's own `apply_rotary_pos_emb` imports it under a name of its own. Grows
        `self.bound` with what the copy imports (resolve_clashes)."""
        # a copy is bound as the import of itself would bind it: importing the same definition
        # again is no clash, importing another of that name (kornia.enhance's `equalize` beside a
        # policy's copied `equalize`) is
        copied = {q.rsplit(".", 1)[-1]: "from {} import {}".format(*q.rsplit(".", 1)) for q in self.report.inlined}
        defined = self.defined | set(self.added)  # an earlier copy's helper of this round too
        own = {n: copied.get(n, f"# {n} is defined in the output") for n in defined if n not in self.bound}
        merged = _Merged(own, self.bound)
        merged.update(self.bound)
        return merged

    def rename_clashing(self, piece: str, take: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
        """A definition taken under another local name (`apply_rotary_pos_emb as
        apply_rotary_pos_emb_local_attention_rotary`, see `bound_or_defined`) whose own name the
        output defines already: copied under the local name, so it replaces nothing."""
        renames = {name: local for name, local in take if local != name and name in self.defined}
        if not renames:
            return piece, take
        piece = rename_definitions(piece, renames)
        return piece, [(renames.get(name, name), local) for name, local in take]

    def rebind_copied(self, index: int, sibling: Sibling) -> None:
        """Names of the import copied in an earlier round: the import goes (it would bind the
        original above the copy), and a second name for a copy is bound to it, not copied
        again (`from ...aggr import Aggregation as aggr_Aggregation`). A name left imported
        before stays imported: library code checks identity against its own classes
        (diffusers' `register_to_config` against configuration_utils' ConfigMixin)."""
        # copied by name, or along with another (kornia's BaseError, the base of a ShapeError copied before)
        copied = set(self.report.inlined) | self.report.copied
        for name, local in sibling.wanted:
            if local in self.defined and sibling.qualified(name) in copied:
                self.remove(index, local)
                self.redirected = True
            elif local != name and name in self.defined and sibling.qualified(name) in copied:
                self.remove(index, local)
                self.add_block(f"{local} = {name}")
                self.defined.add(local)

    def choose(self, sibling: Sibling, candidates: list[tuple[str, str]], kept: set[str]) -> list[tuple[str, str]]:
        """Which candidates are copied. Model code always; other helpers (`_make_ntuple`) when
        small or when they use torch (timm's EfficientNetBuilder builds the layers): a large
        utility that does not (diffusers' `register_to_config`) stays imported rather than
        copied in whole."""
        converted = self.cache[sibling.path][0]
        take = []
        torch_names = torch_bindings(sibling.tree)
        needed = set(model_names(sibling.text)) | {
            n
            for n, _ in candidates
            if uses_torch(sibling.text, n, sibling.name, sibling.tree, torch_names, self.locate)
        }
        if sibling.torch_package():  # left imported, it would import torch when the output loads
            needed |= {n for n, _ in candidates}
        for name, local in candidates:
            if name in needed:
                take.append((name, local))
                continue
            small, _, _ = extract_definitions(converted, [name], sibling.name, sibling.tree, sibling.path, self.reached)
            if small is not None and small.count("\n") < SMALL_HELPER:
                take.append((name, local))
            else:
                self.report.skipped.append(sibling.qualified(name))
        defined = top_level_definitions(sibling.tree)
        held = any(sibling.qualified(name) in kept for name, _ in sibling.wanted if name in defined)
        if held or any(pair not in take for pair in candidates):
            # a torch-free helper stays imported: the others of this import stay with it, so
            # that library code sees its own classes (diffusers' `@register_to_config` checks
            # `isinstance(self, ConfigMixin)` against the ConfigMixin of its module)
            self.report.skipped += [sibling.qualified(name) for name, _ in take if name not in needed]
            take = [(name, local) for name, local in take if name in needed]
        return take

    def copy(self, index: int, sibling: Sibling, take: list[tuple[str, str]], kept: set[str]) -> None:
        """Copy the closure of `take` from the converted sibling into this round's block."""
        report = self.report
        converted, diagnostics = self.cache[sibling.path]
        # what an earlier copy of this module took along (diffusers' ConfigMixin, a base of the
        # copied LegacyConfigMixin) is not copied again for another name that uses it: a second
        # class would fail library identity checks (`register_to_config`'s isinstance)
        present = frozenset(q.rsplit(".", 1)[1] for q in report.copied if q.rsplit(".", 1)[0] == sibling.name)
        names = [n for n, _ in take]
        piece, imports, ranges = extract_definitions(
            converted, names, sibling.name, sibling.tree, sibling.path, self.reached, frozenset(kept), present
        )
        if piece is None:  # it needs a global set under `if`/`try`: left imported, reported
            report.skipped += [sibling.qualified(name) for name in names]
            self.report_left(sibling, names)
            return
        if report.lines + piece.count("\n") + 1 > self.budget:
            report.over_budget += [sibling.qualified(name) for name in names]
            return
        report.lines += piece.count("\n") + 1
        for cls in parsed_source(piece).body:
            if isinstance(cls, ast.ClassDef) and left_out_comment(piece, cls):
                report.trimmed[cls.name] = (sibling.path, sibling.name)
        piece = rename_shadowing_helpers(piece, set(names), self.bound, sibling.name, self.defined_elsewhere)
        piece, take = self.rename_clashing(piece, take)
        piece, imports = resolve_clashes(piece, imports, self.bound_or_defined())
        known = report.renamed.setdefault(sibling.name, {})
        piece, clashing = rename_clashing_definitions(piece, {n for n, _ in take}, self.existing, sibling.name, known)
        known.update(clashing)
        renamed = top_level_definitions(parsed_source(piece))  # a helper renamed is copied under its new name
        classes = [n for n, node in renamed.items() if isinstance(node, ast.ClassDef)]
        # string annotations written for lazy evaluation (`"AttnProcessor" | None`) stay lazy
        self.postponed = self.postponed or postpones_annotations(sibling.tree)
        self.add_block(MARKER.format(module=sibling.name) + "\n" + piece)
        # a class renamed is there for later copies of its module (`known` renames their uses)
        report.copied.update(sibling.qualified(n) for n in [*classes, *(n for n in known if known[n] in classes)])
        self.extra_imports += imports
        for name, local in take:
            if local != name:
                self.add_block(f"{local} = {name}")
            self.remove(index, local)
            report.inlined.append(sibling.qualified(name))
        for line, col, severity, code_, message in diagnostics:
            # an error of the whole sibling (an internal error at 1:1: its code was copied as it
            # was, unconverted) is said wherever it is
            whole = severity == "error" and not any(start <= line <= end for start, end in ranges)
            if whole or (any(start <= line <= end for start, end in ranges) and severity in _SAID):
                report.diagnostics.append((str(sibling.path), line, col, severity, code_, message))

    def add_block(self, block: str) -> None:
        """Put `block` in this round's copies; later copies see what it defines (`existing`)."""
        self.blocks.append(block)
        self.added.update(top_level_definitions(parsed_source(block)))

    def defined_elsewhere(self, imported: ast.ImportFrom, local: str, module: str) -> bool:
        """Whether `imported` (an import of the output binding `local`) names a module other
        than `module` that defines the name itself: a definition of its own, not `module`'s
        under another name (a re-export)."""
        name = next((a.name for a in imported.names if (a.asname or a.name) == local), local)
        path, found = self.locate(imported.level, imported.module)
        if path is None or found == module:
            return False
        try:
            return name in top_level_definitions(parsed_source(read_source(path)))
        except (ReadError, SyntaxError):
            return False

    def existing(self, name: str) -> ast.stmt | None:
        """The output's definition of `name` (the file's own, or a copy's), this round's included."""
        return self.added.get(name) or self.definitions.get(name)

    def report_left(self, sibling: Sibling, names: list[str]) -> None:
        """Names that had to be copied (their module runs torch when imported) but could not be
        are reported where they are defined: the import left in the output loads torch."""
        defined = top_level_definitions(sibling.tree)
        for name in names:
            node = defined.get(name)
            message = (
                f"`{name}` left imported from {sibling.name}, not converted: it needs a global that module sets "
                "under `if`/`try` from a relative import, so the output imports the module (and torch) when it loads"
            )
            if node is None:
                node = _bound_under_block(sibling.tree, name)
                message = (
                    f"`{name}` left imported from {sibling.name}, not converted: that module binds it only under "
                    "`if`/`try` (an optional accelerator, a version switch), so the output imports the module (and "
                    "torch) when it loads"
                )
            if node is None:
                continue
            entry = (str(sibling.path), node.lineno, node.col_offset + 1, "unsupported", "sibling-not-copied", message)
            self.report.diagnostics.append(entry)

    def finish(self) -> str:
        """The output with the imports copies replace dropped and the round's block put in."""
        if not self.blocks and not self.redirected:
            return self.code
        code = drop_imported(self.code, self.lone, self.removals)
        tree = output_tree(code)
        if self.postponed and not postpones_annotations(tree):
            code = postpone_annotations(code, tree)
            tree = output_tree(code)
        # an import the file makes only below where the copies go (rectified-flow's `from PIL
        # import Image` before its dataset class) does not bind it for them: theirs stays
        above = copies_line(tree) if self.blocks else len(code.splitlines()) + 1
        existing = {
            ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom) and n.lineno <= above
        }
        imports = [i for i in dict.fromkeys(self.extra_imports) if i not in existing]
        if not self.blocks:
            return insert_imports(code, tree, imports)
        return insert_block(code, tree, imports, "\n\n\n".join(self.blocks))


def _bound_under_block(tree: ast.Module, name: str) -> ast.stmt | None:
    """The module-level `if`/`try` statement whose blocks bind `name` (fair-esm's
    `try: ... class ESM1bLayerNorm(...) except ImportError: from torch.nn import LayerNorm as
    ESM1bLayerNorm`), or None."""
    for stmt in tree.body:
        if not isinstance(stmt, ast.If | ast.Try):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
                return stmt
            if isinstance(node, ast.Import | ast.ImportFrom) and any(
                (alias.asname or alias.name.split(".")[0]) == name for alias in node.names
            ):
                return stmt
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
                return stmt
    return None
