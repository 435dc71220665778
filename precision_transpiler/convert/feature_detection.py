"""Feature-detection imports of the source framework resolve to the path the conversion took.

Model code probes its torch release with an import guarded by `except ImportError`:

    try:
        import torch.fft                       # torch >= 1.7
        def rfft(x): return torch.fft.rfft(x)
    except ImportError:
        def rfft(x): return torch.rfft(x, 1)   # older torch

    try:
        from torch.nn.functional import scaled_dot_product_attention
        HAS_SDPA = True
    except ImportError:
        HAS_SDPA = False

Once the rules have converted the guarded code, the import is all that still needs torch: left
in place, the converted module imports torch whenever it is installed, and carries a fallback
for a torch it will never run on. Where the rest of the `try` body no longer uses what the
guarded imports bind (and nothing else in the module does, or another import binds it too), the
statement becomes that rest: the path the converted code takes; the ImportError fallback goes,
with a note, and the diagnostics about its code go with it.

The inverse, an optional accelerator guarded by `except ImportError` with torch's own layer as
the fallback (`try: from apex.normalization import FusedLayerNorm` ... `except ImportError: from
torch.nn import LayerNorm`), takes the fallback: the converted module can never use a torch
extension, and the fallback's torch imports convert like any other.

So does a torch feature the target has no counterpart for, probed the same way (titans' `try:
from torch.nn.attention.flex_attention import flex_attention ... except ImportError: pass`, with
`flex_attention = None` above): its import is still torch's once the rules ran, so the converted
module takes the path of a torch without that feature, the handler, where the handler imports
no torch and raises nothing. What uses the feature elsewhere stays reported where it is.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from precision_transpiler.convert.local_imports import _names
from precision_transpiler.syntax import all_nodes, dotted_name, import_bound_names, statements_bound_names

IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


@dataclass(frozen=True)
class Resolved:
    """A feature-detection `try` replaced by its body: the guarded imports (as written) and the
    source lines of the dropped fallback, found in the original text."""

    imports: tuple[str, ...]
    fallback_lines: tuple[int, int] | None
    line: int = 1  # the `try` in the original
    #: "torch-fallback": an optional accelerator's `try` replaced by its torch fallback (then
    #: `imports` are the accelerator's imports and `fallback_lines` the dropped `try` body);
    #: "unconverted-feature": a torch feature without a counterpart, replaced by its handler
    #: (`imports` the torch imports left, `fallback_lines` the dropped `try` body);
    #: "accelerator-branch": an `if` that imports a torch package, replaced by its `else`
    kind: str = "feature"

    @property
    def message(self) -> str:
        """What the note where the `try` stood says."""
        if self.kind == "torch-fallback":
            return (
                f"`{self.imports[0]}` is an optional accelerator of torch the converted module cannot use: "
                "it takes the ImportError fallback, torch's own layer"
            )
        if self.kind == "accelerator-branch":
            return (
                f"`{self.imports[0]}` is an optional accelerator of torch the converted module cannot use: "
                "it takes the `else` branch"
            )
        if self.kind == "unconverted-feature":
            return (
                f"`{self.imports[0]}` has no counterpart in the target: the converted module takes its "
                "ImportError path, as torch without that feature would"
            )
        return (
            f"the code `{self.imports[0]}` guards converted: the `try` keeps only that code, and its "
            "ImportError fallback for an older torch is dropped"
        )


def resolve_feature_detection(
    module: cst.Module, roots: frozenset[str], original: str, convertible: Callable[[str], bool] | None = None
) -> tuple[cst.Module, list[Resolved]]:
    """`module` with its module-level feature-detection tries of `roots` imports resolved.
    `convertible` says whether the tables convert a qualified torch name: a feature the module
    exports with a fallback of its own (diffusers' `maybe_allow_in_graph`) takes the fallback
    only where the target lacks it (a fallback is not always torch's equal: an approximate
    `gelu`), and stays as written where the target has it."""
    body = list(module.body)
    resolved: list[Resolved] = []
    out: list[cst.BaseStatement] = []
    read = _read_names(original) if any(isinstance(s, cst.Try) for s in body) else set()
    for index, stmt in enumerate(body):
        exported = _exported_with_fallback(stmt, roots, read)
        if exported and (convertible is None or any(convertible(name) for name in exported)):
            out.append(stmt)
            continue
        kept = None if exported else _resolve(stmt, roots, body[:index] + body[index + 1 :], read)
        if kept is None:
            fallback = _torch_fallback(stmt, roots, module, original, body[:index] + body[index + 1 :])
            fallback = fallback or _unconverted_feature(stmt, roots, module, original)
            if fallback is None:
                out.append(stmt)
                continue
            statements, record = fallback
            resolved.append(record)
            if statements:
                statements[0] = statements[0].with_changes(leading_lines=stmt.leading_lines)
            out.extend(statements)
            continue
        statements, imports = kept
        texts = tuple(module.code_for_node(i).strip() for i in imports)
        span, line = _fallback_lines(original, texts)
        resolved.append(Resolved(texts, span, line))
        if statements:
            statements[0] = statements[0].with_changes(
                leading_lines=[*stmt.leading_lines, *statements[0].leading_lines]
            )
        out.extend(statements)
    if not resolved:
        return module, []
    return module.with_changes(body=out), resolved


def _resolve(
    stmt: cst.BaseStatement, roots: frozenset[str], others: Sequence[cst.BaseStatement], read: set[str]
) -> tuple[list[cst.BaseStatement], list[cst.CSTNode]] | None:
    """(the statements that replace `stmt`, the guarded imports) or None when it stays. `read`:
    the names the original module reads anywhere."""
    if not isinstance(stmt, cst.Try) or not stmt.handlers or stmt.finalbody is not None:
        return None
    if not all(_catches_import_error(h) for h in stmt.handlers) or not isinstance(stmt.body, cst.IndentedBlock):
        return None
    guarded: list[cst.CSTNode] = []
    rest: list[cst.BaseStatement] = []
    for line in stmt.body.body:
        if isinstance(line, cst.SimpleStatementLine) and all(_imports_root(s, roots) for s in line.body):
            guarded.extend(line.body)
            continue
        rest.append(line)
    if not guarded:
        return None
    bound = set().union(*(import_bound_names(node) for node in guarded))
    if _mentions(rest, bound):
        return None  # the converted body still uses what the import binds
    elsewhere = _mentions(others, bound - _bound_by_imports(others))
    if elsewhere:
        return None  # the rest of the module still reads a name only this import binds
    if stmt.orelse is not None and isinstance(stmt.orelse.body, cst.IndentedBlock):
        rest.extend(stmt.orelse.body.body)
    first = stmt.body.body[0]
    if rest and rest[0] is not first:  # the first line was an import: its comments stay
        rest[0] = rest[0].with_changes(leading_lines=[*first.leading_lines, *rest[0].leading_lines])
    return rest, guarded


def _torch_fallback(
    stmt: cst.BaseStatement,
    roots: frozenset[str],
    module: cst.Module,
    original: str,
    others: Sequence[cst.BaseStatement],
) -> tuple[list[cst.BaseStatement], Resolved] | None:
    """An optional accelerator with torch's own layer as the fallback (fair-esm's
    `try: from apex.normalization import FusedLayerNorm ... class ESM1bLayerNorm(...)` /
    `except ImportError: from torch.nn import LayerNorm as ESM1bLayerNorm`): a torch extension
    the converted module can never use, so the module takes the fallback (the handler's torch
    imports, which the rules convert or drop), and the accelerator's code goes. Only where the
    handler is nothing but imports of `roots`, each name it binds the `try` body binds too, the
    body's other names are not read outside it, and the body imports something else."""
    if not isinstance(stmt, cst.Try) or stmt.orelse is not None or stmt.finalbody is not None:
        return None
    if not stmt.handlers or not all(_catches_import_error(h) for h in stmt.handlers):
        return None
    if len(stmt.handlers) != 1 or not isinstance(stmt.body, cst.IndentedBlock):
        return None
    handler = stmt.handlers[0].body
    if not isinstance(handler, cst.IndentedBlock):
        return None
    fallback: list[cst.BaseSmallStatement] = []
    for line in handler.body:
        if not (isinstance(line, cst.SimpleStatementLine) and all(_imports_root(s, roots) for s in line.body)):
            return None
        fallback.extend(line.body)
    accelerator = [
        small
        for line in stmt.body.body
        if isinstance(line, cst.SimpleStatementLine)
        for small in line.body
        if isinstance(small, cst.Import | cst.ImportFrom) and not _imports_root(small, roots)
    ]
    provided = set().union(*(import_bound_names(node) for node in fallback)) if fallback else set()
    defined = statements_bound_names(stmt.body.body)
    if not accelerator or not fallback or not provided <= defined or _mentions(others, defined - provided):
        return None
    texts = tuple(module.code_for_node(i).strip() for i in accelerator)
    span = _try_body_lines(original, texts)
    record = Resolved(texts, span, span[0] if span else 1, kind="torch-fallback")
    # the fallback imports the rest of the module still reads (none, when `--prune-to-entry`
    # left out their users)
    kept = [line for line in handler.body if _mentions(others, _line_names(line))]
    return kept, record


