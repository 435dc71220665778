"""Copy the runtime definitions ("shims") a converted file uses into it, so it runs on its own.

Rules emit runtime definitions as qualified names (`precision_transpiler.runtime.flax.conv.Conv2d`),
which the import machinery spells `import precision_transpiler` + a dotted reference. This step
replaces each reference by the bare name (`Conv2d`), removes that import, and inserts the
definitions (with the runtime helpers they use and the imports they need) after the file's
imports, under a marker comment. The runtime modules (precision_transpiler/runtime) are read as
text: nothing is imported. A runtime module is named by its dotted path below the package
(`flax.conv`, `common`, `torch.device`).

A runtime module may take helpers from another one with a module-level
`from precision_transpiler.runtime.<other> import _helper, Thing` (unaliased; `from .other` and
`from ..common` work too): a copied definition that names `_helper` brings `<other>`'s definition along,
with its own closure, across any number of modules (the framework modules take their framework-free
arithmetic from `common` so); every definition is copied once and the import line itself never is.
Order: the modules a runtime module imports from come before it (depth-first, in the order the
converted code first names them), each module's definitions in its source order -- so, as when
Python imports them, class bases, decorators, default values and module-level assignments are
defined before their users. Should a cycle between modules put a definition ahead of what it needs
at import time, it is moved after it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst

from precision_transpiler.convert.import_lines import import_as, import_bindings_of
from precision_transpiler.markers import POLICY_IMPORT_MARKER
from precision_transpiler.runtime import PACKAGE, POLICY_MODULES
from precision_transpiler.syntax import dotted_name, import_bound_names, is_import_statement

MARKER = "# ptranspile: torch-compatible definitions copied from precision_transpiler/runtime (torch semantics)"
SHIM_DIR = Path(__file__).resolve().parent.parent / "runtime"

_Key = tuple[str, str]  # (runtime module, as `flax.conv`; top-level name)


@dataclass(frozen=True)
class _Definition:
    name: str
    source: str
    order: int
    # top-level names of its runtime module, or names imported from other runtime modules, it references
    uses: frozenset[str]
    eager: frozenset[str]  # the part of `uses` evaluated when the definition itself runs (bases, defaults, values)
    imports: frozenset[str]  # import aliases it references (jax, jnp, nnx, math, ...)


@dataclass(frozen=True)
class _ShimModule:
    definitions: dict[str, _Definition]
    imports: dict[str, str]  # alias -> import statement
    shim_imports: dict[str, str]  # name imported from another runtime module -> that module


def _shim_path(name: str) -> Path:
    return SHIM_DIR.joinpath(*name.split(".")).with_suffix(".py")


def _shim_module(name: str) -> _ShimModule:
    return _parse_shim_module(_shim_path(name), name)


def _is_shim_module(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split(".")) and _shim_path(name).is_file()


def _segment(lines: list[str], node: ast.stmt) -> str:
    """The statement's text, like ast.get_source_segment, from lines split once: that function
    splits the whole module again for every statement it is asked for."""
    end = node.end_lineno or node.lineno
    chunk = [line.encode() for line in lines[node.lineno - 1 : end]]
    chunk[-1] = chunk[-1][: node.end_col_offset]
    chunk[0] = chunk[0][node.col_offset :]
    return b"".join(chunk).decode()


@lru_cache(maxsize=64)
def _parse_shim_module(path: Path, name: str) -> _ShimModule:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    imports: dict[str, str] = {}
    shim_imports: dict[str, str] = {}
    tops: dict[str, ast.stmt] = {}
    for node in tree.body:
        other = _shim_import(node, name)
        if other is not None:
            assert isinstance(node, ast.ImportFrom)
            for alias in node.names:
                if alias.asname not in (None, alias.name) or alias.name == "*":
                    raise ValueError(f"{path}: import runtime modules' names unaliased ({ast.unparse(node)})")
                shim_imports[alias.name] = other
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                imports[local] = _segment(lines, node)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            tops[node.name] = node
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            for target in node.targets:
                assert isinstance(target, ast.Name)
                tops[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            tops[node.target.id] = node
    linkable = set(tops) | set(shim_imports)
    definitions: dict[str, _Definition] = {}
    for order, (top_name, node) in enumerate(tops.items()):
        start = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
        end = node.end_lineno or node.lineno
        source = "".join(lines[start - 1 : end])
        used = _names(node)
        definitions[top_name] = _Definition(
            top_name,
            source,
            order,
            frozenset(u for u in used if u in linkable and u != top_name),
            frozenset(u for u in _eager_names(node) if u in linkable and u != top_name),
            frozenset(u for u in used if u in imports),
        )
    return _ShimModule(definitions, imports, shim_imports)


def _shim_import(node: ast.stmt, importer: str) -> str | None:
    """The runtime module a `from precision_transpiler.runtime.M import ...` statement (or a
    relative `from .M import ...` / `from ..M import ...` one, read from runtime module
    `importer`) imports from; None for any other statement."""
    if not isinstance(node, ast.ImportFrom) or node.module is None:
        return None
    if node.level == 0 and node.module.startswith(PACKAGE + "."):
        return node.module[len(PACKAGE) + 1 :]
    if node.level >= 1:
        package = importer.split(".")[:-1]
        if node.level - 1 > len(package):
            return None
        return ".".join([*package[: len(package) - (node.level - 1)], node.module])
    return None


def _names(node: ast.AST) -> set[str]:
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    used |= {n.value.id for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    return used


def _eager_names(node: ast.stmt) -> set[str]:
    """Names a top-level statement evaluates when it runs: for a function its decorators, defaults
    and annotations (not its body); for a class its decorators, bases and body, recursively."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        args = node.args
        parts: list[ast.AST] = [*node.decorator_list, *args.defaults, *[d for d in args.kw_defaults if d]]
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        parts += [a.annotation for a in every if a is not None and a.annotation is not None]
        parts += [node.returns] if node.returns is not None else []
        return set().union(*(_names(p) for p in parts)) if parts else set()
    if isinstance(node, ast.ClassDef):
        parts = [*node.decorator_list, *node.bases, *node.keywords]
        eager = set().union(*(_names(p) for p in parts)) if parts else set()
        for stmt in node.body:
            eager |= _eager_names(stmt)
        return eager
    return _names(node)


