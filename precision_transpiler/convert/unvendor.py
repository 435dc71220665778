"""Read copied runtime definitions back: the inverse of vendor.py's copying.

A model converted from torch carries the runtime definitions it uses, copied in after MARKER.
Applying a policy to it again, or writing its runtime into the module beside it, first reads
that block back as (runtime module, name, local name) entries: a copy is recognised by its
source text, word for word, among every runtime module's definitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import libcst as cst

from precision_transpiler.convert.vendor import MARKER, SHIM_DIR, _module_bindings, _shim_module
from precision_transpiler.runtime import PACKAGE, TARGET_PACKAGES
from precision_transpiler.syntax import is_import_statement


def unvendor(code: str, target: str) -> str | None:
    """The inverse of vendor_shims for what a policy pass needs: the copied-in shim definitions
    (the block after MARKER) replaced by imports from their runtime modules, so that they are seen
    as the torch-semantics layers they are; vendor_shims puts them back as they were. None when
    `code` has no such block. A definition both targets' shims have word for word is taken from
    `target`'s ("jax" or "tf"): importing it from the other's would bring that framework in."""
    block = copied_block(code, target)
    if block is None:
        return None
    imports = [
        f"from {PACKAGE}.{shim} import {name}" + (f" as {local}" if local != name else "")
        for shim, name, local in block.entries
        if local != name or name not in block.rebound
    ]
    rest = block.rest
    new = [cst.parse_statement(line + "\n") for line in imports]
    index = 0
    for i, stmt in enumerate(rest.body):
        if is_import_statement(stmt):
            index = i + 1
        elif index or not isinstance(stmt, cst.SimpleStatementLine):
            break
    return rest.with_changes(body=[*rest.body[:index], *new, *rest.body[index:]]).code


@dataclass(frozen=True)
class CopiedBlock:
    """The runtime definitions vendor_shims copied into a file, read back from it."""

    rest: cst.Module  # the file without them
    at: int  # where they were among `rest`'s statements
    entries: tuple[tuple[str, str, str], ...]  # (runtime module, name, local name in the file)
    rebound: frozenset[str]  # names the file's own code binds at top level


def copied_block(code: str, target: str) -> CopiedBlock | None:
    """The block after MARKER, as (runtime module, name, local name) entries; None when `code`
    has none. A definition both targets' shims have word for word is taken from `target`'s."""
    if MARKER not in code:
        return None
    module = cst.parse_module(code)
    body = list(module.body)
    start = next(
        (
            i
            for i, stmt in enumerate(body)
            if any(line.comment is not None and line.comment.value == MARKER for line in stmt.leading_lines)
        ),
        None,
    )
    if start is None:
        return None
    known = _known_definitions()
    prefix = TARGET_PACKAGES[target] + "."
    found: dict[str, str] = {}  # copied definition -> its runtime module
    entries: list[tuple[str, str, str]] = []  # (runtime module, name, local name)
    end = start
    guarded = re.compile(r"\b_ptshim_(\w+)")  # second names of copies the user's code rebinds
    for stmt in body[start:]:
        text = module.with_changes(body=[stmt.with_changes(leading_lines=[])], header=[], footer=[]).code.strip("\n")
        text = guarded.sub(r"\1", text)  # (an alias line `_ptshim_x = x` is read from its node below)
        if end > start and any(line.comment is not None for line in stmt.leading_lines):
            break  # the next block (a precision policy's helpers)
        if text in known:
            candidates = known[text]
            shim, name = next((c for c in candidates if c[0].startswith(prefix)), candidates[0])
            found[name] = shim
            entries.append((shim, name, name))
        elif (
            isinstance(stmt, cst.SimpleStatementLine)
            and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1
            and isinstance(stmt.body[0].targets[0].target, cst.Name)
            and isinstance(stmt.body[0].value, cst.Name)
            and stmt.body[0].value.value in found
        ):
            local, name = stmt.body[0].targets[0].target.value, stmt.body[0].value.value
            entries.append((found[name], name, local))
        else:
            break
        end += 1
    if not entries:
        return None
    # a copy the user's code defines a name of its own for is imported under its second name only:
    # as when the policy first ran, the plain name means the user's definition
    rest = module.with_changes(body=body[:start] + body[end:])
    return CopiedBlock(rest, start, tuple(entries), frozenset(_module_bindings(rest)))


@cache
def _known_definitions() -> dict[str, tuple[tuple[str, str], ...]]:
    """Every shim definition's source -> the (runtime module, name) pairs defining it so."""
    known: dict[str, tuple[tuple[str, str], ...]] = {}
    for path in sorted(SHIM_DIR.rglob("*.py")):
        if path.stem.startswith("_"):
            continue
        module_name = ".".join(path.relative_to(SHIM_DIR).with_suffix("").parts)
        for name, definition in _shim_module(module_name).definitions.items():
            if name.lower().startswith("_ptranspile_"):
                continue  # a policy's helpers (precision/strip.py removes them), never copied in
            text = definition.source.strip("\n")
            known[text] = (*known.get(text, ()), (module_name, name))
    return known
