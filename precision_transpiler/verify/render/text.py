"""The terminal report: `render_text`.

Kept apart from the HTML page because it has its own concerns: plain ASCII tree connectors that
survive any terminal, log file or CI console, aligned columns, and ANSI colour only when asked for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from precision_transpiler.verify.render.layers import (
    Node,
    build_tree,
    first_bad_where,
    fmt_bytes,
    fmt_cos,
    fmt_err,
    fmt_param_ratio,
    fmt_pct,
    fmt_shape,
    fmt_where,
    has_reference,
    is_bad,
    num,
    param_sizes,
    select_layers,
    share_ratio,
)

__all__ = ["render_text"]

_FIRST_BAD_TEXT = "<- first layer over its share"


class _Ansi:
    """ANSI styling that collapses to plain text when colour is off (pipes, files, CI logs)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled and text else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def red(self, text: str) -> str:
        return self._wrap("1;31", text)

    def green(self, text: str) -> str:
        return self._wrap("1;32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns; the first row is the header."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def render_text(report: dict[str, Any], *, color: bool = False, max_layers: int | None = None) -> str:
    """A terminal report: verdict, summary, failures, outputs and the per-layer tree.

    `max_layers` keeps long models readable: the first N layers in execution order and every
    layer over its share are shown, and the number left out is stated (never silently dropped).
    Colour is off by default because the text often ends up in a file or a CI log.
    """
    st = _Ansi(color)
    out = _text_heading(report, st)
    out.append("")
    out.append(st.bold("Summary"))
    out.extend(f"  {label:<13} {value}" for label, value in _text_summary(report, st))

    failures = report.get("failures") or []
    if failures:
        out.append("")
        out.append(st.bold(f"Failures ({len(failures)})"))
        out.extend(f"  - {st.red(str(f))}" for f in failures)

    outputs = report.get("outputs") or []
    if outputs:
        out.append("")
        out.append(st.bold("Outputs"))
        out.extend(_text_outputs(outputs))

    layers = [dict(layer) for layer in report.get("layers") or []]
    first_bad = report.get("first_bad_layer")
    if layers:
        out.append("")
        out.extend(_text_layers(report, layers, first_bad, max_layers, st))

    notes = report.get("notes") or []
    if notes:
        out.append("")
        out.append(st.bold("Notes"))
        out.extend(f"  - {n}" for n in notes)
    return "\n".join(out) + "\n"


def _text_heading(report: Mapping[str, Any], st: _Ansi) -> list[str]:
    """The verdict line and the line of what ran."""
    passed = bool(report.get("passed"))
    verdict = st.green("PASSED") if passed else st.red("FAILED")
    heading = (
        f"{verdict}  {report.get('source', '?')} -> {report.get('target', '?')}"
        f"  policy={report.get('policy', '?')}  entry={report.get('entry', '?')}"
    )
    details = [f"original {report.get('original', '?')}", f"converted {report.get('converted', '?')}"]
    if report.get("inputs"):
        details.append("inputs " + ", ".join(str(i) for i in report["inputs"]))
    if report.get("seed") is not None:
        details.append(f"seed {report['seed']}")
    seconds = num(report.get("seconds"))
    if seconds is not None:
        details.append(f"{seconds:.2f}s")
    return [heading, st.dim("  " + "   ".join(details))]


def _text_summary(report: Mapping[str, Any], st: _Ansi) -> list[tuple[str, str]]:
    """(label, value) rows of the summary: errors against the tolerance, sizes, timing."""
    tol = report.get("tolerance") or {}
    rel, limit = num(report.get("max_rel_err")), num(tol.get("max_rel_err"))
    over = rel is not None and limit is not None and (math.isnan(rel) or rel > limit)
    rel_text = fmt_err(rel)
    cmp = ">" if over else "<="
    if rel is None or limit is None:
        cmp = "vs"
    rel_line = f"{st.red(rel_text) if over else rel_text}  {cmp} tolerance {fmt_err(limit)}"
    if tol.get("rule"):
        rel_line += f"  ({tol['rule']})"
    nonfinite = report.get("nonfinite") or 0
    summary = [
        ("max rel err", rel_line),
        ("max abs err", fmt_err(report.get("max_abs_err"))),
        ("cosine", fmt_cos(report.get("cosine"))),
        ("argmax agree", fmt_pct(report.get("argmax_agreement"))),
        ("non-finite", st.red(str(nonfinite)) if nonfinite else "0"),
    ]
    sizes = param_sizes(report)
    if sizes:
        ratio = fmt_param_ratio(*sizes)
        summary.append(
            ("parameters", f"{fmt_bytes(sizes[0])} -> {fmt_bytes(sizes[1])}" + (f" ({ratio})" if ratio else ""))
        )
    timing = report.get("timing")
    if isinstance(timing, Mapping) and num(timing.get("original")):
        base = float(timing["original"])
        parts = [
            f"original {base * 1e3:.1f} ms",
            f"converted {float(timing['converted']) * 1e3:.1f} ms (x{float(timing['converted']) / base:.3g})",
        ]
        if num(timing.get("reference")):
            ref = float(timing["reference"])
            parts.append(f"original's own mixed precision {ref * 1e3:.1f} ms (x{ref / base:.3g})")
        summary.append(("forward", ", ".join(parts) + f"; medians of {int(timing.get('repeat', 0))}"))
    return summary


def _text_outputs(outputs: list[Mapping[str, Any]]) -> list[str]:
    """The outputs table."""
    rows = [["name", "shape", "dtype", "rel err", "max abs", "cosine", "argmax", "ref err", "non-finite"]]
    for o in outputs:
        shape = fmt_shape(o.get("shape_original"))
        if o.get("shape_converted") != o.get("shape_original"):
            shape += " -> " + fmt_shape(o.get("shape_converted"))
        dtype = f"{o.get('dtype_original')} -> {o.get('dtype_converted')}"
        if o.get("expected_dtype") and o.get("expected_dtype") != o.get("dtype_converted"):
            dtype += f" (expected {o['expected_dtype']})"
        rows.append(
            [
                str(o.get("name", "?")),
                shape,
                dtype,
                fmt_err(o.get("rel_err")),
                fmt_err(o.get("max_abs_err")),
                fmt_cos(o.get("cosine")),
                fmt_pct(o.get("argmax_agreement")),
                fmt_err(o.get("reference_err"), missing="-"),
                f"{o.get('nonfinite_original', 0)} -> {o.get('nonfinite_converted', 0)}",
            ]
        )
    return _table(rows)


def _text_layers(
    report: Mapping[str, Any],
    layers: list[dict[str, Any]],
    first_bad: str | None,
    max_layers: int | None,
    st: _Ansi,
) -> list[str]:
    """The layer tree as aligned lines: tree column, then kind, rel err / share, reference, marker."""
    shown = select_layers(layers, first_bad, max_layers)
    n_bad = sum(is_bad(layer) for layer in layers)
    head = f"Layers ({len(layers)} in execution order, {n_bad} over their share; rel err / share"
    with_ref = has_reference(shown)
    head += ", reference err)" if with_ref else ")"
    lines = [st.bold(head)]
    if first_bad:
        where = first_bad_where(report)
        lines.append("  first layer over its share: " + st.yellow(str(first_bad)) + (f" at {where}" if where else ""))

    root = build_tree(shown)
    rows: list[tuple[str, str, Node]] = []  # (connector prefix, name, node)

    def walk(node: Node, prefix: str) -> None:
        for i, child in enumerate(node.children):
            last = i == len(node.children) - 1
            rows.append((prefix + ("`-- " if last else "|-- "), child.name, child))
            walk(child, prefix + ("    " if last else "|   "))

    rows.append(("", root.name, root))
    walk(root, "")
    name_w = max(len(p) + len(n) for p, n, _ in rows)
    kind_w = max((len(str(r.layer.get("kind", ""))) for _, _, r in rows if r.layer is not None), default=0)

    for prefix, name, node in rows:
        label = st.dim(prefix) + name
        pad = " " * (name_w - len(prefix) - len(name))
        layer = node.layer
        if layer is None:
            lines.append(("  " + label).rstrip())
            continue
        cols = [str(layer.get("kind", "")).ljust(kind_w)]
        ratio = share_ratio(layer.get("rel_err"), layer.get("share"))
        err = f"{fmt_err(layer.get('rel_err')):>9} / {fmt_err(layer.get('share'), missing='-'):<9}"
        err += f" {'x' + format(ratio, '.2g') if ratio is not None and math.isfinite(ratio) else '':<7}"
        cols.append(err)
        if with_ref:
            cols.append(f"ref {fmt_err(layer.get('reference_err'), missing='-'):<9}")
        marks: list[str] = []
        if layer.get("nonfinite"):
            marks.append(st.red("!! non-finite"))
        elif layer.get("exceeded"):
            marks.append(st.red("!! over share"))
        if layer.get("note"):
            marks.append(f"[{layer['note']}]")
        if first_bad is not None and layer.get("path") == first_bad:
            src = fmt_where(layer.get("source"), layer.get("converted_source")) or first_bad_where(report)
            marks.append(st.yellow(_FIRST_BAD_TEXT + (f" ({src})" if src else "")))
        line = "  " + label + pad + "  " + "  ".join(cols) + ("  " + "  ".join(marks) if marks else "")
        lines.append(line.rstrip())

    hidden = len(layers) - len(shown)
    if hidden:
        lines.append(
            f"  ... {hidden} more layer{'s' if hidden != 1 else ''} elided"
            f" (showing the first {max(max_layers or 0, 0)} and every layer over its share)"
        )
    return lines