def _load(name: str) -> _ShimModule | None:
    try:
        return _shim_module(name)
    except OSError:
        return None


def _resolve(module_name: str, name: str, seen: frozenset[_Key] = frozenset()) -> _Key | None:
    """Where `name`, as seen from runtime module `module_name`, is defined (following the runtime
    imports); None when nowhere."""
    module = _load(module_name)
    if module is None or (module_name, name) in seen:
        return None
    if name in module.definitions:
        return module_name, name
    if name in module.shim_imports:
        return _resolve(module.shim_imports[name], name, seen | {(module_name, name)})
    return None


def _closure(wanted: dict[str, list[str]], missing: list[str]) -> list[_Key]:
    """Every definition the wanted symbols need, across runtime modules, each once, in the order the
    module docstring describes. Unknown modules and names are added to `missing`."""
    todo: list[_Key] = []
    for module_name, symbols in wanted.items():
        for symbol in symbols:
            key = _resolve(module_name, symbol)
            if key is None:
                missing.append(f"{PACKAGE}.{module_name}.{symbol}")
            else:
                todo.append(key)
    needs: dict[_Key, set[_Key]] = {}  # definition -> the definitions it needs at import time
    definitions: dict[_Key, _Definition] = {}
    while todo:
        key = todo.pop()
        if key in definitions:
            continue
        module = _shim_module(key[0])
        definitions[key] = definition = module.definitions[key[1]]
        needs[key] = set()
        for use in sorted(definition.uses):
            target = _resolve(key[0], use)
            if target is None:  # imported from a runtime module that does not define it
                absent = f"{PACKAGE}.{module.shim_imports[use]}.{use}"
                missing += [absent] if absent not in missing else []
                continue
            todo.append(target)
            if use in definition.eager:
                needs[key].add(target)

    rank: dict[str, int] = {}  # a module ranks after the modules it imports from (depth-first)

    def visit(module_name: str, path: tuple[str, ...]) -> None:
        module = _load(module_name)
        if module is None or module_name in rank or module_name in path:
            return
        for other in dict.fromkeys(module.shim_imports.values()):
            visit(other, (*path, module_name))
        rank[module_name] = len(rank)

    # the policies' runtime after the rest: where a file's code first names it (a policy's block
    # comes first, or after the read-back imports of the other copies) does not move it
    for module_name in sorted(wanted, key=lambda name: name in POLICY_MODULES):
        visit(module_name, ())
    keys = sorted(definitions, key=lambda k: (rank[k[0]], definitions[k].order))
    # a definition waits for the ones it needs at import time (only a cycle between runtime modules
    # can ask for it); a cycle of such needs keeps the order (Python could not import it either)
    done: set[_Key] = set()
    ordered: list[_Key] = []
    while keys:
        ready = next((k for k in keys if needs[k] <= done), keys[0])
        keys.remove(ready)
        done.add(ready)
        ordered.append(ready)
    return ordered


