"""Modules imported as names (`from ..nets import made as made_module`, then `made_module.MADE(...)`)
become imports of the names used from them, so that sibling inlining can convert and copy them.

Sibling inlining (convert/siblings/) takes `from M import Name` statements; a module object
imported by name was left imported as it was, and its classes (torch layers) were built inside
the converted model, where they fail at the first call. Here every use of such an alias must be
an attribute read (`alias.Name`, through submodules: `utils.splines.spline(...)`); each becomes a
plain name imported from the module that defines it, `from normflows.nets.made import MADE`, and
the module import goes. An alias used otherwise (passed as a value, assigned to, read with
getattr) is left as written. Only modules `locate` finds as files (the file's own package and
torch libraries, never the standard library or mapped frameworks) that use torch are rewritten:
plain Python helpers stay imported as they were.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from pathlib import Path

import libcst as cst

from precision_transpiler.convert.import_lines import (
    char_column,
    line_offsets,
    lone_statement,
    output_tree,
    render,
    splice_spans,
)
from precision_transpiler.syntax import IMPORTS_TORCH, is_dunder

#: (level, dotted module or None) -> (its file or None, its absolute dotted name)
Locate = Callable[[int, str | None], tuple[Path | None, str]]


def module_imports_as_names(code: str, locate: Locate) -> str:
    """`code` with module-object imports of sibling or library modules turned into name imports."""
    if "import " not in code:  # `from m import x` and `import m.sub as x` alike
        return code
    try:
        tree = output_tree(code)
    except SyntaxError:
        return code
    modules = _module_aliases(tree, locate)
    if not modules:
        return code
    uses = _attribute_uses(tree, set(modules))
    if not uses:
        return code
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | _bound_names(tree)
    renames: dict[tuple[str, ...], str] = {}  # attribute chain -> the name it becomes
    imports: list[str] = []
    done: set[str] = set()
    for alias, chains in uses.items():
        complete = True
        for chain in sorted(chains):
            module, length = _split(modules[alias], chain, locate)
            if length is None or _plain_python(locate(0, module)[0], chain[length - 1], module):
                complete = False  # the module object itself is used, or plain Python that can stay
                continue
            key = (alias, *chain[:length])
            if key in renames:
                continue
            symbol = chain[length - 1]
            if is_dunder(symbol):
                # an attribute of the module object, not a definition: `from m import __name__`
                # would rebind the output's own `__name__`. The module's name is known; others stay
                if symbol != "__name__":
                    complete = False
                else:
                    renames[key] = f'"{module}"'
                continue
            local = symbol if symbol not in taken else f"{alias}_{symbol}"
            taken.add(local)
            renames[key] = local
            imports.append(f"from {module} import {symbol}" + (f" as {local}" if local != symbol else ""))
        if complete:
            done.add(alias)
    if not renames:
        return code
    sources = {key[0] for key in renames}
    edited = _rewrite_text(code, tree, renames, done, sources, imports)
    if edited is not None:
        return edited
    return cst.parse_module(code).visit(_Rewrite(renames, done, sources, imports)).code


def _rewrite_text(
    code: str,
    tree: ast.Module,
    renames: dict[tuple[str, ...], str],
    done: set[str],
    sources: set[str],
    imports: list[str],
) -> str | None:
    """What `_Rewrite` does, as edits of the text at ast positions: parsing a large file (the
    output of sibling copying, each round) with LibCST costs seconds, and only the attribute
    chains and a few import statements change. None when an import to edit shares its line with
    another statement (`_Rewrite` then does it)."""
    lines = code.splitlines(keepends=True)
    offsets = line_offsets(lines)

    def offset(line: int, byte_column: int) -> int:
        return offsets[line - 1] + char_column(lines[line - 1], byte_column)

    edits: list[tuple[int, int, str]] = []
    taken: list[tuple[int, int]] = []
    # positions inside f-strings are not reliable before Python 3.12: LibCST edits those files
    in_fstrings = {id(n) for s in ast.walk(tree) if isinstance(s, ast.JoinedStr) for n in ast.walk(s)}
    for node in ast.walk(tree):  # outer attributes first: an inner one of a renamed chain is inside it
        if not isinstance(node, ast.Attribute) or node.end_lineno is None or node.end_col_offset is None:
            continue
        local = renames.get(_ast_chain(node) or ())
        if local is None:
            continue
        if id(node) in in_fstrings:
            return None
        start, end = offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)
        if any(a <= start and end <= b for a, b in taken):
            continue
        taken.append((start, end))
        edits.append((start, end, local))
    statements: list[tuple[ast.Import | ast.ImportFrom, list[ast.stmt]]] = []
    for parent in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(parent, field, None)
            if isinstance(body, list):
                statements += [(s, body) for s in body if isinstance(s, ast.Import | ast.ImportFrom)]
    placed = False
    for node, body in sorted(statements, key=lambda pair: pair[0].lineno):
        if any(a.name == "*" for a in node.names):
            continue
        bound = [a.asname or (a.name.split(".")[0] if isinstance(node, ast.Import) else a.name) for a in node.names]
        if not sources & set(bound):
            continue
        keep = [name not in done for name in bound]
        if all(keep) and placed:
            continue
        statement = lone_statement(lines, node, body)
        if statement is None:
            return None
        indent = lines[node.lineno - 1][: node.col_offset]
        text = ""
        if any(keep):
            imp = statement.body[0]
            assert isinstance(imp, cst.Import | cst.ImportFrom) and not isinstance(imp.names, cst.ImportStar)
            aliases = [a for a, k in zip(imp.names, keep, strict=True) if k]
            aliases[-1] = aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            text = render(statement.with_changes(body=[imp.with_changes(names=aliases)]), indent)
        if not placed:
            placed = True
            text += "".join(f"{indent}{line}\n" for line in dict.fromkeys(imports))
        if not text and len(body) == 1:
            text = f"{indent}pass\n"  # the only statement of its block
        first = node.lineno - 1
        while not text and first > 0 and not lines[first - 1].strip():
            first -= 1  # blank lines above go with a dropped statement, as with LibCST's leading lines
        edits.append((offsets[first], offsets[node.end_lineno or node.lineno], text))
    return splice_spans(code, edits)


def _ast_chain(node: ast.expr) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(parts))


def module_namespaces(code: str, locate: Locate) -> str:
    """`code` with module objects of sibling or library modules that are used as a whole made
    namespaces of names imported from them, which sibling inlining can then convert and copy.

    torch-geometric builds its registries of layers from whole modules
    (`import torch_geometric.nn.aggr as aggr` in a function, then `vars(aggr).values()`), kornia's
    RandAugment takes its operations from one by name (`from . import ops`, then `getattr(ops,
    name)`); the module object would hand torch classes to converted code. So such an import becomes
    `aggr = types.SimpleNamespace(**{"SumAggregation": aggr_SumAggregation, ...})` in its place,
    over the module's public names (its `__all__`, else its public classes and functions), each
    imported by name at the top of the file. Imports whose alias is only read through attributes
    are left to `module_imports_as_names`."""
    if "import " not in code:
        return code
    try:
        tree = output_tree(code)
    except SyntaxError:
        return code
    found: list[tuple[ast.Import | ast.ImportFrom, str, str, Path]] = []  # statement, alias, module, its file
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and len(node.names) == 1 and node.names[0].asname:
            alias = node.names[0]
            file, dotted = locate(0, alias.name)
            if file is not None:
                found.append((node, alias.asname or "", dotted, file))
    # `from . import ops`, then `getattr(ops, name)` (kornia's RandAugment picks its operations by
    # name): a sibling module bound by a from-import and used whole
    submodules = _module_aliases(tree, locate)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and len(node.names) == 1:
            bound = node.names[0].asname or node.names[0].name
            file = locate(0, submodules[bound])[0] if bound in submodules else None
            if file is not None:
                found.append((node, bound, submodules[bound], file))
    if not found:
        return code
    whole = _whole_uses(tree, {alias for _, alias, _, _ in found})
    lines = code.splitlines(keepends=True)
    top: list[str] = []
    taken = _bound_names(tree) | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    top_level = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    existing = {  # names an earlier round imported already: (module, name) -> local
        (n.module, a.name): a.asname or a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module and not n.level
        for a in n.names
    }
    for node, alias, module, file in sorted(found, key=lambda f: -f[0].lineno):
        line = lines[node.lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        names = _public_names(file)
        if alias not in whole or not names or node.lineno != node.end_lineno or line.strip() != ast.unparse(node):
            continue
        members = []
        for name in names:
            local = existing.get((module, name))
            if local is None and f"{alias}_{name}" in top_level:
                local = f"{alias}_{name}"  # copied in an earlier round (`aggr_X = X` follows the copy)
            if local is None:
                local = f"{alias}_{name}"
                while local in taken:
                    local += "_"
                taken.add(local)
                existing[(module, name)] = local
                top.append(f"from {module} import {name} as {local}\n")
            members.append(f'{indent}    "{name}": {local},\n')
        lines[node.lineno - 1] = f"{indent}{alias} = types.SimpleNamespace(**{{\n{''.join(members)}{indent}}})\n"
    if lines == code.splitlines(keepends=True):
        return code
    top.insert(0, "import types\n")
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    at = max((n.end_lineno or n.lineno) for n in imports) if imports else 0
    made = [node.lineno - 1 for node, alias, _, _ in found if node in tree.body and alias in whole]
    at = min([at, *made])  # above a namespace made at module level, which reads them
    lines[at:at] = top
    return "".join(lines)


def _whole_uses(tree: ast.Module, aliases: set[str]) -> set[str]:
    """The aliases read as a value somewhere, not only as the object of an attribute read."""
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name)
        and node.id in aliases
        and isinstance(node.ctx, ast.Load)
        and not isinstance(parents.get(id(node)), ast.Attribute)
    }


def _public_names(path: Path) -> list[str]:
    """What `from module import *` would give: its literal `__all__`, else its public top-level
    classes, functions and assigned names."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = node.value
            if isinstance(value, ast.List | ast.Tuple) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
            ):
                return [e.value for e in value.elts]  # type: ignore[attr-defined]
            return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):  # constants too (`ops.SCALE`)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return [name for name in dict.fromkeys(names) if not name.startswith("_")]


