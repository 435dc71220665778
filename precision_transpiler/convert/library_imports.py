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

import libcst as cst

from precision_transpiler.convert.import_lines import lone_from_imports, output_tree, render, splice
from precision_transpiler.convert.siblings import absolute_module, dotted, top_level_from_imports


def _absolute_module(path: str, imp: cst.ImportFrom) -> str | None:
    return absolute_module(path, len(imp.relative), dotted(imp.module) if imp.module is not None else "")


def redirect_library_imports(
    path: str, code: str, symbols: Mapping[str, Mapping[str, str]], target: str
) -> tuple[str, list[str]]:
    """Rewrite top-level `from M import name` of names with a `target` counterpart in `symbols`.
    Returns the new code and the qualified names redirected."""
    imports = top_level_from_imports(code)
    if imports is not None:  # no relative import, none of a module with counterparts: unchanged
        modules = {symbol.rpartition(".")[0] for symbol in symbols}
        if not any(absolute_module(path, level, name) in modules for level, name in imports):
            return code, []
    try:
        tree = output_tree(code)
    except SyntaxError:
        return code, []
    redirected: list[str] = []
    edits: dict[tuple[int, int], str] = {}
    for found in lone_from_imports(code, tree):  # the import lines, parsed alone (convert/import_lines.py)
        imp = found.node
        if isinstance(imp.names, cst.ImportStar):
            continue
        absolute = _absolute_module(path, imp)
        keep: list[cst.ImportAlias] = []
        new_lines: list[str] = []
        for alias in imp.names:
            name = dotted(alias.name)
            counterpart = symbols.get(f"{absolute}.{name}", {}).get(target) if absolute else None
            if counterpart is None or "." not in counterpart:
                keep.append(alias)
                continue
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            target_module, target_name = counterpart.rsplit(".", 1)
            suffix = f" as {local}" if local != target_name else ""
            new_lines.append(f"from {target_module} import {target_name}{suffix}\n")
            redirected.append(f"{absolute}.{name}")
        if not new_lines:
            continue
        kept = ""
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            kept = render(found.statement.with_changes(body=[imp.with_changes(names=keep)]))
        edits[found.start, found.end] = kept + "".join(new_lines)
    if not edits:
        return code, []
    return splice(code, edits), redirected
