"""Order top-level definitions so that each exists before its definition runs.

Sibling copying (convert/siblings/) copies definitions in rounds: what the file imports first, then
what those copies import, each round's block placed after the imports, above the earlier ones.
That order is right for what a definition uses when it is *called*, but not for what it uses
when it is *defined*: normflows' `MaskedPiecewiseRationalQuadraticAutoregressive(Autoregressive)`
comes in a round after `Flow`, and its base `Autoregressive(Flow)` two rounds later lands above
`Flow`, so the class statement fails (or, with the original `Flow` still imported, silently
subclasses the torch class). Python evaluates a class's bases, keywords and decorators, the
statements of its body, and the defaults and decorators of its methods when the class statement
runs; a function's defaults and decorators when the `def` runs; an assignment's value at once.

`order_definitions` moves each top-level class, function or assignment that a later-running
statement needs at definition time (and is bound nowhere above it) to just above that statement,
with what it needs in turn. Nothing else moves, so a file that already runs keeps its order.

This module is the one place that decides where copies go: `copies_line` (each round's block,
after the output's leading imports, so above the blocks of earlier rounds, which need what it
brings), `imports_line` (imports a round adds alone) and `order_definitions` at the end.
"""

from __future__ import annotations

import ast

import libcst as cst

from precision_transpiler.convert.import_lines import after_imports
from precision_transpiler.syntax import import_bound_names

__all__ = ["copies_line", "imports_line", "order_definitions"]


def copies_line(tree: ast.Module) -> int:
    """The 0-based line where a round's block of copies goes in the output (`tree`): after its
    leading imports, above what earlier rounds copied (which imports what this round brings)."""
    return after_imports(tree, leading_only=True)


def imports_line(tree: ast.Module) -> int:
    """The 0-based line where imports a round adds without copies go: after the last top-level
    import of the output (`tree`)."""
    return after_imports(tree, leading_only=False)


class _Loads(cst.CSTVisitor):
    """Names a statement reads when it runs: not inside function or lambda bodies, but their
    decorators and default values."""

    def __init__(self, annotations: bool = False) -> None:
        self.names: set[str] = set()
        self.annotations = annotations  # evaluated when the `def` runs (no postponed annotations)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        for decorator in node.decorators:
            decorator.visit(self)
        params = node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None:
                param.default.visit(self)
        if self.annotations:
            stars = [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
            for param in (*params.posonly_params, *params.params, *params.kwonly_params, *stars):
                if param.annotation is not None:
                    param.annotation.visit(self)
            if node.returns is not None:
                node.returns.visit(self)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
            if param.default is not None:
                param.default.visit(self)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # `a.b` reads `a`, not `b`
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)  # a keyword's name is not a read
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        return False

    # names bound, not read: assignment and loop targets, imports, `as` names
    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        self._target(node.target)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        self._target(node.target)
        node.annotation.visit(self)
        if node.value is not None:
            node.value.visit(self)
        return False

    def visit_For(self, node: cst.For) -> bool:
        self._target(node.target)
        node.iter.visit(self)
        node.body.visit(self)
        if node.orelse is not None:
            node.orelse.visit(self)
        return False

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        self._target(node.target)
        node.iter.visit(self)
        for condition in node.ifs:
            condition.visit(self)
        if node.inner_for_in is not None:
            node.inner_for_in.visit(self)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        node.value.visit(self)
        return False

    def visit_AsName(self, node: cst.AsName) -> bool:
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Global(self, node: cst.Global) -> bool:
        return False

    def visit_Nonlocal(self, node: cst.Nonlocal) -> bool:
        return False

    def _target(self, target: cst.BaseExpression) -> None:
        """A store target: its names are bound; what an attribute or subscript target reads is read."""
        if isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._target(target.value)
        elif not isinstance(target, cst.Name):
            target.visit(self)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        for decorator in node.decorators:
            decorator.visit(self)
        for arg in (*node.bases, *node.keywords):
            arg.value.visit(self)
        node.body.visit(self)
        return False

    def visit_Comp(self, node: cst.BaseComp) -> bool:
        return True


def _loads(stmt: cst.CSTNode, annotations: bool = False) -> set[str]:
    visitor = _Loads(annotations)
    if isinstance(stmt, cst.ClassDef | cst.FunctionDef):
        visitor.visit_ClassDef(stmt) if isinstance(stmt, cst.ClassDef) else visitor.visit_FunctionDef(stmt)
    else:
        stmt.visit(visitor)
    return visitor.names


