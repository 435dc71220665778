"""Source-framework imports that only functions still need move into those functions.

A converted model file keeps `import torch` (or `from torch.utils import model_zoo`) when some
code still names it: a checkpoint-download method (`model_zoo.load_url(url)`), a helper the
tables cannot map. Left at module level, that import makes the converted model need torch to
load at all, though building and calling it never touches that code. When every remaining use
of the names an import binds is inside function bodies (not in decorators, default values or
annotations, which run when the function is defined), the import moves into each function that
uses them, as its first statement (after the docstring), marked; the unconvertible uses keep
their own `unsupported` marks, and the model loads and runs without torch. An import that no
code uses any more goes (uses are read from Python's scopes: a parameter named like the import
is no use of it).
"""

from __future__ import annotations

import symtable
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from precision_transpiler.syntax import dotted_name, import_bound_names, is_docstring, statements_bound_names

MARK = "# ptranspile: only this function still needs it (the module loads without it)"


@dataclass(frozen=True)
class Moved:
    """An import moved into the functions that use it (for the note the pipeline writes)."""

    statement: str
    functions: tuple[str, ...]


#: methods that building or running a model goes through: an import moved into one still runs
_MODEL_PATH = frozenset({"__init__", "__call__", "call", "forward", "build", "setup"})


def moved_messages(original: str, moved: list[Moved]) -> list[tuple[str, str, int]]:
    """(severity, message, line in the original) for each import `localize_imports` moved or
    removed. One moved into a model's constructor or forward (`from fairscale... import
    ColumnParallelLinear` into `__init__`) still runs whenever the model is built or called: the
    module loads without torch, the model does not run without it, so that is a warning."""
    lines = original.splitlines()
    said = []
    for item in moved:
        line = next((i for i, text in enumerate(lines, 1) if text.strip() == item.statement), 1)
        core = sorted(set(item.functions) & _MODEL_PATH)
        if core:
            said.append((
                "warning",
                f"`{item.statement}` moved into {', '.join(item.functions)}: the converted module loads without "
                f"torch, but building or running the model ({', '.join(core)}) still imports it and needs torch",
                line,
            ))  # fmt: skip
            continue
        where = (
            f"moved into {', '.join(item.functions)}, the only code that still uses it"
            if item.functions
            else "removed: nothing converted uses it"
        )
        said.append(("note", f"`{item.statement}` {where}: the converted module loads without torch", line))
    return said


def torch_roots(code: str, path: str | None) -> frozenset[str]:
    """torch's own top-level packages, and those of the torch packages `code` imports at load
    (spikingjelly's Triton kernels, imported for a branch that only a GPU precision setting
    takes, and its logger): what `localize_imports` may move into the functions using it."""
    from pathlib import Path

    from precision_transpiler.analysis.load_imports import TORCH_ROOTS, torch_imports_at_load

    found = torch_imports_at_load(code, Path(path) if path else None)
    return TORCH_ROOTS | {module.split(".")[0] for _, module, _ in found if module and not module.startswith(".")}