@dataclass
class _References:
    """A converted module's references to the runtime, each replaced by a local name."""

    module: cst.Module
    wanted: dict[str, list[str]]  # runtime module -> names, in the order the code first names them
    aliases: list[tuple[str, str]]  # (local name, runtime name) where the two differ
    bare: set[str]  # runtime names the code now refers to by their own name
    missing: list[str]


def _take_references(module: cst.Module, text: str | None = None) -> _References:
    """Every `precision_transpiler.runtime.*` reference of `module` (and its imports from there)
    replaced by a local name: the name itself, or `_ptshim_<name>` where the user's code uses or
    binds that name. `text`: `module`'s code, when the caller holds it (reading names from the
    text is cheaper than walking the tree)."""
    wanted: dict[str, list[str]] = {}
    bare: set[str] = set()
    module, aliases = _take_shim_imports(module, wanted, bare)
    # A shim named like something of the user's (transformers' `def f(..., dropout: float = 0.0)`
    # calling `F.dropout`) is referred to through an alias, so the user's name cannot shadow it.
    if text is not None:
        from precision_transpiler.rewrite.import_editor import used_names

        mentioned = used_names(text)
    else:
        mentioned = _mentioned_names(module)
    taken = mentioned | _bound_names(module)

    class _Refs(cst.CSTTransformer):
        def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
            name = dotted_name(original)
            if name and name.startswith(PACKAGE + "."):
                shim_module, _, symbol = name[len(PACKAGE) + 1 :].rpartition(".")
                if not _is_shim_module(shim_module):  # a package on the way (`...runtime.flax`) or a typo
                    unresolved.add(name)
                    return updated
                resolved.add(name)
                wanted.setdefault(shim_module, [])
                if symbol not in wanted[shim_module]:
                    wanted[shim_module].append(symbol)
                local = symbol
                if symbol in taken:
                    # not `_ptranspile_*`: that prefix marks what a precision policy inserted,
                    # which `--policy fp32` (precision/strip.py) removes
                    local = f"_ptshim_{symbol}"
                    if (local, symbol) not in aliases:
                        aliases.append((local, symbol))
                else:
                    bare.add(symbol)
                return cst.Name(local, lpar=updated.lpar, rpar=updated.rpar)
            return updated

    unresolved: set[str] = set()
    resolved: set[str] = set()
    module = module.visit(_Refs())
    # a reference to no runtime module (`precision_transpiler.runtime.flax.nonesuch.X`): its
    # longest unresolved spelling, unless that is the package part of a resolved reference
    missing: list[str] = sorted(
        n
        for n in unresolved
        if not any(other.startswith(n + ".") for other in unresolved)
        and not any(f"{PACKAGE}.{m}.".startswith(n + ".") for m in wanted)
        and not any(n.startswith(r + ".") for r in resolved)  # `Conv2d.__init__`
    )
    return _References(module, wanted, aliases, bare, missing)


