"""Remove what ptranspile inserted for a precision policy.

Everything the policy passes insert is recognisable by name: module-level definitions named
`_ptranspile_*`/`_PTRANSPILE_*`, decorators `@_ptranspile_*` (on functions and classes),
keyword arguments with such a value, and calls that wrap the user's expression as their first
argument (`_ptranspile_fp32(x)`, `_ptranspile_compute(self.norm(x), self)`), and
`_ptranspile_autocast(op, *args)`, which calls the user's op on the user's arguments. Removing exactly
those restores the user's code byte for byte, because the passes never touch anything else.
The runtime definitions the block bound are the runtime's (runtime/<framework>/policy.py): read
back as imports (`from precision_transpiler.runtime.flax.policy import FlaxPolicy`), those only
removed statements used go with them.
"""

from __future__ import annotations

from typing import TypeVar

import libcst as cst

from precision_transpiler.markers import POLICY_IMPORT_MARKER
from precision_transpiler.runtime import PACKAGE, POLICY_MODULES
from precision_transpiler.syntax import dotted_name, import_bound_names

PREFIXES = ("_ptranspile_", "_PTRANSPILE_")
_Decorated = TypeVar("_Decorated", cst.FunctionDef, cst.ClassDef)
IMPORT_MARKER = POLICY_IMPORT_MARKER


def marked_import(module: str, alias: str) -> cst.SimpleStatementLine:
    """An import the policy helpers need, marked so that stripping removes exactly it."""
    code = f"import {module}" if alias == module.split(".")[0] and "." not in module else f"import {module} as {alias}"
    stmt = cst.parse_statement(f"{code}  {IMPORT_MARKER}\n")
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


