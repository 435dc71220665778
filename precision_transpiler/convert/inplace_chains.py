"""Split chains of in-place tensor methods into one call per statement, before the rules run.

torch code chains in-place methods, each returning the tensor it changed:

    idx[1:].mul_(num_nodes).add_(edge_index[1])     # torch-geometric's coalesce
    idx = row.mul_(num_nodes).add_(col)             # its negative sampling
    p.mul_(momentum).add_(grad)                     # optimizers, EMA updates

The torch-inplace-ops rule (rules/torch_inplace_ops_model.py) turns one in-place call on a name,
an attribute or an indexed view into an assignment; on a chain the outer call's receiver is the
inner call, whose effect on the tensor would be lost. Since every link returns its receiver,

    R.a_(x).b_(y)   is   R.a_(x); R.b_(y)

whenever `R` can be evaluated twice to the same tensor: a name, an attribute of one, or an index
of those without calls in it (a basic view `idx[1:]` is made again over the same storage). So
this stage writes the chain as separate statements on the same line (`;`, so that every later
position still names the input's line), the last one keeping the statement's own form
(`y = R.b_(y)`, `return R.b_(y)`); the rule then converts each. Chains on anything else
(`(a - b).abs_().add_(1)`, a call's result) are left to the rule, and so are chains whose first
link is a function of an imported module (`nn.init.normal_(w).clamp_(...)`).

An in-place call inside an expression is moved before its statement the same way, on the same
line, its place taken by its receiver (what it returns):

    idx.sub_(mask.logical_not_().cumsum(dim=0))     # torch-geometric's coalesce
    ->  mask.logical_not_(); idx.sub_(mask.cumsum(dim=0))

That is the same computation when nothing of the statement evaluated before the call reads
the receiver: so only where the receiver's name occurs nowhere else in the statement (but as a
plain target it is assigned to), where the call is not under a lambda, a comprehension, a
conditional expression or `and`/`or` (which may not run it), and where moving its arguments'
calls ahead of other calls of the statement cannot reorder them. Only methods of the in-place
table (mappings/ops/inplace_ops.yaml) count, and lines carrying a `# ptranspile:` marker are
left as written. Static: nothing is imported or run.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TypeVar

import libcst as cst

from precision_transpiler.syntax import all_nodes

#: a cheap test before parsing: `.name_(...)` followed by `.name_(` somewhere
_CHAIN_HINT = re.compile(r"\.[A-Za-z]\w*_\(")
#: `idx[1:], perm = ...`: a subscript among the targets of an unpacking
_UNPACK_HINT = re.compile(r"^\s*[\w\[\]:, .]*\w\[[^\]=]*\]\s*,[^=]*=[^=]")
#: a line whose one in-place call is the statement's own (`x.add_(y)`, `y = x.mul_(2)`,
#: `return x.sub_(1)`): nothing to move
_STATEMENT_CALL = re.compile(
    r"^\s*(?:return\s+|[\w.\[\], ]+=\s*)?[\w.]+(?:\[[^\]]*\])?\.[A-Za-z]\w*_\([^()]*\)\s*(?:#.*)?$"
)


def split_inplace_chains(module: cst.Module, methods: Collection[str]) -> cst.Module | None:
    """`module` with chained in-place calls split into statements; None when there is none."""
    splitter = _Split(frozenset(methods), _imported_names(module))
    result = module.visit(splitter)
    return result if splitter.changed else None


def may_have_chains(code: str) -> bool:
    """Whether `code` may hold a chain (two in-place method calls on one line), an in-place call
    inside an expression, or an unpacking into a subscript (`idx[1:], perm = ...`)."""
    for line in code.splitlines():
        if "_(" not in line and "]," not in line:
            continue
        hints = len(_CHAIN_HINT.findall(line))
        if hints >= 2 or (hints == 1 and not _STATEMENT_CALL.match(line)) or _UNPACK_HINT.match(line):
            return True
    return False


_Line = TypeVar("_Line", cst.SimpleStatementLine, cst.SimpleStatementSuite)
_Node = TypeVar("_Node", bound=cst.CSTNode)


class _Split(cst.CSTTransformer):
    def __init__(self, methods: frozenset[str], imported: frozenset[str]) -> None:
        super().__init__()
        self.methods = methods
        self.imported = imported  # names imports bind: `nn.init.normal_(w)` is a function call
        self.changed = False

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        return self._leave(updated_node)

    def leave_SimpleStatementSuite(
        self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite
    ) -> cst.SimpleStatementSuite:
        return self._leave(updated_node)

    def _leave(self, line: _Line) -> _Line:
        """A statement line (or the `if x: a; b` suite) with its chains split."""
        if _has_marker(line.trailing_whitespace.comment):
            return line
        body = self._split(line.body)
        return line if body is None else line.with_changes(body=body)

    def _split(self, body: Sequence[cst.BaseSmallStatement]) -> list[cst.BaseSmallStatement] | None:
        out: list[cst.BaseSmallStatement] = []
        changed = False
        for statement in body:
            pieces = self._pieces(statement)
            changed = changed or pieces is not None
            for piece in pieces or [statement]:
                # again on what is left: `x.a_().b_().sum()` moves `x.a_()`, then `x.b_()`
                while (hoisted := self._hoisted(piece)) is not None:
                    changed = True
                    *moved, piece = hoisted
                    out += [cst.Expr(call, semicolon=_SEMICOLON) for call in moved]
                out.append(piece)
        if not changed:
            return None
        self.changed = True
        return out

    def _pieces(self, statement: cst.BaseSmallStatement) -> list[cst.BaseSmallStatement] | None:
        """The statement's unpacking into a subscript or chain of in-place calls as statements;
        None when it has neither."""
        unpacked = _unpacked_stores(statement) if isinstance(statement, cst.Assign) else None
        if unpacked is not None:
            return [
                *(s.with_changes(semicolon=_SEMICOLON) for s in unpacked[:-1]),
                unpacked[-1].with_changes(semicolon=statement.semicolon),
            ]
        value = statement.value if isinstance(statement, cst.Expr | cst.Assign | cst.Return) else None
        links = self._links(value) if isinstance(value, cst.Call) else None
        if links is None:
            return None
        *leading, last = links
        return [*(cst.Expr(call, semicolon=_SEMICOLON) for call in leading), statement.with_changes(value=last)]

    def _hoisted(self, statement: cst.BaseSmallStatement) -> list[cst.BaseSmallStatement] | None:
        """The in-place calls inside the statement's expressions, innermost first, then the
        statement with each replaced by its receiver; None when there is none to move."""
        if not isinstance(statement, cst.Expr | cst.Assign | cst.AugAssign | cst.Return):
            return None
        own = statement.value if not isinstance(statement, cst.AugAssign) else None
        finder = _Nested(self.methods, self.imported, own)
        statement.visit(finder)
        if not finder.found:
            return None
        calls = [c for c in finder.found if _movable(statement, c)]
        if not calls:
            return None
        moved: list[cst.Call] = []
        replacements: dict[cst.CSTNode, cst.BaseExpression] = {}
        for call in calls:  # innermost first: a moved call's arguments have their own moved already
            moved.append(_replace(call, replacements))
            receiver = call.func.value  # type: ignore[attr-defined]
            replacements[call] = receiver.with_changes(lpar=call.lpar, rpar=call.rpar)
        return [*moved, _replace(statement, replacements)]

    def _links(self, call: cst.Call) -> list[cst.Call] | None:
        """The calls of an in-place chain on a receiver that can be read again, each on that
        receiver, innermost first; None when `call` is not such a chain of two or more."""
        calls: list[tuple[cst.Name, cst.Call]] = []
        node: cst.BaseExpression = call
        while (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in self.methods
            and not node.lpar
        ):
            calls.append((node.func.attr, node))
            node = node.func.value
        if len(calls) < 2 or not _rereadable(node) or _root(node) in self.imported:
            return None
        receiver = node
        return [
            link.with_changes(func=link.func.with_changes(value=receiver))  # type: ignore[union-attr]
            for _, link in reversed(calls)
        ]


class _Nested(cst.CSTVisitor):
    """In-place calls of the table on a receiver that can be read again, inside a statement's
    expressions (not its own call, which the in-place rule converts), where they surely run:
    not under a lambda, a comprehension, a conditional expression or `and`/`or`. Post-order:
    a call inside another's arguments comes first."""

    _GUARDED = (
        cst.Lambda,
        cst.ListComp,
        cst.SetComp,
        cst.DictComp,
        cst.GeneratorExp,
        cst.IfExp,
        cst.BooleanOperation,
    )

    def __init__(self, methods: frozenset[str], imported: frozenset[str], own: cst.CSTNode | None) -> None:
        super().__init__()
        self.methods, self.imported, self.own = methods, imported, own
        self.guarded = 0
        self.found: list[cst.Call] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self._GUARDED):
            self.guarded += 1
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, self._GUARDED):
            self.guarded -= 1
        elif (
            isinstance(original_node, cst.Call)
            and not self.guarded
            and original_node is not self.own
            and isinstance(original_node.func, cst.Attribute)
            and original_node.func.attr.value in self.methods
            and _rereadable(original_node.func.value)
            and _root(original_node.func.value) not in self.imported | {"self", "cls", ""}
        ):
            self.found.append(original_node)