def localize_imports(module: cst.Module, roots: frozenset[str]) -> tuple[cst.Module, list[Moved]]:
    """`module` with its top-level imports of `roots` (top-level packages: torch, torchvision)
    moved into the functions that use what they bind, where nothing at load time uses it."""
    body = list(module.body)
    candidates = [
        i
        for i, stmt in enumerate(body)
        if (_imports_only(stmt, roots) or _optional_imports(stmt, roots)) and not _skipped(module, stmt)
    ]
    if not candidates:
        return module, []
    load_time, in_functions = _uses(module, body)
    moved: list[Moved] = []
    wanted: dict[int, list[cst.BaseStatement]] = {}  # id(function) -> imports to put first
    drop: set[int] = set()
    for index in candidates:
        stmt = body[index]
        imports = _import_smalls(stmt)
        names = set().union(*(import_bound_names(small) for small in imports))
        if names & load_time:
            continue
        # `from torch import einsum` then `from einops import einsum`: functions read the later binding
        rebound = names & _rebound_after(body, index)
        names -= rebound
        users = [f for f, used in in_functions if used & names]
        if not users and _named_in_strings(module.code, names):
            continue  # `__all__ = ["tensor"]`, `getattr(mod, "tensor")`: a use no scope shows
        for function in users:
            wanted.setdefault(id(function), []).append((_moved_form(_without(stmt, rebound)), names))
        drop.add(index)
        text = module.code_for_node(imports[0]).strip()
        moved.append(Moved(text, tuple(_name(f) for f in users)))
    if not drop:
        return module, []
    inserted = list(module.visit(_Insert(wanted)).body)  # (top-level statements stay where they are)
    kept = [stmt for i, stmt in enumerate(inserted) if i not in drop]
    if kept and min(drop) == 0:  # the file's first comments stay first, without blank lines above them
        lines = [*body[0].leading_lines, *kept[0].leading_lines]
        while lines and lines[0].comment is None and not module.header:
            lines.pop(0)
        kept[0] = kept[0].with_changes(leading_lines=lines)
    return module.with_changes(body=kept), moved


def _rebound_after(body: Sequence[cst.BaseStatement], index: int) -> set[str]:
    """Names that top-level statements after `body[index]` bind again (imports, definitions,
    plain assignments): a function reads the last binding, so an earlier import of such a name
    that nothing at load time reads is no use to it."""
    return statements_bound_names(body[index + 1 :], assignments=True)


def _skipped(module: cst.Module, stmt: cst.BaseStatement) -> bool:
    """`import torch  # ptranspile: skip`: left exactly as written (rewrite/skips.py)."""
    from precision_transpiler.rewrite.skips import marker_in

    return "ptranspile" in (text := module.code_for_node(stmt)) and marker_in(text) is not None


def _named_in_strings(code: str, names: set[str]) -> bool:
    return any(f'"{name}"' in code or f"'{name}'" in code for name in names)


def torch_at_load(code: str, original: str, path: str | None) -> list[tuple[int, str]]:
    """(line in the original, message) for each import of converted `code` that still runs when
    it loads and needs torch (torch itself, a distribution that requires it, a sibling module
    that imports it; analysis/load_imports.py): what localize_imports could not move, said where
    it is, since the output then only loads where torch is installed whatever verification says."""
    from pathlib import Path

    from precision_transpiler.analysis.load_imports import torch_imports_at_load

    converted, source = code.splitlines(), original.splitlines()
    found = []
    for line, module, why in torch_imports_at_load(code, Path(path) if path else None):
        text = converted[line - 1].strip() if 0 < line <= len(converted) else module
        at = next((i for i, s in enumerate(source, 1) if s.strip() == text), 1)
        because = "" if why == "torch" else f": {module} is {why},"
        found.append(
            (
                at,
                f"`{text}` still runs when the converted module loads{because} so the output needs torch "
                "installed (what still uses it is reported where it is used)",
            )
        )
    return found


def torch_when_called(code: str, original: str, path: str | None, said: set[str]) -> list[tuple[str, int, str]]:
    """(severity, line in the original, message) for each import inside a function of converted
    `code` that needs torch and that no other message covers (`said`: the statements
    `moved_messages` spoke of): the module loads, but running that function imports torch. A
    warning, or a note where a `try` catches ImportError around it (an optional kernel the code
    runs without)."""
    from pathlib import Path

    from precision_transpiler.analysis.load_imports import torch_imports_when_called

    converted, source = code.splitlines(), original.splitlines()
    found = []
    for line, module, why, function, guarded in torch_imports_when_called(code, Path(path) if path else None):
        text = converted[line - 1].split("#", 1)[0].strip() if 0 < line <= len(converted) else module
        if text in said:  # moved there by the conversion: `import-localized` spoke of it
            continue
        at = next((i for i, s in enumerate(source, 1) if s.strip() == text), 1)
        because = "torch" if why == "torch" else f"torch ({module} is {why})"
        if guarded:
            message = (
                f"`{text}` in {function} is left as it is, imported only when that branch runs and caught "
                f"when it fails, as the original does: it needs {because}"
            )
        else:
            message = (
                f"`{text}` in {function} still imports {because} whenever {function} runs: the converted "
                "module loads without torch, that code does not run without it"
            )
        found.append(("note" if guarded else "warning", at, message))
    return found