def _called_loads(function: cst.FunctionDef, annotations: bool = False) -> set[str]:
    """What a function reads when it is called at definition time (a decorator, a helper a
    class body or a default calls: timm's `@register_notrace_module` adds to `_leaf_modules`):
    the names of its body, less its parameters and what it assigns."""

    class _Deep(_Loads):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return True

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return True

    deep = _Deep()
    function.body.visit(deep)
    local: set[str] = set()

    class _Locals(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            local.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            return False

        def visit_Subscript(self, node: cst.Subscript) -> bool:
            return False

    for node in _store_targets(function):
        node.visit(_Locals())
    local -= _declared_global(function)  # `global _handler; _handler = ...` assigns the module's
    params = function.params
    local |= {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            local.add(star.name.value)
    return (deep.names | _loads(function, annotations)) - local


def _declared_global(function: cst.FunctionDef) -> set[str]:
    """Names the function's `global` statements declare (not those of functions inside it)."""
    names: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Global(self, node: cst.Global) -> None:
            names.update(item.name.value for item in node.names)

    function.visit(_V())
    return names


def _store_targets(function: cst.FunctionDef) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class _V(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            found.append(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            found.append(node.target)

        def visit_For(self, node: cst.For) -> None:
            found.append(node.target)

        def visit_CompFor(self, node: cst.CompFor) -> None:
            found.append(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:
            found.append(node.name)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            found.append(node.target)

    function.body.visit(_V())
    return found


def _binds(stmt: cst.CSTNode) -> set[str]:
    """Names a movable statement binds: a class, a function, or plain names assigned."""
    if isinstance(stmt, cst.ClassDef | cst.FunctionDef):
        return {stmt.name.value}
    if isinstance(stmt, cst.SimpleStatementLine):
        names: set[str] = set()
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    names |= _target_names(t.target)
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                names.add(small.target.value)
        return names
    return set()


def _target_names(target: cst.BaseExpression) -> set[str]:
    """Plain names an assignment target binds: `x`, and those of `a, (b, *c) = ...`."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, cst.Tuple | cst.List):
        found: set[str] = set()
        for element in target.elements:  # an Element or a StarredElement: `.value` either way
            found |= _target_names(element.value)
        return found
    return set()


def _all_bindings(stmt: cst.CSTNode) -> set[str]:
    """Every top-level name a statement may bind (imports, loops, `with`, `try` too)."""
    found = _binds(stmt)
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            found |= import_bound_names(small)
            if isinstance(small, cst.AugAssign | cst.AnnAssign) and isinstance(small.target, cst.Name):
                found.add(small.target.value)
    elif not isinstance(stmt, cst.ClassDef | cst.FunctionDef):

        class _Stores(cst.CSTVisitor):
            def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
                if isinstance(node.target, cst.Name):
                    found.add(node.target.value)

            def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
                target = node.asname.name if node.asname is not None else node.name
                while isinstance(target, cst.Attribute):
                    target = target.value
                if isinstance(target, cst.Name):
                    found.add(target.value)

            def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                found.add(node.name.value)
                return False

            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                found.add(node.name.value)
                return False

        stmt.visit(_Stores())
    return found


def _called_names(stmt: cst.CSTNode) -> set[str]:
    """Names the statement calls as it runs (`f(...)`; not inside function or lambda bodies)."""
    names: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name):
                names.add(node.func.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is stmt

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    if isinstance(stmt, cst.FunctionDef):
        stmt.body.visit(_V())  # a function waiting to be called: what its body calls
    elif not isinstance(stmt, cst.ClassDef):
        stmt.visit(_V())
    return names


def _through_calls(
    stmt: cst.CSTNode, functions: dict[str, cst.FunctionDef], evaluated: bool, closures: dict[str, set[str]]
) -> set[str]:
    """What the top-level functions a simple statement calls read when called, transitively
    (diffusers' `logger = get_logger(__name__)` runs `_configure_library_root_logger`, which
    reads the annotated global `_default_handler` defined further down)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return set()
    needs: set[str] = set()
    for name in _called_names(stmt) & functions.keys():
        if name not in closures:
            closures[name] = set()  # a recursive call stops here
            todo, seen, found = [name], {name}, set()
            while todo:
                function = functions[todo.pop()]
                found |= _called_loads(function, evaluated)
                for callee in _called_names(function) & functions.keys():
                    if callee not in seen:
                        seen.add(callee)
                        todo.append(callee)
            closures[name] = found
        needs |= closures[name]
    return needs


def order_definitions(code: str) -> str:
    """`code` with definitions moved above the statements that need them when they run (the
    module docstring says which); unchanged when nothing is out of order."""
    module = cst.parse_module(code)
    body = list(module.body)
    bindings = {id(stmt): _all_bindings(stmt) for stmt in body}
    # `if`/`try` blocks move too, with every name they bind (diffusers' `if USE_TORCH ...:
    # _torch_available, _torch_version = ...` read by a helper called further up)
    movable = {id(stmt): bindings[id(stmt)] if isinstance(stmt, cst.If | cst.Try) else _binds(stmt) for stmt in body}
    evaluated = "from __future__ import annotations" not in code  # annotations run with the `def`
    moved = 0
    called: set[int] = set()
    above: set[str] = set()
    # top-level functions by name: a statement that calls one at once (`logger = get_logger()`)
    # needs what its body reads, and what the functions it calls read in turn
    functions = {stmt.name.value: stmt for stmt in body if isinstance(stmt, cst.FunctionDef)}
    closures: dict[str, set[str]] = {}
    i = 0
    while i < len(body):
        # definitions wait for others (what sibling inlining copies), and so do `if`/`try`
        # blocks that define globals (monai's `if optional_import(...)[1]: def monai_swish`,
        # copied above the function it calls); other statements (imports, calls) keep their
        # place and need nothing moved
        stmt = body[i]
        needs = _called_loads(stmt, evaluated) if id(stmt) in called else _loads(stmt, evaluated)
        needs |= _through_calls(stmt, functions, evaluated, closures)
        # what the statement binds itself (`try: from torch.library import custom_op / except:
        # def custom_op(...)`) is not waited for: two such blocks would swap places for ever
        missing = (
            needs - above - bindings[id(stmt)] if movable[id(stmt)] or isinstance(stmt, cst.If | cst.Try) else set()
        )
        later = None
        if missing and moved <= len(body):
            later = next(
                (
                    j
                    for j in range(i + 1, len(body))
                    if movable[id(body[j])] & missing and not movable[id(body[j])] & above
                ),
                None,
            )
        if later is None:
            above |= bindings[id(body[i])]
            i += 1
            continue
        dependency = body.pop(later)
        if isinstance(dependency, cst.FunctionDef):
            called.add(id(dependency))  # needed when a definition runs: it may be called then
        body.insert(i, dependency)  # then look at the moved one: what it needs comes first
        moved += 1
    if not moved:
        return code
    return module.with_changes(body=body).code