def _movable(statement: cst.BaseSmallStatement, call: cst.Call) -> bool:
    """Whether moving `call` before `statement` computes the same: its receiver's name is read
    nowhere else in the statement (but inside the call, or as a plain name assigned to), and
    when its arguments call something, no other call of the statement (one not around it) could
    have run first."""
    root = _root(call.func.value)  # type: ignore[attr-defined]
    inside = {id(n) for n in all_nodes(call)}
    assigned = {id(t.target) for t in statement.targets} if isinstance(statement, cst.Assign) else set()
    for node in all_nodes(statement):
        if isinstance(node, cst.Name) and node.value == root and id(node) not in inside | assigned:
            return False
    if any(isinstance(n, cst.Call) for a in call.args for n in all_nodes(a)):
        around = _ancestors(statement, call)
        if any(isinstance(n, cst.Call) and id(n) not in inside | around for n in all_nodes(statement)):
            return False
    return True


def _ancestors(root: cst.CSTNode, node: cst.CSTNode) -> set[int]:
    """ids of the nodes on the path from `root` down to `node` (excluded)."""
    path: list[cst.CSTNode] = []

    def walk(current: cst.CSTNode) -> bool:
        if current is node:
            return True
        path.append(current)
        if any(walk(child) for child in current.children):
            return True
        path.pop()
        return False

    walk(root)
    return {id(n) for n in path}