def _optional_imports(stmt: cst.CSTNode, roots: frozenset[str]) -> bool:
    """`try: from torchvision.models.utils import load_state_dict_from_url` / `except ImportError:
    from torch.utils.model_zoo import load_url as ...` (or `pass`), or a version switch `if
    TORCH_VERSION >= (1, 11): from torch.ao.quantization import fuse_modules / else: ...`: every
    branch imports from `roots` only, so the whole statement moves (or, with nothing left using
    it, goes)."""
    if isinstance(stmt, cst.If):
        blocks = _if_blocks(stmt)  # `if TORCH_VERSION >= (1, 11): from torch.ao... / else: ...`
    elif isinstance(stmt, cst.Try):
        blocks = [stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody]
    else:
        return False
    statements = [line for block in blocks if block is not None for line in _block_statements(block)]
    if any(line is None for line in statements):
        return False
    smalls = [small for line in statements if line is not None for small in line.body]
    imports = [small for small in smalls if not isinstance(small, cst.Pass)]
    return bool(imports) and all(_imports_only(cst.SimpleStatementLine(body=[small]), roots) for small in imports)


def _if_blocks(stmt: cst.If) -> list[cst.BaseSuite]:
    """The blocks of an `if` / `elif` / `else` chain."""
    blocks: list[cst.BaseSuite] = [stmt.body]
    rest = stmt.orelse
    while rest is not None:
        blocks.append(rest.body)
        rest = rest.orelse if isinstance(rest, cst.If) else None
    return blocks


def _block_statements(block: object) -> list[cst.SimpleStatementLine | None]:
    """The statements of a try/except block's body (None for a compound statement)."""
    if isinstance(block, cst.IndentedBlock):
        return [s if isinstance(s, cst.SimpleStatementLine) else None for s in block.body]
    if isinstance(block, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=list(block.body))]
    body = getattr(block, "body", None)
    return _block_statements(body) if body is not None else [None]


def _import_smalls(stmt: cst.BaseStatement) -> list[cst.Import | cst.ImportFrom]:
    """The import statements of a candidate (an import line, or every branch of an optional one)."""
    found: list[cst.Import | cst.ImportFrom] = []

    class _Imports(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> bool:
            found.append(node)
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            found.append(node)
            return False

    stmt.visit(_Imports())
    return found


def _without(stmt: cst.BaseStatement, names: set[str]) -> cst.BaseStatement:
    """`from torch import einsum, cat` without `einsum`, which a later import rebinds: moved
    into a function whole, it would replace that binding there."""
    if not names or not isinstance(stmt, cst.SimpleStatementLine):
        return stmt
    smalls = []
    for small in stmt.body:
        if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            kept = [a for a in small.names if not (import_bound_names(small.with_changes(names=[a])) & names)]
            if not kept:
                continue
            small = small.with_changes(names=[*kept[:-1], kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)])
        smalls.append(small)
    return stmt.with_changes(body=smalls) if smalls else stmt


