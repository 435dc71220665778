"""Name resolution: which framework symbol does a Name or dotted name refer to here?

`import torch as t` makes `t.half` mean `torch.half`; `def f(torch): torch.half` does not. This
is scope analysis, as LibCST's QualifiedNameProvider does, but computed lazily: that provider
analyses every name of the module up front and alone costs more than the 0.5 s budget for a
1,000-line file (0.59 s on torchvision's resnet.py, benchmarks/). Here only names spelled like
an imported alias are ever resolved, against bindings read from Python's own `ast` of the
enclosing scope (parameters, assignments, loop/with/except targets, walrus, nested defs,
imports, `global`), walking outwards through enclosing functions and skipping class bodies,
exactly as Python does. tests/rewrite/test_names.py checks it against QualifiedNameProvider.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

import libcst as cst

from precision_transpiler.syntax import dotted_name, python_ast

_SCOPE_STMTS = (cst.FunctionDef, cst.ClassDef)
_EXPR_SCOPES = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)

Bindings = dict[str, str | None]  # local name -> qualified name for imports, None for other bindings


def _import_bindings(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str | None]]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                root = alias.name.split(".")[0]
                yield root, root
    else:
        module = node.module if node.level == 0 else None
        for alias in node.names:
            if alias.name == "*":
                continue
            yield alias.asname or alias.name, f"{module}.{alias.name}" if module else None


def _target_names(target: ast.AST) -> Iterator[str]:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            yield node.name
        elif isinstance(node, ast.MatchMapping) and node.rest:
            yield node.rest


def _args_names(args: ast.arguments) -> Iterator[str]:
    for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        yield a.arg
    if args.vararg:
        yield args.vararg.arg
    if args.kwarg:
        yield args.kwarg.arg


def scope_bindings(scope: ast.AST) -> tuple[Bindings, set[str]]:
    """Names bound directly in `scope` (not in nested scopes) and names it declares global."""
    bindings: Bindings = {}
    declared_global: set[str] = set()
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        for name in _args_names(scope.args):
            bindings[name] = None
    body: Iterable[ast.AST] = scope.body if isinstance(scope.body, list) else [scope.body]  # type: ignore[attr-defined]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bindings.setdefault(node.name, None)
            for expr in (
                *node.decorator_list,
                *getattr(node, "bases", ()),
                *[k.value for k in getattr(node, "keywords", ())],
            ):
                visit(expr)
            if not isinstance(node, ast.ClassDef):
                for default in (*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]):
                    visit(default)
            return
        if isinstance(node, ast.Lambda):
            for default in (*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]):
                visit(default)
            return
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            visit(node.generators[0].iter)  # evaluated in the enclosing scope
            for sub in ast.walk(node):
                if isinstance(sub, ast.NamedExpr):
                    bindings.setdefault(sub.target.id, None)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            for local, qualified in _import_bindings(node):
                bindings[local] = qualified  # an import wins over other bindings of the name
            return
        if isinstance(node, ast.Global | ast.Nonlocal):
            declared_global.update(node.names)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            if node.id not in bindings or bindings[node.id] is None:
                bindings[node.id] = None
        elif (isinstance(node, ast.ExceptHandler) and node.name) or (
            isinstance(node, ast.MatchAs | ast.MatchStar) and node.name
        ):
            bindings.setdefault(node.name, None)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bindings.setdefault(node.rest, None)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in body:
        visit(stmt)
    for name in declared_global:
        bindings.pop(name, None)
    return bindings, declared_global


class NameResolver:
    """Resolves Names/dotted names of one module. `stack` arguments are the path from the
    module to the node (the transformer's traversal stack)."""

    def __init__(self, module: cst.Module, source: str) -> None:
        self.tree: ast.Module | None
        try:
            self.tree = python_ast(source)
        except (SyntaxError, ValueError, RecursionError):
            self.tree = None
        self.module_bindings, _ = scope_bindings(self.tree) if self.tree is not None else ({}, set())
        self.imported_locals = self._all_imported_locals()
        self._ast_of: dict[int, ast.AST | None] = {id(module): self.tree}
        self._bindings: dict[int, tuple[Bindings, set[str]]] = {}

    def _all_imported_locals(self) -> frozenset[str]:
        names: set[str] = set()
        if self.tree is not None:
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    names.update(local for local, _ in _import_bindings(node))
        return frozenset(names)

    def reference_counts(self) -> dict[str, int]:
        """Module-level imported local name -> how often the module mentions it."""
        counts = dict.fromkeys((n for n, q in self.module_bindings.items() if q is not None), 0)
        if self.tree is not None:
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Name) and node.id in counts:
                    counts[node.id] += 1
        return counts

    # -- resolution ----------------------------------------------------------------------------

    def qualified_name(self, node: cst.CSTNode, stack: list[cst.CSTNode]) -> str | None:
        dotted = dotted_name(node)
        if dotted is None:
            return None
        if len(stack) >= 2 and stack[-1] is node and not _is_reference(node, stack[-2]):
            return None
        root, _, rest = dotted.partition(".")
        if root not in self.imported_locals:
            return None
        base = self._resolve(root, stack)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def _resolve(self, name: str, stack: list[cst.CSTNode]) -> str | None:
        inner, qualified = self._inner_binding(name, stack)
        return qualified if inner else self.module_bindings.get(name)

    def module_level(self, name: str, stack: list[cst.CSTNode]) -> bool:
        """Whether `name` read at the end of `stack` is the module's own binding of it (no
        function, lambda or comprehension around it binds it again): relative imports resolve to
        no qualified name, so this tells one from a local variable."""
        return not self._inner_binding(name, stack)[0] and name in self.module_bindings

    def _inner_binding(self, name: str, stack: list[cst.CSTNode]) -> tuple[bool, str | None]:
        """(True, what it imports or None) when a scope inside the module binds `name` (or cannot
        be analysed: conservatively, a binding that imports nothing); (False, None) when the
        module's own binding is the one read."""
        scopes = [n for n in stack if isinstance(n, (*_SCOPE_STMTS, *_EXPR_SCOPES))]
        innermost = True
        for scope in reversed(scopes):
            if isinstance(scope, cst.ClassDef) and not innermost:
                continue  # class bodies are not visible from nested functions
            innermost = False
            if isinstance(scope, _EXPR_SCOPES):
                if name in _expr_scope_names(scope):
                    return True, None
                continue
            info = self._scope_info(scope, stack)
            if info is None:
                return True, None  # could not analyse: be conservative, treat as not imported
            bindings, declared_global = info
            if name in declared_global:
                break
            if name in bindings:
                return True, bindings[name]
        return False, None

    def _scope_info(self, scope: cst.CSTNode, stack: list[cst.CSTNode]) -> tuple[Bindings, set[str]] | None:
        cached = self._bindings.get(id(scope))
        if cached is not None:
            return cached
        node = self._ast_for(scope, stack)
        if node is None:
            return None
        info = scope_bindings(node)
        self._bindings[id(scope)] = info
        return info

    def _ast_for(self, target: cst.CSTNode, stack: list[cst.CSTNode]) -> ast.AST | None:
        """The ast node of a FunctionDef/ClassDef on the path, found by walking statement
        bodies of both trees in parallel (same statements, same order)."""
        if id(target) in self._ast_of:
            return self._ast_of[id(target)]
        if self.tree is None or not stack:
            return None
        cst_body: list[cst.CSTNode] = list(stack[0].body)  # type: ignore[attr-defined]
        ast_body: list[ast.stmt] = self.tree.body
        on_path = {id(n) for n in stack}
        for node in stack[1:]:
            if not isinstance(node, cst.SimpleStatementLine | cst.BaseCompoundStatement):
                continue
            index = 0
            for item in cst_body:
                if item is node:
                    break
                index += len(item.body) if isinstance(item, cst.SimpleStatementLine) else 1
            else:
                return None
            if index >= len(ast_body):
                return None
            ast_node = ast_body[index]
            self._ast_of[id(node)] = ast_node
            if node is target:
                kind_ok = isinstance(node, cst.ClassDef) == isinstance(ast_node, ast.ClassDef)
                return ast_node if kind_ok else None
            pair = enter_block(node, ast_node, on_path)
            if pair is None:
                return None
            cst_body, ast_body = pair
        return None


