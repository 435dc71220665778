"""Bring in what a converted file needs from sibling modules of its package.

torchvision's vision_transformer.py builds `MLPBlock(MLP)` where `MLP` comes from
`..ops.misc`; a converted ViT that imported the original `MLP` would import torch. So each name
the converted file still imports from its own package (relative imports, or absolute ones into
the same top-level package) whose module uses torch is converted too: the sibling module is
converted in memory, and the definitions the file needs (with the helpers and imports they
use, in the sibling's order) are copied into the output in place of the import. Relative
imports inside copied code are made absolute, and the step repeats for what they bring in.

Model code also imports small torch libraries of other distributions (x-transformers builds
its layers with `torch_einops_utils.nn.Sequential`). Their names are treated the same way when
the module's file is found on the search path (`sys.path`, looked up as files: nothing is
imported) and its top-level package is not one the mapping tables know (torch, einops,
transformers, the targets: those are mapped, not converted), so the output does not hand
converted layers to torch code.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst

from precision_transpiler.convert.class_reach import (
    LEFT_OUT,
    class_text,
    reachable_parts,
    reached_lines,
    used_attributes,
    used_names,
)
from precision_transpiler.convert.definition_order import order_definitions
from precision_transpiler.convert.import_lines import (
    after_imports,
    first_line,
    insert_lines,
    lone_from_imports,
    render,
    splice,
)
from precision_transpiler.convert.module_imports import module_imports_as_names, module_namespaces
from precision_transpiler.files import ReadError, read_source
from precision_transpiler.syntax import IMPORTS_TORCH

MARKER = "# ptranspile: converted from {module} (a sibling module this file needs)"


#: Lines of converted sibling code one file may take in (after unreached methods are left out).
#: diffusers' `get_down_block` dispatches on block names to every block class of its module, and
#: its attention module names every processor class: UNet2DConditionModel needs ~27,000 lines,
#: AutoencoderKL ~33,000 (its Downsample2D left imported past a budget of 30,000 broke the
#: model). What is left imported past the budget is reported as unsupported, since a torch class
#: left imported breaks the converted model: the budget is a guard against runaway copies only.
BUDGET = 60000
#: Non-model helpers are copied in only below this many lines (with what they use).
SMALL_HELPER = 200


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


Diagnostics = list[tuple[int, int, str, str, str]]  # line, col, severity, code, message

_RUNS_GENERATED_CODE = re.compile(r"\bexec_module\(|(?<![\w.])exec\(")
_FROM_LINE = re.compile(r"^\f*from\b.*$", re.MULTILINE)
_FROM_IMPORT = re.compile(r"\f*from[ \t]+(\.*)[ \t]*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)?[ \t]+import\b")


def top_level_from_imports(code: str) -> list[tuple[int, str]] | None:
    """(level, dotted module) of every line that may be a top-level `from M import ...`, read
    from the text alone; None when a line starting with `from` cannot be read so (the caller then
    parses). A superset: lines inside strings count too. Lets the steps that only look at these
    imports skip parsing a whole large file with LibCST when none of them can matter."""
    found: list[tuple[int, str]] = []
    for line in _FROM_LINE.finditer(code):
        match = _FROM_IMPORT.match(line.group())
        if match is None:
            if re.match(r"\f*from[ \t.\\(]", line.group()):
                return None  # `from \` continued on the next line, `from a . b import c`: unsure
            continue  # `fromage = 1`
        found.append((len(match.group(1)), match.group(2) or ""))
    return found


def package_of(path: Path) -> list[str]:
    parts: list[str] = []
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return parts


def absolute_module(path: str, level: int, module: str) -> str | None:
    """The module `from <level dots><module> import ...` names, seen from the file `path`."""
    if not level:
        return module or None
    file = Path(path)
    package = package_of(file) if file.is_file() else []
    if level > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def _module_file(path: Path, level: int, module: str | None) -> tuple[Path | None, str]:
    """File and dotted name of `from <level dots><module> import ...` seen from `path`."""
    package = package_of(path)
    if level > len(package) or not package:
        return None, ""
    base_parts = package[: len(package) - (level - 1)]
    root = path.parent
    for _ in range(level - 1):
        root = root.parent
    parts = module.split(".") if module else []
    target = root.joinpath(*parts)
    name = ".".join([*base_parts, *parts])
    if target.with_suffix(".py").is_file():
        return target.with_suffix(".py"), name
    if (target / "__init__.py").is_file():
        return target / "__init__.py", name
    return None, name


#: Package modules read at most to find the framework a file uses only through its package.
_PACKAGE_SCAN = 40


def framework_through_package(path: Path, code: str, detect: Callable[[str], str | None]) -> tuple[str, Path] | None:
    """(framework, module file) for a file that imports no framework itself but builds on its
    package's modules (segmentation_models_pytorch's `decoders/unet/model.py` imports only
    `..base` and `.decoder`, which import torch): the framework of the first module its package
    imports reach that uses one, read as files in breadth-first order (nothing is imported).
    `detect` tells a module's framework from its text. None when no module in reach uses one."""
    queue: list[tuple[Path, str]] = [(path, code)]
    seen = {path.resolve()}
    while queue and len(seen) <= _PACKAGE_SCAN:
        here, text = queue.pop(0)
        imports = top_level_from_imports(text)
        if imports is None:
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            imports = [(n.level, n.module or "") for n in tree.body if isinstance(n, ast.ImportFrom)]
        for level, module in imports:
            found = _module_file(here, level, module)[0] if level else _absolute_file(here, module)[0]
            if found is None or found.resolve() in seen:
                continue
            seen.add(found.resolve())
            try:
                found_text = read_source(found)
            except ReadError:
                continue
            framework = detect(found_text)
            if framework is not None and framework != "numpy":
                return framework, found
            queue.append((found, found_text))
    return None


