"""Transpile time of this checkout against another one, measured side by side.

Two interpreters stay alive, one importing each checkout's `precision_transpiler`; each input is
converted by them in turn (A, B, A, B, ...), so the machine's load at any moment weighs on both
alike. The table gives each side's median and the ratio, and says whether the outputs are the
same bytes. Use it when a change must not make conversion slower (a refactor of the engine):

    git worktree add /tmp/before <revision>
    python benchmarks/compare_revisions.py --baseline /tmp/before [--repeat 7]

Inputs: the synthetic 1,000-line file of transpile_throughput.py and the installed model files it
reads (torchvision's resnet.py and vision_transformer.py, transformers' modeling_bert.py), to JAX
and to Keras, at `--policy fp32` and `mixed`. `--wild NAME` (repeatable) adds cases of the wild
corpus (benchmarks/wild/: installed with its requirements), converted with their entry and
`prune_to_entry` as `corpus.py` does, once each and cold: sibling modules a checkout remembers
from earlier conversions are forgotten first, so each number is what one user's first
conversion of that model costs. `--wild-only` skips the other inputs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from transpile_throughput import real_files, synthetic_model  # noqa: E402

# One conversion per request line: {"path": ..., "to": ..., "policy": ...} -> {"seconds", "digest"}
WORKER = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
from precision_transpiler import transpile
from precision_transpiler import pipeline
for line in sys.stdin:
    job = json.loads(line)
    source = open(job["path"], encoding="utf-8").read()
    getattr(pipeline, "_CONVERTED_SIBLINGS", {}).clear()  # cold: nothing remembered from before
    entry = job.get("entry")
    start = time.perf_counter()
    result = transpile(
        source, to=job["to"], policy=job["policy"], path=job["path"], entry=entry, prune_to_entry=bool(entry)
    )
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(result.code.encode()).hexdigest()[:16]
    print(json.dumps({"seconds": seconds, "digest": digest}), flush=True)
"""


class Worker:
    """An interpreter that imports one checkout's package and converts what it is sent."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def convert(self, path: Path, to: str, policy: str, entry: str | None = None) -> tuple[float, str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        job = {"path": str(path), "to": to, "policy": policy, "entry": entry}
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer["seconds"], answer["digest"]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def _wild_cases(names: list[str]) -> list[tuple[str, Path, str]]:
    """(name, file, entry) of the named wild corpus cases."""
    if not names:
        return []
    from corpus import SUITES, load_cases, package_file

    cases = {case.name: case for case in load_cases(SUITES["wild"])}
    unknown = [name for name in names if name not in cases]
    if unknown:
        raise SystemExit(f"not a wild corpus case: {', '.join(unknown)}")
    return [(n, package_file(cases[n].package, cases[n].file), cases[n].entry) for n in names]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout (a git worktree)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/ptranspile-compare"))
    parser.add_argument("--wild", action="append", default=[], metavar="NAME", help="a wild corpus case, by name")
    parser.add_argument("--wild-only", action="store_true", help="only the --wild cases")
    args = parser.parse_args()
    if not (args.baseline / "precision_transpiler").is_dir():
        parser.error(f"{args.baseline}: not a checkout of this project")
    args.scratch.mkdir(parents=True, exist_ok=True)
    synthetic = args.scratch / "synthetic_1000.py"
    synthetic.write_text(synthetic_model(1000), encoding="utf-8")
    inputs = [] if args.wild_only else [synthetic, *real_files()]
    wild = _wild_cases(args.wild)
    this, baseline = Worker(HERE.parent), Worker(args.baseline)
    print("| input | target | policy | baseline median s | this median s | this / baseline | same output |")
    print("|---|---|---|---|---|---|---|")
    try:
        for name, path, entry in wild:  # once each, cold: a conversion takes a minute or more
            for to in ("jax", "tf"):
                theirs_s, digest_b = baseline.convert(path, to, "fp32", entry)
                mine_s, digest_a = this.convert(path, to, "fp32", entry)
                same = "yes" if digest_a == digest_b else "no"
                print(f"| {name} | {to} | fp32 | {theirs_s:.1f} | {mine_s:.1f} | {mine_s / theirs_s:.2f} | {same} |")
        for path in inputs:
            for to in ("jax", "tf"):
                for policy in ("fp32", "mixed"):
                    baseline.convert(path, to, policy)  # warm: tables, caches, first imports
                    this.convert(path, to, policy)
                    mine, theirs = [], []
                    digests = set()
                    for _ in range(args.repeat):
                        seconds, digest_b = baseline.convert(path, to, policy)
                        theirs.append(seconds)
                        seconds, digest_a = this.convert(path, to, policy)
                        mine.append(seconds)
                        digests.add((digest_a, digest_b))
                    a, b = statistics.median(mine), statistics.median(theirs)
                    same = "yes" if all(x == y for x, y in digests) else "no"
                    name = path.name if path != synthetic else "synthetic 1000-line file"
                    print(f"| {name} | {to} | {policy} | {b:.3f} | {a:.3f} | {a / b:.2f} | {same} |", flush=True)
    finally:
        this.close()
        baseline.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
