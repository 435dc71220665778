"""Convert only what an entry point reaches (`--entry NAME` or `--entry 'BertModel(BertConfig())'`).

A model file often holds more than the model a user ports: transformers' modeling_bert.py has
eleven heads with losses, TF-checkpoint loaders and model-parallel helpers. With an entry, the
top-level definitions the entry does not reach (through names in bodies, bases, decorators,
annotations and defaults, transitively) are left out before conversion, so the output holds
the model and what it needs, and diagnostics speak only of that code. The `if __name__ ==
"__main__":` block, which runs only as a script, is left out too.

Pruning keeps line numbers: a left-out definition (with the comment block right above it) is
replaced by a marker line and blank lines, so diagnostics point at the original file's lines;
`finish_pruned` then removes the markers. Imports that only left-out code used are removed from
the converted file (`prune_imports`). Nothing is imported or run: this is `ast` analysis.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import libcst as cst

from precision_transpiler.errors import UsageError

MARKER = "# ptranspile: pruned (not reached from the entry)"
_MARKER_RUN = re.compile(r"\n*" + re.escape(MARKER) + r"\n+")


@dataclass
class Pruned:
    source: str
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    import_names: set[str] = field(default_factory=set)  # bound by imports only dropped code used


def entry_names(entry: str) -> list[str]:
    """Names an entry expression mentions, in order: 'BertModel(BertConfig(n=2))' -> both."""
    try:
        tree = ast.parse(entry.strip(), mode="eval")
    except SyntaxError:
        raise UsageError(f"--entry {entry!r} is not a Python expression") from None
    names = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name)]
    return list(dict.fromkeys(names))


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _mentions(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _import_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [a.asname or a.name for a in node.names if a.name != "*"]
    return []


def _main_block(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (either way round): code that runs only as a script."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.ops) != 1:
        return False
    sides = [node.test.left, *node.test.comparators]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return isinstance(node.test.ops[0], ast.Eq) and len(names) == 1 and len(mains) == 1


MAIN_LABEL = 'if __name__ == "__main__": ...'


def _label(node: ast.stmt) -> list[str]:
    """How the report names a left-out statement: its definitions, `f(...)`, or the main block."""
    if _main_block(node):
        return [MAIN_LABEL]
    return _defined(node) or [ast.unparse(node.value.func) + "(...)"]  # type: ignore[attr-defined]


def _reach(start: list[str], definitions: dict[str, list[ast.stmt]]) -> set[str]:
    """The definitions `start` reaches through the names their bodies mention, transitively."""
    reached: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        for node in definitions.get(name, ()):
            todo.extend(n for n in _mentions(node) if n in definitions and n not in reached)
    return reached


def prune_source(source: str, entry: str, path: str = "<string>") -> Pruned:
    """Blank out the top-level definitions `entry` does not reach. Raises UsageError when the
    entry names nothing the file defines."""
    tree = ast.parse(source)
    definitions: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        for name in _defined(node):
            definitions.setdefault(name, []).append(node)
    roots = [n for n in entry_names(entry) if n in definitions]
    if not roots:
        raise UsageError(f"--entry {entry!r}: {path} defines none of {', '.join(entry_names(entry)) or 'its names'}")
    # Top-level calls made for their side effects (timm's `register_model_deprecations(__name__,
    # {...})`, which looks up the model functions pruning leaves out) go unless they mention what
    # the entry reaches, and so does the `if __name__ == "__main__":` block (it runs only as a
    # script); other top-level code (imports, `if`/`try` blocks) is kept, with what it mentions.
    from_roots = _reach(roots, definitions)
    side_effects = {
        id(node)
        for node in tree.body
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and not (_mentions(node) & from_roots))
        or _main_block(node)
    }
    kept_code = [
        n
        for node in tree.body
        if not _defined(node) and not isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in side_effects
        for n in _mentions(node)
        if n in definitions
    ]
    reached = _reach([*roots, *kept_code], definitions)

    lines = source.splitlines(keepends=True)
    dropped: list[str] = []
    used_before: set[str] = set()
    used_after: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = _defined(node)
        mentions = _mentions(node)
        used_before |= mentions
        if (names and not any(n in reached for n in names)) or id(node) in side_effects:
            dropped.extend(_label(node))
            start = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
            while start > 1 and lines[start - 2].lstrip().startswith("#"):
                start -= 1  # the comment block attached above (`# Copied from ...`)
            end = node.end_lineno or node.lineno
            for index in range(start - 1, end):
                ending = "\n" if lines[index].endswith("\n") else ""
                lines[index] = (MARKER if index == start - 1 else "") + ending
        else:
            used_after |= mentions
    imported = {name for node in tree.body for name in _import_names(node)}
    # an imported name the entry itself calls (timm's `decode_arch_def` in
    # `EfficientNet(block_args=decode_arch_def(...))`) stays imported
    only_dropped = {n for n in imported if n in used_before and n not in used_after} - set(entry_names(entry))
    kept = [n for n in definitions if n in reached]
    return Pruned("".join(lines), kept, list(dict.fromkeys(dropped)), only_dropped)


def finish_pruned(code: str) -> str:
    """Remove the pruning markers, leaving two blank lines between what was around them."""
    if MARKER not in code:
        return code
    code = _MARKER_RUN.sub("\n\n\n", code)
    return code.rstrip("\n") + "\n" if code.strip() else code


def prune_imports(code: str, names: set[str]) -> str:
    """Remove top-level import aliases binding `names` (imports only left-out code used) when the
    converted code does not use them either."""
    if not names:
        return code
    from precision_transpiler.rewrite.import_editor import used_names

    unused = names - used_names(code)
    if not unused:
        return code
    module = cst.parse_module(code)
    body: list[cst.BaseStatement] = []
    for stmt in module.body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.Import | cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            keep = [a for a in small.names if _bound(a, isinstance(small, cst.ImportFrom)) not in unused]
            if not keep:
                continue
            if len(keep) != len(small.names):
                keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                stmt = stmt.with_changes(body=[small.with_changes(names=keep)])
        body.append(stmt)
    return module.with_changes(body=body).code


def _bound(alias: cst.ImportAlias, is_from: bool) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    node: cst.BaseExpression = alias.name
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.insert(0, node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.insert(0, node.value)
    return ".".join(parts) if is_from else parts[0]