def _absolute_file(path: Path, module: str) -> tuple[Path | None, str]:
    """An absolute import into the file's own top-level package."""
    package = package_of(path)
    if not package or module.split(".")[0] != package[0]:
        return None, module
    root = path.parent
    for _ in range(len(package)):
        root = root.parent
    target = root.joinpath(*module.split("."))
    if target.with_suffix(".py").is_file():
        return target.with_suffix(".py"), module
    if (target / "__init__.py").is_file():
        return target / "__init__.py", module
    return None, module


def _installed_file(module: str, mapped: frozenset[str]) -> tuple[Path | None, str]:
    """The file of an absolute import of another distribution, found on `sys.path` as a file
    (never imported); None for the standard library, for packages the tables map (`mapped`
    top-level names) and for what is not found."""
    parts = module.split(".")
    if not parts[0] or parts[0] in mapped or parts[0] in sys.stdlib_module_names:
        return None, module
    for entry in sys.path:
        root = Path(entry or ".")
        top = root / parts[0]
        # a regular package, a namespace package (a folder without `__init__.py`: pytorch-tabnet),
        # or a top-level module
        if not top.is_dir() and not (len(parts) == 1 and top.with_suffix(".py").is_file()):
            continue
        target = root.joinpath(*parts)
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if candidate.is_file():
                try:
                    text = candidate.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    return None, module
                # torch code only: a library that merely mentions torch stays imported; a
                # package's `__init__.py` that re-exports its own modules (torch_einops_utils'
                # `from torch_einops_utils.stable_softmax import cross_entropy`) is followed there
                # (torchvision's `models/mobilenet.py` is `from .mobilenetv2 import *` only)
                torch_code = IMPORTS_TORCH.search(text) is not None
                if not torch_code:
                    init = candidate.name == "__init__.py"
                    package = module if init else module.rsplit(".", 1)[0]
                    star = "" if init else r"[^\n]*import[ \t]+\*"  # a module: star re-exports only
                    own = re.compile(rf"^[ \t]*from[ \t]+(?:\.|{re.escape(package)}\.){star}", re.MULTILINE)
                    torch_code = own.search(text) is not None
                return (candidate if torch_code else None), module
        return None, module  # the package is here, the module is not (an extension): left as is
    return None, module


@functools.lru_cache(maxsize=64)
def parsed_source(text: str) -> ast.Module:
    """`ast.parse(text)`, remembered: copying reads the same sibling modules and converted texts
    again in every round (a tree is read, never changed). Raises SyntaxError as ast.parse does."""
    return ast.parse(text)


