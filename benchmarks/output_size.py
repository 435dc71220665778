"""Output size: converted files' lines over their source's, with the runtime in a module beside
them (`--runtime module`, what `-o` writes) and copied in (`--runtime inline`).

    python benchmarks/output_size.py [--suite corpus] [--targets jax,tf] [--policies fp32,mixed]

Converts every case of the corpus (benchmarks/corpus.yaml: real model files of installed
packages) as the corpus does (`--entry ... --prune-to-entry`) and as a user converting the whole
file would; prints the median and the largest ratio per target and policy. Transpiling only:
benchmarks/corpus.py --runtime module verifies the outputs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus import SUITES, load_cases, package_file
from precision_transpiler import transpile


def ratios(cases: list, target: str, policy: str, prune: bool) -> list[tuple[str, int, int, int]]:
    """(case, source lines, lines inline, lines with the runtime module) per converted case."""
    found = []
    seen: set[str] = set()
    for case in cases:
        try:
            path = package_file(case.package, case.file)
        except FileNotFoundError:
            continue
        if not prune and str(path) in seen:
            continue  # the whole file once, whatever its cases build
        seen.add(str(path))
        source = path.read_text(encoding="utf-8")
        extra = {"entry": case.entry, "prune_to_entry": True} if prune else {}
        result = transpile(source, to=target, policy=policy, path=str(path), **extra)
        module = transpile(source, to=target, policy=policy, path=str(path), runtime="module", **extra)
        if result.errors or module.errors:
            continue
        found.append((case.name, source.count("\n"), result.code.count("\n"), module.code.count("\n")))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=sorted(SUITES), default="corpus")
    parser.add_argument("--targets", default="jax,tf")
    parser.add_argument("--policies", default="fp32,mixed")
    parser.add_argument("--cases", default="", help="only cases whose name contains one of these (comma-separated)")
    args = parser.parse_args(argv)
    from tests.real_models import import_torchvision

    import_torchvision()
    wanted = [w for w in args.cases.split(",") if w] or [""]
    cases = [c for c in load_cases(SUITES[args.suite]) if any(w in c.name for w in wanted)]
    print(f"Converted lines / source lines, {args.suite} ({len(cases)} cases)\n")
    print("| to | policy | converted | files | inline: median | inline: max | module: median | module: max |")
    print("|---|---|---|---|---|---|---|---|")
    for prune in (True, False):
        for target in args.targets.split(","):
            for policy in args.policies.split(","):
                rows = ratios(cases, target, policy, prune)
                inline = [out / max(src, 1) for _, src, out, _ in rows]
                module = [mod / max(src, 1) for _, src, _, mod in rows]
                if not rows:
                    continue
                what = "--prune-to-entry" if prune else "whole file"
                print(
                    f"| {target} | {policy} | {what} | {len(rows)} | {statistics.median(inline):.2f} | "
                    f"{max(inline):.2f} | {statistics.median(module):.2f} | {max(module):.2f} |"
                )
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
