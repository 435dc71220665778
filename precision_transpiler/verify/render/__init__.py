"""Turn a verification report (the `VerificationResult.to_json()` dict) into something a person reads.

Two renderers share one idea: the interesting part of a failed verification is *where* the error
appears first, so the per-layer records are shown as a tree that follows the module path
hierarchy in execution order, with every layer's error set against the share of the tolerance it
may use, and the first layer over its share called out with the source line that created it.

* `render_text` is for the terminal: plain ASCII tree connectors (they survive any terminal, log
  file or CI console), ANSI colour only when asked for.
* `render_html` is one self-contained page (no external URLs) to attach to a CI run or open
  locally: collapsible tree, error bars, a filter box, and the full JSON embedded so the page is
  also the archived report.

Both read only the dict, never the dataclasses, so a report saved as JSON can be re-rendered
later, and every float may be None (a metric that could not be computed) or non-finite.

Modules:

* `layers` - what both renderers share: number formatting (`fmt_err`, `fmt_cos`, `fmt_pct`,
  `fmt_tol`, `fmt_bytes`, `fmt_shape`, ...), the layer tree (`Node`, `build_tree`,
  `select_layers`, `first_bad_where`, ...) and `json_safe`.
* `text` - `render_text`: the terminal report.
* `html_page` - `render_html`: the standalone HTML page, its CSS and script included.
"""

from __future__ import annotations

from precision_transpiler.verify.render.html_page import render_html
from precision_transpiler.verify.render.text import render_text

__all__ = ["render_html", "render_text"]
