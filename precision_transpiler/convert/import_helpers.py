"""Run-time imports of torch modules through library helpers, written as the imports they are.

Model libraries import optional dependencies through helpers that take the module's name as a
string:

    Rearrange, _ = optional_import("einops.layers.torch", name="Rearrange")   # monai
    rearrange, has_einops = optional_import("einops", name="rearrange")
    F = importlib.import_module("torch.nn.functional")

The converter resolves imports statically, so such a name was never converted: the output loaded
torch's module at run time and handed the target's arrays to it. The helpers are listed per
source framework in mappings/frameworks.yaml (`import_helpers`: where the module's name and the
attribute's name are passed, and whether the helper returns the object or an (object, found)
pair). A statement that binds a helper's result, with literal strings naming a module of the
framework or of its companions (`torch.*`, `einops.*`), becomes the import statement it
performs, on the same line, before the rules run:

    from einops.layers.torch import Rearrange
    from einops import rearrange; has_einops = True
    import torch.nn.functional as F

so the tables convert the name like any imported one. Other uses of the helpers (a module of
another library, a name built at run time) are left as written; torch modules among them are
reported by rules/torch_module_strings_model.py. Static: the helper is recognised by the import
that binds its name in the file, nothing is imported or run.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from precision_transpiler.mappings.model import ImportHelper
from precision_transpiler.syntax import dotted_name


def static_imports(
    module: cst.Module, helpers: Mapping[str, ImportHelper], roots: frozenset[str], path: str
) -> cst.Module | None:
    """`module` with helper calls that import a module under `roots` made import statements;
    None when there is none."""
    bound = _imported(module, path)
    reachable = {q for h in helpers for q in (h, h.rsplit(".", 1)[0])}  # a helper, or its module
    if not any(qualified in reachable for qualified in bound.values()):
        return None
    rewrite = _Rewrite(helpers, bound, roots)
    result = module.visit(rewrite)
    return result if rewrite.changed else None


def _imported(module: cst.Module, path: str) -> dict[str, str]:
    """Local name -> qualified name, of the file's top-level `from M import n` and `import M`."""
    bound: dict[str, str] = {}
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                base = _absolute(small, path)
                if base is None:
                    continue
                for alias in small.names:
                    name = dotted_name(alias.name) or ""
                    asname = alias.asname.name if alias.asname else None
                    bound[asname.value if isinstance(asname, cst.Name) else name] = f"{base}.{name}"
            elif isinstance(small, cst.Import):
                for alias in small.names:
                    name = dotted_name(alias.name) or ""
                    if alias.asname and isinstance(alias.asname.name, cst.Name):
                        bound[alias.asname.name.value] = name
                    else:
                        bound[name.split(".")[0]] = name.split(".")[0]
    return bound


def _absolute(node: cst.ImportFrom, path: str) -> str | None:
    from precision_transpiler.convert.siblings import absolute_module

    return absolute_module(path, len(node.relative), dotted_name(node.module) if node.module is not None else "")


class _Rewrite(cst.CSTTransformer):
    def __init__(self, helpers: Mapping[str, ImportHelper], bound: dict[str, str], roots: frozenset[str]) -> None:
        super().__init__()
        self.helpers = helpers
        self.bound = bound
        self.roots = roots
        self.changed = False

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        body: list[cst.BaseSmallStatement] = []
        changed = False
        for small in updated_node.body:
            replaced = self._statements(small) if isinstance(small, cst.Assign) else None
            if replaced is None:
                body.append(small)
                continue
            changed = True
            body += [s.with_changes(semicolon=_SEMICOLON) for s in replaced[:-1]]
            body.append(replaced[-1].with_changes(semicolon=small.semicolon))
        self.changed |= changed
        return updated_node.with_changes(body=body) if changed else updated_node

    def _statements(self, assign: cst.Assign) -> list[cst.BaseSmallStatement] | None:
        """The import (and the found flag's assignment) that `assign` performs, or None."""
        if len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        value = assign.value
        first_only = False
        if (
            isinstance(value, cst.Subscript)
            and len(value.slice) == 1
            and isinstance(value.slice[0].slice, cst.Index)
            and isinstance(value.slice[0].slice.value, cst.Integer)
            and value.slice[0].slice.value.value == "0"
        ):
            value, first_only = value.value, True  # `optional_import(...)[0]`
        if not isinstance(value, cst.Call):
            return None
        helper = self.helpers.get(self._qualified(value.func))
        if helper is None:
            return None
        module = _string_argument(value, helper.module_position, helper.module_keyword)
        name = _string_argument(value, None, helper.name_keyword) if helper.name_keyword else None
        if module is None or module.split(".")[0] not in self.roots:
            return None
        if not all(part.isidentifier() for part in module.split(".")) or (name is not None and not name.isidentifier()):
            return None  # `optional_import("monai.networks.nets", name=f"{name}")`: not a static name
        pair = helper.returns == "pair" and not first_only
        if pair:
            if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                return None
            local, flag = target.elements[0].value, target.elements[1].value
        else:
            local, flag = target, None
        if not isinstance(local, cst.Name) or (flag is not None and not isinstance(flag, cst.Name)):
            return None
        statements: list[cst.BaseSmallStatement] = [_import(module, name, local.value)]
        if flag is not None and flag.value != "_":  # `_`: the result is thrown away
            statements.append(cst.Assign([cst.AssignTarget(flag)], cst.Name("True")))
        return statements

    def _qualified(self, func: cst.BaseExpression) -> str:
        dotted = dotted_name(func) or ""
        head, _, rest = dotted.partition(".")
        base = self.bound.get(head)
        if base is None:
            return ""
        return f"{base}.{rest}" if rest else base


def _string_argument(call: cst.Call, position: int | None, keyword: str | None) -> str | None:
    """The literal string passed at `position` or as `keyword`, or None."""
    found: cst.BaseExpression | None = None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if position is not None and position < len(positional):
        found = positional[position].value
    for arg in call.args:
        if keyword is not None and arg.keyword is not None and arg.keyword.value == keyword:
            found = arg.value
    if isinstance(found, cst.SimpleString):
        value = found.evaluated_value
        return value if isinstance(value, str) and value else None
    return None


def _import(module: str, name: str | None, local: str) -> cst.BaseSmallStatement:
    if name:
        alias = f" as {local}" if local != name else ""
        statement = cst.parse_statement(f"from {module} import {name}{alias}\n")
    else:
        statement = cst.parse_statement(f"import {module} as {local}\n")
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement.body[0]


_SEMICOLON = cst.Semicolon(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))
