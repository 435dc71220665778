"""Putting copies into the output: imports and renames.

Copied code arrives as text (a converted sibling's lines, taken at `ast` positions), and the
output it goes into grows to ~18,000 lines over ~10 rounds for a segmentation model with its
encoders. Parsing that output with LibCST every round cost more than converting the siblings,
so the edits here are made in the text at positions `ast` finds (convert/import_lines.py, shared
with convert/module_imports.py and convert/library_imports.py): only the import statements that
change are parsed with LibCST, so their comments and layout survive, and the rest is spliced as
is. What is edited here:

- imports of the output that copies replace (`drop_imported`), and the copies' own imports,
  renamed where they clash with a name the output binds otherwise (`resolve_clashes`), as are
  copied helpers named like one of the output's imports (`rename_shadowing_helpers`) or like a
  different definition the output has (`rename_clashing_definitions`);
- relative and package imports inside copied functions, hoisted to the top
  (`hoist_local_imports`): at top level the next round copies what they name;
- the block of copies and its imports, after the output's imports (`insert_block`), and
  left-out methods put back into copied classes once the output reaches them
  (`restore_left_out`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import libcst as cst

from precision_transpiler.convert.class_reach import LEFT_OUT, used_attributes
from precision_transpiler.convert.import_lines import (
    FromImport,
    first_line,
    insert_lines,
    lone_from_imports,
    render,
    splice,
)
from precision_transpiler.convert.siblings.order import copies_line, imports_line
from precision_transpiler.convert.siblings.resolve import (
    absolute_from,
    absolute_import,
    absolute_name,
    dotted,
    import_bindings,
    parsed_source,
    top_level_definitions,
)

MARKER = "# ptranspile: converted from {module} (a sibling module this file needs)"

#: `elsewhere(import, name, module)`: whether the output's `import` of `name` names a module
#: other than `module` (a copy's) that defines `name` itself
Elsewhere = Callable[[ast.ImportFrom, str, str], bool]


def local_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return dotted(alias.name)


def hoist_local_imports(
    converted: str, module_name: str, package: bool = False, path: Path | None = None
) -> tuple[str, list[tuple[str, str]]]:
    """Relative imports inside functions (diffusers' `Attention.__init__` imports
    `from .normalization import RMSNorm` there, against a circular import) taken out of the
    code and returned as (top-level definition, absolute import line): copied code lives in
    another file, where the relative import would not resolve, and at top level the next round
    converts and copies what it names like any sibling import. Absolute imports of the package's
    own modules there (monai's activation factories: `from monai.networks.blocks.activation
    import Swish` in the function that returns it) likewise: left in place they would import
    the torch original at run time. An import of a module that raises when it loads without an
    optional library (colt5-attention's Triton kernels, imported in a CUDA-only branch: `try:
    import triton / except ImportError: raise ...`) stays where it is, imported only when that
    branch runs, as the original does: copied in, the converted file would fail to load; so
    does an import the function guards with `try: ... except ImportError:`."""
    package_top = module_name.split(".")[0]
    tree = parsed_source(converted)
    lines = converted.splitlines(keepends=True)
    found: list[tuple[str, str]] = []
    drop: set[int] = set()
    rewritten: dict[int, str] = {}  # line -> the relative import there, made absolute in place

    def keep_in_place(stmt: ast.ImportFrom) -> None:
        indent = lines[stmt.lineno - 1][: stmt.col_offset]
        rewritten[stmt.lineno] = indent + absolute_from(stmt, module_name, package) + "\n"
        drop.update(range(stmt.lineno + 1, (stmt.end_lineno or stmt.lineno) + 1))

    for top in tree.body:
        if not isinstance(top, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(top):
            body = getattr(node, "body", None)
            if (node is top and isinstance(top, ast.ClassDef)) or not isinstance(body, list):
                continue
            relative = [stmt for stmt in body if own_package_import(stmt, package_top)]
            if _guards_import(node):
                # `try: from .triton_sinkhorn import ... except ImportError:` (hyper-connections'
                # optional kernels, under `if use_triton_sinkhorn:`): the code runs without it, so
                # it stays where it is, imported only when that branch runs, as the original
                # does; copied in at module level, the converted file needed the optional library
                for stmt in relative:
                    if stmt.level:
                        keep_in_place(stmt)
                continue
            if node is top:
                # a top-level function's own body: absolute imports of the package (monai's
                # factories) move, and relative ones of functions and classes (spikingjelly's
                # `voltage_reset` imports `from ..._ops.reset import voltage`: left in place, the
                # call imported the torch original); relative ones of anything else stay where
                # they are (imported when called, as diffusers' `deprecate` does `from .. import
                # __version__`), made absolute: the copy lives in another file, where the dots
                # would name another package
                for stmt in relative:
                    if stmt.level and not (path is not None and _imports_code(stmt, module_name, package, path)):
                        keep_in_place(stmt)
                relative = [stmt for stmt in relative if stmt.lineno not in rewritten]
            if path is not None:
                relative = [stmt for stmt in relative if not _raises_on_load(stmt, module_name, package, path)]
            if not relative or len(relative) == len(body):
                continue  # the block would be empty
            for stmt in relative:
                line = absolute_from(stmt, module_name, package) if stmt.level else ast.unparse(stmt)
                found.append((top.name, line))
                drop.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    if not drop and not rewritten:
        return converted, []
    kept = (rewritten.get(number, line) for number, line in enumerate(lines, 1) if number not in drop)
    return "".join(kept), found


def _guards_import(node: ast.AST) -> bool:
    """A `try` whose handlers catch a failed import."""
    from precision_transpiler.analysis.load_imports import catches_import_error

    return isinstance(node, ast.Try) and any(catches_import_error(h) for h in node.handlers)


def _imported_tree(stmt: ast.ImportFrom, module_name: str, package: bool, path: Path) -> ast.Module | None:
    """The syntax tree of the package module `stmt` imports from (None when it is not a file
    of the package or does not parse)."""
    absolute = absolute_name(stmt.level, stmt.module, module_name, package) if stmt.level else stmt.module or ""
    parts = absolute.split(".")
    root = path.parent
    for _ in range(len(module_name.split(".")) - (0 if package else 1)):
        root = root.parent
    target = root.joinpath(*parts)
    for file in (target.with_suffix(".py"), target / "__init__.py"):
        if file.is_file():
            try:
                return parsed_source(file.read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                return None
    return None


def _raises_on_load(stmt: ast.ImportFrom, module_name: str, package: bool, path: Path) -> bool:
    """Whether the package module `stmt` imports has a `raise` among its module-level statements
    (inside a module-level `if` or `try` included): it refuses to load in some environments; or
    imports a GPU kernel library when it loads (native-sparse-attention's `triton_nsa.py`, which
    `SparseAttention.forward` imports only `if self.use_triton_kernel`): an optional accelerated
    path (`kernel_packages:` in mappings/torch_surface.yaml)."""
    tree = _imported_tree(stmt, module_name, package, path)
    if tree is None:
        return False
    kernels = _kernel_packages()
    for node in (n for stmt_ in tree.body for n in _module_level(stmt_)):
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in kernels for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in kernels:
            return True
    return False


def _kernel_packages() -> frozenset[str]:
    from precision_transpiler.mappings.registry import load_mappings

    surface = load_mappings().surfaces.get("torch")
    return surface.kernel_packages if surface is not None else frozenset()


def _imports_code(stmt: ast.ImportFrom, module_name: str, package: bool, path: Path) -> bool:
    """Whether every name `stmt` imports is a function or class its module defines at top level:
    code the copy converts, where a value (`__version__`) may stay imported."""
    tree = _imported_tree(stmt, module_name, package, path)
    if tree is None or any(alias.name == "*" for alias in stmt.names):
        return False
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)}
    return all(alias.name in defined for alias in stmt.names)