def _unconverted_feature(
    stmt: cst.BaseStatement, roots: frozenset[str], module: cst.Module, original: str
) -> tuple[list[cst.BaseStatement], Resolved] | None:
    """A module-level `try` whose body still imports torch after the rules ran (a feature
    without a counterpart: flex attention) and whose one ImportError handler imports no torch
    and raises nothing: the handler's statements (`pass` gone), and the record."""
    if not isinstance(stmt, cst.Try) or stmt.orelse is not None or stmt.finalbody is not None:
        return None
    if len(stmt.handlers) != 1 or not _catches_import_error(stmt.handlers[0]):
        return None
    handler = stmt.handlers[0].body
    if not isinstance(stmt.body, cst.IndentedBlock) or not isinstance(handler, cst.IndentedBlock):
        return None
    left = [
        small
        for line in stmt.body.body
        if isinstance(line, cst.SimpleStatementLine)
        for small in line.body
        if isinstance(small, cst.Import | cst.ImportFrom) and _imports_root(small, roots)
    ]
    inside = all_nodes(handler)
    if not left or any(isinstance(n, cst.Raise) for n in inside):
        return None
    if any(isinstance(n, cst.Import | cst.ImportFrom) and _imports_root(n, roots) for n in inside):
        return None
    texts = tuple(module.code_for_node(i).strip() for i in left)
    span = _try_body_lines(original, texts)
    record = Resolved(texts, span, span[0] if span else 1, kind="unconverted-feature")
    return [line for line in handler.body if not _only_pass(line)], record