def _moved_form(stmt: cst.BaseStatement) -> cst.BaseStatement:
    """The statement as it goes into a function: no blank lines above, marked on its first line."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.with_changes(leading_lines=[], trailing_whitespace=_marked(stmt.trailing_whitespace))
    assert isinstance(stmt, cst.Try | cst.If) and isinstance(stmt.body, cst.IndentedBlock)
    return stmt.with_changes(leading_lines=[], body=stmt.body.with_changes(header=_marked(stmt.body.header)))


def _imports_only(stmt: cst.CSTNode, roots: frozenset[str]) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, cst.Import):
            modules = [dotted_name(alias.name) or "" for alias in small.names]
        elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
            if isinstance(small.names, cst.ImportStar):
                return False
            modules = [dotted_name(small.module) or ""]
        else:
            return False
        if not all(m.split(".")[0] in roots for m in modules):
            return False
    return True


def _uses(
    module: cst.Module, body: Sequence[cst.BaseStatement]
) -> tuple[set[str], list[tuple[cst.FunctionDef, set[str]]]]:
    """Names used at load time (module level, class bodies, decorators, defaults, annotations),
    and for each top-level function and method the module-level names its body uses.

    Read from Python's own scopes (`symtable`): a parameter or local variable that shadows an
    imported name (`def max_neg_value(tensor)` beside `from torch import tensor`) is no use of
    the import, at load time or in that function; moving the import into it would even rebind
    the parameter."""
    try:
        table = symtable.symtable(module.code, "<converted>", "exec")
    except (SyntaxError, ValueError):  # pragma: no cover - generated code always compiles
        return _syntactic_uses(body)
    load_time = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced()}
    scopes: dict[str, list[set[str]]] = {}
    _scope_uses(table, "", load_time, scopes)
    functions: list[tuple[cst.FunctionDef, set[str]]] = []
    taken_ids: set[int] = set()

    def walk(statements: Sequence[cst.BaseStatement], prefix: str) -> None:
        for stmt in statements:
            if isinstance(stmt, cst.FunctionDef):
                found = scopes.get(prefix + stmt.name.value, [])
                taken = next((uses for uses in found if id(uses) not in taken_ids), set())
                taken_ids.add(id(taken))
                functions.append((stmt, taken))
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                walk(stmt.body.body, f"{prefix}{stmt.name.value}.")

    walk(body, "")
    placed = {id(uses) for _, uses in functions}
    for found in scopes.values():  # a def inside an `if` or `try`: where it may be run, unknown
        load_time.update(*(uses for uses in found if id(uses) not in placed))
    return load_time, functions


_ANONYMOUS = frozenset({"lambda", "listcomp", "setcomp", "dictcomp", "genexpr"})  # symtable's names


def _scope_uses(table: symtable.SymbolTable, prefix: str, load_time: set[str], scopes: dict) -> None:
    """Fill `scopes` (qualified function name -> the module-level names its scope and the scopes
    nested in it read) and `load_time` (what class bodies, and code run with them, read)."""
    for child in table.get_children():
        name = f"{prefix}{child.get_name()}"
        if child.get_type() == "class":
            load_time.update(s.get_name() for s in child.get_symbols() if s.is_referenced() and not s.is_local())
            _scope_uses(child, f"{name}.", load_time, scopes)
        elif child.get_type() == "function" and child.get_name() not in _ANONYMOUS:
            scopes.setdefault(name, []).append(_global_reads(child))
        else:  # a lambda or comprehension at module or class level: counted as run at load
            load_time.update(_global_reads(child))


def _global_reads(table: symtable.SymbolTable) -> set[str]:
    found = {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_global()}
    for child in table.get_children():
        found |= _global_reads(child)
    return found


def _syntactic_uses(body: Sequence[cst.BaseStatement]) -> tuple[set[str], list[tuple[cst.FunctionDef, set[str]]]]:
    """`_uses` read from names alone, shadowing ignored (keeps an import whenever in doubt)."""
    load_time: set[str] = set()
    functions: list[tuple[cst.FunctionDef, set[str]]] = []

    def walk(statements: Sequence[cst.BaseStatement]) -> None:
        for stmt in statements:
            if isinstance(stmt, cst.FunctionDef):
                load_time.update(_names(stmt.decorators, stmt.params, stmt.returns))
                functions.append((stmt, _names(stmt.body)))
            elif isinstance(stmt, cst.ClassDef):
                load_time.update(_names(stmt.decorators, *stmt.bases, *stmt.keywords))
                walk(stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else [])
            elif not (isinstance(stmt, cst.SimpleStatementLine) and _is_import_line(stmt)):
                load_time.update(_names(stmt))

    walk(body)
    return load_time, functions


def _names(*nodes: object) -> set[str]:
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

    for node in nodes:
        items = node if isinstance(node, list | tuple) else [node]
        for item in items:
            if isinstance(item, cst.CSTNode):
                item.visit(_Names())
    return found


def _is_import_line(stmt: cst.SimpleStatementLine) -> bool:
    return all(isinstance(small, cst.Import | cst.ImportFrom) for small in stmt.body)


def _marked(whitespace: cst.TrailingWhitespace) -> cst.TrailingWhitespace:
    return whitespace.with_changes(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(MARK))


def _name(function: cst.FunctionDef) -> str:
    return function.name.value


class _Insert(cst.CSTTransformer):
    """Put each import in the functions whose ids `wanted` holds, in the narrowest block around
    all the function's uses of what it binds, before the first statement that uses them: a
    fallback only an `else:` of a version check needs (`else: q = torch.qr(...)`) imports torch
    only when that branch runs, so building and calling the model never does."""

    def __init__(self, wanted: dict[int, list[tuple[cst.BaseStatement, set[str]]]]) -> None:
        super().__init__()
        self.wanted = wanted

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        imports = self.wanted.get(id(original))
        if not imports or not isinstance(updated.body, cst.IndentedBlock):
            return updated
        block = updated.body
        for statement, names in reversed(imports):  # each goes before the first user: keep their order
            block = _place(block, statement, names, docstring=True)
        return updated.with_changes(body=block)


def _place(
    block: cst.IndentedBlock, statement: cst.BaseStatement, names: set[str], docstring: bool = False
) -> cst.IndentedBlock:
    """`block` with `statement` in the narrowest block around the uses of `names`."""
    statements = list(block.body)
    users = [i for i, s in enumerate(statements) if _names(s) & names]
    start = 1 if docstring and statements and is_docstring(statements[0]) else 0
    index = max(users[0], start) if users else start
    if len(users) == 1 and index == users[0]:
        inner = _place_inside(statements[index], statement, names)
        if inner is not None:
            statements[index] = inner
            return block.with_changes(body=statements)
    statements.insert(index, statement)
    return block.with_changes(body=statements)


def _place_inside(compound: cst.CSTNode, statement: cst.BaseStatement, names: set[str]) -> cst.CSTNode | None:
    """`compound` (an if, loop, with or try) with `statement` placed in the one branch that uses
    `names`, or None where its header uses them, several branches do, or the branch is on one line."""
    if isinstance(compound, cst.If):
        if _names(compound.test) & names:
            return None
        in_body, in_else = bool(_names(compound.body) & names), bool(_names(compound.orelse) & names)
        if in_body == in_else:
            return None
        if in_body:
            body = _inside_block(compound.body, statement, names)
            return None if body is None else compound.with_changes(body=body)
        orelse = compound.orelse
        if isinstance(orelse, cst.If):  # elif
            inner = _place_inside(orelse, statement, names)
        else:
            assert isinstance(orelse, cst.Else)
            body = _inside_block(orelse.body, statement, names)
            inner = None if body is None else orelse.with_changes(body=body)
        return None if inner is None else compound.with_changes(orelse=inner)
    if isinstance(compound, cst.For | cst.While | cst.With):
        header = (
            [compound.target, compound.iter]
            if isinstance(compound, cst.For)
            else [compound.test]
            if isinstance(compound, cst.While)
            else list(compound.items)
        )
        if _names(*header) & names or (not isinstance(compound, cst.With) and _names(compound.orelse) & names):
            return None
        body = _inside_block(compound.body, statement, names)
        return None if body is None else compound.with_changes(body=body)
    return None


def _inside_block(block: cst.BaseSuite, statement: cst.BaseStatement, names: set[str]) -> cst.IndentedBlock | None:
    return _place(block, statement, names) if isinstance(block, cst.IndentedBlock) else None
