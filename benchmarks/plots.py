"""PNG charts of the corpus and memory benchmarks, for docs/benchmarks.md.

A table of 36 models x 2 targets x 2 policies hides what a picture shows at a glance: how far
below (or above) its tolerance each converted model lands, where mixed precision pays off in
speed and where it does not, and what it does to memory. This reads the JSON that
`benchmarks/corpus.py --json` (with `--time N` for the speed chart) and `benchmarks/memory.py
--json` write, and draws with matplotlib's Agg backend (no display needed):

- corpus_rel_err.png: per model, the relative error of each target/policy (log scale) beside
  that policy's tolerance; hollow markers did not verify, crosses did not convert or run.
- corpus_forward_time.png: per model and target, forward time of the converted model (each
  policy) and of torch autocast, as ratios to the torch fp32 forward measured in the same process.
- memory.png: per model, parameter bytes, forward peak rise and process peak RSS of torch fp32,
  torch autocast and the converted JAX and Keras models, fp32 and mixed.

    python benchmarks/plots.py [--corpus corpus.json] [--memory memory.json] [--out docs/img]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "img"
MiB = 1 << 20
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display, in CI and over ssh
    import matplotlib.pyplot as plt

    return plt


def _subtitle(payload: dict[str, Any]) -> str:
    """Date and the framework versions of a benchmark JSON, for the figure title."""
    names = ("torch", "jax", "flax", "tensorflow-cpu", "keras")
    found = payload.get("versions", {})
    versions = ", ".join(f"{n.replace('-cpu', '')} {found[n]}" for n in names if n in found)
    return f"{payload.get('date', '')}; {versions}".strip("; ")


def _offsets(count: int, spread: float = 0.7) -> list[float]:
    """Vertical offsets of `count` markers sharing one row."""
    if count == 1:
        return [0.0]
    step = spread / (count - 1)
    return [-spread / 2 + i * step for i in range(count)]


def _rows(ax: Any, labels: Sequence[str]) -> None:
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first case at the top, as in the tables
    for y in range(len(labels)):
        if y % 2:
            ax.axhspan(y - 0.5, y + 0.5, color="#f2f2f2", zorder=0)


def plot_errors(payload: dict[str, Any], path: Path) -> Path:
    """Relative error of every case and target/policy against its tolerance (log x)."""
    plt = _pyplot()
    outcomes = payload["outcomes"]
    cases = list(dict.fromkeys(o["case"] for o in outcomes))
    groups = list(dict.fromkeys((o["target"], o["policy"]) for o in outcomes))
    values = [o["max_rel_err"] for o in outcomes if o["max_rel_err"]] + [
        o["tolerance"] for o in outcomes if o["tolerance"]
    ]
    low = min(values, default=1e-8) / 10
    high = max(values, default=1.0) * 10
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.42 * len(cases) * max(1, len(groups) / 3)))
    _rows(ax, cases)
    offsets = _offsets(len(groups))
    by_key = {(o["case"], o["target"], o["policy"]): o for o in outcomes}
    for (target, policy), offset, color in zip(groups, offsets, COLORS, strict=False):
        for row, case in enumerate(cases):
            o = by_key.get((case, target, policy))
            if o is None:
                continue
            y = row + offset
            if o.get("tolerance"):
                ax.plot([o["tolerance"]], [y], marker="|", markersize=9, color=color, markeredgewidth=2)
            error = o.get("max_rel_err")
            if error is None:
                ax.plot([low], [y], marker="x", color=color, markersize=6)
            else:
                ax.plot(
                    [max(error, low)],
                    [y],
                    marker="o",
                    markersize=6,
                    color=color,
                    markerfacecolor=color if o["verified"] else "white",
                )
        ax.plot([], [], marker="o", linestyle="", color=color, label=f"{target} {policy}")
    ax.plot([], [], marker="|", linestyle="", color="black", markersize=9, markeredgewidth=2, label="tolerance")
    ax.plot([], [], marker="o", linestyle="", color="black", markerfacecolor="white", label="did not verify")
    ax.plot([], [], marker="x", linestyle="", color="black", label="did not convert / run")
    ax.set_xscale("log")
    ax.set_xlim(low / 2, high)
    ax.set_xlabel(f"max relative error of the output vs torch fp32 (0 drawn at {low:.0e})")
    ax.grid(axis="x", which="major", color="#dddddd")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"Converted model vs torch original\n{_subtitle(payload)}", fontsize=9)
    return _save(fig, path)


def plot_times(payload: dict[str, Any], path: Path) -> Path | None:
    """Forward-time ratios to torch fp32 per case and target; None without `--time` data."""
    outcomes = [o for o in payload["outcomes"] if o.get("forward_original_s")]
    if not outcomes:
        return None
    plt = _pyplot()
    cases = list(dict.fromkeys(o["case"] for o in outcomes))
    targets = list(dict.fromkeys(o["target"] for o in outcomes))
    policies = list(dict.fromkeys(o["policy"] for o in outcomes))
    series = [f"converted {p}" for p in policies] + ["torch autocast"]
    ratios = [
        seconds / o["forward_original_s"]
        for o in outcomes
        for seconds in (o.get("forward_converted_s"), o.get("forward_reference_s"))
        if seconds
    ]
    low, high = min([*ratios, 1.0]) / 1.5, max([*ratios, 1.0]) * 1.5
    fig, axes = plt.subplots(
        1, len(targets), figsize=(4.5 * len(targets) + 2, 1.4 + 0.36 * len(cases)), sharey=True, squeeze=False
    )
    offsets = _offsets(len(series), 0.5)
    for ax, target in zip(axes[0], targets, strict=True):
        _rows(ax, cases)
        ax.axvline(1.0, color="black", linewidth=0.8)
        for row, case in enumerate(cases):
            for o in outcomes:
                if (o["case"], o["target"]) != (case, target):
                    continue
                base = o["forward_original_s"]
                index = policies.index(o["policy"])
                if o["forward_converted_s"]:
                    ax.plot([o["forward_converted_s"] / base], [row + offsets[index]], "o", color=COLORS[index], ms=6)
                if o.get("forward_reference_s"):
                    ax.plot([o["forward_reference_s"] / base], [row + offsets[-1]], "s", color="#555555", ms=5)
        _ratio_axis(ax, low, high)
        ax.set_title(f"to {target} ({'jax.jit' if target == 'jax' else 'tf.function'})", fontsize=9)
        ax.set_xlabel("forward time / torch fp32 (same process; < 1 is faster)", fontsize=8)
        ax.grid(axis="x", which="major", color="#dddddd")
    for index, label in enumerate(series[:-1]):
        axes[0][-1].plot([], [], "o", color=COLORS[index], label=label)
    axes[0][-1].plot([], [], "s", color="#555555", label="torch autocast bf16")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(f"Forward time, medians after warm-up\n{_subtitle(payload)}", fontsize=9)
    return _save(fig, path)


def _ratio_axis(ax: Any, low: float, high: float) -> None:
    """Log x with ticks at powers of two (0.25, 0.5, 1, 2, ...) and no minor labels: ratios often
    span less than a decade, where matplotlib's minor log labels collide."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.set_xlim(low, high)
    powers = range(math.floor(math.log2(low)), math.ceil(math.log2(high)) + 1)
    step = max(1, math.ceil(len(powers) / 7))  # at most ~7 labels, 1 always among them
    ax.xaxis.set_major_locator(FixedLocator([2.0**k for k in powers if k % step == 0]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if v >= 1 else f"1/{round(1 / v)}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_memory(payload: dict[str, Any], path: Path) -> Path:
    """Parameter bytes, one forward's working memory and process peak RSS per model and combination.

    The middle panel is the measured forward's RSS rise, except for Keras, whose TensorFlow
    allocator pools freed memory (its RSS hardly rises): there it is the allocator's rise of bytes
    in use, drawn hatched."""
    plt = _pyplot()
    results = payload["measurements"]
    models = list(dict.fromkeys(r["model"] for r in results))
    combos = list(dict.fromkeys((r["framework"], r["precision"]) for r in results))

    def working(r: dict[str, Any]) -> int | None:
        return r["allocator_rise"] if r.get("allocator_rise") is not None else r.get("forward_rise")

    panels = [
        ("parameters as held (MiB)", lambda r: r.get("param_bytes")),
        ("one forward: RSS rise; Keras (hatched): TF allocator rise (MiB)", working),
        ("process peak RSS (MiB)", lambda r: r.get("process_peak")),
    ]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(13, 1.6 + 0.5 * len(models) * len(combos) / 3), sharey=True, squeeze=False
    )
    height = 0.8 / max(1, len(combos))
    by_key = {(r["model"], r["framework"], r["precision"]): r for r in results}
    for ax, (label, value) in zip(axes[0], panels, strict=True):
        _rows(ax, [_wrap(m) for m in models])
        for index, (framework, precision) in enumerate(combos):
            color = COLORS[index % len(COLORS)]
            for row, model in enumerate(models):
                r = by_key.get((model, framework, precision))
                y = row - 0.4 + height * (index + 0.5)
                number = None if r is None or r.get("error") else value(r)
                if number is None:
                    ax.plot([0], [y], "x", color=color, ms=5)
                    continue
                pooled = value is working and r.get("allocator_rise") is not None
                ax.barh(
                    y,
                    number / MiB,
                    height=height * 0.9,
                    color=color,
                    hatch="///" if pooled else None,
                    edgecolor="white",
                )
        ax.set_xlabel(label, fontsize=8)
        ax.grid(axis="x", color="#dddddd")
        ax.set_axisbelow(True)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color=COLORS[index % len(COLORS)], label=f"{framework} {precision}")
        for index, (framework, precision) in enumerate(combos)
    ]
    handles.append(Line2D([], [], marker="x", linestyle="", color="black", label="failed"))
    axes[0][-1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    batch = payload.get("batch", "")
    fig.suptitle(
        f"Memory of inference, batch {batch}, one fresh process per bar group\n{_subtitle(payload)}", fontsize=9
    )
    return _save(fig, path)


def _wrap(label: str, width: int = 22) -> str:
    """Long model names on two lines, so the chart keeps its width."""
    if len(label) <= width or " (" not in label:
        return label
    return label.replace(" (", "\n(", 1)


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends sit outside the axes
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="JSON from benchmarks/corpus.py --json (with --time N for speed)")
    parser.add_argument("--memory", type=Path, help="JSON from benchmarks/memory.py --json")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not args.corpus and not args.memory:
        parser.error("give --corpus and/or --memory")
    written: list[Path] = []
    if args.corpus:
        corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
        written.append(plot_errors(corpus, args.out / "corpus_rel_err.png"))
        timed = plot_times(corpus, args.out / "corpus_forward_time.png")
        if timed is None:
            print("no forward times in the corpus JSON (run corpus.py with --time N): no speed chart", file=sys.stderr)
        else:
            written.append(timed)
    if args.memory:
        memory = json.loads(args.memory.read_text(encoding="utf-8"))
        written.append(plot_memory(memory, args.out / "memory.png"))
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
