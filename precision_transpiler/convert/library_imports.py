"""Import library infrastructure from its target-framework counterpart.

transformers' `modeling_bert.py` imports `PreTrainedModel`, `ModelOutput`, `ACT2FN` and mask
helpers from the rest of transformers, which is torch code too large to convert along with the
model. The `symbols:` of the layer tables (mappings/layers/transformers.yaml) name a counterpart
for each; this step rewrites the import of such a name:

    from ...modeling_utils import PreTrainedModel
    ->  from precision_transpiler.runtime.flax.transformers import PreTrainedModel

(relative modules made absolute from the file's package), keeping the local name, so the code
that uses it is untouched. Shim imports are later replaced by the shim definitions
(convert/vendor.py). Runs on the converted file and on each round of sibling inlining, whose
copied code brings absolute imports of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import libcst as cst

from precision_transpiler.convert.siblings import dotted, package_of, top_level_from_imports


def _absolute_module(path: str, imp: cst.ImportFrom) -> str | None:
    module = dotted(imp.module) if imp.module is not None else ""
    level = len(imp.relative)
    if not level:
        return module or None
    file = Path(path)
    package = package_of(file) if file.is_file() else []
    if level > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def redirect_library_imports(
    path: str, code: str, symbols: Mapping[str, Mapping[str, str]], target: str
) -> tuple[str, list[str]]:
    """Rewrite top-level `from M import name` of names with a `target` counterpart in `symbols`.
    Returns the new code and the qualified names redirected."""
    imports = top_level_from_imports(code)
    if imports is not None:  # no relative import, none of a module with counterparts: unchanged
        modules = {symbol.rpartition(".")[0] for symbol in symbols}
        if not any(level or name in modules for level, name in imports):
            return code, []
    module = cst.parse_module(code)
    redirected: list[str] = []
    body: list[cst.BaseStatement] = []
    changed = False
    for stmt in module.body:
        if not (
            isinstance(stmt, cst.SimpleStatementLine)
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.ImportFrom)
            and not isinstance(stmt.body[0].names, cst.ImportStar)
        ):
            body.append(stmt)
            continue
        imp = stmt.body[0]
        absolute = _absolute_module(path, imp)
        keep: list[cst.ImportAlias] = []
        new_lines: list[cst.BaseStatement] = []
        for alias in imp.names:  # type: ignore[union-attr]
            name = dotted(alias.name)
            counterpart = symbols.get(f"{absolute}.{name}", {}).get(target) if absolute else None
            if counterpart is None or "." not in counterpart:
                keep.append(alias)
                continue
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            target_module, target_name = counterpart.rsplit(".", 1)
            suffix = f" as {local}" if local != target_name else ""
            new_lines.append(cst.parse_statement(f"from {target_module} import {target_name}{suffix}\n"))
            redirected.append(f"{absolute}.{name}")
        if not new_lines:
            body.append(stmt)
            continue
        changed = True
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            body.append(stmt.with_changes(body=[imp.with_changes(names=keep)]))
            body.extend(new_lines)
        else:
            first = new_lines[0]
            body.append(first.with_changes(leading_lines=stmt.leading_lines))  # type: ignore[attr-defined]
            body.extend(new_lines[1:])
    if not changed:
        return code, []
    return module.with_changes(body=body).code, redirected
