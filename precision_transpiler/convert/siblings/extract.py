"""What a copy takes from a converted sibling: definitions and what they depend on.

Given the names a file imports from a sibling, `extract_definitions` takes their closure in the
converted sibling: the top-level definitions they reach (classes only with the methods reached,
convert/class_reach.py), the statements that bind globals they read under `if`/`try`, the
registrations that fill a registry they use, and the imports all of it needs, made absolute.
`model_names` and `uses_torch` say which names model code needs (module classes, layer builders,
helpers that use torch): the rest may stay imported. Trees come from `resolve.parsed_source`, so
each module text is parsed once however many names and rounds read it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from precision_transpiler.convert.class_reach import class_text, reachable_parts, reached_lines, used_attributes
from precision_transpiler.convert.siblings.resolve import (
    absolute_import,
    package_module_file,
    package_of,
    parsed_source,
    rebinds_itself,
    reexport_sources,
    relative_module_file,
    single_imports,
    star_source,
    top_level_definitions,
)
from precision_transpiler.convert.siblings.splice import hoist_local_imports
from precision_transpiler.files import ReadError, read_source

RUNS_GENERATED_CODE = re.compile(r"\bexec_module\(|(?<![\w.])exec\(")


@functools.lru_cache(maxsize=256)
def model_names(text: str) -> frozenset[str]:
    """Module classes and layer-building functions of a sibling (its source): what model code
    needs from it (utilities such as logging or config helpers stay imported). Remembered: a
    sibling is imported by many copied modules, in many rounds."""
    from precision_transpiler.analysis.torch_models import analyse
    from precision_transpiler.rewrite.names import scope_bindings

    tree = parsed_source(text)
    bindings, _ = scope_bindings(tree)
    analysis = analyse(tree, bindings, strict=True)
    return frozenset(analysis.module_classes | {k for k in analysis.builders if "." not in k})


def extract_definitions(
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
    converted, local_imports = hoist_local_imports(
        converted, module_name, package=path is not None and path.name == "__init__.py", path=path
    )
    tree = parsed_source(converted)
    defs = top_level_definitions(tree)
    if not any(n in defs for n in names):
        return None, [], []
    defs = {**conditional_globals(tree), **defs}  # statements binding globals under `if`/`try`
    for keys in registration_statements(tree).values():
        defs.update(keys)  # statements filling a global (the closure takes them with it)
    attributes = set(reached)
    imported = single_imports(tree.body)
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
    original_defs = top_level_definitions(original_tree)
    ranges = [
        span for n in sorted(closure) if n in original_defs for span in reached_lines(original_defs[n], attributes)
    ]
    kept = {getattr(defs[name], "name", name) for name in closure}  # a registration's definition too
    hoisted = [line for name, line in local_imports if name in kept]
    return "\n\n\n".join(pieces), list(dict.fromkeys([*needed_imports, *hoisted])), ranges


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
    conditional = conditional_globals(tree)
    lazy = postpones_annotations(tree)  # annotations are strings: what they name is not needed
    closure: set[str] = set()
    needed_imports: list[str] = []
    todo = [n for n in names if n in defs]
    registrations = registration_statements(tree)
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
                needed_imports.append(absolute_import(imports[used_name], used_name, module_name, package))
            elif path is not None and (star := star_source(tree, path, module_name, used_name)) is not None:
                needed_imports.append(f"from {star} import {used_name}")
    return closure, needed_imports


def registration_statements(tree: ast.Module) -> dict[str, dict[str, ast.stmt]]:
    """Top-level statements that fill a global after it is made, by the global's name, each
    under a key of its own (`<registration N>`, N its line): calls of its methods
    (`encoders.update(resnet_encoders)` in segmentation_models_pytorch, monai's
    `Act.add_factory_callable("elu", ...)`), stores into it (`REGISTRY["x"] = X`), attributes
    set on it (hyper-connections' `mHC.get_init_and_expand_reduce_stream_functions =
    staticmethod(...)` after the class) and definitions it decorates
    (`@Conv.factory_function("conv")`). A copied registry comes with
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
        elif isinstance(node, ast.Assign) and rebinds_itself(node, defined):
            names = [node.targets[0].id]  # type: ignore[attr-defined]  # `X = torch.jit.script(X)`
        elif isinstance(node, ast.Assign):  # `REGISTRY["x"] = X`, `X.create = staticmethod(create)`
            names = [
                t.value.id
                for t in node.targets
                if isinstance(t, ast.Subscript | ast.Attribute) and isinstance(t.value, ast.Name)
            ]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [owner(d) for d in node.decorator_list]
        for name in dict.fromkeys(n for n in names if n is not None):
            found.setdefault(name, {})[f"<registration {node.lineno}>"] = node
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            defined[node.name] = node
    return found


def conditional_globals(tree: ast.Module) -> dict[str, ast.stmt]:
    """Module-level names bound only inside compound statements (`if is_torch_npu_available():
    import torch_npu`, `try: import x except ImportError: ...`), which `top_level_definitions` does not take,
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
    defined = top_level_definitions(tree)
    return {name: node for name, node in names.items() if name not in defined}


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


def postpones_annotations(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )


def torch_bindings(tree: ast.Module) -> set[str]:
    """Top-level names a module binds to torch (`torch`, `nn`, `F`, `from torch import Tensor`)."""
    return {
        alias.asname or alias.name.split(".")[0]
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
        if (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0] == "torch"
        and not getattr(node, "level", 0)
    }


def uses_torch(
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
    piece, imports, _ = extract_definitions(text, [name], module_name, tree)
    if piece is None:
        return False
    if torch_names and any(isinstance(n, ast.Name) and n.id in torch_names for n in ast.walk(parsed_source(piece))):
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
                    reexported = reexport_sources(parsed_source(source), module).get(imported, "")
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
    nodes: list[ast.stmt], imported: dict[str, ast.Import | ast.ImportFrom], module_name: str, path: Path | None
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
            node_imported = imported.get(base.id) if isinstance(base, ast.Name) else None
            if node_imported is not None and path is not None and _model_class_in(node_imported, path, module_name):
                found |= {m.name for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)}
                break
    return found


def _model_class_in(node: ast.Import | ast.ImportFrom, path: Path, module_name: str) -> bool:
    """Whether the one name the import `node` (`from ..base import Flow`) binds is a class
    defining `forward` in a module of the package of `path`."""
    if not isinstance(node, ast.ImportFrom) or len(node.names) != 1:
        return False
    if node.level:
        file, _ = relative_module_file(path, node.level, node.module)
    elif node.module and node.module.split(".")[0] == module_name.split(".")[0]:
        file, _ = package_module_file(path, node.module)
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
        module = reexport_sources(tree, package).get(name) if package else None
        if module is None:
            return False
        file, _ = package_module_file(path, module)
    return False


def imports_inside(text: str, module_name: str, tree: ast.Module | None = None) -> bool:
    """Whether a function imports from the package of `module_name` (relative or by name):
    what it imports may be torch code, whatever the module's own imports say. Imports under a
    module-level `if`/`try` (beartype.typing's version switches) run at load like the others."""
    top = module_name.split(".")[0]
    if re.search(rf"^[ \t]+from[ \t]+(\.|{re.escape(top)}\b)", text, re.MULTILINE) is None:
        return False  # no indented import of the package at all: nothing to parse
    if tree is None:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return True
    return any(
        isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == top)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
    )
