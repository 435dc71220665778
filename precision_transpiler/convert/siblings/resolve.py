"""Which modules and names sibling copying reads: the first phase.

A converted file names what it still needs by its imports. This module finds the file behind
each (`relative_module_file` for `from ..ops.misc import MLP`, `package_module_file` for an
absolute import into the file's own top-level package, `installed_module_file` for a torch
library of another distribution, found on `sys.path` as a file: nothing is imported), follows a
package's re-exports and star imports to the module that defines a name, and reads what a module
binds at top level. Every module is read as one `ast` tree, remembered by its text
(`parsed_source`): the other phases are handed that tree rather than parsing the text again.
Names are made absolute here too (`absolute_import`): copied code lives in another file, where
relative imports would name another package.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path

import libcst as cst

from precision_transpiler.convert.import_lines import char_column
from precision_transpiler.files import ReadError, package_parts, read_source
from precision_transpiler.syntax import IMPORTS_TORCH, is_dunder

#: `locate(level, module)`: the file and dotted name of `from <level dots><module> import ...`
Locate = Callable[[int, str | None], tuple[Path | None, str]]

_STAR_IMPORT = re.compile(r"\bimport[ \t]*\*")

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
    """The packages `path` sits in, namespace portions inside a package included."""
    return package_parts(path)


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


def relative_module_file(path: Path, level: int, module: str | None) -> tuple[Path | None, str]:
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
                tree = parsed_source(text)
            except SyntaxError:
                continue
            imports = [(n.level, n.module or "") for n in tree.body if isinstance(n, ast.ImportFrom)]
        for level, module in imports:
            found = relative_module_file(here, level, module)[0] if level else package_module_file(here, module)[0]
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


def package_module_file(path: Path, module: str) -> tuple[Path | None, str]:
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


def installed_module_file(module: str, mapped: frozenset[str]) -> tuple[Path | None, str]:
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
                # package's `__init__.py` that re-exports modules of its distribution
                # (torch_einops_utils' `from torch_einops_utils.stable_softmax import
                # cross_entropy`, timm's deprecated `timm.models.layers` re-exporting
                # `timm.layers`) is followed there (torchvision's `models/mobilenet.py` is `from
                # .mobilenetv2 import *` only)
                torch_code = IMPORTS_TORCH.search(text) is not None
                if not torch_code:
                    init = candidate.name == "__init__.py"
                    package = parts[0] if init else module.rsplit(".", 1)[0]
                    star = "" if init else r"[^\n]*import[ \t]+\*"  # a module: star re-exports only
                    own = re.compile(rf"^[ \t]*from[ \t]+(?:\.|{re.escape(package)}\.){star}", re.MULTILINE)
                    torch_code = own.search(text) is not None
                return (candidate if torch_code else None), module
        return None, module  # the package is here, the module is not (an extension): left as is
    return None, module


@functools.lru_cache(maxsize=64)
def parsed_source(text: str) -> ast.Module:
    """`ast.parse(text)`, remembered: copying reads the same sibling modules and converted texts
    again in every round (a tree is read, never changed). Raises SyntaxError as ast.parse does.
    The output itself, a new text every round and the largest, is parsed where a round needs it
    and not remembered; single import lines that are edited are parsed alone (splice.py)."""
    return ast.parse(text)


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    assert isinstance(node, cst.Attribute)
    return f"{dotted(node.value)}.{node.attr.value}"


def top_level_names(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)}


def top_level_definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            if rebinds_itself(node, defs):
                continue  # `SelectOutput = torch.jit.script(SelectOutput)`: a registration of the class
            for target in node.targets:
                # `_flash_attn_available, _flash_attn_version = _is_package_available(...)`
                for name in [target] if isinstance(target, ast.Name) else getattr(target, "elts", []):
                    if isinstance(name, ast.Name):
                        defs[name.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            defs[node.target.id] = node  # `DEFAULT_DIM: int = 64`
    return defs


def rebinds_itself(node: ast.Assign, defs: dict[str, ast.stmt]) -> bool:
    """`X = f(X)` after `X` is defined (torch-geometric's `SelectOutput =
    torch.jit.script(SelectOutput)`): the statement wraps the definition, which it needs."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return False
    name = node.targets[0].id
    return name in defs and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))


def single_imports(body: list[ast.stmt]) -> dict[str, ast.Import | ast.ImportFrom]:
    """Local name -> an import of that name alone (a new node, its alias shared), of the
    top-level imports in `body`."""
    bound: dict[str, ast.Import | ast.ImportFrom] = {}
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = node.__class__(**{**vars(node), "names": [alias]})
    return bound


def import_bindings(body: list[ast.stmt]) -> dict[str, str]:
    """Local name -> the import line binding it, of the top-level imports in `body`."""
    return {name: ast.unparse(node) for name, node in single_imports(body).items()}


def reexport_sources(tree: ast.Module, package: str, path: Path | None = None) -> dict[str, str]:
    """Names a module imports from elsewhere in its package, made absolute: relative imports,
    and absolute ones of the same top-level package (torch_einops_utils' `__init__.py` has
    `from torch_einops_utils.stable_softmax import cross_entropy`). Given the module's `path`,
    also what its star imports of the package bring (torch_geometric.nn's `from .conv import *`
    gives GCNConv); names it binds itself win."""
    found: dict[str, str] = {}
    top = package.split(".")[0]
    if path is not None:
        found.update(star_reexports(tree, path, top))
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


def star_reexports(tree: ast.Module, path: Path, top: str) -> dict[str, str]:
    """name -> module for the names `from <module of the package> import *` binds in the module
    at `path`."""
    found: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)):
            continue
        if not node.level and not (node.module or "").startswith(f"{top}."):
            continue
        file, absolute = (
            relative_module_file(path, node.level, node.module)
            if node.level
            else package_module_file(path, node.module or "")
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
    names = star_exports(tree)
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
                    relative_module_file(path, node.level, node.module)
                    if node.level
                    else package_module_file(path, node.module or "")
                )
                if found is not None:
                    files.append(found)
    return files


def star_exports(tree: ast.Module) -> set[str]:
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
    names.update(top_level_definitions(tree))
    return {n for n in names if not n.startswith("_")}


def star_source(tree: ast.Module, path: Path, module_name: str, name: str) -> str | None:
    """The absolute module a star import of the sibling (`tree`, the file at `path`) takes `name`
    from, when that module defines it at top level; None otherwise."""
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)):
            continue
        if node.level:
            file, absolute = relative_module_file(path, node.level, node.module)
        else:
            file, absolute = package_module_file(path, node.module or "")
        if file is None:
            continue
        try:
            defined = top_level_definitions(parsed_source(read_source(file)))
        except (ReadError, SyntaxError, ValueError):
            continue
        if name in defined:
            return absolute
    return None


def expand_star_imports(text: str, tree: ast.Module, path: Path, module_name: str) -> str:
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
            file, absolute = relative_module_file(path, node.level, node.module)
        else:
            file, absolute = package_module_file(path, node.module or "")
        if file is None:
            continue
        try:
            star_tree = parsed_source(read_source(file))
        except (ReadError, SyntaxError, ValueError):
            continue
        exported = star_exports(star_tree)
        extra = [
            absolute_import(imp, name, absolute if file.name != "__init__.py" else absolute + ".__init__")
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


def expand_file_star_imports(text: str, path: str) -> str:
    """`expand_star_imports` for the file being converted (`path`, when it is a module of a
    package): the rules then know what `math` and `nn` are where only a star import binds them."""
    file = Path(path)
    if _STAR_IMPORT.search(text) is None or not file.is_file() or not package_of(file):
        return text
    try:
        tree = parsed_source(text)
    except SyntaxError:
        return text
    parts = package_of(file) + ([] if file.name == "__init__.py" else [file.stem])
    return expand_star_imports(text, tree, file, ".".join(parts))


def absolute_import(node: ast.stmt, name: str, module_name: str, package: bool = False) -> str:
    """The import of `name` only, with a relative module made absolute."""
    if isinstance(node, ast.Import):
        alias = next(a for a in node.names if (a.asname or a.name.split(".")[0]) == name)
        return ast.unparse(ast.Import(names=[alias]))
    assert isinstance(node, ast.ImportFrom)
    alias = next(a for a in node.names if (a.asname or a.name) == name)
    module = node.module or ""
    if node.level:
        module = absolute_name(node.level, node.module, module_name, package)
    return ast.unparse(ast.ImportFrom(module=module, names=[alias], level=0))


def absolute_from(node: ast.ImportFrom, module_name: str, package: bool = False) -> str:
    """`from .x import a, b` of the module `module_name` as an absolute import line."""
    module = absolute_name(node.level, node.module, module_name, package)
    return ast.unparse(ast.ImportFrom(module=module, names=node.names, level=0))


def absolute_name(level: int, module: str | None, module_name: str, package: bool) -> str:
    """The absolute name of `from <level dots><module> import` in `module_name`; in a package's
    `__init__.py` (`package`) one dot is the package itself (`from .timm_universal import` in
    `smp/encoders/__init__.py` is `smp.encoders.timm_universal`)."""
    parts = module_name.split(".")
    base = parts[: len(parts) - level + (1 if package else 0)]
    return ".".join([*base, *([module] if module else [])])


def locator(file: Path, mapped: frozenset[str] | None) -> Locate:
    """`locate(level, module)`: the file and dotted name of `from <level dots><module> import`
    seen from `file`; modules of other distributions too when `mapped` is given."""

    def locate(level: int, name: str | None) -> tuple[Path | None, str]:
        if level:
            return relative_module_file(file, level, name)
        if not name:
            return None, ""
        found, dotted_name = package_module_file(file, name)
        if found is None and mapped is not None and name.split(".")[0] not in package_of(file)[:1]:
            return installed_module_file(name, mapped)
        return found, dotted_name

    return locate


def imports_a_sibling(file: Path, code: str, locate: Locate) -> bool:
    """Whether `code` may import from a sibling module, read from the text when it can be."""
    imports = top_level_from_imports(code)
    return imports is None or any(
        sibling is not None and sibling.resolve() != file.resolve()
        for sibling, _ in (locate(level, name or None) for level, name in imports if level or name)
    )


def package_imports_torch(path: Path) -> bool:
    """Whether importing the module at `path` runs a package `__init__.py` that imports torch,
    itself or through the modules of its package it imports (geffnet's `__init__.py` is
    `from .gen_efficientnet import *`): a module free of torch is then no lighter to import."""
    folder = path.absolute().parent  # `Path("mod.py").parent` is `.`, whose parent is itself
    while folder.parent != folder and (folder / "__init__.py").is_file():
        if _init_imports_torch(folder / "__init__.py"):
            return True
        folder = folder.parent
    return False


@functools.lru_cache(maxsize=256)
def _init_imports_torch(init: Path) -> bool:
    try:
        text = read_source(init)
        tree = parsed_source(text)
    except (ReadError, SyntaxError, ValueError):
        return False
    if IMPORTS_TORCH.search(text):
        return True
    top = package_of(init)[:1]
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or not (node.level or (node.module or "").split(".")[0] in top):
            continue
        found = (
            relative_module_file(init, node.level, node.module)[0]
            if node.level
            else package_module_file(init, node.module or "")[0]
        )
        try:
            if found is not None and found != init and IMPORTS_TORCH.search(read_source(found)):
                return True
        except ReadError:
            continue
    return False


def star_imports_as_names(code: str, file: Path, locate: Locate) -> tuple[str, list[str]]:
    """`code` (the output) with each top-level star import of a module `locate` finds (a sibling,
    a torch library) spelled out as the names the output uses of what it exports (its `__all__`,
    else its public names, through the package's star imports): `from .config import *` becomes
    `from .config import is_exportable`, which the rounds then copy like any named import. A name
    the module itself imports is imported from where it comes. A star import of which the output
    uses nothing goes: left, it would run the module (and torch) for nothing. Also returns the
    modules of star imports that cannot be read, which stay as written."""
    if _STAR_IMPORT.search(code) is None:
        return code, []
    tree = ast.parse(code)
    stars = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) and node.module != "__future__"
    ]
    if not stars:
        return code, []
    bound = top_level_names(tree) | set(top_level_definitions(tree)) | set(single_imports(tree.body))
    used = dict.fromkeys(
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound
    )
    lines = code.splitlines(keepends=True)
    unresolved: list[str] = []
    for node in reversed(stars):  # bottom up: the line numbers above stay right
        path, name = locate(node.level, node.module)
        if path is None or path.resolve() == file.resolve():
            continue
        try:
            star_tree = parsed_source(read_source(path))
        except (ReadError, SyntaxError, ValueError):
            unresolved.append(f"{'.' * node.level}{node.module or ''}")
            continue
        exported = _star_names(path, name.split(".")[0])
        taken = [n for n in used if n in exported and not is_dunder(n)]
        imports = single_imports(star_tree.body)
        package = path.name == "__init__.py"
        spelled = [absolute_import(imports[n], n, name, package) for n in taken if n in imports]
        own = [n for n in taken if n not in imports]
        if own:
            spelled.insert(0, f"from {'.' * node.level}{node.module or ''} import {', '.join(own)}")
        _replace_statement(lines, node, spelled)
    return "".join(lines), unresolved[::-1]


def _replace_statement(lines: list[str], node: ast.stmt, spelled: list[str]) -> None:
    """Put the top-level statements `spelled` where `node` is in `lines`, each on a line of its
    own (the rounds read import lines alone): its own lines, or above the rest of a line it
    shares (`from .m import *; import math`, as `expand_star_imports` writes)."""
    line = lines[node.lineno - 1]
    start = char_column(line, node.col_offset)
    end = char_column(line, node.end_col_offset or 0)
    after = line[end:].lstrip(" \t")
    if node.end_lineno == node.lineno and (line[:start].strip() or after.startswith(";")):
        if after.startswith(";"):  # the star import first
            rest = line[:start] + after[1:].lstrip(" \t")
        else:  # after another statement
            rest = line[:start].rstrip().removesuffix(";").rstrip() + line[end:]
        lines[node.lineno - 1] = "".join(f"{statement}\n" for statement in spelled) + rest
        return
    text = "".join(f"{line[:start]}{statement}\n" for statement in spelled)
    lines[node.lineno - 1 : node.end_lineno or node.lineno] = [text] if text else []