def _replace(node: _Node, replacements: dict[cst.CSTNode, cst.BaseExpression]) -> _Node:
    """`node` with each of `replacements`' keys (nodes inside it) replaced by its value."""
    if not replacements:
        return node

    class _Swap(cst.CSTTransformer):
        def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
            return replacements.get(original_node, updated_node)

    return node.visit(_Swap())  # type: ignore[return-value]


_SEMICOLON = cst.Semicolon(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))


def _unpacked_stores(assign: cst.Assign) -> list[cst.BaseSmallStatement] | None:
    """`idx[1:], perm = f(...)` (torch-geometric's coalesce) -> `_pt_unpacked_0, perm = f(...);
    idx[1:] = _pt_unpacked_0`: the store into the subscript becomes a statement of its own, which
    the in-place rule converts (`idx = idx.at[1:].set(...)`). Only where no index reads another
    target of the unpacking (the stores then happen after the plain names are bound)."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Tuple | cst.List):
        return None
    elements = assign.targets[0].target.elements
    if any(isinstance(e, cst.StarredElement) for e in elements):
        return None
    stores = [e.value for e in elements if isinstance(e.value, cst.Subscript)]
    if not stores or not all(isinstance(s.value, cst.Name) for s in stores):
        return None
    plain = {e.value.value for e in elements if isinstance(e.value, cst.Name)}
    if any(_names_in(element) & plain for s in stores for element in s.slice):
        return None
    temporaries: list[cst.BaseElement] = []
    after: list[cst.BaseSmallStatement] = []
    for element in elements:
        if isinstance(element.value, cst.Subscript):
            name = cst.Name(f"_pt_unpacked_{len(after)}")
            after.append(cst.Assign([cst.AssignTarget(element.value)], name))
            temporaries.append(element.with_changes(value=name))
        else:
            temporaries.append(element)
    target = assign.targets[0].with_changes(target=assign.targets[0].target.with_changes(elements=temporaries))
    return [assign.with_changes(targets=[target]), *after]


def _names_in(node: cst.CSTNode) -> set[str]:
    return {n.value for n in all_nodes(node) if isinstance(n, cst.Name)}


def _rereadable(node: cst.BaseExpression) -> bool:
    """A name, an attribute of one, or an index of those with no call in the index."""
    if isinstance(node, cst.Name):
        return True
    if isinstance(node, cst.Attribute):
        return _rereadable(node.value)
    if isinstance(node, cst.Subscript):
        return _rereadable(node.value) and not any(_has_call(element.slice) for element in node.slice)
    return False


def _root(node: cst.BaseExpression) -> str:
    while isinstance(node, cst.Attribute | cst.Subscript):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""


def _imported_names(module: cst.Module) -> frozenset[str]:
    names: set[str] = set()

    class _Imports(cst.CSTVisitor):
        def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
            if node.asname is not None and isinstance(node.asname.name, cst.Name):
                names.add(node.asname.name.value)
            else:
                names.add(cst.Module([]).code_for_node(node.name).split(".")[0])

    module.visit(_Imports())
    return frozenset(names)


def _has_call(node: cst.CSTNode) -> bool:
    return any(isinstance(n, cst.Call) for n in all_nodes(node))


def _has_marker(comment: cst.Comment | None) -> bool:
    return comment is not None and "ptranspile:" in comment.value