def import_runtime(code: str, into: str) -> tuple[str, tuple[str, ...], list[str]]:
    """`import_runtime_tree` on text (tests and tools; the pipeline works on its tree)."""
    if PACKAGE not in code:
        return code, (), []
    module, names, missing = import_runtime_tree(cst.parse_module(code), into, code)
    return module.code, names, missing


def import_runtime_tree(
    module: cst.Module, into: str, text: str | None = None
) -> tuple[cst.Module, tuple[str, ...], list[str]]:
    """`module` importing the runtime definitions it refers to from module `into` (the runtime
    module beside the outputs, `--runtime module`) instead of copying them in: the new module,
    the names it imports, and the definitions that could not be found. `text`: `module`'s code,
    when the caller holds it."""
    refs = _take_references(module, text)
    missing = list(refs.missing)
    if not refs.wanted:
        return module, (), missing
    _closure(refs.wanted, missing)  # names no runtime module defines
    imported = {name: name for name in refs.bare}
    imported.update(refs.aliases)
    module = _drop_package_import(refs.module)
    body = list(module.body)
    index = _after_leading_imports(body)
    while index and _is_marked_import(body[index - 1]):  # before a policy's helper imports, as copies go
        index -= 1
    body.insert(index, _statement(import_line(into, imported)))
    return module.with_changes(body=body), tuple(sorted(set(imported.values()))), missing


def import_line(module: str, imported: dict[str, str]) -> str:
    """`from MODULE import name, other as local` for {local name: name}, sorted, wrapped in
    parentheses one name a line past 100 characters."""
    names = [name if local == name else f"{name} as {local}" for local, name in sorted(imported.items())]
    line = f"from {module} import " + ", ".join(names)
    if len(line) <= 100:
        return line + "\n"
    return f"from {module} import (\n" + "".join(f"    {name},\n" for name in names) + ")\n"


def _after_leading_imports(body: Sequence[cst.CSTNode]) -> int:
    """The index after a module's leading docstring and imports."""
    index = 0
    for i, stmt in enumerate(body):
        if is_import_statement(stmt):
            index = i + 1
        elif i == 0 and isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr):
            index = 1  # module docstring
        elif index or not isinstance(stmt, cst.SimpleStatementLine):
            break
    return index


def vendor_shims(code: str) -> tuple[str, list[str]]:
    """`vendor_tree` on text (tests and tools; the pipeline works on its tree)."""
    if PACKAGE not in code:
        return code, []
    module, missing = vendor_tree(cst.parse_module(code), code)
    return module.code, missing


