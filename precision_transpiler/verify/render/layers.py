"""What the terminal and the HTML renderer share: number formatting and the layer tree.

Both renderers must print the same number the same way (an error of 1.23e-04 in the terminal is
1.23e-04 on the page) and arrange the per-layer records in the same tree, so those pieces live
here, once. Every function reads the report dict only and accepts None or non-finite values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Node",
    "build_tree",
    "first_bad_where",
    "fmt_bytes",
    "fmt_cos",
    "fmt_err",
    "fmt_param_ratio",
    "fmt_pct",
    "fmt_shape",
    "fmt_tol",
    "fmt_where",
    "has_reference",
    "is_bad",
    "json_safe",
    "num",
    "param_sizes",
    "select_layers",
    "share_ratio",
]


def num(value: Any) -> float | None:
    """A float for any numeric report value, None for missing or unparsable ones.

    Saved reports can carry the strings "nan"/"inf" (see `json_safe`), so accept those too.
    """
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def fmt_err(value: Any, missing: str = "n/a") -> str:
    """Errors span many decades, so always scientific with three significant digits."""
    x = num(value)
    if x is None:
        return missing
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    return f"{x:.2e}"


def fmt_cos(value: Any, missing: str = "n/a") -> str:
    """Cosine similarity is interesting in its last digits (0.999981 vs 0.99), so six decimals."""
    x = num(value)
    if x is None:
        return missing
    if not math.isfinite(x):
        return fmt_err(x)
    text = f"{x:.6f}"
    if text == "1.000000" and x < 1:  # do not round a near-miss up to a perfect score
        return f"1 - {1 - x:.1e}"
    return text


def fmt_pct(value: Any, missing: str = "n/a") -> str:
    """Argmax agreement is a fraction of rows; people read it as a percentage."""
    x = num(value)
    if x is None:
        return missing
    if not math.isfinite(x):
        return fmt_err(x)
    return f"{x * 100:.1f}%"


def fmt_tol(key: str, value: Any) -> str:
    """Extra tolerance fields: errors in scientific notation, factors and counts as plain numbers."""
    x = num(value)
    if x is None:
        return str(value)
    return fmt_err(x) if "err" in key else f"{x:.4g}"


def fmt_bytes(value: Any) -> str:
    x = num(value)
    if x is None:
        return "?"
    if abs(x) < 1024:
        return f"{x:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        x /= 1024
        if abs(x) < 1024:
            return f"{x:.1f} {unit}"
    return f"{x / 1024:.1f} TiB"


def param_sizes(report: Mapping[str, Any]) -> tuple[float | None, float | None] | None:
    """Parameter bytes (original, converted), or None when the report does not carry them."""
    sizes = report.get("param_bytes")
    if not isinstance(sizes, Mapping) or not sizes:
        return None
    return num(sizes.get("original")), num(sizes.get("converted"))


def fmt_param_ratio(before: float | None, after: float | None) -> str:
    return f"x{after / before:.2f}" if before and after is not None else ""


def fmt_shape(shape: Any) -> str:
    if shape is None:
        return "?"
    try:
        return "(" + ", ".join(str(d) for d in shape) + ")"
    except TypeError:
        return str(shape)


def share_ratio(err: Any, share: Any) -> float | None:
    """How much of its share a layer used (1.0 = exactly at its share); None when unknown."""
    e, s = num(err), num(share)
    if e is None or s is None or s <= 0 or math.isnan(e):
        return None
    return e / s


def fmt_where(source: Any, converted: Any) -> str | None:
    """`model.py:12 (converted model_jax.py:455)`: the user's own line (the original model's),
    the converted file's beside it; either alone when the other is unknown."""
    if source and converted and converted != source:
        return f"{source} (converted {converted})"
    if source:
        return str(source)
    return f"converted {converted}" if converted else None


def first_bad_where(report: Mapping[str, Any]) -> str | None:
    return fmt_where(report.get("first_bad_source"), report.get("first_bad_converted_source"))


def is_bad(layer: Mapping[str, Any]) -> bool:
    return bool(layer.get("exceeded")) or bool(layer.get("nonfinite"))


def _layer_sort_key(layer: Mapping[str, Any]) -> tuple[int, str]:
    order = layer.get("order")
    return (order if isinstance(order, int) else 1 << 62, str(layer.get("path", "")))


@dataclass
class Node:
    """One component of a module path; `layer` is None for containers that were not recorded."""

    name: str
    path: str
    layer: dict[str, Any] | None = None
    children: list[Node] = field(default_factory=list)
    first_order: int = 1 << 62  # smallest `order` in the subtree: siblings are sorted by it
    bad_below: int = 0  # bad layers in the subtree, this node included

    @property
    def bad(self) -> bool:
        return self.layer is not None and is_bad(self.layer)


def build_tree(layers: Iterable[Mapping[str, Any]]) -> Node:
    """Arrange layer records by their dotted paths, keeping execution order among siblings.

    Intermediate path components that were not recorded as layers (`layer1`, `layer1.0` when only
    `layer1.0.conv1` was hooked) still become nodes, because that is how people navigate a model.
    A layer with the empty path is the model itself and lives on the root.
    """
    root = Node(name="model", path="")
    index: dict[str, Node] = {"": root}
    for layer in sorted(layers, key=_layer_sort_key):
        record = dict(layer)
        path = str(record.get("path") or "")
        if path in index and index[path].layer is None:
            index[path].layer = record
            continue
        parent = root
        parts = path.split(".") if path else []
        for depth, part in enumerate(parts):
            sub = ".".join(parts[: depth + 1])
            node = index.get(sub)
            last = depth == len(parts) - 1
            if node is None or (last and node.layer is not None):
                # A repeated path (should not happen, but a saved report may be hand-edited)
                # becomes a sibling instead of overwriting the first record.
                node = Node(name=part if node is None else f"{part} (again)", path=sub)
                parent.children.append(node)
                if sub not in index:
                    index[sub] = node
            parent = node
        if parts:
            parent.layer = record
        else:
            root.layer = record

    def finish(node: Node) -> None:
        for child in node.children:
            finish(child)
        own = _layer_sort_key(node.layer)[0] if node.layer is not None else 1 << 62
        node.first_order = min([own, *(c.first_order for c in node.children)])
        node.children.sort(key=lambda c: (c.first_order, c.name))
        node.bad_below = int(node.bad) + sum(c.bad_below for c in node.children)

    finish(root)
    return root


def select_layers(layers: list[dict[str, Any]], first_bad: str | None, max_layers: int | None) -> list[dict[str, Any]]:
    """The first `max_layers` in execution order plus every bad layer: the ones a reader needs."""
    ordered = sorted(layers, key=_layer_sort_key)
    if max_layers is None or len(ordered) <= max_layers:
        return ordered
    keep = max(max_layers, 0)
    return [
        layer
        for i, layer in enumerate(ordered)
        if i < keep or is_bad(layer) or (first_bad is not None and layer.get("path") == first_bad)
    ]


def has_reference(layers: Iterable[Mapping[str, Any]]) -> bool:
    return any(num(layer.get("reference_err")) is not None for layer in layers)


def json_safe(value: Any) -> Any:
    """Replace NaN/inf by strings: browsers' JSON.parse rejects Python's bare NaN/Infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
