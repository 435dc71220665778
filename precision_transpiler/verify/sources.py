"""Find the source line where a layer is created: the `self.<name> = ...` in its parent's class.

Used by the per-layer report to point at the line a user should look at. Works from class
objects (`inspect`) and Python's `ast`, never from string matching.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from functools import lru_cache


@lru_cache(maxsize=256)
def _class_assignments(cls: type) -> tuple[str, dict[str, int]] | None:
    """file and {attribute: line} for `self.attr = ...`, `self.add_module("attr", ...)` and
    `setattr(self, "attr", ...)` anywhere in the class body (and its base classes' bodies are
    searched separately by the caller)."""
    try:
        filename = inspect.getsourcefile(cls)
        lines, start = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return None
    if filename is None:
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if line is None:
            continue
        absolute = start + line - 1
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                        found.setdefault(sub.attr, absolute)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if name in ("add_module", "register_module") and isinstance(first, ast.Constant):
                found.setdefault(str(first.value), absolute)
            elif name == "setattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                found.setdefault(str(node.args[1].value), absolute)
    return filename, found


def attribute_line(cls: type, attr: str) -> str | None:
    """`file:line` of the assignment that creates `attr` on instances of `cls` (or a base)."""
    for klass in inspect.getmro(cls):
        if klass.__module__ in ("builtins",) or klass.__module__.startswith(("torch.nn.", "flax.", "keras.")):
            continue
        info = _class_assignments(klass)
        if info is not None and attr in info[1]:
            return f"{info[0]}:{info[1][attr]}"
    return None


def layer_source(ancestors: list[tuple[str, object]]) -> str | None:
    """Given [(name, module), ...] from the root down to the layer (the root's name is ""),
    the creation line of the innermost layer whose creating class is user code. A list
    element (`layers.3`) resolves to the line that creates the list (`self.layers = ...`)."""
    for depth in range(len(ancestors) - 1, 0, -1):
        name = ancestors[depth][0]
        parent = ancestors[depth - 1][1]
        if name.isdigit():
            continue
        line = attribute_line(type(parent), name)
        if line is not None:
            return line
    return None
