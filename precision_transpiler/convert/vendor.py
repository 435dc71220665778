"""Copy the shims a converted file uses into that file, so it runs on its own.

Rules emit shims as qualified names (`precision_transpiler.shims.flax_nn.Conv2d`), which the
import machinery spells `import precision_transpiler` + a dotted reference. This step replaces
each reference by the bare name (`Conv2d`), removes that import, and inserts the definitions
(with the shim-module helpers they use, in the shim module's order, and the imports they need)
after the file's imports, under a marker comment. The shim modules are read as text: nothing is
imported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst

from precision_transpiler.rewrite.templates import dotted_name

PACKAGE = "precision_transpiler.shims"
MARKER = "# ptranspile: torch-compatible definitions copied from precision_transpiler/shims (torch semantics)"


@dataclass(frozen=True)
class _Definition:
    name: str
    source: str
    order: int
    uses: frozenset[str]  # top-level names of the same shim module it references
    imports: frozenset[str]  # import aliases it references (jax, jnp, nnx, math, ...)


@dataclass(frozen=True)
class _ShimModule:
    definitions: dict[str, _Definition]
    imports: dict[str, str]  # alias -> import statement


@lru_cache(maxsize=8)
def _shim_module(name: str) -> _ShimModule:
    path = Path(__file__).resolve().parent.parent / "shims" / f"{name}.py"
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    imports: dict[str, str] = {}
    tops: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                imports[local] = ast.get_source_segment(text, node) or ""
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            tops[node.name] = node
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            for target in node.targets:
                assert isinstance(target, ast.Name)
                tops[target.id] = node
    definitions: dict[str, _Definition] = {}
    for order, (top_name, node) in enumerate(tops.items()):
        start = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
        end = node.end_lineno or node.lineno
        source = "".join(lines[start - 1 : end])
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        used |= {n.value.id for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        definitions[top_name] = _Definition(
            top_name,
            source,
            order,
            frozenset(u for u in used if u in tops and u != top_name),
            frozenset(u for u in used if u in imports),
        )
    return _ShimModule(definitions, imports)


def vendor_shims(code: str) -> tuple[str, list[str]]:
    """Inline every `precision_transpiler.shims.*` definition `code` refers to. Returns the new
    code and the shims that could not be found (a table names a shim that does not exist)."""
    if PACKAGE not in code:
        return code, []
    module = cst.parse_module(code)
    wanted: dict[str, list[str]] = {}

    class _Refs(cst.CSTTransformer):
        def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
            name = dotted_name(original)
            if name and name.startswith(PACKAGE + ".") and name.count(".") == 3:
                shim_module, symbol = name.split(".")[2:]
                wanted.setdefault(shim_module, [])
                if symbol not in wanted[shim_module]:
                    wanted[shim_module].append(symbol)
                return cst.Name(symbol, lpar=updated.lpar, rpar=updated.rpar)
            return updated

    module = module.visit(_Refs())
    if not wanted:
        return code, []
    missing: list[str] = []
    blocks: list[str] = []
    needed_imports: dict[str, str] = {}
    for shim_name, symbols in wanted.items():
        try:
            shim = _shim_module(shim_name)
        except OSError:
            missing += [f"{PACKAGE}.{shim_name}.{s}" for s in symbols]
            continue
        missing += [f"{PACKAGE}.{shim_name}.{s}" for s in symbols if s not in shim.definitions]
        closure: set[str] = set()
        todo = [s for s in symbols if s in shim.definitions]
        while todo:
            current = todo.pop()
            if current in closure:
                continue
            closure.add(current)
            todo.extend(shim.definitions[current].uses)
        for definition in sorted((shim.definitions[n] for n in closure), key=lambda d: d.order):
            blocks.append(definition.source.rstrip("\n"))
            for alias in definition.imports:
                needed_imports.setdefault(alias, shim.imports[alias])
    module = _drop_package_import(module)
    existing = _bound_names(module)
    import_lines = [stmt for alias, stmt in sorted(needed_imports.items()) if alias not in existing]
    text = "\n".join(import_lines)
    block = MARKER + "\n" + "\n\n\n".join(blocks) + "\n"
    return _insert_after_imports(module, text, block), missing


def _drop_package_import(module: cst.Module) -> cst.Module:
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Import):
            names = [dotted_name(a.name) for a in stmt.body[0].names]
            if names and all(n is not None and (n == "precision_transpiler" or n.startswith(PACKAGE)) for n in names):
                continue
        body.append(stmt)
    return module.with_changes(body=body)


def _bound_names(module: cst.Module) -> set[str]:
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                            names.add(alias.asname.name.value)
                        else:
                            names.add((dotted_name(alias.name) or "").split(".")[0])
                elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                    for alias in small.names:
                        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                            names.add(alias.asname.name.value)
                        else:
                            names.add(dotted_name(alias.name) or "")
    return names


def _insert_after_imports(module: cst.Module, imports: str, block: str) -> str:
    body = list(module.body)
    index = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
        ):
            index = i + 1
        elif i == 0 and isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr):
            index = 1  # module docstring
        elif index or not isinstance(stmt, cst.SimpleStatementLine):
            break
    head = module.with_changes(body=body[:index]).code
    tail = module.with_changes(body=body[index:], header=[]).code
    if imports:
        head = head.rstrip("\n") + "\n" + imports + "\n"
    head = head.rstrip("\n")
    return (head + "\n\n\n" if head else "") + block + "\n\n" + tail.lstrip("\n")