def inline_siblings(
    path: str,
    code: str,
    convert: Callable[[str, str], tuple[str, Diagnostics]],
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
        new_code = _one_round(file, code, convert, cache, report, budget, known=known, mapped=mapped)
        if new_code == code:
            # what later copies call on a class copied earlier (a base whose subclasses came in
            # later rounds: torch-geometric's `Aggregation.reduce`) comes back into it
            new_code = _restore_left_out(code, report, cache)
            if new_code == code:
                break
        code = new_code
    else:
        report.unfinished = max_rounds  # imports copied code still needs stay as they are: said
    if report.inlined:
        code = order_definitions(code)  # a base copied in a later round lands above its own base
    return code, report


@functools.lru_cache(maxsize=256)
def _model_names(text: str) -> frozenset[str]:
    """Module classes and layer-building functions of a sibling (its source): what model code
    needs from it (utilities such as logging or config helpers stay imported). Remembered: a
    sibling is imported by many copied modules, in many rounds."""
    from precision_transpiler.analysis.torch_models import analyse
    from precision_transpiler.rewrite.names import scope_bindings

    tree = parsed_source(text)
    bindings, _ = scope_bindings(tree)
    analysis = analyse(tree, bindings, strict=True)
    return frozenset(analysis.module_classes | {k for k in analysis.builders if "." not in k})


def _one_round(
    file: Path,
    code: str,
    convert: Callable[[str, str], tuple[str, Diagnostics]],
    cache: dict[Path, tuple[str, Diagnostics]],
    report: SiblingReport,
    budget: int = BUDGET,
    known: frozenset[str] = frozenset(),
    mapped: frozenset[str] | None = None,
) -> str:
    def locate(level: int, name: str | None) -> tuple[Path | None, str]:
        if level:
            return _module_file(file, level, name)
        if not name:
            return None, ""
        found, dotted_name = _absolute_file(file, name)
        if found is None and mapped is not None and name.split(".")[0] not in package_of(file)[:1]:
            return _installed_file(name, mapped)
        return found, dotted_name

    code = module_imports_as_names(code, locate)  # `made_module.MADE` -> `MADE`, imported by name
    code = module_namespaces(code, locate)  # `vars(aggr)` of `import pkg.aggr as aggr`: a namespace
    imports = top_level_from_imports(code)
    if imports is not None and not any(
        sibling is not None and sibling.resolve() != file.resolve()
        for sibling, _ in (locate(level, name or None) for level, name in imports if level or name)
    ):
        return code  # no import of a sibling: nothing to do, without parsing a large file
    parsed = ast.parse(code)
    defined = _top_names(parsed)
    reached = frozenset(used_names([parsed]))  # what copied classes must keep
    bound = _import_bindings(parsed.body)  # local name -> import line, to catch clashes
    blocks: list[str] = []
    removals: dict[int, set[str]] = {}  # index in `lone` -> local names no longer imported
    extra_imports: list[str] = []
    redirected = postponed = False
    lone = lone_from_imports(code, parsed)  # the import lines, parsed alone (convert/import_lines.py)
    for index, found in enumerate(lone):
        imp = found.node
        if isinstance(imp.names, cst.ImportStar):
            continue
        level = len(imp.relative)
        dotted_module = dotted(imp.module) if imp.module is not None else None
        if not level and not dotted_module:
            continue
        sibling, sibling_name = locate(level, dotted_module)
        if sibling is None or sibling.resolve() == file.resolve():
            continue
        try:
            text = read_source(sibling)  # as Python reads it: UTF-8, a BOM or a coding comment
        except ReadError:
            continue  # a sibling that cannot be read: its import stays as written
        wanted = [
            (a.name.value, a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else a.name.value)
            for a in imp.names
            if isinstance(a.name, cst.Name)
        ]
        original_tree = parsed_source(text)
        # `from ..ops import StochasticDepth` where ops/__init__.py re-exports it from
        # `.stochastic_depth`: import it from where it is defined (handled next round).
        package_of_sibling = sibling_name if sibling.name == "__init__.py" else sibling_name.rsplit(".", 1)[0]
        reexports = _reexports(original_tree, package_of_sibling, sibling)
        for name, local in wanted:
            if name in reexports and name not in _ast_defs(original_tree) and local not in defined:
                alias = f" as {local}" if local != name else ""
                extra_imports.append(f"from {reexports[name]} import {name}{alias}")
                removals.setdefault(index, set()).add(local)
                redirected = True
            elif name in reexports and local in defined and f"{reexports[name]}.{name}" in report.inlined:
                # re-exported by the package, copied from its module in an earlier round: the
                # import would bind the original above the copy (a subclass copied below would
                # derive from the torch class)
                removals.setdefault(index, set()).add(local)
                redirected = True
        text = _expand_star_imports(text, original_tree, sibling, sibling_name)  # `nn` from `import *`
        if "torch" not in text and not _RUNS_GENERATED_CODE.search(text) and not _imports_inside(text, sibling_name):
            # plain Python (after re-exports were followed): it can stay imported, unless it
            # runs code it generates (torch-geometric's template loader), which converted code
            # must refuse (rules/torch_generated_code_model.py), or imports modules of its
            # package inside functions (a registry's factory returning a layer class)
            continue
        original_tree = parsed_source(text)
        models = _model_names(text)
        # a name left imported before (an earlier statement or round) stays imported: a second
        # copy would be a second class, and library code checks identity against its own
        # (diffusers' `register_to_config` against configuration_utils' ConfigMixin)
        kept = set(report.skipped)
        for name, local in wanted:
            if local in defined and f"{sibling_name}.{name}" in report.inlined:
                # copied in an earlier round: the import would bind the original above the copy
                removals.setdefault(index, set()).add(local)
                redirected = True
            elif local != name and name in defined and f"{sibling_name}.{name}" in report.inlined:
                # copied before under its own name: a second name for it, not a second class
                # (`from ...aggr import Aggregation as aggr_Aggregation`)
                removals.setdefault(index, set()).add(local)
                blocks.append(f"{local} = {name}")
                defined.add(local)
        candidates = [
            (name, local)
            for name, local in wanted
            if name in _ast_defs(original_tree)
            and local not in defined
            and f"{sibling_name}.{name}" not in known
            and f"{sibling_name}.{name}" not in kept
        ]
        if not candidates:
            continue
        if report.lines >= budget:
            report.over_budget += [f"{sibling_name}.{name}" for name, _ in candidates]
            continue
        if sibling not in cache:
            cache[sibling] = convert(text, str(sibling))
        converted, diagnostics = cache[sibling]
        # Model code always; other helpers (`_make_ntuple`) when small or when they use torch
        # (timm's EfficientNetBuilder builds the layers): a large utility that does not
        # (diffusers' `register_to_config`) stays imported rather than copied in whole.
        take = []
        torch_names = _torch_bindings(original_tree)
        needed = set(models) | {
            n for n, _ in candidates if _uses(text, n, sibling_name, original_tree, torch_names, locate)
        }
        for name, local in candidates:
            if name in needed:
                take.append((name, local))
                continue
            small, _, _ = _extract(converted, [name], sibling_name, original_tree, sibling, reached)
            if small is not None and small.count("\n") < SMALL_HELPER:
                take.append((name, local))
            else:
                report.skipped.append(f"{sibling_name}.{name}")
        held = any(f"{sibling_name}.{name}" in kept for name, _ in wanted if name in _ast_defs(original_tree))
        if held or any(pair not in take for pair in candidates):
            # a torch-free helper stays imported: the others of this import stay with it, so
            # that library code sees its own classes (diffusers' `@register_to_config` checks
            # `isinstance(self, ConfigMixin)` against the ConfigMixin of its module)
            report.skipped += [f"{sibling_name}.{name}" for name, _ in take if name not in needed]
            take = [(name, local) for name, local in take if name in needed]
        if not take:
            continue
        # what an earlier copy of this module took along (diffusers' ConfigMixin, a base of the
        # copied LegacyConfigMixin) is not copied again for another name that uses it: a second
        # class would fail library identity checks (`register_to_config`'s isinstance)
        present = frozenset(q.rsplit(".", 1)[1] for q in report.copied if q.rsplit(".", 1)[0] == sibling_name)
        piece, imports, ranges = _extract(
            converted, [n for n, _ in take], sibling_name, original_tree, sibling, reached, frozenset(kept), present
        )
        if piece is None:  # it needs a global set under `if`/`try`: left imported, reported
            report.skipped += [f"{sibling_name}.{name}" for name, _ in take]
            continue
        if report.lines + piece.count("\n") + 1 > budget:
            report.over_budget += [f"{sibling_name}.{name}" for name, _ in take]
            continue
        report.lines += piece.count("\n") + 1
        for cls in ast.parse(piece).body:
            if isinstance(cls, ast.ClassDef) and _left_out(piece, cls):
                report.trimmed[cls.name] = (sibling, sibling_name)
        piece = _rename_shadowing_helpers(piece, {n for n, _ in take}, bound, sibling_name)
        piece, imports = _resolve_clashes(piece, imports, bound)
        # string annotations written for lazy evaluation (`"AttnProcessor" | None`) stay lazy
        postponed = postponed or _postpones_annotations(original_tree)
        blocks.append(MARKER.format(module=sibling_name) + "\n" + piece)
        classes = [n for n, node in _ast_defs(parsed_source(piece)).items() if isinstance(node, ast.ClassDef)]
        report.copied.update(f"{sibling_name}.{n}" for n in classes)
        extra_imports += imports
        for name, local in take:
            if local != name:
                blocks.append(f"{local} = {name}")
            removals.setdefault(index, set()).add(local)
            report.inlined.append(f"{sibling_name}.{name}")
        for line, col, severity, code_, message in diagnostics:
            if any(start <= line <= end for start, end in ranges) and severity in ("error", "unsupported", "warning"):
                report.diagnostics.append((str(sibling), line, col, severity, code_, message))
    if not blocks and not redirected:
        return code
    edits: dict[tuple[int, int], str] = {}
    for index, names in removals.items():
        found = lone[index]
        imp = found.node
        assert not isinstance(imp.names, cst.ImportStar)
        keep = [a for a in imp.names if _local(a) not in names]
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            edits[found.start, found.end] = render(found.statement.with_changes(body=[imp.with_changes(names=keep)]))
        else:
            edits[found.start, found.end] = ""
    code = splice(code, edits)
    tree = ast.parse(code)
    if postponed and not _postpones_annotations(tree):
        code = _postpone_annotations(code, tree)
        tree = ast.parse(code)
    existing = {ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
    imports = [i for i in dict.fromkeys(extra_imports) if i not in existing]
    if not blocks:
        return _insert_imports(code, tree, imports)
    return _insert(code, tree, imports, "\n\n\n".join(blocks))


def _insert_imports(code: str, tree: ast.Module, imports: list[str]) -> str:
    """Only new import lines (re-exports redirected to their defining modules), after the last
    top-level import."""
    if not imports:
        return code
    return insert_lines(code, after_imports(tree, leading_only=False), "\n".join(imports))


def _reexports(tree: ast.Module, package: str, path: Path | None = None) -> dict[str, str]:
    """Names a module imports from elsewhere in its package, made absolute: relative imports,
    and absolute ones of the same top-level package (torch_einops_utils' `__init__.py` has
    `from torch_einops_utils.stable_softmax import cross_entropy`). Given the module's `path`,
    also what its star imports of the package bring (torch_geometric.nn's `from .conv import *`
    gives GCNConv); names it binds itself win."""
    found: dict[str, str] = {}
    top = package.split(".")[0]
    if path is not None:
        found.update(_star_reexports(tree, path, top))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = package.split(".")
            base = parts[: len(parts) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(f"{top}."):
            module = node.module
        else:
            continue
        for alias in node.names:
            if alias.name != "*":
                found[alias.asname or alias.name] = module
    return found


def _star_reexports(tree: ast.Module, path: Path, top: str) -> dict[str, str]:
    """name -> module for the names `from <module of the package> import *` binds in the module
    at `path`."""
    found: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)):
            continue
        if not node.level and not (node.module or "").startswith(f"{top}."):
            continue
        file, absolute = (
            _module_file(path, node.level, node.module) if node.level else _absolute_file(path, node.module or "")
        )
        if file is None or not absolute:
            continue
        found.update(dict.fromkeys(_star_names(file, top), absolute))
    return found


def _star_names(file: Path, top: str, depth: int = 3) -> set[str]:
    """What `from <file's module> import *` binds, through the star imports of the package it
    makes in turn (torchvision's `models/mobilenet.py` is `from .mobilenetv2 import *` with a
    computed `__all__`)."""
    try:
        tree = parsed_source(read_source(file))
    except (ReadError, SyntaxError, ValueError):
        return set()
    names = _star_exports(tree)
    if depth > 0:
        for nested in _star_reexports_files(tree, file, top):
            names |= {n for n in _star_names(nested, top, depth - 1) if not n.startswith("_")}
    return names


def _star_reexports_files(tree: ast.Module, path: Path, top: str) -> list[Path]:
    """The files of the package's modules that `tree` (the module at `path`) star-imports."""
    files = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            if node.level or (node.module or "").startswith(f"{top}."):
                found, _ = (
                    _module_file(path, node.level, node.module)
                    if node.level
                    else _absolute_file(path, node.module or "")
                )
                if found is not None:
                    files.append(found)
    return files


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    assert isinstance(node, cst.Attribute)
    return f"{dotted(node.value)}.{node.attr.value}"


def _local(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return dotted(alias.name)


def _top_names(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)}


def _ast_defs(tree: ast.Module) -> dict[str, ast.stmt]:
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            if _rebinds_itself(node, defs):
                continue  # `SelectOutput = torch.jit.script(SelectOutput)`: a registration of the class
            for target in node.targets:
                # `_flash_attn_available, _flash_attn_version = _is_package_available(...)`
                for name in [target] if isinstance(target, ast.Name) else getattr(target, "elts", []):
                    if isinstance(name, ast.Name):
                        defs[name.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            defs[node.target.id] = node  # `DEFAULT_DIM: int = 64`
    return defs


def _rebinds_itself(node: ast.Assign, defs: dict[str, ast.stmt]) -> bool:
    """`X = f(X)` after `X` is defined (torch-geometric's `SelectOutput =
    torch.jit.script(SelectOutput)`): the statement wraps the definition, which it needs."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return False
    name = node.targets[0].id
    return name in defs and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))


def _extract(
    converted: str,
    names: list[str],
    module_name: str,
    original_tree: ast.Module,
    path: Path | None = None,
    reached: frozenset[str] = frozenset(),
    held: frozenset[str] = frozenset(),
    present: frozenset[str] = frozenset(),
) -> tuple[str | None, list[str], list[tuple[int, int]]]:
    """The closure of `names` in the converted sibling, its imports (made absolute), and the
    original line ranges of what was taken (for diagnostics). A name the closure uses that comes
    from a star import of the sibling (timm's `from .activations import *`) gets an import of its
    own from the module that defines it (`path`, the sibling's file, resolves relative ones), which
    the next round converts like any sibling import. Classes keep only the methods reached from
    `reached` (the attribute names the converting file uses) and from what is kept
    (convert/class_reach.py). `held` names (qualified) stay imported from the library: what the
    closure uses of them is imported, not copied (one class, as the library's own code sees it).
    `present` names of the module are in the output already (an earlier copy took them along):
    the closure uses them there, it does not copy them again."""
    converted, local_imports = _hoist_local_imports(
        converted, module_name, package=path is not None and path.name == "__init__.py"
    )
    tree = parsed_source(converted)
    defs = _ast_defs(tree)
    if not any(n in defs for n in names):
        return None, [], []
    defs = {**_conditional_globals(tree), **defs}  # statements binding globals under `if`/`try`
    for keys in _registrations(tree).values():
        defs.update(keys)  # statements filling a global (the closure takes them with it)
    attributes = set(reached)
    imported = _import_bindings(tree.body)
    while True:
        found = _closure(tree, defs, names, module_name, path, attributes, held)
        if found is None:
            return None, [], []
        closure, needed_imports = found
        grown = attributes | used_attributes(
            part for name in closure for part in reachable_parts(defs[name], attributes)
        )
        grown |= _overridable_methods([defs[name] for name in closure], imported, module_name, path)
        if grown == attributes:
            break
        attributes = grown
    lines = converted.splitlines(keepends=True)
    pieces = []
    taken = {id(defs[name]) for name in closure if name not in present or name in names}
    for node in tree.body:
        if id(node) in taken:
            if isinstance(node, ast.ClassDef):
                pieces.append(class_text(node, lines, attributes))
                continue
            start = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
            pieces.append("".join(lines[start - 1 : node.end_lineno]).rstrip("\n"))
    original_defs = _ast_defs(original_tree)
    ranges = [
        span for n in sorted(closure) if n in original_defs for span in reached_lines(original_defs[n], attributes)
    ]
    kept = {getattr(defs[name], "name", name) for name in closure}  # a registration's definition too
    hoisted = [line for name, line in local_imports if name in kept]
    return "\n\n\n".join(pieces), list(dict.fromkeys([*needed_imports, *hoisted])), ranges


def _torch_bindings(tree: ast.Module) -> set[str]:
    """Top-level names a module binds to torch (`torch`, `nn`, `F`, `from torch import Tensor`)."""
    return {
        alias.asname or alias.name.split(".")[0]
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
        if (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0] == "torch"
        and not getattr(node, "level", 0)
    }


def _uses(
    text: str,
    name: str,
    module_name: str,
    tree: ast.Module,
    torch_names: set[str],
    locate: Callable[[int, str | None], tuple[Path | None, str]] | None = None,
) -> bool:
    """Whether what `name` reaches in the original module (`text`) mentions torch, or imports a
    name from a module of its own library that imports torch (timm's `decode_arch_def` builds
    block arguments with `get_act_layer`, from timm.layers: torch layer classes)."""
    piece, imports, _ = _extract(text, [name], module_name, tree)
    if piece is None:
        return False
    if torch_names and any(isinstance(n, ast.Name) and n.id in torch_names for n in ast.walk(ast.parse(piece))):
        return True
    if locate is None:
        return False
    top = module_name.split(".")[0]
    for line in imports:
        found = re.match(r"from ([\w.]+) import (\w+)", line)
        if found is None or found.group(1).split(".")[0] != top:
            continue
        module, imported = found.group(1), found.group(2)
        for _ in range(3):  # the module, or where its package re-exports the name from
            file, _ = locate(0, module)
            try:
                source = file.read_text(encoding="utf-8", errors="replace") if file is not None else ""
            except OSError:
                break
            reexported = ""
            if file is not None and file.name == "__init__.py":
                try:
                    reexported = _reexports(ast.parse(source), module).get(imported, "")
                except SyntaxError:
                    break
            if not reexported:
                # torch code, also through star imports (timm's create_act.py reads `torch` that way)
                if "torch" in source:
                    return True
                break
            module = reexported
    return False


def _overridable_methods(
    nodes: list[ast.stmt], imported: dict[str, str], module_name: str, path: Path | None
) -> set[str]:
    """The method names of classes among `nodes` whose base is a model class of another module
    of the same package (normflows' `MaskedPiecewiseRationalQuadraticAutoregressive(Autoregressive)`,
    whose base defines `forward`): that base is copied in a later round, and what it calls on
    `self` (`_elementwise_forward`, overridden here) is not known yet, so none of these methods is
    left out. Mixins (diffusers' `PushToHubMixin`) leave the class trimmed as before."""
    found: set[str] = set()
    for node in nodes:
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            while isinstance(base, ast.Attribute):
                base = base.value
            line = imported.get(base.id, "") if isinstance(base, ast.Name) else ""
            if line and path is not None and _model_class_in(line, path, module_name):
                found |= {m.name for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
                break
    return found


def _model_class_in(line: str, path: Path, module_name: str) -> bool:
    """Whether the one name `line` (`from ..base import Flow`) imports is a class defining
    `forward` in a module of the package of `path`."""
    try:
        node = ast.parse(line).body[0]
    except (SyntaxError, IndexError):
        return False
    if not isinstance(node, ast.ImportFrom) or len(node.names) != 1:
        return False
    if node.level:
        file, _ = _module_file(path, node.level, node.module)
    elif node.module and node.module.split(".")[0] == module_name.split(".")[0]:
        file, _ = _absolute_file(path, node.module)
    else:
        return False
    name = node.names[0].name
    for _ in range(4):  # through a package's re-exports (`from torch_geometric.nn.conv import MessagePassing`)
        try:
            tree = parsed_source(read_source(file)) if file is not None else None
        except (ReadError, SyntaxError):
            return False
        if tree is None:
            return False
        for stmt in tree.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return any(isinstance(m, ast.FunctionDef) and m.name == "forward" for m in stmt.body)
        package = ".".join(package_of(file)) if file is not None else ""
        module = _reexports(tree, package).get(name) if package else None
        if module is None:
            return False
        file, _ = _absolute_file(path, module)
    return False


def _import_bindings(body: list[ast.stmt]) -> dict[str, str]:
    """Local name -> the import line binding it, of the top-level imports in `body`."""
    bound: dict[str, str] = {}
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                one = node.__class__(**{**vars(node), "names": [alias]})
                bound[alias.asname or alias.name.split(".")[0]] = ast.unparse(one)
    return bound


def _resolve_clashes(piece: str, imports: list[str], bound: dict[str, str]) -> tuple[str, list[str]]:
    """Copied code importing a name the output already binds to something else (diffusers'
    `from diffusers.utils import logging` beside the standard library's `import logging`): the
    copy imports it under a name of its own, and its uses are renamed. `bound` grows with what
    the copy imports."""
    result: list[str] = []
    for line in imports:
        node = ast.parse(line).body[0]
        assert isinstance(node, ast.Import | ast.ImportFrom)
        alias = node.names[0]
        local = alias.asname or alias.name.split(".")[0]
        if bound.setdefault(local, line) == line or (not alias.asname and "." in alias.name):
            result.append(line)
            continue
        module = node.module if isinstance(node, ast.ImportFrom) and node.module else "import"
        fresh = f"{local}_{module.replace('.', '_')}"
        alias.asname = fresh
        piece = _rename(piece, local, fresh)
        result.append(ast.unparse(node))
        bound[fresh] = result[-1]
    return piece, result


_LEFT_OUT_LINE = re.compile(r"^([ \t]*)" + re.escape(LEFT_OUT.split("{")[0]) + r"(.*)$")


def _left_out(code: str, cls: ast.ClassDef) -> tuple[int, str, list[str]] | None:
    """(line number, indentation, method names) of the left-out comment in `cls`, if it has one."""
    lines = code.splitlines()
    for number in range(cls.lineno, (cls.end_lineno or cls.lineno) + 1):
        match = _LEFT_OUT_LINE.match(lines[number - 1])
        if match:
            return number, match.group(1), [n.strip() for n in match.group(2).split(",") if n.strip()]
    return None


def _restore_left_out(code: str, report: SiblingReport, cache: dict[Path, Any]) -> str:
    """`code` with the left-out methods that the code now reaches put back into their classes
    (taken from the converted sibling they were copied from)."""
    if not report.trimmed:
        return code
    tree = ast.parse(code)
    used = used_attributes([tree])
    lines = code.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []  # (start, end) lines replaced, new lines
    extra: list[str] = []
    for cls in tree.body:
        origin = report.trimmed.get(cls.name) if isinstance(cls, ast.ClassDef) else None
        if origin is None or origin[0] not in cache:
            continue
        path, module_name = origin
        found = _left_out(code, cls)  # type: ignore[arg-type]
        if found is None:
            continue
        number, indent, names = found
        wanted = [n for n in names if n in used]
        if not wanted:
            continue
        source = cache[path][0]  # type: ignore[index]
        classes = (n for n in parsed_source(source).body if isinstance(n, ast.ClassDef))
        original = next((n for n in classes if n.name == cls.name), None)
        if original is None:
            continue
        source_lines = source.splitlines(keepends=True)
        methods = []
        for member in original.body:
            if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and member.name in wanted:
                first = min([member.lineno, *[d.lineno for d in member.decorator_list]])
                methods.append("\n" + "".join(source_lines[first - 1 : member.end_lineno]))
        # imports of the sibling that the restored methods need and the output lacks (the next
        # round converts and copies what they name, as for any sibling import)
        bound = set(_import_bindings(tree.body)) | set(_ast_defs(tree))
        needs = {n.id for m in methods for n in ast.walk(ast.parse(textwrap.dedent(m))) if isinstance(n, ast.Name)}
        for node in parsed_source(source).body:
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                if name in needs and name not in bound and alias.name != "*":
                    package = path.name == "__init__.py"
                    extra.append(_absolute_import(node, name, module_name, package))
        rest = [n for n in names if n not in wanted]
        comment = [indent + LEFT_OUT.format(names=", ".join(rest)) + "\n"] if rest else []
        end = cls.end_lineno or cls.lineno
        edits.append((end, end, [lines[end - 1].rstrip("\n") + "\n", *methods]))
        edits.append((number, number, comment))
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1 : end] = new
    if not edits:
        return code
    restored = "".join(lines)
    imports = list(dict.fromkeys(extra))
    return _insert_imports(restored, ast.parse(restored), imports) if imports else restored


def _rename_shadowing_helpers(piece: str, wanted: set[str], bound: dict[str, str], module: str) -> str:
    """A helper the copy brings along, named like something the output imports (torch-geometric's
    inspector defines `class Parameter`, where the copied message-passing code already imports
    `inspect.Parameter`): defined below the import, the copy would replace it for all the code
    that meant the import. So the helper, and the copy's uses of it, get a name of their own."""
    tree = ast.parse(piece)
    top = module.split(".")[0]
    for name in _ast_defs(tree):
        if name in wanted or name not in bound:
            continue
        imported = ast.parse(bound[name]).body[0]
        if not isinstance(imported, ast.ImportFrom) or imported.level or (imported.module or "").split(".")[0] == top:
            continue  # the package's own name for the same definition, which the next round redirects
        fresh = f"{name}_{module.replace('.', '_')}"
        piece = _rename(piece, name, fresh)
        piece = re.sub(rf"^((?:async\s+)?(?:def|class)\s+){re.escape(name)}\b", rf"\g<1>{fresh}", piece, flags=re.M)
    return piece


def _rename(code: str, old: str, new: str) -> str:
    """`code` with every name `old` (not attributes, not strings) spelled `new`."""
    lines = code.splitlines(keepends=True)
    spots = sorted(
        ((n.lineno, n.col_offset) for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name) and n.id == old),
        reverse=True,
    )
    for line, col in spots:
        text = lines[line - 1]
        start = len(text.encode("utf-8")[:col].decode("utf-8"))  # col_offset counts UTF-8 bytes
        lines[line - 1] = text[:start] + new + text[start + len(old) :]
    return "".join(lines)


def _evaluated_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk` without annotations (kornia's `msg: Optional[CheckMessage]`, whose name is bound
    under `if TYPE_CHECKING:`): under `from __future__ import annotations` they are never
    evaluated."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        for field_name, value in ast.iter_fields(current):
            if field_name in ("annotation", "returns"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    todo.append(child)


def _hoist_local_imports(converted: str, module_name: str, package: bool = False) -> tuple[str, list[tuple[str, str]]]:
    """Relative imports inside functions (diffusers' `Attention.__init__` imports
    `from .normalization import RMSNorm` there, against a circular import) taken out of the
    code and returned as (top-level definition, absolute import line): copied code lives in
    another file, where the relative import would not resolve, and at top level the next round
    converts and copies what it names like any sibling import. Absolute imports of the package's
    own modules there (monai's activation factories: `from monai.networks.blocks.activation
    import Swish` in the function that returns it) likewise: left in place they would import
    the torch original at run time."""
    package_top = module_name.split(".")[0]
    tree = parsed_source(converted)
    lines = converted.splitlines(keepends=True)
    found: list[tuple[str, str]] = []
    drop: set[int] = set()
    rewritten: dict[int, str] = {}  # line -> the relative import there, made absolute in place
    for top in tree.body:
        if not isinstance(top, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(top):
            body = getattr(node, "body", None)
            if (node is top and isinstance(top, ast.ClassDef)) or not isinstance(body, list):
                continue
            relative = [stmt for stmt in body if _own_package_import(stmt, package_top)]
            if node is top:
                # a top-level function's own body: only absolute imports of the package (monai's
                # factories) move; its relative ones stay where they are (imported when called,
                # as diffusers' `deprecate` does `from .. import __version__`), made absolute:
                # the copy lives in another file, where the dots would name another package
                for stmt in relative:
                    if stmt.level:
                        indent = lines[stmt.lineno - 1][: stmt.col_offset]
                        rewritten[stmt.lineno] = indent + _absolute_from(stmt, module_name, package) + "\n"
                        drop.update(range(stmt.lineno + 1, (stmt.end_lineno or stmt.lineno) + 1))
                relative = [stmt for stmt in relative if not stmt.level]
            if len(relative) == len(body):
                continue  # the block would be empty
            for stmt in relative:
                line = _absolute_from(stmt, module_name, package) if stmt.level else ast.unparse(stmt)
                found.append((top.name, line))
                drop.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    if not drop and not rewritten:
        return converted, []
    kept = (rewritten.get(number, line) for number, line in enumerate(lines, 1) if number not in drop)
    return "".join(kept), found


def _imports_inside(text: str, module_name: str) -> bool:
    """Whether an indented line imports from the package of `module_name` (relative or by name):
    what it imports may be torch code, whatever the module's own imports say."""
    top = re.escape(module_name.split(".")[0])
    return re.search(rf"^[ \t]+from[ \t]+(\.|{top}\b)", text, re.MULTILINE) is not None


def _own_package_import(stmt: ast.stmt, package_top: str) -> bool:
    """A `from ... import` of a module of the package `package_top`, relative or absolute."""
    if not isinstance(stmt, ast.ImportFrom):
        return False
    return bool(stmt.level) or (stmt.module or "").split(".")[0] == package_top


def _absolute_from(node: ast.ImportFrom, module_name: str, package: bool = False) -> str:
    """`from .x import a, b` of the module `module_name` as an absolute import line."""
    module = _absolute_module(node.level, node.module, module_name, package)
    return ast.unparse(ast.ImportFrom(module=module, names=node.names, level=0))


def _absolute_module(level: int, module: str | None, module_name: str, package: bool) -> str:
    """The absolute name of `from <level dots><module> import` in `module_name`; in a package's
    `__init__.py` (`package`) one dot is the package itself (`from .timm_universal import` in
    `smp/encoders/__init__.py` is `smp.encoders.timm_universal`)."""
    parts = module_name.split(".")
    base = parts[: len(parts) - level + (1 if package else 0)]
    return ".".join([*base, *([module] if module else [])])


def _closure(
    tree: ast.Module,
    defs: dict[str, ast.stmt],
    names: list[str],
    module_name: str,
    path: Path | None,
    attributes: set[str],
    held: frozenset[str] = frozenset(),
) -> tuple[set[str], list[str]] | None:
    """The top-level names `names` reach (through what of each is reached) and the imports they
    need; None when one of them uses a global the copy could not define."""
    imports: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                imports[alias.asname or alias.name.split(".")[0]] = node
    conditional = _conditional_globals(tree)
    lazy = _postpones_annotations(tree)  # annotations are strings: what they name is not needed
    closure: set[str] = set()
    needed_imports: list[str] = []
    todo = [n for n in names if n in defs]
    registrations = _registrations(tree)
    defs = {**conditional, **defs}  # a global set under `if`/`try` comes with its statement
    for keys in registrations.values():
        defs.update(keys)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        todo.extend(registrations.get(name, {}))  # `encoders.update(resnet_encoders)` fills it
        # source order (a set's order depends on PYTHONHASHSEED and reaches the import lines)
        used = dict.fromkeys(
            n.id
            for part in reachable_parts(defs[name], attributes)
            for n in (_evaluated_nodes(part) if lazy else ast.walk(part))
            if isinstance(n, ast.Name)
        )
        for used_name in used:
            if used_name in conditional and any(
                isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(conditional[used_name])
            ):
                # a global set under `if`/`try` by a relative import: copied, the import would
                # not resolve, so the name stays imported instead
                return None
            if used_name in defs and f"{module_name}.{used_name}" in held and used_name not in names:
                needed_imports.append(f"from {module_name} import {used_name}")
            elif used_name in defs and used_name not in closure:
                todo.append(used_name)
            elif used_name in imports:
                package = path is not None and path.name == "__init__.py"
                needed_imports.append(_absolute_import(imports[used_name], used_name, module_name, package))
            elif path is not None and (star := _star_source(tree, path, module_name, used_name)) is not None:
                needed_imports.append(f"from {star} import {used_name}")
    return closure, needed_imports


def _registrations(tree: ast.Module) -> dict[str, dict[str, ast.stmt]]:
    """Top-level statements that fill a global after it is made, by the global's name, each
    under a key of its own (`<registration N>`, N its line): calls of its methods
    (`encoders.update(resnet_encoders)` in segmentation_models_pytorch, monai's
    `Act.add_factory_callable("elu", ...)`), stores into it (`REGISTRY["x"] = X`) and
    definitions it decorates (`@Conv.factory_function("conv")`). A copied registry comes with
    them: without them it is empty where the code looks names up in it. A class or function
    rebound to a wrapper of itself (`X = torch.jit.script(X)`) comes with that statement too."""
    found: dict[str, dict[str, ast.stmt]] = {}

    def owner(node: ast.expr) -> str | None:
        if isinstance(node, ast.Call):
            node = node.func
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.value.id
        return None

    defined: dict[str, ast.stmt] = {}
    for node in tree.body:
        names: list[str | None] = []
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            names = [owner(node.value)]
        elif isinstance(node, ast.Assign) and _rebinds_itself(node, defined):
            names = [node.targets[0].id]  # type: ignore[attr-defined]  # `X = torch.jit.script(X)`
        elif isinstance(node, ast.Assign):
            names = [t.value.id for t in node.targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [owner(d) for d in node.decorator_list]
        for name in dict.fromkeys(n for n in names if n is not None):
            found.setdefault(name, {})[f"<registration {node.lineno}>"] = node
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            defined[node.name] = node
    return found


def _expand_star_imports(text: str, tree: ast.Module, path: Path, module_name: str) -> str:
    """`text` with the imports a star import brings in spelled out on its line (timm's
    `from .create_act import *` gives `nn`, bound there by `from torch import nn`): converting
    the module then knows `nn` is torch.nn. Appended to the star import's line with `;`, so line
    numbers, which diagnostics name, stay the same."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    lines = text.splitlines(keepends=True)
    changed = False
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)):
            continue
        if node.level:
            file, absolute = _module_file(path, node.level, node.module)
        else:
            file, absolute = _absolute_file(path, node.module or "")
        if file is None:
            continue
        try:
            star_tree = parsed_source(read_source(file))
        except (ReadError, SyntaxError, ValueError):
            continue
        exported = _star_exports(star_tree)
        extra = [
            _absolute_import(imp, name, absolute if file.name != "__init__.py" else absolute + ".__init__")
            for imp in star_tree.body
            if isinstance(imp, ast.Import | ast.ImportFrom)
            for name in [a.asname or a.name.split(".")[0] for a in imp.names if a.name != "*"]
            if name in used and name in exported
        ]
        if extra and node.end_lineno == node.lineno:
            line = lines[node.lineno - 1]
            ending = line[len(line.rstrip("\r\n")) :]
            lines[node.lineno - 1] = line.rstrip("\r\n") + "; " + "; ".join(dict.fromkeys(extra)) + ending
            changed = True
    return "".join(lines) if changed else text


def _star_exports(tree: ast.Module) -> set[str]:
    """Names `from module import *` binds: `__all__` when the module sets it as a literal list,
    else its public top-level names."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                break
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name.split(".")[0]) for a in node.names if a.name != "*")
    names.update(_ast_defs(tree))
    return {n for n in names if not n.startswith("_")}


def _star_source(tree: ast.Module, path: Path, module_name: str, name: str) -> str | None:
    """The absolute module a star import of the sibling (`tree`, the file at `path`) takes `name`
    from, when that module defines it at top level; None otherwise."""
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)):
            continue
        if node.level:
            file, absolute = _module_file(path, node.level, node.module)
        else:
            file, absolute = _absolute_file(path, node.module or "")
        if file is None:
            continue
        try:
            defined = _ast_defs(parsed_source(read_source(file)))
        except (ReadError, SyntaxError, ValueError):
            continue
        if name in defined:
            return absolute
    return None


def _conditional_globals(tree: ast.Module) -> dict[str, ast.stmt]:
    """Module-level names bound only inside compound statements (`if is_torch_npu_available():
    import torch_npu`, `try: import x except ImportError: ...`), which `_ast_defs` does not take,
    and the statement that binds each (the first)."""
    names: dict[str, ast.stmt] = {}
    for node in tree.body:
        if not isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.setdefault(sub.id, node)
            elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.setdefault(sub.name, node)
            elif isinstance(sub, ast.Import | ast.ImportFrom):
                for a in sub.names:
                    names.setdefault((a.asname or a.name).split(".")[0], node)
    defined = _ast_defs(tree)
    return {name: node for name, node in names.items() if name not in defined}


def _absolute_import(node: ast.stmt, name: str, module_name: str, package: bool = False) -> str:
    """The import of `name` only, with a relative module made absolute."""
    if isinstance(node, ast.Import):
        alias = next(a for a in node.names if (a.asname or a.name.split(".")[0]) == name)
        return ast.unparse(ast.Import(names=[alias]))
    assert isinstance(node, ast.ImportFrom)
    alias = next(a for a in node.names if (a.asname or a.name) == name)
    module = node.module or ""
    if node.level:
        module = _absolute_module(node.level, node.module, module_name, package)
    return ast.unparse(ast.ImportFrom(module=module, names=[alias], level=0))


def _postpones_annotations(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )


def _postpone_annotations(code: str, tree: ast.Module) -> str:
    """`code` with `from __future__ import annotations` (after its docstring), which code copied
    from a module that has it needs."""
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        at = first.end_lineno or 0
    else:
        at = first_line(tree)
    return insert_lines(code, at, "from __future__ import annotations")


def _insert(code: str, tree: ast.Module, imports: list[str], block: str) -> str:
    """`block` (copied definitions) after the file's leading imports, with `imports` above it."""
    at = after_imports(tree, leading_only=True)
    lines = code.splitlines(keepends=True)
    head = "".join(lines[:at]).rstrip("\n")
    tail = "".join(lines[at:]).lstrip("\n")
    if imports:
        head += "\n" + "\n".join(imports)
    return head + "\n\n\n" + block + "\n\n\n" + tail