def _generated_name(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value.startswith(PREFIXES)


def _is_generated_statement(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, cst.SimpleStatementLine):
        comment = stmt.trailing_whitespace.comment
        if comment is not None and comment.value == IMPORT_MARKER:
            return True
    if isinstance(stmt, cst.FunctionDef):
        return stmt.name.value.startswith(PREFIXES)
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        small = stmt.body[0]
        if isinstance(small, cst.Assign):
            return all(_generated_name(t.target) for t in small.targets)
    return False


class StripInserted(cst.CSTTransformer):
    """Undo the policy passes. `removed` counts what was taken out."""

    def __init__(self) -> None:
        super().__init__()
        self.removed = 0

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        # Generated statements are inserted with their own leading lines and never change the
        # lines of the statement after them, so dropping them restores the layout exactly.
        body = [stmt for stmt in updated_node.body if not _is_generated_statement(stmt)]
        self.removed += len(updated_node.body) - len(body)
        dropped = [stmt for stmt in updated_node.body if _is_generated_statement(stmt)]
        return updated_node.with_changes(body=_without_policy_runtime(body, dropped))

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return self._without_generated_decorators(updated_node)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        return self._without_generated_decorators(updated_node)

    def _without_generated_decorators(self, node: _Decorated) -> _Decorated:
        # Inserted decorators carry no leading lines of their own (the definition's comments and
        # blank lines sit on the definition), so dropping them restores the layout exactly.
        kept = [d for d in node.decorators if not _decorator_generated(d)]
        if len(kept) != len(node.decorators):
            self.removed += len(node.decorators) - len(kept)
            return node.with_changes(decorators=kept)
        return node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        args = list(updated_node.args)
        if args and _is_generated_arg(args[-1]):
            # Inserted arguments go last; the last one carries the call's original trailing comma.
            # and the space before the closing parenthesis.
            trailing, closing = args[-1].comma, args[-1].whitespace_after_arg
            while args and _is_generated_arg(args[-1]):
                args.pop()
                self.removed += 1
            if args:
                if isinstance(args[-1].whitespace_after_arg, cst.ParenthesizedWhitespace):
                    closing = args[-1].whitespace_after_arg  # inserted by an earlier version: as it was
                args[-1] = args[-1].with_changes(comma=trailing, whitespace_after_arg=closing)
            updated_node = updated_node.with_changes(args=args)
        if isinstance(updated_node.func, cst.Name) and updated_node.func.value == "_ptranspile_autocast" and args:
            # `_ptranspile_autocast(op, *args)` (passes/keras_torch.py): the op called on its arguments
            self.removed += 1
            op = args[0].value
            if isinstance(op, cst.Name) and op.value == "_ptranspile_matmul" and len(args) == 3:
                lpar, rpar = updated_node.lpar, updated_node.rpar  # `(a @ b)` kept its parentheses
                return cst.BinaryOperation(args[1].value, cst.MatrixMultiply(), args[2].value, lpar=lpar, rpar=rpar)
            return cst.Call(func=args[0].value, args=args[1:])
        if (
            _generated_name(updated_node.func)
            and updated_node.args
            and all(arg.keyword is None and arg.star == "" for arg in updated_node.args)
        ):
            self.removed += 1
            return updated_node.args[0].value  # wrappers take the user's expression, exactly as written, first
        return updated_node


def _without_policy_runtime(body: list[cst.BaseStatement], dropped: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """`body` without its imports from the policy runtime (`from
    precision_transpiler.runtime.flax.policy import FlaxPolicy`, POLICY_MODULES) that no code
    left in it names: what the dropped block bound, and what those definitions needed, as it
    reads when their copies or the runtime module's import were read back (convert/vendor.py
    `unvendor`, convert/runtime_module.py `read_runtime_imports`)."""
    imported = {name for stmt in body if _policy_import_line(stmt) for name in _bound(stmt)}
    if not imported or not dropped:
        return body
    gone = imported - _names_in([stmt for stmt in body if not _policy_import_line(stmt)])
    if not gone:
        return body
    kept: list[cst.BaseStatement] = []
    for stmt in body:
        if not (_policy_import_line(stmt) and _bound(stmt) & gone):
            kept.append(stmt)
            continue
        assert isinstance(stmt, cst.SimpleStatementLine)
        smalls = []
        for small in stmt.body:
            assert isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar)
            names = [a for a in small.names if import_bound_names(small.with_changes(names=[a])).isdisjoint(gone)]
            if names:
                names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                smalls.append(small.with_changes(names=names))
        if smalls:
            smalls[-1] = smalls[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            kept.append(stmt.with_changes(body=smalls))
    return kept


def _policy_import_line(stmt: cst.CSTNode) -> bool:
    """A line of runtime imports (`from precision_transpiler.runtime.M import N`, several on
    one line as read_runtime_imports writes them) with one from a policy runtime module."""
    if not isinstance(stmt, cst.SimpleStatementLine) or not stmt.body:
        return False
    modules = []
    for small in stmt.body:
        if not isinstance(small, cst.ImportFrom) or small.module is None or isinstance(small.names, cst.ImportStar):
            return False
        modules.append(dotted_name(small.module) or "")
    if not all(m.startswith(PACKAGE + ".") for m in modules):
        return False
    return any(m[len(PACKAGE) + 1 :] in POLICY_MODULES for m in modules)


def _bound(stmt: cst.BaseStatement) -> set[str]:
    assert isinstance(stmt, cst.SimpleStatementLine)
    return set().union(*(import_bound_names(small) for small in stmt.body))


def _names_in(statements: list[cst.BaseStatement]) -> set[str]:
    found: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

    for stmt in statements:
        stmt.visit(_Names())
    return found


def _is_generated_arg(arg: cst.Arg) -> bool:
    return arg.keyword is not None and _generated_name(arg.value)


def _decorator_generated(decorator: cst.Decorator) -> bool:
    expr = decorator.decorator
    if isinstance(expr, cst.Call):
        expr = expr.func
    return _generated_name(expr)


def strip_inserted(module: cst.Module) -> tuple[cst.Module, int]:
    stripper = StripInserted()
    return module.visit(stripper), stripper.removed
