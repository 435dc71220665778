"""Merge run_ivy.py's and ours.py's JSON into one side-by-side Markdown table.

    python benchmarks/ivy_baseline/compare.py --ivy ivy.json --ours ours.json [--markdown OUT.md]

Only the standard library: the two runs happen in different environments, the merge in either.
Rows are paired by (case, target); a row one side lacks shows as "-". The first error of every
row that did not verify is listed under the table, so a failure is never just a "no".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def status(row: dict[str, Any] | None) -> str:
    """How far a conversion got: matches torch (ran, output dtype equal, relative L2 error within
    1e-5: ptranspile's verification, run_ivy.py's own check), runs but differs, transpiled only,
    failed."""
    if row is None:
        return "-"
    if row.get("passed"):
        return "matches torch"
    if row.get("ran"):
        return "runs, differs"
    if row.get("transpiled"):
        return "transpiled, does not run"
    return "failed"


def _num(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _size(row: dict[str, Any] | None) -> str:
    if row is None or row.get("files") is None:
        return "-"
    return f"{row['files']} / {row['lines']:,}"


def _precision(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    kept = row.get("precision_kept") or "-"
    if kept == "-":
        return kept
    markers = ", ".join(row.get("markers") or []) or "none"
    dtype = row.get("out_dtype")
    return f"{kept}; out {dtype or '-'} (torch {row.get('torch_dtype') or '-'}); in source: {markers}"


def _versions(payload: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in payload.get("versions", {}).items())


def merge(ivy: dict[str, Any], ours: dict[str, Any]) -> str:
    """The side-by-side table, its legend and the first errors, as Markdown."""
    keyed = {
        (r["case"], r["target"], side): r
        for side, payload in (("ivy", ivy), ("ours", ours))
        for r in payload["results"]
    }
    pairs = list(dict.fromkeys((r["case"], r["target"]) for p in (ivy, ours) for r in p["results"]))
    lines = [
        f"- Ivy: {ivy.get('date', '?')}, {ivy.get('seconds', 0):.0f} s in all; {_versions(ivy)}",
        f"- ptranspile: {ours.get('date', '?')}, {ours.get('seconds', 0):.0f} s in all; {_versions(ours)}",
        "",
        "| case | to | Ivy | ptranspile | rel L2 err Ivy / ours | transpile s Ivy / ours "
        "| files / lines Ivy | files / lines ours | precision kept, Ivy | precision kept, ours |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case, target in pairs:
        a, b = keyed.get((case, target, "ivy")), keyed.get((case, target, "ours"))
        err = f"{_num(a and a.get('rel_err'), '.1e')} / {_num(b and b.get('rel_err'), '.1e')}"
        secs = f"{_num(a and a.get('transpile_s'), '.1f')} / {_num(b and b.get('transpile_s'), '.2f')}"
        lines.append(
            f"| {case} | {target} | {status(a)} | {status(b)} | {err} | {secs} | {_size(a)} | {_size(b)} "
            f"| {_precision(a)} | {_precision(b)} |"
        )
    errors = [
        f"- {label}, {case} -> {target}: `{row['error']}`"
        for case, target in pairs
        for label, side in (("Ivy", "ivy"), ("ptranspile", "ours"))
        if (row := keyed.get((case, target, side))) and row.get("error")
    ]
    if errors:
        lines += ["", "First errors (one line each):", "", *errors]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ivy", type=Path, required=True, help="run_ivy.py --json output")
    parser.add_argument("--ours", type=Path, required=True, help="ours.py --json output")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    ivy, ours = (json.loads(p.read_text(encoding="utf-8")) for p in (args.ivy, args.ours))
    table = merge(ivy, ours)
    print(table, end="")
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
