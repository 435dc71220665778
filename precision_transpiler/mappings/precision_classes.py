"""The precision classes table (`kind: precision_classes`, mappings/precision_classes.yaml): which
symbols of each framework belong to each op class a precision policy decides on.

A class lists torch's symbols and, per target, the target library's own (`flax.nnx.Linear`,
`keras.layers.Dense`). The runtime's torch-semantics definitions in it are not listed but derived
once every table is read (`derive_runtime_entries`), from what the converter emits for the torch
symbols: a torch layer's runtime counterparts from the layer table (its target's `shim`,
`reference`, or a `call` into the runtime), a torch function's or method's from the op tables
(the runtime function a target pattern of its op calls). So a layer or op added to those tables
joins its class's target lists by itself. `not_derived: {target: [torch symbols] | all}` keeps
counterparts out where they must not be in the class (a runtime layer that takes no dtype
keywords); the YAML says why beside each.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from precision_transpiler.errors import MappingError
from precision_transpiler.mappings.model import MappingSet, NotDerived, OpSpec

#: `precision_transpiler.runtime.PACKAGE`, spelled out: mappings/ imports no other subpackage
_RUNTIME = "precision_transpiler.runtime."
_ALL = "all"


def precision_classes_handler(result: MappingSet, data: Any, where: Any) -> None:
    """Validate a `kind: precision_classes` table and merge it into `result` (a later table's
    list for a class and framework replaces an earlier one's)."""
    for key in data:
        if key not in ("kind", "classes"):
            raise where.error(data.lines[key], key, "unknown key (allowed: kind, classes)")
    classes = data.get("classes")
    if not hasattr(classes, "items"):
        raise where.error(data.lines.get("classes", data.line), "classes", "expected a mapping of op classes")
    for cls, per_fw in classes.items():
        if not hasattr(per_fw, "items"):
            raise where.error(classes.lines[cls], f"classes.{cls}", "expected framework: [symbols] pairs")
        for fw, value in per_fw.items():
            line, context = per_fw.lines.get(fw, per_fw.line), f"classes.{cls}.{fw}"
            if fw == "not_derived":
                result.precision_not_derived[cls] = _not_derived(value, where, line, context)
                continue
            symbols = [value] if isinstance(value, str) else value
            if not isinstance(symbols, list) or not symbols or not all(isinstance(s, str) for s in symbols):
                raise where.error(line, context, "expected a list of strings")
            result.precision_classes.setdefault(str(cls), {})[str(fw)] = list(symbols)


def _not_derived(value: Any, where: Any, line: int, context: str) -> NotDerived:
    if not hasattr(value, "items"):
        raise where.error(line, context, "expected target: [torch symbols] or target: all pairs")
    targets: dict[str, frozenset[str] | None] = {}
    for fw, symbols in value.items():
        if symbols == _ALL:
            targets[str(fw)] = None
        elif isinstance(symbols, list) and symbols and all(isinstance(s, str) for s in symbols):
            targets[str(fw)] = frozenset(symbols)
        else:
            raise where.error(value.lines.get(fw, line), f"{context}.{fw}", "expected a list of torch symbols or 'all'")
    return NotDerived(targets, f"{where.path}:{line}")


def derive_runtime_entries(result: MappingSet) -> None:
    """Append to each class's target lists the runtime counterparts of its torch symbols (in the
    torch list's order, after the listed symbols), less those its `not_derived` keeps out."""
    ops = _ops_by_torch_symbol(result)
    for cls, per_fw in result.precision_classes.items():
        torch_symbols = per_fw.get("torch", [])
        skip = result.precision_not_derived.get(cls, NotDerived({}, ""))
        found: dict[str, dict[str, list[str]]] = {}  # target -> torch symbol -> runtime symbols
        for symbol in torch_symbols:
            for fw, runtime in _runtime_counterparts(result, ops.get(symbol, ()), symbol):
                found.setdefault(fw, {}).setdefault(symbol, [])
                if runtime not in found[fw][symbol]:
                    found[fw][symbol].append(runtime)
        for fw, kept_out in skip.targets.items():
            for symbol in sorted(kept_out or ()):
                if symbol not in torch_symbols:
                    raise MappingError(f"{skip.origin}: not_derived: {symbol} is not in classes.{cls}.torch")
                if symbol not in found.get(fw, {}):
                    raise MappingError(f"{skip.origin}: not_derived: {symbol} has no runtime counterpart in {fw}")
        for fw, per_symbol in found.items():
            if fw in skip.targets and skip.targets[fw] is None:
                continue
            kept_out = skip.targets.get(fw) or frozenset()
            listed = per_fw.setdefault(fw, [])
            for symbol, runtime in per_symbol.items():
                listed += [r for r in runtime if symbol not in kept_out and r not in listed]
            if not listed:
                del per_fw[fw]


def _runtime_counterparts(result: MappingSet, ops: Iterable[OpSpec], symbol: str) -> Iterator[tuple[str, str]]:
    """(target, runtime symbol) pairs the converter emits for the torch `symbol`."""
    layer = result.layers.get(symbol)
    if layer is not None:
        for fw, target in layer.targets.items():
            for emitted in () if target is None else (target.shim, target.reference, target.call):
                if emitted and emitted.startswith(_RUNTIME):
                    yield fw, emitted
        return
    for op in ops:
        for fw, patterns in op.patterns.items():
            if fw == "torch":
                continue
            for pattern in patterns:
                name = pattern.function_name
                if name and name.startswith(_RUNTIME):
                    yield fw, name


def _ops_by_torch_symbol(result: MappingSet) -> dict[str, list[OpSpec]]:
    """The ops whose torch patterns read each function (`torch.nn.functional.linear`) or method
    (`Tensor.var`)."""
    index: dict[str, list[OpSpec]] = {}
    for op in result.ops.values():
        for pattern in op.patterns.get("torch", ()):
            if pattern.emit_only:
                continue
            name = pattern.function_name or (pattern.method_name and f"Tensor.{pattern.method_name}")
            if name and op not in index.setdefault(name, []):
                index[name].append(op)
    return index