def _module_level(stmt: ast.stmt) -> list[ast.AST]:
    """`stmt` and what runs with it when the module loads (not function or class bodies)."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return []
    found: list[ast.AST] = [stmt]
    for field in ("body", "orelse", "finalbody", "handlers"):
        for child in getattr(stmt, field, []) or []:
            found += _module_level(child) if isinstance(child, ast.stmt) else _handler_level(child)
    return found


def _handler_level(handler: ast.AST) -> list[ast.AST]:
    return [node for child in getattr(handler, "body", []) for node in _module_level(child)]


def own_package_import(stmt: ast.stmt, package_top: str) -> bool:
    """A `from ... import` of a module of the package `package_top`, relative or absolute."""
    if not isinstance(stmt, ast.ImportFrom):
        return False
    return bool(stmt.level) or (stmt.module or "").split(".")[0] == package_top


def resolve_clashes(piece: str, imports: list[str], bound: dict[str, str]) -> tuple[str, list[str]]:
    """Copied code importing a name the output already binds to something else (diffusers'
    `from diffusers.utils import logging` beside the standard library's `import logging`): the
    copy imports it under a name of its own, and its uses are renamed. `bound` grows with what
    the copy imports."""
    result: list[str] = []
    renames: dict[str, str] = {}
    for line in imports:
        node = ast.parse(line).body[0]  # parsed alone: its alias is renamed in place
        assert isinstance(node, ast.Import | ast.ImportFrom)
        alias = node.names[0]
        local = alias.asname or alias.name.split(".")[0]
        if bound.setdefault(local, line) == line or (not alias.asname and "." in alias.name):
            result.append(line)
            continue
        module = node.module if isinstance(node, ast.ImportFrom) and node.module else "import"
        fresh = f"{local}_{module.replace('.', '_')}"
        alias.asname = fresh
        renames.setdefault(local, fresh)  # a second clash of the name finds it renamed already
        result.append(ast.unparse(node))
        bound[fresh] = result[-1]
    return rename_names(piece, renames), result


def rename_shadowing_helpers(
    piece: str, wanted: set[str], bound: dict[str, str], module: str, elsewhere: Elsewhere | None = None
) -> str:
    """A helper the copy brings along, named like something the output imports (torch-geometric's
    inspector defines `class Parameter`, where the copied message-passing code already imports
    `inspect.Parameter`): defined below the import, the copy would replace it for all the code
    that meant the import. So the helper, and the copy's uses of it, get a name of their own.
    An import from the package (the copy's own or the file's) is the same definition under the
    package's name, which the next round redirects, unless `elsewhere(import, name, module)`
    says it names another module that defines it itself (the file imports `split` from
    helpers.py, and the copy of local.py brings local.py's own `split`)."""
    tree = parsed_source(piece)
    top = module.split(".")[0]
    renames: dict[str, str] = {}
    for name in top_level_definitions(tree):
        if name in wanted or name not in bound:
            continue
        imported = ast.parse(bound[name]).body[0]
        if not isinstance(imported, ast.ImportFrom):
            continue
        own = imported.level or (imported.module or "").split(".")[0] == top
        if own and (elsewhere is None or not elsewhere(imported, name, module)):
            continue
        renames[name] = f"{name}_{module.replace('.', '_')}"
    return rename_definitions(piece, renames, tree)


def rename_clashing_definitions(
    piece: str, wanted: set[str], existing: Callable[[str], ast.stmt | None], module: str, known: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """A definition the copy brings along named like a different one the output has already
    (colt5-attention's own `pad_to_multiple`, returning `(tensor, seq_len)`, beside
    local_attention's, returning `(padded, tensor)`, which the copied LocalAttention calls):
    one would replace the other for all the code, whichever comes first. So the copy's gets a
    name of its own (`pad_to_multiple_local_attention_local_attention`), and the copy's uses
    follow; what uses a renamed one may then differ in turn, until nothing clashes. A definition
    the same as the output's (the same module's copied again, `exists` written alike) stays
    shared. `existing(name)`: the output's definition of `name`, or None; `known`: this module's
    names renamed by earlier copies (name -> name in the output), applied first (what a copy
    uses of a class copied before, not copied again, follows it). Returns the piece and its
    renames, `known`'s included."""
    renames = {name: fresh for name, fresh in known.items() if name not in wanted}
    piece = rename_definitions(piece, renames)
    suffix = "_" + module.replace(".", "_")
    while True:
        tree = parsed_source(piece)
        clashing = {
            name: name + suffix
            for name, node in top_level_definitions(tree).items()
            if name not in wanted and _differs(existing(name), node)
        }
        if not clashing:
            return piece, renames
        piece = rename_definitions(piece, clashing, tree)
        for name, fresh in clashing.items():
            renames[next((old for old, new in renames.items() if new == name), name)] = fresh


def _differs(there: ast.stmt | None, node: ast.stmt) -> bool:
    return there is not None and ast.dump(there) != ast.dump(node)


def rename_definitions(piece: str, renames: dict[str, str], tree: ast.Module | None = None) -> str:
    """`piece` with the top-level definitions `renames` names (`def`, `class`, assignment) and
    every use of them spelled as it says."""
    if not renames:
        return piece
    piece = rename_names(piece, renames, tree)
    for name, fresh in renames.items():
        piece = re.sub(rf"^((?:async\s+)?(?:def|class)\s+){re.escape(name)}\b", rf"\g<1>{fresh}", piece, flags=re.M)
    return piece


def rename_names(code: str, renames: dict[str, str], tree: ast.Module | None = None) -> str:
    """`code` with every name (not attributes, not strings) that `renames` maps spelled as it
    says, found in one walk of its tree (`tree`, when the caller has it). A function's own
    name of that spelling stays (`def f(x, scale)` beside a helper `scale` renamed), as do
    class attributes (`dim = 64` in a class body)."""
    if not renames:
        return code
    lines = code.splitlines(keepends=True)
    spots = sorted(_module_names(tree if tree is not None else ast.parse(code), set(renames)), reverse=True)
    for line, col, old in spots:
        text = lines[line - 1]
        start = len(text.encode("utf-8")[:col].decode("utf-8"))  # col_offset counts UTF-8 bytes
        lines[line - 1] = text[:start] + renames[old] + text[start + len(old) :]
    return "".join(lines)


def _module_names(tree: ast.Module, names: set[str]) -> list[tuple[int, int, str]]:
    """(line, column, name) of each of `names` used as a module-level name in `tree`: not in the
    body of a function (or lambda) that binds it otherwise than by assigning it, nor assigned in
    a class body."""
    found: list[tuple[int, int, str]] = []
    attributes: set[int] = set()  # ids of Name nodes a class body assigns
    stack: list[tuple[ast.AST, frozenset[str]]] = [(tree, frozenset())]
    while stack:
        node, local = stack.pop()
        if isinstance(node, ast.Name):
            if node.id in names and node.id not in local and id(node) not in attributes:
                found.append((node.lineno, node.col_offset, node.id))
            continue
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            body = node.body if isinstance(node.body, list) else [node.body]
            inner, own = local | (_bound_otherwise(node, body) & names), {id(b) for b in body}
            stack += [(child, inner if id(child) in own else local) for child in children]
            continue
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
                for target in targets if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign) else []:
                    elts = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
                    attributes.update(id(e) for e in elts if isinstance(e, ast.Name))
        stack += [(child, local) for child in children]
    return found


def _bound_otherwise(scope: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, body: list[Any]) -> set[str]:
    """Names `scope` binds for itself otherwise than by assigning a name (renamed with its uses,
    that stays right): its parameters, definitions, imports and `except ... as` names."""
    args = scope.args
    found = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)  # its body is a scope of its own
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.add(node.name)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack += ast.iter_child_nodes(node)
    return found


_LEFT_OUT_LINE = re.compile(r"^([ \t]*)" + re.escape(LEFT_OUT.split("{")[0]) + r"(.*)$")


def left_out_comment(code: str, cls: ast.ClassDef) -> tuple[int, str, list[str]] | None:
    """(line number, indentation, method names) of the left-out comment in `cls`, if it has one."""
    lines = code.splitlines()
    for number in range(cls.lineno, (cls.end_lineno or cls.lineno) + 1):
        match = _LEFT_OUT_LINE.match(lines[number - 1])
        if match:
            return number, match.group(1), [n.strip() for n in match.group(2).split(",") if n.strip()]
    return None


def restore_left_out(code: str, trimmed: dict[str, tuple[Path, str]], cache: dict[Path, Any]) -> str:
    """`code` with the left-out methods that the code now reaches put back into their classes
    (taken from the converted sibling they were copied from; `trimmed`: class name -> the
    sibling's file and module name, `cache`: file -> its converted text first)."""
    if not trimmed:
        return code
    tree = ast.parse(code)
    used = used_attributes([tree])
    lines = code.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []  # (start, end) lines replaced, new lines
    extra: list[str] = []
    for cls in tree.body:
        origin = trimmed.get(cls.name) if isinstance(cls, ast.ClassDef) else None
        if origin is None or origin[0] not in cache:
            continue
        path, module_name = origin
        found = left_out_comment(code, cls)  # type: ignore[arg-type]
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
        members = [
            m for m in original.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and m.name in wanted
        ]
        methods = []
        for member in members:
            first = min([member.lineno, *[d.lineno for d in member.decorator_list]])
            methods.append("\n" + "".join(source_lines[first - 1 : member.end_lineno]))
        # imports of the sibling that the restored methods need and the output lacks (the next
        # round converts and copies what they name, as for any sibling import)
        bound = set(import_bindings(tree.body)) | set(top_level_definitions(tree))
        needs = {n.id for m in members for n in ast.walk(m) if isinstance(n, ast.Name)}  # from the sibling's tree
        for node in parsed_source(source).body:
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                if name in needs and name not in bound and alias.name != "*":
                    package = path.name == "__init__.py"
                    extra.append(absolute_import(node, name, module_name, package))
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
    return insert_imports(restored, ast.parse(restored), imports) if imports else restored


def postpone_annotations(code: str, tree: ast.Module) -> str:
    """`code` with `from __future__ import annotations` (after its docstring), which code copied
    from a module that has it needs."""
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        at = first.end_lineno or 0
    else:
        at = first_line(tree)
    return insert_lines(code, at, "from __future__ import annotations")


def insert_block(code: str, tree: ast.Module, imports: list[str], block: str) -> str:
    """`block` (copied definitions) after the file's leading imports, with `imports` above it."""
    at = copies_line(tree)
    lines = code.splitlines(keepends=True)
    head = "".join(lines[:at]).rstrip("\n")
    tail = "".join(lines[at:]).lstrip("\n")
    if imports:
        head += "\n" + "\n".join(imports)
    return head + "\n\n\n" + block + "\n\n\n" + tail


def insert_imports(code: str, tree: ast.Module, imports: list[str]) -> str:
    """Only new import lines (re-exports redirected to their defining modules), after the last
    top-level import."""
    if not imports:
        return code
    return insert_lines(code, imports_line(tree), "\n".join(imports))


def output_imports(code: str, tree: ast.Module) -> list[FromImport]:
    """The output's top-level `from` imports alone on their lines (`tree` is its `ast`), each
    parsed alone with LibCST: what a round reads the names wanted from, and what
    `drop_imported` edits by index."""
    return lone_from_imports(code, tree)


def drop_imported(code: str, lone: list[FromImport], removals: dict[int, set[str]]) -> str:
    """`code` without the names `removals` says (index in `lone` -> local names) in its lone
    `from` imports (convert/import_lines.py): an import left with no name goes, blank lines
    above it too; the others are rendered again by LibCST, comments kept."""
    edits: dict[tuple[int, int], str] = {}
    for index, names in removals.items():
        found = lone[index]
        imp = found.node
        assert not isinstance(imp.names, cst.ImportStar)
        keep = [a for a in imp.names if local_name(a) not in names]
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            edits[found.start, found.end] = render(found.statement.with_changes(body=[imp.with_changes(names=keep)]))
        else:
            edits[found.start, found.end] = ""
    return splice(code, edits)
