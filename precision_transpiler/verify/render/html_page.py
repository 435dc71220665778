"""The HTML report: `render_html`, one self-contained page with its CSS and script inline.

Kept apart from the terminal report because a page has its own concerns: escaping, anchors for
links into the tree, log-scale error bars, and an embedded copy of the report JSON that must stay
safe inside `<script>`. Everything is inline (no external URLs) so the file can be attached to a
CI run or opened offline.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
    fmt_tol,
    has_reference,
    is_bad,
    json_safe,
    num,
    param_sizes,
    share_ratio,
)

__all__ = ["render_html"]

_DASH = "\u2013"  # en dash: "no value" in the HTML, where it reads better than "n/a"

_E = html.escape

# Log-scale error bar: a layer at 1/1000 of its share is at the left, 10x over at the right,
# and the share itself sits at a fixed 75% mark so bars of different layers compare at a glance.
_BAR_DECADES_BELOW = 3.0
_BAR_DECADES_ABOVE = 1.0


def _bar_pos(ratio: float) -> float:
    if ratio <= 0:
        return 0.0
    span = _BAR_DECADES_BELOW + _BAR_DECADES_ABOVE
    return max(0.0, min(100.0, (math.log10(ratio) + _BAR_DECADES_BELOW) / span * 100.0))


_SHARE_MARK = _bar_pos(1.0)


def _error_bar(layer: Mapping[str, Any]) -> str:
    """Where this layer's error sits relative to its share (and the reference run's error)."""
    if layer.get("nonfinite"):
        return (
            '<span class="bar nonfinite" title="non-finite output"><span class="fill" style="width:100%"></span>'
            + "</span>"
        )
    ratio = share_ratio(layer.get("rel_err"), layer.get("share"))
    if ratio is None:
        return '<span class="bar none" title="no share to compare against"></span>'
    width = 100.0 if math.isinf(ratio) else _bar_pos(ratio)
    level = "over" if ratio > 1 else ("near" if ratio > 0.5 else "ok")
    parts = [
        f'<span class="bar {level}" title="{_E(f"{ratio:.3g}")} x its share">',
        f'<span class="fill" style="width:{width:.1f}%"></span>',
        f'<span class="share-mark" style="left:{_SHARE_MARK:.1f}%"></span>',
    ]
    ref_ratio = share_ratio(layer.get("reference_err"), layer.get("share"))
    if ref_ratio is not None and math.isfinite(ref_ratio):
        parts.append(
            f'<span class="ref-mark" style="left:{_bar_pos(ref_ratio):.1f}%" title="reference run error"></span>'
        )
    parts.append("</span>")
    return "".join(parts)


def _anchor_ids(root: Node) -> dict[int, str]:
    """Stable, valid, unique ids per tree node, derived from the module path for readable links."""
    ids: dict[int, str] = {}
    seen: set[str] = set()

    def visit(node: Node) -> None:
        base = "layer-" + (re.sub(r"[^A-Za-z0-9_.-]", "_", node.path) or "root")
        anchor, n = base, 2
        while anchor in seen:
            anchor, n = f"{base}-{n}", n + 1
        seen.add(anchor)
        ids[id(node)] = anchor
        for child in node.children:
            visit(child)

    visit(root)
    return ids


_INDENT_PX = 22  # .children margin + padding + border: one tree level, used to line up the columns


@dataclass
class _HtmlTree:
    """What every node of one rendered tree shares."""

    ids: Mapping[int, str]
    first_bad: str | None
    open_all: bool
    with_ref: bool
    name_ch: int  # widest "name" in characters
    max_depth: int
    kind_ch: int


def _html_node(node: Node, t: _HtmlTree, depth: int) -> str:
    """One `<details>` per tree node: the summary row carries the numbers, the body the facts and children.

    Columns line up across depths because the name cell shrinks by one indent per level.
    """
    layer = node.layer
    is_first = layer is not None and t.first_bad is not None and layer.get("path") == t.first_bad
    classes = ["node"]
    if layer is None:
        classes.append("group")
    if layer is not None and layer.get("exceeded"):
        classes.append("exceeded")
    if layer is not None and layer.get("nonfinite"):
        classes.append("nonfinite")
    if node.bad_below - int(node.bad) > 0:
        classes.append("has-bad")
    if is_first:
        classes.append("first-bad")
    if not node.children:
        classes.append("leaf")
    # Open the way to every bad layer, and the first bad layer itself so its facts (source line)
    # are visible; leaves stay closed otherwise so the tree reads as one line per layer.
    opened = is_first or (bool(node.children) and (node.bad_below > int(node.bad) or t.open_all))
    search = node.path + (" " + str(layer.get("kind", "")) if layer is not None else "")

    width = f"calc({t.name_ch}ch + {(t.max_depth - depth) * _INDENT_PX}px)"
    summary = [f'<span class="name" style="width:{width}" title="{_E(node.path or "(model)")}">{_E(node.name)}</span>']
    if layer is not None:
        summary.append(f'<span class="kind" style="width:{t.kind_ch}ch">{_E(str(layer.get("kind", "")))}</span>')
        summary.append(_error_bar(layer))
        summary.append(
            f'<span class="err">{_E(fmt_err(layer.get("rel_err"), _DASH))}'
            f'<span class="slash"> / </span><span class="share">{_E(fmt_err(layer.get("share"), _DASH))}</span></span>'
        )
        if t.with_ref:
            summary.append(f'<span class="ref">ref {_E(fmt_err(layer.get("reference_err"), _DASH))}</span>')
        if layer.get("nonfinite"):
            summary.append('<span class="tag bad">non-finite</span>')
        elif layer.get("exceeded"):
            summary.append('<span class="tag bad">✗ over share</span>')
        if layer.get("note"):
            summary.append(f'<span class="tag note">{_E(str(layer["note"]))}</span>')
        if is_first:
            summary.append('<span class="tag first">first layer over its share</span>')
    elif node.bad_below:
        summary.append(f'<span class="tag count">{node.bad_below} bad inside</span>')

    body: list[str] = []
    if layer is not None:
        facts = [
            ("path", node.path or "(model)"),
            ("source", str(layer.get("source") or _DASH)),
            *([("converted source", str(layer["converted_source"]))] if layer.get("converted_source") else []),
            ("order", str(layer.get("order", _DASH))),
            ("calls", str(layer.get("calls", _DASH))),
            ("shape", fmt_shape(layer.get("shape"))),
            ("max abs err", fmt_err(layer.get("max_abs_err"), _DASH)),
        ]
        if layer.get("reference_err") is not None:
            facts.append(("reference err", fmt_err(layer.get("reference_err"), _DASH)))
        if layer.get("note"):
            facts.append(("note", str(layer["note"])))
        body.append('<dl class="facts">' + "".join(f"<dt>{_E(k)}</dt><dd>{_E(v)}</dd>" for k, v in facts) + "</dl>")
    if node.children:
        body.append('<div class="children">')
        body.extend(_html_node(c, t, depth + 1) for c in node.children)
        body.append("</div>")

    return (
        f'<details id="{t.ids[id(node)]}" class="{" ".join(classes)}" data-path="{_E(node.path)}"'
        f' data-search="{_E(search.lower())}" data-depth="{depth}"{" open" if opened else ""}>'
        f"<summary>{''.join(summary)}</summary>{''.join(body)}</details>"
    )


def _card(label: str, value: str, sub: str = "", bad: bool = False, extra: str = "") -> str:
    cls = "card bad" if bad else "card"
    return (
        f'<div class="{cls}"><div class="label">{_E(label)}</div><div class="value">{_E(value)}</div>'
        f"{f'<div class=sub>{_E(sub)}</div>' if sub else ''}{extra}</div>"
    )


def render_html(report: dict[str, Any]) -> str:
    """One self-contained HTML page for a verification report.

    Everything is inline (CSS, script, data) so the file can be attached to a CI run, mailed or
    opened offline and still look the same. The page works without JavaScript (the tree is plain
    `<details>`); the script only adds the expand/collapse toggle and the filter box, and marks
    `<body data-rendered="true">` so tests can tell that a browser actually ran it.
    """
    passed = bool(report.get("passed"))
    verdict = "PASSED" if passed else "FAILED"
    layers = [dict(layer) for layer in report.get("layers") or []]
    first_bad = report.get("first_bad_layer")
    root = build_tree(layers)
    ids = _anchor_ids(root)

    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_E(verdict)}: {_E(str(report.get('source', '?')))} → {_E(str(report.get('target', '?')))}"
        f" · {_E(str(report.get('converted', '')))}</title>",
        f"<style>{_CSS}</style></head>",
        f'<body class="{"passed" if passed else "failed"}">',
        _html_banner(report, passed, verdict),
        _html_cards(report),
    ]

    failures = report.get("failures") or []
    if failures:
        parts.append(
            f'<section class="failures"><h2>Failures ({len(failures)})</h2><ul>'
            + "".join(f"<li>{_E(str(f))}</li>" for f in failures)
            + "</ul></section>"
        )

    if first_bad:
        node_id = next((ids[id(n)] for n in _iter_nodes(root) if n.layer and n.layer.get("path") == first_bad), None)
        where = first_bad_where(report)
        link = f'<a href="#{node_id}">{_E(str(first_bad))}</a>' if node_id else f"<code>{_E(str(first_bad))}</code>"
        parts.append(
            f'<section class="firstbad"><span class="tag first">first layer over its share</span> {link}'
            + (f" created at <code>{_E(str(where))}</code>" if where else "")
            + "</section>"
        )

    outputs = report.get("outputs") or []
    if outputs:
        parts.append(_html_outputs(outputs))
    parts.extend(_html_layers(layers, root, ids, first_bad))

    notes = report.get("notes") or []
    if notes:
        parts.append(
            '<section class="notes"><h2>Notes</h2><ul>'
            + "".join(f"<li>{_E(str(n))}</li>" for n in notes)
            + "</ul></section>"
        )

    parts.append('<details class="raw"><summary>Report JSON</summary><pre id="raw-json"></pre></details></main>')
    parts.append(f'<script type="application/json" id="report-data">{_embed_json(report)}</script>')
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts) + "\n"


def _html_banner(report: Mapping[str, Any], passed: bool, verdict: str) -> str:
    """The verdict banner (and the start of `<main>`)."""
    meta = [
        f"policy <b>{_E(str(report.get('policy', '?')))}</b>",
        f"entry <code>{_E(str(report.get('entry', '?')))}</code>",
        f"seed {_E(str(report.get('seed', '?')))}",
    ]
    if report.get("inputs"):
        meta.append("inputs " + ", ".join(f"<code>{_E(str(i))}</code>" for i in report["inputs"]))
    seconds = num(report.get("seconds"))
    if seconds is not None:
        meta.append(f"{seconds:.2f}s")
    return (
        f'<header class="banner {"pass" if passed else "fail"}" id="verdict">'
        f'<div class="verdict">{"✔" if passed else "✘"} {verdict}</div>'
        f'<div class="route">{_E(str(report.get("source", "?")))} → {_E(str(report.get("target", "?")))}</div>'
        f'<div class="files"><code>{_E(str(report.get("original", "?")))}</code> → '
        f"<code>{_E(str(report.get('converted', '?')))}</code></div>"
        f'<div class="meta">{" · ".join(meta)}</div></header><main>'
    )


def _html_cards(report: Mapping[str, Any]) -> str:
    """The summary cards: errors against the tolerance, non-finite values, parameter sizes."""
    tol = report.get("tolerance") or {}
    rel, limit = num(report.get("max_rel_err")), num(tol.get("max_rel_err"))
    rel_bad = rel is not None and limit is not None and (math.isnan(rel) or rel > limit)
    tol_bar = ""
    tol_ratio = share_ratio(rel, limit)
    if tol_ratio is not None:
        pos = 100.0 if math.isinf(tol_ratio) else _bar_pos(tol_ratio)
        tol_bar = (
            f'<span class="bar {"over" if tol_ratio > 1 else "ok"}"><span class="fill" style="width:{pos:.1f}%">'
            f'</span><span class="share-mark" style="left:{_SHARE_MARK:.1f}%"></span></span>'
        )
    rel_sub = f"tolerance {fmt_err(limit, _DASH)}"
    if tol.get("rule"):
        rel_sub += f" · {tol['rule']}"
    extra_tol = [f"{k} {fmt_tol(k, v)}" for k, v in tol.items() if k not in ("max_rel_err", "rule") and v is not None]
    tol_extra = tol_bar + (f'<div class="sub">{_E(", ".join(extra_tol))}</div>' if extra_tol else "")
    nonfinite = report.get("nonfinite") or 0
    cards = [
        '<section class="cards">',
        _card("max rel err", fmt_err(rel, _DASH), rel_sub, rel_bad, tol_extra),
        _card("max abs err", fmt_err(report.get("max_abs_err"), _DASH)),
        _card("cosine", fmt_cos(report.get("cosine"), _DASH)),
        _card("argmax agreement", fmt_pct(report.get("argmax_agreement"), _DASH)),
        _card("non-finite", str(nonfinite), "values the original does not have", bool(nonfinite)),
    ]
    sizes = param_sizes(report)
    if sizes:
        ratio = fmt_param_ratio(*sizes)
        sub = f"from {fmt_bytes(sizes[0])}" + (f", {ratio}" if ratio else "")
        cards.append(_card("parameters", fmt_bytes(sizes[1]), sub))
    cards.append("</section>")
    return "\n".join(cards)


def _html_layers(layers: list[dict[str, Any]], root: Node, ids: dict[int, str], first_bad: Any) -> list[str]:
    """The layer tree section (its toolbar and legend, or a line saying there are no layers)."""
    n_bad = sum(is_bad(layer) for layer in layers)
    parts = [f'<section class="layers"><h2>Layers <small>{len(layers)} recorded, {n_bad} over their share']
    parts.append("</small></h2>")
    if layers:
        with_ref = has_reference(layers)
        parts.append(
            '<div class="toolbar" hidden>'
            '<input type="search" id="filter" placeholder="filter by path or kind" aria-label="filter layers">'
            '<button type="button" id="toggle">expand all</button>'
            '<span id="filter-count"></span></div>'
            '<p class="legend">bar: rel err on a log scale (1e-3 to 10x of its share); '
            '<span class="legend-share"></span> its share'
            + ('; <span class="legend-ref"></span> reference run' if with_ref else "")
            + "</p>"
        )
        tops = [root] if root.layer is not None else root.children
        spans = [(len(n.name), d) for top in tops for n, d in _iter_depths(top, 0)]
        tree = _HtmlTree(
            ids=ids,
            first_bad=first_bad,
            open_all=n_bad == 0 and len(layers) <= 200,  # a healthy model: show its whole structure
            with_ref=with_ref,
            name_ch=max(n for n, _ in spans) + 1,
            max_depth=max(d for _, d in spans),
            kind_ch=max(len(str(layer.get("kind", ""))) for layer in layers) + 1,
        )
        parts.append('<div class="tree" id="tree">')
        parts.extend(_html_node(top, tree, 0) for top in tops)
        parts.append("</div>")
    else:
        parts.append('<p class="empty">No per-layer records in this report.</p>')
    parts.append("</section>")
    return parts


def _iter_depths(node: Node, depth: int) -> Iterable[tuple[Node, int]]:
    yield node, depth
    for child in node.children:
        yield from _iter_depths(child, depth + 1)


def _iter_nodes(node: Node) -> Iterable[Node]:
    yield node
    for child in node.children:
        yield from _iter_nodes(child)


def _embed_json(report: Mapping[str, Any]) -> str:
    """The report as JSON that is safe inside `<script>`: `<`, `>` and `&` become \\u escapes.

    Those characters can only occur inside JSON strings, where the escapes mean the same thing, so
    `</script>` in a layer path cannot end the block and `JSON.parse` still returns the original.
    """
    text = json.dumps(json_safe(report), ensure_ascii=False, allow_nan=False, default=str)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _html_outputs(outputs: list[Mapping[str, Any]]) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in ("output", "shape", "dtype", "rel err", "max abs err", "cosine", "argmax", "ref err", "non-finite")
    )
    rows = []
    for o in outputs:
        shape = fmt_shape(o.get("shape_original"))
        shape_bad = o.get("shape_converted") != o.get("shape_original")
        if shape_bad:
            shape += " → " + fmt_shape(o.get("shape_converted"))
        dtype_bad = bool(o.get("expected_dtype")) and o.get("expected_dtype") != o.get("dtype_converted")
        dtype = f"{o.get('dtype_original')} → {o.get('dtype_converted')}"
        if dtype_bad:
            dtype += f" (expected {o.get('expected_dtype')})"
        nf_bad = (o.get("nonfinite_converted") or 0) > (o.get("nonfinite_original") or 0)
        cells = [
            (str(o.get("name", "?")), False),
            (shape, shape_bad),
            (dtype, dtype_bad),
            (fmt_err(o.get("rel_err"), _DASH), False),
            (fmt_err(o.get("max_abs_err"), _DASH), False),
            (fmt_cos(o.get("cosine"), _DASH), False),
            (fmt_pct(o.get("argmax_agreement"), _DASH), False),
            (fmt_err(o.get("reference_err"), _DASH), False),
            (f"{o.get('nonfinite_original', 0)} → {o.get('nonfinite_converted', 0)}", nf_bad),
        ]
        rows.append("<tr>" + "".join(f"<td{' class=bad' if bad else ''}>{_E(t)}</td>" for t, bad in cells) + "</tr>")
    return (
        '<section class="outputs"><h2>Outputs</h2><table><thead><tr>'
        + head
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


_CSS = """
:root{--ok:#1a7f37;--bad:#cf222e;--warn:#bf8700;--fg:#1f2328;--muted:#656d76;--bg:#fff;--panel:#f6f8fa;
--line:#d0d7de;--badbg:#ffebe9;--mono:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#8d96a0;--bg:#0d1117;--panel:#161b22;
--line:#30363d;--badbg:#3c1618}}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg)}
code,.tree,.facts,table{font-family:var(--mono);font-size:12.5px}
main{max-width:1200px;margin:0 auto;padding:0 20px 40px}
h2{font-size:16px;margin:24px 0 8px}h2 small{font-weight:normal;color:var(--muted);margin-left:8px}
.banner{color:#fff;padding:18px 24px;display:flex;flex-wrap:wrap;gap:6px 24px;align-items:baseline}
.banner.pass{background:var(--ok)}.banner.fail{background:var(--bad)}
.banner .verdict{font-size:26px;font-weight:700;letter-spacing:.04em}
.banner .route{font-size:18px;font-weight:600}
.banner .meta,.banner .files{opacity:.92}.banner code{background:rgba(255,255,255,.18);padding:0 4px;border-radius:3px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(190px,1fr));gap:12px;margin-top:18px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
.card.bad{border-color:var(--bad);background:var(--badbg)}
.card .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.05em}
.card .value{font-size:22px;font-weight:600;font-family:var(--mono)}
.card.bad .value{color:var(--bad)}
.card .sub{color:var(--muted);font-size:12px}.card .bar{width:100%;margin-top:6px}
.failures{border-left:4px solid var(--bad);background:var(--badbg);padding:4px 16px;margin-top:18px;border-radius:4px}
.failures ul{margin:4px 0 10px;padding-left:18px}
.firstbad{margin-top:14px;padding:10px 14px;border:1px solid var(--warn);border-radius:6px;background:var(--panel)}
.firstbad a{font-family:var(--mono);font-weight:600}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);white-space:nowrap}
th{color:var(--muted);font-weight:600}td.bad{color:var(--bad);font-weight:600}
.toolbar{display:flex;gap:10px;align-items:center;margin:6px 0}
.toolbar input{flex:0 1 320px;padding:5px 8px;border:1px solid var(--line);border-radius:6px;background:var(--bg);
color:var(--fg)}
.toolbar button{padding:5px 10px;border:1px solid var(--line);border-radius:6px;background:var(--panel);
color:var(--fg);cursor:pointer}
#filter-count{color:var(--muted)}
.legend{color:var(--muted);font-size:12px;margin:4px 0 8px}
.legend-share,.legend-ref{display:inline-block;width:2px;height:10px;background:var(--fg);vertical-align:middle}
.legend-ref{background:#0969da}
.tree details{margin:0}
.tree .children{margin-left:9px;padding-left:12px;border-left:1px dotted var(--line)}
.tree summary{display:flex;gap:10px;align-items:center;padding:1px 6px;border-radius:4px;cursor:pointer;
white-space:nowrap;list-style:none}
.tree summary::-webkit-details-marker{display:none}
.tree summary::before{content:"\\25B8";width:1ch;margin-right:-4px;color:var(--muted)}
.tree details[open]>summary::before{content:"\\25BE"}
.tree summary:hover{background:var(--panel)}
.tree .name{font-weight:600;flex:none;overflow:hidden;text-overflow:ellipsis}
.tree .group>summary .name{font-weight:normal;color:var(--muted)}
.tree .kind{color:var(--muted);flex:none}
.tree .err{min-width:20ch}.tree .slash,.tree .share,.tree .ref{color:var(--muted)}
.tree .exceeded>summary,.tree .nonfinite>summary{background:var(--badbg)}
.tree .exceeded>summary .name,.tree .nonfinite>summary .name{color:var(--bad)}
.tree .has-bad>summary .name{color:var(--bad)}
.tree .first-bad>summary{outline:2px solid var(--warn)}
.tree details:target>summary{outline:2px solid #0969da}
.tree .filtered-out{display:none}
.tag{font-family:system-ui,sans-serif;font-size:11px;padding:0 6px;border-radius:10px;border:1px solid var(--line)}
.tag.bad{color:#fff;background:var(--bad);border-color:var(--bad)}
.tag.first{color:#fff;background:var(--warn);border-color:var(--warn)}
.tag.count{color:var(--bad);border-color:var(--bad)}
.tag.note{color:var(--muted)}
.bar{position:relative;display:inline-block;width:140px;height:8px;background:var(--line);border-radius:4px;
overflow:hidden;flex:none}
.bar .fill{position:absolute;left:0;top:0;bottom:0;background:var(--ok)}
.bar.near .fill{background:var(--warn)}.bar.over .fill,.bar.nonfinite .fill{background:var(--bad)}
.bar.nonfinite .fill{background:repeating-linear-gradient(45deg,var(--bad) 0 4px,#8c1d1d 4px 8px)}
.bar.none{background:transparent;border:1px dashed var(--line)}
.bar .share-mark{position:absolute;top:0;bottom:0;width:2px;background:var(--fg)}
.bar .ref-mark{position:absolute;top:0;bottom:0;width:2px;background:#0969da}
.facts{display:flex;flex-wrap:wrap;gap:0 6px;margin:2px 0 4px 24px;padding:3px 10px;background:var(--panel);
border-radius:6px;width:max-content;max-width:100%}
.facts dt{color:var(--muted)}.facts dd{margin:0 12px 0 0}
.empty{color:var(--muted)}
.raw{margin-top:24px}.raw pre{background:var(--panel);padding:10px;overflow:auto;max-height:480px;font-size:12px}
"""

# No "</" anywhere in this script, so it can never close its own <script> element early.
_JS = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var raw = document.getElementById("raw-json");
  if (raw) { raw.textContent = JSON.stringify(data, null, 2); }
  var tree = document.getElementById("tree");
  var nodes = tree ? Array.prototype.slice.call(tree.querySelectorAll("details.node")) : [];
  var initiallyOpen = nodes.map(function (n) { return n.open; });
  var toolbar = document.querySelector(".toolbar");
  var toggle = document.getElementById("toggle");
  var filter = document.getElementById("filter");
  var count = document.getElementById("filter-count");
  var expanded = false;
  if (toolbar && toggle && filter) {
    toolbar.hidden = false;
    toggle.addEventListener("click", function () {
      expanded = !expanded;
      // Collapsing goes back to the rendered state: only the way to the bad layers is open.
      nodes.forEach(function (n, i) { n.open = expanded || initiallyOpen[i]; });
      toggle.textContent = expanded ? "collapse to bad layers" : "expand all";
    });
    filter.addEventListener("input", function () {
      var q = filter.value.trim().toLowerCase();
      if (!q) {
        nodes.forEach(function (n, i) { n.classList.remove("filtered-out"); n.open = initiallyOpen[i]; });
        count.textContent = "";
        return;
      }
      var hits = 0;
      nodes.slice().reverse().forEach(function (n) {
        var self = (n.getAttribute("data-search") || "").indexOf(q) !== -1;
        var inner = n.querySelector("details.node:not(.filtered-out)") !== null;
        n.classList.toggle("filtered-out", !(self || inner));
        if (inner) { n.open = true; }
        if (self) { hits += 1; }
      });
      count.textContent = hits + " match" + (hits === 1 ? "" : "es");
    });
  }
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (id.indexOf("filter=") === 0 && filter) {
      // A shareable view: report.html#filter=batchnorm opens with the filter applied.
      filter.value = id.slice(7);
      filter.dispatchEvent(new Event("input"));
      return;
    }
    var el = id ? document.getElementById(id) : null;
    for (var p = el; p; p = p.parentElement) { if (p.tagName === "DETAILS") { p.open = true; } }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.body.dataset.layers = String((data.layers || []).length);
  document.body.dataset.rendered = "true";
})();
"""