def vendor_tree(module: cst.Module, text: str | None = None) -> tuple[cst.Module, list[str]]:
    """Inline every `precision_transpiler.runtime.*` definition `module` refers to. Returns the
    new module and the shims that could not be found (a table names a shim that does not exist).
    The copies are the runtime modules' statements, each parsed once per process. `text`:
    `module`'s code, when the caller holds it."""
    refs = _take_references(module, text)
    module, wanted, aliases, missing = refs.module, refs.wanted, refs.aliases, refs.missing
    if not wanted:
        return module, missing
    needed_imports: dict[str, str] = {}
    keys = _closure(wanted, missing)
    for shim_name, symbol in keys:
        shim = _shim_module(shim_name)
        for alias in shim.definitions[symbol].imports:
            needed_imports.setdefault(alias, shim.imports[alias])
    module = _drop_package_import(module)
    # an import a policy's helpers made (marked, so that stripping the policy removes it) gives
    # way to the copied definitions' own, which stays when the policy is stripped (in the place
    # the fp32 conversion has it: re-converting to fp32 gives that file exactly)
    # only the imports above the copies count: a file whose own `from flax import nnx` comes after
    # a `try:` block (which ends the leading imports) gets the copies' imports again above them
    leading = cst.Module(body=module.body[: _after_leading_imports(module.body)])
    existing = _bound_names(leading, marked=False)
    module = _drop_marked_imports(module, set(needed_imports) - existing)
    bindings = _module_bindings(module)
    clashing = _clashing_imports(module, needed_imports, bindings)
    imports = [
        _statement(import_as(stmt, f"_ptshim_{alias}") if alias in clashing else stmt)
        for alias, stmt in sorted(needed_imports.items())
        if alias in clashing or alias not in existing
    ]
    rebound = {symbol for _, symbol in keys} & bindings
    if rebound or clashing:
        referred = {name for _, name in aliases if name in rebound}  # the user's code names the copy too
        sources = "\n\n\n".join(_shim_module(m).definitions[n].source.rstrip("\n") for m, n in keys) + "\n"
        for alias in sorted(clashing):
            sources = _guard_rebound(sources, set(), set(), (alias, needed_imports[alias]))
        if rebound:
            sources = _guard_rebound(sources, rebound, referred)
        block = list(cst.parse_module(sources).body)
        aliases = [(local, name) for local, name in aliases if name not in rebound]
    else:
        copies = [stmt for m, n in keys for stmt in _definition_statements(_shim_module(m).definitions[n].source)]
        block = _spaced(copies, _TWO_BLANK)
    block[0] = _with_leading(block[0], [cst.EmptyLine(comment=cst.Comment(MARKER))])
    if aliases:
        block += _spaced([_statement(f"{local} = {name}\n") for local, name in aliases], [], first=_TWO_BLANK)
    again = _imports_binding(module, rebound)
    if again:
        # the user's own import of a name a copy defines (`from inspect import Parameter` beside
        # the runtime's Parameter): the copies go after the imports, so the import is repeated
        # below them, and the name keeps meaning what the user imported
        block += _spaced(again, [], first=[*_TWO_BLANK, cst.EmptyLine(comment=cst.Comment(AGAIN))])
    return _insert_after_imports(module, imports, block), missing


_TWO_BLANK = (cst.EmptyLine(), cst.EmptyLine())
AGAIN = "# ptranspile: the file's own import again, after copies of the same name"