def _is_reference(node: cst.CSTNode, parent: cst.CSTNode) -> bool:
    """False for names that only label something (an attribute, keyword, definition or
    binding target) rather than refer to a value. A dotted target (`a.b = 1`) still refers to
    `a`."""
    if not isinstance(node, cst.Name):
        return True
    if isinstance(parent, cst.NameItem):  # global/nonlocal declarations
        return False
    if isinstance(parent, cst.Attribute):
        return parent.attr is not node
    if isinstance(parent, cst.Arg):
        return parent.keyword is not node
    if isinstance(parent, cst.FunctionDef | cst.ClassDef | cst.Param):
        return parent.name is not node
    if isinstance(parent, cst.AssignTarget | cst.AsName):
        return False
    if isinstance(parent, cst.For | cst.CompFor | cst.AugAssign | cst.AnnAssign | cst.NamedExpr):
        return parent.target is not node
    return True


def _expr_scope_names(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    if isinstance(node, cst.Lambda):
        params = node.params
        for p in (*params.posonly_params, *params.params, *params.kwonly_params):
            names.add(p.name.value)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                names.add(star.name.value)
        return names
    comp = getattr(node, "for_in", None)
    while comp is not None:
        for n in _cst_target_names(comp.target):
            names.add(n)
        comp = comp.inner_for_in
    return names


def _cst_target_names(target: cst.CSTNode) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, cst.Tuple | cst.List):
        for el in target.elements:
            yield from _cst_target_names(el.value)
    elif isinstance(target, cst.StarredElement):
        yield from _cst_target_names(target.value)


