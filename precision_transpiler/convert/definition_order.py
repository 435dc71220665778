"""Order top-level definitions so that each exists before its definition runs.

Sibling inlining (siblings.py) copies definitions in rounds: what the file imports first, then
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
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.syntax import import_bound_names

__all__ = ["order_definitions"]


class _Loads(cst.CSTVisitor):
    """Names a statement reads when it runs: not inside function or lambda bodies, but their
    decorators and default values."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        for decorator in node.decorators:
            decorator.visit(self)
        for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
            if param.default is not None:
                param.default.visit(self)
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

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        for decorator in node.decorators:
            decorator.visit(self)
        for arg in (*node.bases, *node.keywords):
            arg.value.visit(self)
        node.body.visit(self)
        return False

    def visit_Comp(self, node: cst.BaseComp) -> bool:
        return True


def _loads(stmt: cst.CSTNode) -> set[str]:
    visitor = _Loads()
    if isinstance(stmt, cst.ClassDef | cst.FunctionDef):
        visitor.visit_ClassDef(stmt) if isinstance(stmt, cst.ClassDef) else visitor.visit_FunctionDef(stmt)
    else:
        stmt.visit(visitor)
    return visitor.names


def _binds(stmt: cst.CSTNode) -> set[str]:
    """Names a movable statement binds: a class, a function, or plain names assigned."""
    if isinstance(stmt, cst.ClassDef | cst.FunctionDef):
        return {stmt.name.value}
    if isinstance(stmt, cst.SimpleStatementLine):
        names: set[str] = set()
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                names |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                names.add(small.target.value)
        return names
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


def order_definitions(code: str) -> str:
    """`code` with definitions moved above the statements that need them when they run (the
    module docstring says which); unchanged when nothing is out of order."""
    module = cst.parse_module(code)
    body = list(module.body)
    bindings = {id(stmt): _all_bindings(stmt) for stmt in body}
    movable = {id(stmt): _binds(stmt) for stmt in body}
    moved = 0
    above: set[str] = set()
    i = 0
    while i < len(body):
        missing = _loads(body[i]) - above
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
        body.insert(i, body.pop(later))  # then look at the moved one: what it needs comes first
        moved += 1
    if not moved:
        return code
    return module.with_changes(body=body).code
