"""Turning qualified names into code that uses the file's own imports.

Mapping tables name targets fully (`jax.numpy.float16`). When the file already imports
`jax.numpy as jnp`, the output must say `jnp.float16`; when it imports nothing suitable, the
framework's conventional import is recorded here and added afterwards by `import_editor`.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.syntax import dotted_name as get_full_name_for_node


def module_imports(module: cst.Module) -> dict[str, str]:
    """Qualified prefix -> local name, from module-level (incl. try/if-guarded) imports."""
    found: dict[str, str] = {}

    def scan(body: object) -> None:
        for stmt in body:  # type: ignore[attr-defined]
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    _record(small, found)
            elif isinstance(stmt, cst.If | cst.Try):
                scan(stmt.body.body)
                for handler in getattr(stmt, "handlers", ()):
                    scan(handler.body.body)
                orelse = getattr(stmt, "orelse", None)
                if orelse is not None and hasattr(orelse.body, "body"):
                    scan(orelse.body.body)

    scan(module.body)
    return found


def _record(small: cst.BaseSmallStatement, found: dict[str, str]) -> None:
    if isinstance(small, cst.Import):
        for alias in small.names:
            name = get_full_name_for_node(alias.name)
            if name is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                found.setdefault(name, alias.asname.name.value)
            else:
                root = name.split(".")[0]
                found.setdefault(root, root)
                found.setdefault(name, name)  # `import jax.numpy` makes `jax.numpy.x` usable
    elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        module = get_full_name_for_node(small.module)
        if module is None or isinstance(small.names, cst.ImportStar):
            return
        for alias in small.names:
            name = get_full_name_for_node(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            found.setdefault(f"{module}.{name}", local)


def dotted_expr(parts: list[str]) -> cst.BaseExpression:
    """`a.b.c` as a Name/Attribute chain (cheaper than parsing)."""
    expr: cst.BaseExpression = cst.Name(parts[0])
    for part in parts[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


class ImportNamer:
    """Produces expressions for qualified names and records the imports they need."""

    def __init__(
        self,
        module: cst.Module,
        mappings: MappingSet,
        avoid_roots: frozenset[str],
        taken_names: frozenset[str],
    ) -> None:
        self.mappings = mappings
        # Imports of the source framework are about to go away: never build on them.
        self.available = {q: local for q, local in module_imports(module).items() if q.split(".")[0] not in avoid_roots}
        self.taken = taken_names
        self.preferred: dict[str, str] = {}
        for info in mappings.frameworks.values():
            self.preferred.update(info.imports)
        self.pending: dict[tuple[str, str], None] = {}  # (module, alias), insertion-ordered

    def expr_for(self, qualified: str) -> cst.BaseExpression:
        parts = qualified.split(".")
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i])
            local = self.available.get(prefix)
            if local is not None:
                return dotted_expr([*local.split("."), *parts[i:]])
            # A module with a conventional alias that the file does not import yet (jax.numpy
            # as jnp) wins over spelling it through a parent the file or we imported (`jax.`),
            # unless the file itself imports the parent.
            alias = self.preferred.get(prefix) if i < len(parts) else None
            if alias is not None and alias not in self.taken and self._added_parent(prefix):
                self._add_import(prefix, alias)
                return dotted_expr([alias, *parts[i:]])
        module, alias = self._choose_import(parts)
        self._add_import(module, alias)
        rest = parts[len(module.split(".")) :]
        return dotted_expr([alias, *rest])

    def _added_parent(self, module: str) -> bool:
        """Whether every shorter available prefix of `module` is one this namer added (not the
        user's own import, whose spelling we keep)."""
        parts = module.split(".")
        for i in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in self.available and (prefix, self.available[prefix]) not in self.pending:
                return False
        return True

    def _choose_import(self, parts: list[str]) -> tuple[str, str]:
        for i in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:i])
            alias = self.preferred.get(module)
            if alias is not None and (alias not in self.taken or self.available.get(module) == alias):
                return module, alias
        root = parts[0]
        return root, root

    def _add_import(self, module: str, alias: str) -> None:
        self.available[module] = alias
        self.pending[(module, alias)] = None