def _mentioned_names(module: cst.Module) -> set[str]:
    """Identifiers the code mentions outside import statements: names, not attributes after a
    `.`, and the strings of `__all__` (re-exported names)."""
    names: set[str] = set()
    attributes: set[int] = set()

    class _Names(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_Attribute(self, node: cst.Attribute) -> None:
            attributes.add(id(node.attr))

        def visit_Name(self, node: cst.Name) -> None:
            if id(node) not in attributes:
                names.add(node.value)

        def visit_Assign(self, node: cst.Assign) -> None:
            targets = [t.target for t in node.targets]
            if any(isinstance(t, cst.Name) and t.value == "__all__" for t in targets):
                for item in getattr(node.value, "elements", ()):
                    if isinstance(item.value, cst.SimpleString) and str(item.value.evaluated_value).isidentifier():
                        names.add(str(item.value.evaluated_value))

    module.visit(_Names())
    return names


@lru_cache(maxsize=1024)
def _statement(line: str) -> cst.BaseStatement:
    """One generated statement (an import line, an alias), parsed once per process."""
    return cst.parse_statement(line)


@lru_cache(maxsize=4096)
def _definition_statements(source: str) -> tuple[cst.BaseStatement, ...]:
    """A runtime definition's statements, parsed once per process (LibCST trees are immutable:
    every converted file that copies the definition shares them)."""
    parsed = cst.parse_module(source.rstrip("\n") + "\n")
    body = list(parsed.body)
    if parsed.header:
        body[0] = _with_leading(body[0], list(parsed.header))
    return tuple(body)


def _with_leading(stmt: cst.BaseStatement, lines: Sequence[cst.EmptyLine]) -> cst.BaseStatement:
    return stmt.with_changes(leading_lines=[*lines, *stmt.leading_lines])


def _spaced(
    stmts: Sequence[cst.BaseStatement], between: Sequence[cst.EmptyLine], first: Sequence[cst.EmptyLine] = ()
) -> list[cst.BaseStatement]:
    """`stmts`, the first after the lines `first`, each further top-level definition after
    `between` (a multi-statement definition keeps its own layout)."""
    out: list[cst.BaseStatement] = []
    for i, stmt in enumerate(stmts):
        lead = first if i == 0 else between
        out.append(_with_leading(stmt, lead) if lead else stmt)
    return out


def _imports_binding(module: cst.Module, names: set[str]) -> list[cst.BaseStatement]:
    """Top-level import statements of `module`, one name each, that bind one of `names`."""
    found: list[cst.BaseStatement] = []
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not isinstance(small, cst.Import | cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                continue
            for alias in small.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(bound, cst.Name) and bound.value in names:
                    one = small.with_changes(names=[alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)])
                    if isinstance(one, cst.ImportFrom):
                        one = one.with_changes(lpar=None, rpar=None)
                    found.append(cst.SimpleStatementLine(body=[one]))
    return found


def _module_bindings(module: cst.Module) -> set[str]:
    """Names the converted code binds at module level (definitions, assignments, imports, loop and
    `with` targets, also inside top-level `if`/`try`/`for`/`with` blocks, and `global`
    declarations): what would rebind a copied definition of that name. Read from the tree's
    top-level statements (no second parse of the file)."""
    names: set[str] = set()

    class _Targets(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            return False  # `a.b = ...` binds no name

        def visit_Subscript(self, node: cst.Subscript) -> bool:
            return False

    class _Globals(cst.CSTVisitor):
        def visit_Global(self, node: cst.Global) -> None:
            names.update(item.name.value for item in node.names)

    def bind(target: cst.CSTNode | None) -> None:
        if target is not None:
            target.visit(_Targets())

    def walk(statements: Sequence[cst.CSTNode]) -> None:
        for stmt in statements:
            if isinstance(stmt, cst.FunctionDef | cst.ClassDef):
                names.add(stmt.name.value)
                stmt.visit(_Globals())
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for target in small.targets:
                            bind(target.target)
                    elif isinstance(small, cst.AnnAssign | cst.AugAssign):
                        bind(small.target)
                    elif isinstance(small, cst.Import | cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                        for alias in small.names:
                            if alias.asname is not None:
                                bind(alias.asname.name)
                            else:
                                names.add((dotted_name(alias.name) or "").split(".")[0])
            else:
                if isinstance(stmt, cst.For):
                    bind(stmt.target)
                elif isinstance(stmt, cst.With):
                    for item in stmt.items:
                        bind(item.asname.name if item.asname is not None else None)
                elif isinstance(stmt, cst.Try | cst.TryStar):
                    for handler in stmt.handlers:
                        bind(handler.name.name if handler.name is not None else None)
                walk(_blocks(stmt))

    walk(module.body)
    return names


def _blocks(stmt: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements of a compound statement's suites (`if`/`elif`/`else`, `try` and its
    handlers, loops, `with`), not of nested functions or classes."""
    found: list[cst.CSTNode] = []
    for child in stmt.children:
        if isinstance(child, cst.IndentedBlock):
            found += child.body
        elif isinstance(child, cst.SimpleStatementSuite):
            found.append(cst.SimpleStatementLine(body=child.body))
        elif isinstance(child, cst.If | cst.Else | cst.ExceptHandler | cst.ExceptStarHandler | cst.Finally):
            found += _blocks(child)
    return found


def _clashing_imports(module: cst.Module, needed: dict[str, str], bindings: set[str]) -> set[str]:
    """Names the copies import (`ops`) that the converted code binds otherwise (kornia's `from .
    import ops`): inline, the user's binding would replace the framework's for every copy."""
    top = [small for stmt in module.body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body]
    same = {
        bound for small in top if isinstance(small, cst.Import | cst.ImportFrom) for bound in import_bindings_of(small)
    }
    return {alias for alias, stmt in needed.items() if alias in bindings and not import_bindings_of(stmt) <= same}


def _guard_rebound(
    definitions: str, rebound: set[str], referred: set[str], imported: tuple[str, str] | None = None
) -> str:
    """The converted code defines names the copied definitions also define (a user's `_tuple`,
    `linear`, `class LayerNorm`): defined after the copies, the user's would replace them for
    every copied function that calls them at run time. So each such copy that copied code calls
    late, or that the user's code names, gets a second name right after its definition
    (`_ptshim_linear = linear`), and the copied code refers to it by that name wherever it runs
    late (inside functions); references evaluated while the copies are defined (bases,
    decorators, defaults) still mean the copies. The user's code, and the copies' names, are
    unchanged (weight loading matches classes by name). `imported`: (name, the copies' import of
    it) instead (`_clashing_imports`): every reference to it becomes `_ptshim_<name>`."""
    from libcst.metadata import FunctionScope, GlobalScope, MetadataWrapper, ScopeProvider

    if imported is not None:
        definitions = imported[1].rstrip("\n") + "\n" + definitions
        rebound = {imported[0]}
    wrapper = MetadataWrapper(cst.parse_module(definitions), unsafe_skip_copy=True)
    seconded = set(referred)  # the copies that need their second name
    scopes = wrapper.resolve(ScopeProvider)
    module = wrapper.module
    top = scopes[module]
    assert isinstance(top, GlobalScope)
    late: set[cst.Name] = set()
    for name in rebound:
        for assignment in top.assignments[name]:
            for access in assignment.references:
                if imported is not None:
                    if isinstance(access.node, cst.Name):
                        late.add(access.node)  # every reference to the import, read late or not
                    continue
                scope = access.scope
                while scope is not None and not isinstance(scope, GlobalScope):
                    if isinstance(scope, FunctionScope) and isinstance(access.node, cst.Name):
                        late.add(access.node)
                        seconded.add(name)
                        break
                    scope = scope.parent

    class _Late(cst.CSTTransformer):
        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
            return updated.with_changes(value=f"_ptshim_{original.value}") if original in late else updated

    renamed = module.visit(_Late())
    if imported is not None:
        return renamed.with_changes(body=renamed.body[1:]).code  # without the import put first
    body: list[cst.BaseStatement] = []
    two_blank = [cst.EmptyLine(), cst.EmptyLine()]
    for stmt in renamed.body:
        body.append(stmt)
        defined = _defined_name(stmt)
        if defined in seconded:
            alias = cst.parse_statement(f"_ptshim_{defined} = {defined}\n")
            body.append(alias.with_changes(leading_lines=two_blank))
    return renamed.with_changes(body=body).code


def _defined_name(stmt: cst.CSTNode) -> str | None:
    if isinstance(stmt, cst.FunctionDef | cst.ClassDef):
        return stmt.name.value
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        target = small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1 else None
        if isinstance(small, cst.AnnAssign):
            target = small.target
        if isinstance(target, cst.Name):
            return target.value
    return None


def _take_shim_imports(
    module: cst.Module, wanted: dict[str, list[str]], bare: set[str]
) -> tuple[cst.Module, list[tuple[str, str]]]:
    """Remove `from precision_transpiler.runtime.M import N [as L]` statements (written by
    convert/library_imports.py, and by reading a runtime module's imports back, several on one
    line), adding N to `wanted` (and to `bare` when imported under its own name); returns the
    (L, N) aliases to define."""
    body = []
    aliases: list[tuple[str, str]] = []
    for stmt in module.body:
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()
        if not smalls or not all(_is_shim_import(small) for small in smalls):
            body.append(stmt)
            continue
        for small in smalls:
            assert isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar)
            shim_module = (dotted_name(small.module) if small.module is not None else "")[len(PACKAGE) + 1 :]
            for alias in small.names:
                name = dotted_name(alias.name) or ""
                wanted.setdefault(shim_module, [])
                if name not in wanted[shim_module]:
                    wanted[shim_module].append(name)
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    if alias.asname.name.value != name:
                        aliases.append((alias.asname.name.value, name))
                        continue
                bare.add(name)
    return module.with_changes(body=body), aliases


def _is_shim_import(small: cst.BaseSmallStatement) -> bool:
    return (
        isinstance(small, cst.ImportFrom)
        and small.module is not None
        and (dotted_name(small.module) or "").startswith(PACKAGE + ".")
        and not isinstance(small.names, cst.ImportStar)
    )


def _drop_package_import(module: cst.Module) -> cst.Module:
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Import):
            names = [dotted_name(a.name) for a in stmt.body[0].names]
            if names and all(n is not None and (n == "precision_transpiler" or n.startswith(PACKAGE)) for n in names):
                continue
        body.append(stmt)
    return module.with_changes(body=body)


def _bound_names(module: cst.Module, *, marked: bool = True) -> set[str]:
    """Names the module's top-level imports bind (without a policy's marked imports: marked=False)."""
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and (marked or not _is_marked_import(stmt)):
            for small in stmt.body:
                names |= import_bound_names(small)
    return names


def _drop_marked_imports(module: cst.Module, aliases: set[str]) -> cst.Module:
    """Without the policy's marked imports that bind only names among `aliases`."""
    if not aliases:
        return module
    body = [
        stmt
        for stmt in module.body
        if not (_is_marked_import(stmt) and _bound_names(cst.Module(body=[stmt])) <= aliases)
    ]
    return module.with_changes(body=body)


def _insert_after_imports(
    module: cst.Module, imports: list[cst.BaseStatement], block: list[cst.BaseStatement]
) -> cst.Module:
    """`module` with `imports` after its leading imports and `block` after them, two blank
    lines around the block; the first statement after it loses its own blank leading lines."""
    body = list(module.body)
    index = _after_leading_imports(body)
    # the imports go before a policy's marked helper imports (`# ptranspile: policy helpers`),
    # where a later policy pass, which strips and re-adds those, puts them: re-converting is stable
    first = index
    while first and _is_marked_import(body[first - 1]):
        first -= 1
    if imports and first < index:
        imports = [*imports, *body[first:index]]
        body = body[:first] + body[index:]
        index = first
    head, tail = body[:index], body[index:]
    header = list(module.header)
    if not head:  # the file starts with its comments (if any), without blank lines after them
        while header and header[-1].comment is None:
            header.pop()
        if not any(line.comment is not None for line in header):
            header = []
    if imports and head:
        imports[0] = imports[0].with_changes(leading_lines=())
    if head or imports or header:
        block[0] = _with_leading(block[0], _TWO_BLANK)
    footer = list(module.footer)
    if tail:
        lines = list(tail[0].leading_lines)
        while lines and _blank(lines[0]):
            lines.pop(0)
        tail[0] = tail[0].with_changes(leading_lines=[*_TWO_BLANK, *lines])
    else:
        while footer and _blank(footer[0]):
            footer.pop(0)
        footer = [*_TWO_BLANK, *footer]
    return module.with_changes(header=header, body=[*head, *imports, *block, *tail], footer=footer)


def _blank(line: cst.EmptyLine) -> bool:
    """A line that is only its line break (what stripping "\\n" from text removes)."""
    return line.comment is None and not line.whitespace.value and line.indent


def _is_marked_import(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and all(isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body)
        and stmt.trailing_whitespace.comment is not None
        and POLICY_IMPORT_MARKER in stmt.trailing_whitespace.comment.value
    )