def enter_block(
    node: cst.CSTNode, ast_node: ast.AST, on_path: set[int]
) -> tuple[list[cst.CSTNode], list[ast.stmt]] | None:
    """The (LibCST, ast) statement lists of the block of compound statement `node` that the
    path (`on_path`: ids of the nodes on it) enters; None if it enters none."""

    def block(suite: object) -> list[cst.CSTNode] | None:
        if isinstance(suite, cst.IndentedBlock) and id(suite) in on_path:
            return list(suite.body)
        return None

    body = block(getattr(node, "body", None))
    if body is not None:
        return body, list(getattr(ast_node, "body", []))
    orelse = getattr(node, "orelse", None)
    if orelse is not None and id(orelse) in on_path:
        if isinstance(orelse, cst.If):
            return [orelse], list(getattr(ast_node, "orelse", []))
        body = block(orelse.body)
        if body is not None:
            return body, list(getattr(ast_node, "orelse", []))
    if isinstance(node, cst.Try | cst.TryStar):
        for handler, ast_handler in zip(node.handlers, getattr(ast_node, "handlers", []), strict=False):
            body = block(handler.body) if id(handler) in on_path else None
            if body is not None:
                return body, list(ast_handler.body)
        if node.finalbody is not None and id(node.finalbody) in on_path:
            body = block(node.finalbody.body)
            if body is not None:
                return body, list(getattr(ast_node, "finalbody", []))
    if isinstance(node, cst.Match):
        for case, ast_case in zip(node.cases, getattr(ast_node, "cases", []), strict=False):
            body = block(case.body) if id(case) in on_path else None
            if body is not None:
                return body, list(ast_case.body)
    return None
