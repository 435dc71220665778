"""Re-convert every output of the real-model corpus and check that nothing changes.

For each case of benchmarks/corpus.yaml and each target and policy asked for, this converts the
case as the corpus does (its entry, `--prune-to-entry`), converts that output again with the same
target and policy (what `ptranspile OUT --to T --policy P --check` does) and compares the bytes.
It prints one row per case and a summary; rows that changed name the first changed line, and
`--diffs DIR` writes the whole diffs. Nothing is imported or run but the converter.

    python benchmarks/fixed_point.py                       # the whole corpus, 5 targets/policies
    python benchmarks/fixed_point.py --cases resnet --targets jax:mixed,tf:mixed
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus import DEFAULT_CASES, Case, load_cases, package_file
from precision_transpiler import transpile

TARGETS = "jax:fp32,jax:mixed,tf:fp32,tf:mixed,torch:mixed"


@dataclass
class Row:
    case: str
    target: str
    policy: str
    fixed_point: bool
    seconds: float
    first_change: str = ""
    diff: str = ""


def check(case: Case, target: str, policy: str) -> Row:
    """`case` converted to (`target`, `policy`), then its output converted again the same way."""
    original = package_file(case.package, case.file)
    start = time.perf_counter()
    first = transpile(
        original.read_text(encoding="utf-8"),
        to=target,
        policy=policy,
        path=str(original),
        entry=case.entry,
        prune_to_entry=True,
    )
    output = original.with_name(f"{original.stem}_{target}_{policy}.py")  # where `-o` would have written it
    again = transpile(first.code, to=target, policy=policy, path=str(output))
    row = Row(case.name, target, policy, again.code == first.code, time.perf_counter() - start)
    if not row.fixed_point:
        lines = list(difflib.unified_diff(first.code.splitlines(True), again.code.splitlines(True), n=2))
        row.diff = "".join(lines)
        changed = next((ln for ln in lines[2:] if ln[:1] in "+-"), "")
        row.first_change = " ".join(changed.split())[:100]
    return row


def table(rows: list[Row]) -> str:
    out = ["| case | to | policy | fixed point | seconds | first change |", "|---|---|---|---|---:|---|"]
    for r in rows:
        change = r.first_change.replace("|", "\\|")
        out.append(
            f"| {r.case} | {r.target} | {r.policy} | {'yes' if r.fixed_point else 'no'} | {r.seconds:.1f} | {change} |"
        )
    fixed = sum(r.fixed_point for r in rows)
    out += ["", f"{fixed} of {len(rows)} outputs are fixed points."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases-file", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names (default: all)")
    parser.add_argument("--targets", default=TARGETS, help=f"target:policy pairs (default {TARGETS})")
    parser.add_argument("--diffs", type=Path, help="write the diff of every output that changed into this folder")
    args = parser.parse_args(argv)
    wanted = [w for w in args.cases.split(",") if w] or [""]
    cases = [c for c in load_cases(args.cases_file) if any(w in c.name for w in wanted)]
    pairs = [tuple(p.split(":", 1)) for p in args.targets.split(",") if p]
    rows: list[Row] = []
    for case in cases:
        for target, policy in pairs:
            row = check(case, target, policy)
            rows.append(row)
            verdict = "fixed point" if row.fixed_point else "CHANGED"
            print(f"{case.name} -> {target} {policy}: {verdict}", file=sys.stderr)
            if row.diff and args.diffs:
                args.diffs.mkdir(parents=True, exist_ok=True)
                name = "".join(ch if ch.isalnum() else "_" for ch in case.name)
                (args.diffs / f"{name}-{target}-{policy}.diff").write_text(row.diff, encoding="utf-8")
    print(table(rows))
    return 0 if all(r.fixed_point for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