def _exported_with_fallback(stmt: cst.BaseStatement, roots: frozenset[str], read: set[str]) -> list[str]:
    """The qualified torch names a module-level `try` imports as names the module never reads
    (other modules import them) and its ImportError handler defines itself: an export with a
    fallback, not code the rules converted."""
    if not isinstance(stmt, cst.Try) or not isinstance(stmt.body, cst.IndentedBlock):
        return []
    if not stmt.handlers or not all(_catches_import_error(h) for h in stmt.handlers):
        return []
    defined = set().union(*(_handler_definitions(h) for h in stmt.handlers))
    found = []
    for line in stmt.body.body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if not isinstance(small, cst.Import | cst.ImportFrom) or not _imports_root(small, roots):
                continue
            module = dotted_name(small.module) if isinstance(small, cst.ImportFrom) and small.module else None
            for alias in small.names if not isinstance(small.names, cst.ImportStar) else ():
                name = dotted_name(alias.name) or ""
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
                if local in defined and local not in read:
                    found.append(f"{module}.{name}" if module else name)
    return found


def _handler_definitions(handler: cst.ExceptHandler) -> set[str]:
    """The names an ImportError handler binds by code of its own: a definition, or an
    assignment of something other than None (`name = None` marks the feature absent)."""
    names: set[str] = set()
    for node in all_nodes(handler.body):
        if isinstance(node, cst.FunctionDef | cst.ClassDef):
            names.add(node.name.value)
        elif isinstance(node, cst.Assign) and not (isinstance(node.value, cst.Name) and node.value.value == "None"):
            names.update(t.target.value for t in node.targets if isinstance(t.target, cst.Name))
    return names


def _read_names(original: str) -> set[str]:
    """The names the original module reads (loads) anywhere."""
    try:
        tree = ast.parse(original)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _only_pass(line: cst.BaseStatement) -> bool:
    return isinstance(line, cst.SimpleStatementLine) and all(isinstance(s, cst.Pass) for s in line.body)


def _line_names(line: cst.BaseStatement) -> set[str]:
    """The names an import line binds."""
    if not isinstance(line, cst.SimpleStatementLine):
        return set()
    return set().union(*(import_bound_names(s) for s in line.body if isinstance(s, cst.Import | cst.ImportFrom)))


def _try_body_lines(original: str, imports: tuple[str, ...]) -> tuple[int, int] | None:
    """The source lines of the original's module-level `try` body holding these imports."""
    try:
        tree = ast.parse(original)
    except SyntaxError:
        return None
    # by module: the conversion may have dropped names of an import nothing reads
    wanted = {_imported_module(text) for text in imports}
    for stmt in tree.body:
        if isinstance(stmt, ast.Try) and stmt.handlers:
            imports_here = [n for n in stmt.body if isinstance(n, ast.Import | ast.ImportFrom)]
            guarded = {_imported_module(ast.unparse(n)) for n in imports_here}
            if wanted <= guarded:
                return stmt.lineno, stmt.body[-1].end_lineno or stmt.body[-1].lineno
    return None


def _imported_module(text: str) -> str:
    """`from a.b import c, d` -> "from a.b"; `import a.b as x` -> "import a.b"."""
    normal = _normal(text)
    return normal.split(" import ")[0] if normal.startswith("from ") else normal.split(" as ")[0]


def _catches_import_error(handler: cst.ExceptHandler) -> bool:
    kind = handler.type
    if kind is None:
        return False
    names = [e.value for e in kind.elements] if isinstance(kind, cst.Tuple) else [kind]
    return all(isinstance(n, cst.Name) and n.value in IMPORT_ERRORS for n in names)