def module_aliases_of(path: str) -> Callable[[ast.Module], Collection[str]] | None:
    """What the rule engine asks (EngineOptions.module_aliases): the top-level names of a
    module's tree that `from M import sub` binds to module files of `path`'s package."""
    file = Path(path) if path else None
    if file is None or not file.is_file():
        return None
    from precision_transpiler.convert.siblings.resolve import locator  # siblings/ imports this module

    return lambda tree: set(_module_aliases(tree, locator(file, None)))


def _module_aliases(tree: ast.Module, locate: Locate) -> dict[str, str]:
    """Local name -> absolute module name, for top-level `from M import sub [as alias]` where
    `sub` is a module file of M's package and not a name M's own file defines."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            found.update(_torch_package_imports(node, locate))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            if alias.name == "*":
                continue
            submodule = f"{node.module}.{alias.name}" if node.module else alias.name
            file, dotted = locate(node.level, submodule)
            if file is None:
                continue
            parent_file, _ = locate(node.level, node.module) if node.module or node.level else (None, "")
            if parent_file is not None and alias.name in _defined(parent_file):
                continue  # a class or function of that name shadows the submodule
            found[alias.asname or alias.name] = dotted
    return found


def _torch_package_imports(node: ast.Import, locate: Locate) -> dict[str, str]:
    """`import torchvision` (then `torchvision.models.MobileNetV2` as a base class:
    segmentation_models_pytorch's encoders): local name -> package, for a package (not torch
    itself) whose `__init__.py` imports torch; `import pkg.utils.torchutils as torchutils`: a
    module file that imports torch. Plain-Python packages and modules (`import numpy as np`)
    are left alone."""
    found: dict[str, str] = {}
    for alias in node.names:
        module = alias.name if alias.asname else alias.name.split(".")[0]
        if module.split(".")[0] == "torch":
            continue
        file, dotted = locate(0, module)
        if file is None or (file.name != "__init__.py" and not alias.asname):
            continue  # `import pkg.sub` binds `pkg`, read through the package
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if IMPORTS_TORCH.search(text) or (alias.asname and _loads_torch(file)):
            found[alias.asname or module] = dotted
    return found


def _loads_torch(path: Path) -> bool:
    """Whether importing the module at `path` runs a package `__init__.py` that imports torch
    (nflows' `import nflows.utils.typechecks as check`: plain, in a package that is not)."""
    from precision_transpiler.convert.siblings.resolve import package_imports_torch  # siblings/ imports this module

    return package_imports_torch(path)


def _plain_python(path: Path | None, symbol: str, module: str) -> bool:
    """Whether `symbol` is defined in a module that does not use torch and whose import does
    not load it either: a package `__init__.py` above it that imports torch (nflows' `utils`
    re-exports its torch helpers beside the plain `typechecks`), or a distribution that requires
    torch, makes it a torch module like any other. A re-export is followed by sibling
    inlining, so it is not judged here."""
    if path is None:
        return True
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    from precision_transpiler.analysis.load_imports import torch_distribution
    from precision_transpiler.convert.siblings.resolve import package_imports_torch  # siblings/ imports this module

    if "torch" in text or package_imports_torch(path) or torch_distribution(module.split(".")[0]) is not None:
        return False
    return symbol in _defined(path)


def _defined(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name a definition, parameter or import binds anywhere in the module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return names


def _attribute_uses(tree: ast.Module, aliases: set[str]) -> dict[str, set[tuple[str, ...]]]:
    """Alias -> the attribute chains read from it (`("splines", "spline")`); aliases with any
    other use are left out."""
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    uses: dict[str, set[tuple[str, ...]]] = {}
    spoiled: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id in aliases):
            continue
        parent = parents.get(id(node))
        if isinstance(node.ctx, ast.Store) and _class_scope(node, parents):
            continue  # a class attribute of that name (a dataclass field `surrogate: str`) shadows nothing here
        if isinstance(parent, ast.alias) or not isinstance(parent, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            spoiled.add(node.id)
            continue
        chain: list[str] = []
        current: ast.AST = node
        while isinstance(parent, ast.Attribute) and parent.value is current:
            chain.append(parent.attr)
            current, parent = parent, parents.get(id(parent))
        if not isinstance(current.ctx, ast.Load):  # type: ignore[attr-defined]
            spoiled.add(node.id)
            continue
        uses.setdefault(node.id, set()).add(tuple(chain))
    return {alias: chains for alias, chains in uses.items() if alias not in spoiled}


def _class_scope(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Whether the nearest scope around `node` is a class body."""
    current = parents.get(id(node))
    while current is not None:
        if isinstance(current, ast.ClassDef):
            return True
        if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.comprehension):
            return False
        current = parents.get(id(current))
    return False


def _split(module: str, chain: tuple[str, ...], locate: Locate) -> tuple[str, int | None]:
    """The module a chain's name lives in and how many parts of the chain name it: `utils` +
    (`splines`, `spline`, `x`) -> (`pkg.utils.splines`, 2) when splines is a module file; None
    when the chain ends in a module (the module object itself is used)."""
    for index, part in enumerate(chain):
        file, _ = locate(0, f"{module}.{part}")
        if file is None:
            return module, index + 1
        module = f"{module}.{part}"
    return module, None


class _Rewrite(cst.CSTTransformer):
    """Replace the attribute chains by their names; drop the module imports fully replaced and
    put the new imports in their place."""

    def __init__(
        self, renames: dict[tuple[str, ...], str], done: set[str], sources: set[str], imports: list[str]
    ) -> None:
        super().__init__()
        self.renames = renames
        self.done = done  # aliases every use of which is renamed: their import goes
        self.sources = sources  # aliases with a renamed use: the new imports follow theirs
        self.imports = imports
        self.placed = False

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        chain = _chain(original_node)
        local = self.renames.get(chain) if chain is not None else None
        return cst.parse_expression(local) if local is not None else updated_node  # a name or a literal

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.BaseStatement] | cst.RemovalSentinel:
        if len(updated_node.body) != 1 or not isinstance(updated_node.body[0], cst.ImportFrom | cst.Import):
            return updated_node
        imp = updated_node.body[0]
        if isinstance(imp.names, cst.ImportStar):
            return updated_node
        bound = [
            a.asname.name.value
            if a.asname and isinstance(a.asname.name, cst.Name)
            else _text(a.name).split(".")[0]  # `import torchvision.models` binds `torchvision`
            if isinstance(imp, cst.Import)
            else _text(a.name)
            for a in imp.names
        ]
        if not self.sources & set(bound):
            return updated_node
        keep = [a for a, name in zip(imp.names, bound, strict=True) if name not in self.done]
        new: list[cst.BaseStatement] = []
        if len(keep) == len(imp.names):
            new.append(updated_node)
        elif keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            new.append(updated_node.with_changes(body=[imp.with_changes(names=keep)]))
        if not self.placed:
            self.placed = True
            new += [cst.parse_statement(line + "\n") for line in dict.fromkeys(self.imports)]
        return cst.FlattenSentinel(new) if new else cst.RemoveFromParent()


def _chain(node: cst.BaseExpression) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    return (node.value, *reversed(parts))


def _text(node: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(node)
