"""Attributes a module class starts as an empty container and fills later.

`self._params = {}` then `self._params[name] = self.add_weight(...)` (ncps' LTC cell): torch
keeps a plain dict of Parameters beside its registered ones. Flax NNX treats a plain dict or
list attribute as static, and refuses one that comes to hold a Variable or a Module, when the
module is built. The torch -> JAX module rule makes such an attribute NNX data
(`nnx.data({})`), whatever it comes to hold (Python values in data stay static under jit).
Read from the file's `ast`, once per file.
"""

from __future__ import annotations

import ast

from precision_transpiler.analysis.view import FileView

_FILLING = frozenset({"append", "extend", "insert", "update", "setdefault", "__setitem__", "add"})


def is_empty_container(node: ast.expr) -> bool:
    """`{}`, `[]`, `dict()`, `list()`, `collections.OrderedDict()`, `defaultdict(list)`: an empty
    dict or list."""
    if isinstance(node, ast.Dict | ast.List):
        return not (node.keys if isinstance(node, ast.Dict) else node.elts)
    if isinstance(node, ast.Call) and not node.keywords:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "defaultdict":  # block-recurrent-transformer's `defaultdict(list)` of modules
            return len(node.args) <= 1
        return not node.args and name in ("dict", "list", "OrderedDict")
    return False


def filled_containers(ctx: FileView) -> dict[str, frozenset[str]]:
    """Class name -> attributes it assigns an empty container (`self.x = {}`) and fills
    (`self.x[k] = v`, `self.x.append(v)`, ...) in its own methods."""

    def build() -> dict[str, frozenset[str]]:
        tree, _ = ctx.module_ast()
        if tree is None:
            return {}
        found: dict[str, frozenset[str]] = {}
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            empty: set[str] = set()
            filled: set[str] = set()
            for node in ast.walk(cls):
                if isinstance(node, ast.Assign) and is_empty_container(node.value):
                    empty |= {a for t in node.targets if (a := _self_attribute(t)) is not None}
                elif isinstance(node, ast.Assign | ast.AugAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    filled |= {a for t in targets if isinstance(t, ast.Subscript) and (a := _self_attribute(t.value))}
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    receiver = node.func.value
                    if isinstance(receiver, ast.Subscript):  # `self.router[key].append(block)`
                        receiver = receiver.value
                    if node.func.attr in _FILLING and (a := _self_attribute(receiver)) is not None:
                        filled.add(a)
            if empty & filled:
                found[cls.name] = frozenset(empty & filled)
        return found

    return ctx.per_file("filled-containers", build)


def _self_attribute(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None