def _imports_root(node: cst.BaseSmallStatement, roots: frozenset[str]) -> bool:
    if isinstance(node, cst.Import):
        return all((dotted_name(a.name) or "").split(".")[0] in roots for a in node.names)
    if isinstance(node, cst.ImportFrom) and not node.relative and node.module is not None:
        return (dotted_name(node.module) or "").split(".")[0] in roots and not isinstance(node.names, cst.ImportStar)
    return False


def _bound_by_imports(statements: Sequence[cst.BaseStatement]) -> set[str]:
    found: set[str] = set()
    for stmt in statements:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import | cst.ImportFrom):
                    found |= import_bound_names(small)
    return found


def _mentions(nodes: Sequence[cst.CSTNode], names: set[str]) -> bool:
    """Whether the nodes read any of `names` (imports aside: convert/local_imports.py's walk)."""
    return bool(names) and bool(_names(list(nodes)) & names)


def _fallback_lines(original: str, imports: tuple[str, ...]) -> tuple[tuple[int, int] | None, int]:
    """The source lines of the ImportError handlers of the original's module-level `try` that
    guards these imports (matched by their text), for dropping what was said about them, and
    the line of that `try`."""
    try:
        tree = ast.parse(original)
    except SyntaxError:
        return None, 1
    wanted = {_normal(text) for text in imports}
    for stmt in tree.body:
        if isinstance(stmt, ast.Try) and stmt.handlers:
            guarded = {ast.unparse(n) for n in stmt.body if isinstance(n, ast.Import | ast.ImportFrom)}
            if wanted <= guarded:
                first, last = stmt.handlers[0], stmt.handlers[-1]
                return (first.lineno, last.end_lineno or last.lineno), stmt.lineno
    return None, 1


def _normal(text: str) -> str:
    try:
        return ast.unparse(ast.parse(text))
    except SyntaxError:
        return text


def resolve_accelerator_branches(
    module: cst.Module, packages: frozenset[str], original: str
) -> tuple[cst.Module, list[Resolved]]:
    """Module-level `if <available>: import <torch package>` / `else: <fallback>` (diffusers'
    `if is_xformers_available(): import xformers ... else: xformers = None`) becomes its `else`:
    a torch extension the converted module can never use, probed by a test instead of `except
    ImportError`. Left, the converted module imported the extension (and torch) wherever it
    was installed, and the static check of what an output imports at load failed it."""
    out: list[cst.BaseStatement] = []
    resolved: list[Resolved] = []
    for stmt in module.body:
        imports = _accelerator_imports(stmt, packages)
        if imports is None:
            out.append(stmt)
            continue
        assert isinstance(stmt, cst.If) and isinstance(stmt.orelse, cst.Else)
        texts = tuple(module.code_for_node(i).strip() for i in imports)
        line, span = _if_body_lines(original, texts)
        resolved.append(Resolved(texts, span, line, kind="accelerator-branch"))
        kept = [line for line in stmt.orelse.body.body if not _only_pass(line)]
        if kept:
            kept[0] = kept[0].with_changes(leading_lines=[*stmt.leading_lines, *kept[0].leading_lines])
        out.extend(kept)
    if not resolved:
        return module, []
    return module.with_changes(body=out), resolved


def _accelerator_imports(stmt: cst.BaseStatement, packages: frozenset[str]) -> list[cst.CSTNode] | None:
    """The imports of an `if` whose body only imports torch packages and that has a plain `else`."""
    if not isinstance(stmt, cst.If) or not isinstance(stmt.orelse, cst.Else):
        return None
    if not isinstance(stmt.body, cst.IndentedBlock) or not isinstance(stmt.orelse.body, cst.IndentedBlock):
        return None
    imports: list[cst.CSTNode] = []
    for line in stmt.body.body:
        if not isinstance(line, cst.SimpleStatementLine) or not all(_imports_root(s, packages) for s in line.body):
            return None
        imports.extend(line.body)
    inside = all_nodes(stmt.orelse.body)
    if not imports or any(isinstance(n, cst.Import | cst.ImportFrom) and _imports_root(n, packages) for n in inside):
        return None
    return imports


def _if_body_lines(original: str, imports: tuple[str, ...]) -> tuple[int, tuple[int, int] | None]:
    """The line of the original's module-level `if` whose body is these imports, and the body's
    lines ((1, None) when not found)."""
    try:
        tree = ast.parse(original)
    except SyntaxError:
        return 1, None
    wanted = tuple(ast.unparse(ast.parse(i).body[0]) for i in imports)
    for node in tree.body:
        if isinstance(node, ast.If) and node.orelse and tuple(ast.unparse(n) for n in node.body) == wanted:
            return node.lineno, (node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno)
    return 1, None
