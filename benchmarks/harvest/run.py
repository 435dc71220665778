"""The run stage of the harvested corpus: convert and verify every frozen case, stage by stage.

harvest.py freezes what a package offers (benchmarks/harvest/cases/<package>.yaml); this converts
each runnable case to JAX and Keras at fp32 (or under `--policy mixed`, ...) with what the entry
reaches (`--prune-to-entry`, the way benchmarks/corpus.py does: `transpile(..., entry=,
prune_to_entry=True)` then `verify_files`) and records how far it got:

    converted        the converter reported no error
    imported         the converted file imported, and neither it nor anything it ran imported
                     torch (or torchvision, or the original package when its distribution
                     requires torch: a converted model that still needs torch is a failure
                     however close its numbers are)
    built            the entry expression built the converted model
    weights loaded   it took the original's weights
    verified         its outputs matched the original's within the policy's tolerance

A run that did not verify because the original's own outputs change from one seed to the next
(its forward draws random numbers: `VerificationResult.random_forward`) is recorded at stage
`verified` with `random_forward` set, and counted apart as *not comparable*: not unreported, and
not in the verified rate's denominator (the way trivial classes are left out of the harvest's).

Results go to a JSON file keyed by package version and converter commit
(`timm==1.0.31@1e7a56d`, `.../mixed` under another policy, `.../whole` for whole files), written after every case, so a
stopped run resumes where it stopped and a new converter commit starts a new column of results.

    python benchmarks/harvest/run.py [--split look|held_back|all] [--packages a,b] [--targets jax,tf]
                                     [--policy fp32|mixed|bf16|fp16] [--sample N --seed S]
                                     [--shard K/N]  # every N-th case from the K-th: N processes
                                     [--results FILE.json] [--markdown OUT.md]
                                     [--same-as EARLIER.json]  # the cases an earlier run ran
                                     [--whole-file]  # each case's whole file, not what its entry reaches
    python benchmarks/harvest/run.py --vendored     # the CI slice: benchmarks/harvest/vendored.yaml

`--vendored` runs every case of the packages copied into benchmarks/harvest/vendored/ from those
copies, with none of the harvest's packages installed (the test-suite runs it).
"""

from __future__ import annotations

import argparse
import builtins
import importlib.util
import json
import random
import signal
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402 - after the repository is on the path

from benchmarks.corpus import NOT_COMPARABLE, Case, Outcome, converter_commit, failure_stage, run_case  # noqa: E402
from benchmarks.harvest.harvest import CASES, DEFAULT_SITE, FIRST_CONTACT, in_split, load_packages  # noqa: E402
from precision_transpiler.analysis.load_imports import torch_distribution  # noqa: E402

STAGES = ("converted", "imported", "built", "weights loaded", "verified")
#: corpus.failure_stage -> the first of STAGES that was not reached
_FIRST_MISSED = {
    "conversion": "converted",
    "import": "imported",
    "build": "built",
    "weights": "weights loaded",
    "first call": "verified",
    "outputs": "verified",
    NOT_COMPARABLE: "verified",  # it ran to the end; only its values cannot be compared
    "other": "imported",  # not located: counted as failing early rather than late
}
CASE_LIMIT_S = 300
VENDORED = HERE / "vendored"
TORCH_LIKE = {"torch", "torchvision", "torchaudio"}


@dataclass
class Result:
    package: str
    version: str
    case: str  # the class's qualified name
    target: str
    stage: str = ""  # the first stage not reached ("" when verified)
    imports_torch: str = ""  # what the converted code imported that needs torch
    unsupported: int = 0  # constructs the conversion reported unsupported
    torch_at_load: int = 0  # imports it warned would still need torch when the output loads
    max_rel_err: float | None = None
    transpile_s: float = 0.0
    verify_s: float = 0.0
    problem: str = ""
    random_forward: bool = False  # the original's forward draws random numbers (absent in older files)
    original_nonfinite: bool = False  # every output of the original is NaN/inf (absent in older files)

    @property
    def not_comparable(self) -> bool:
        """Ran to the comparison, which failed because the original's own outputs change from one
        seed to the next, or are all NaN/inf: counted apart, neither verified nor a converter failure."""
        return (self.random_forward or self.original_nonfinite) and self.stage == "verified"

    def reached(self, stage: str) -> bool:
        return not self.stage or STAGES.index(stage) < STAGES.index(self.stage)

    @property
    def unreported(self) -> bool:
        """Converted without an error, failed later, and the conversion reported nothing
        unsupported: the converter should have said so (never silently wrong). Stricter than the
        wild corpus' count: a wrong number or a torch import with nothing reported counts too (a
        torch import the conversion warned of is reported)."""
        if self.stage == "imported" and self.imports_torch and self.torch_at_load:
            return False
        if self.not_comparable:
            return False
        return self.stage not in ("", "converted") and not self.unsupported


@contextmanager
def watch_imports(forbidden: set[str]) -> Any:
    """Record the imports that converted code (modules named `_ptranspile_converted_...`) makes
    of a forbidden top-level package, relative imports into the original package included."""
    seen: list[str] = []
    original = builtins.__import__

    def hooked(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        importer = (globals or {}).get("__name__", "")
        if "_ptranspile_converted_" in importer:
            full = name
            if level:
                try:
                    full = importlib.util.resolve_name("." * level + name, (globals or {}).get("__package__") or "")
                except (ImportError, ValueError):
                    full = name
            top = full.split(".")[0]
            runtime = "_ptranspile_runtime" in full  # the runtime module beside a converted file
            if top in forbidden and not runtime and full not in seen:
                seen.append(full)
        return original(name, globals, locals, fromlist, level)

    builtins.__import__ = hooked
    try:
        yield seen
    finally:
        builtins.__import__ = original


class CaseTimeout(BaseException):
    pass


@contextmanager
def limit(seconds: int) -> Any:
    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_one(
    document: dict[str, Any],
    case: dict[str, Any],
    target: str,
    policy: str = "fp32",
    vendored: bool = False,
    whole_file: bool = False,
) -> Result:
    """Convert and verify one case for one target under one policy (see the module docstring)."""
    result = Result(document["package"], str(document["version"]), case["class"], target)
    corpus_case = Case(case["class"], document["import"], case["file"], case["entry"], list(case["inputs"]))
    # the original package counts as torch when its distribution requires torch, as for the
    # verifier's torch-free check (analysis/load_imports.py): ncps, a torch and Keras package,
    # may stay imported for its pure-Python helpers (`ncps.wirings`); the vendored copies carry
    # no distribution metadata, and are torch code
    requires_torch = vendored or torch_distribution(document["import"])
    forbidden = TORCH_LIKE | ({document["import"]} if requires_torch else set())
    try:
        with limit(CASE_LIMIT_S), watch_imports(forbidden) as seen:
            outcome = run_case(corpus_case, target, policy, prune_to_entry=not whole_file)
    except CaseTimeout:
        outcome = Outcome(case["class"], target, policy, first_problem=f"over {CASE_LIMIT_S} s")
        outcome.converted = True  # unknown where: counted as failing at import (see _FIRST_MISSED)
    result.max_rel_err, result.transpile_s, result.verify_s = outcome.max_rel_err, outcome.transpile_s, outcome.verify_s
    result.problem = outcome.first_problem
    result.unsupported, result.torch_at_load = outcome.unsupported, outcome.torch_at_load
    result.random_forward = outcome.random_forward
    result.original_nonfinite = outcome.original_nonfinite
    result.stage = _FIRST_MISSED[failure_stage(outcome)] if not outcome.verified else ""
    if seen:
        result.imports_torch = ", ".join(seen)
        if not result.stage or STAGES.index(result.stage) > STAGES.index("imported"):
            result.stage = "imported"
            result.problem = f"the converted code imports {result.imports_torch}"
    return result


def select(
    split: str, packages: set[str], sample: int, seed: int, folder: Path = CASES
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(document, case) pairs of the chosen packages' runnable cases; a seeded sample of N if asked."""
    chosen = {p.distribution for p in load_packages() if in_split(p, split)}
    pairs = []
    for path in sorted(folder.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        if document["package"] in chosen and (not packages or document["package"] in packages):
            pairs += [(document, case) for case in document["cases"]]
    if sample and sample < len(pairs):
        pairs = random.Random(seed).sample(pairs, sample)
    return pairs


def sharded(pairs: list[Any], spec: str) -> list[Any]:
    """Every N-th of `pairs` from the K-th (`spec` "K/N", 0 <= K < N): N processes, each with a
    results file of its own, share a run and together run each case once."""
    shard, _, shards = spec.partition("/")
    if not (shard.isdigit() and shards.isdigit() and int(shard) < int(shards)):
        raise SystemExit(f"run.py: --shard {spec!r}: expected K/N with 0 <= K < N")
    return pairs[int(shard) :: int(shards)]


def table(results: list[Result]) -> str:
    """Per package and target: cases, how many reached each stage, how many were not comparable
    (the original's forward draws random numbers), how many failed with the torch rule, and how
    many failed with nothing reported unsupported while converting. The totals' verified rate
    leaves the not comparable runs out of its denominator."""
    rows = [
        "| package | to | cases | " + " | ".join(STAGES) + " | not comparable | imports torch | unreported |",
        "|---|---|---|" + "---|" * 8,
    ]
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.package, r.target), []).append(r)
    totals: Counter[str] = Counter()
    for (package, target), group in sorted(groups.items()):
        reached = [sum(r.reached(s) for r in group) for s in STAGES]
        apart = sum(r.not_comparable for r in group)
        torch_count = sum(bool(r.imports_torch) for r in group)
        silent = sum(r.unreported for r in group)
        cells = " | ".join(map(str, reached))
        rows.append(f"| {package} | {target} | {len(group)} | {cells} | {apart} | {torch_count} | {silent} |")
        totals.update({f"{target} {s}": n for s, n in zip(STAGES, reached, strict=True)})
        totals[f"{target} cases"] += len(group)
        totals[f"{target} not comparable"] += apart
        totals[f"{target} unreported"] += silent
    for target in sorted({r.target for r in results}):
        cases, apart = totals[f"{target} cases"], totals[f"{target} not comparable"]
        cells = " | ".join(_rate(totals[f"{target} {s}"], cases - apart if s == "verified" else cases) for s in STAGES)
        rows.append(f"| **all** | {target} | {cases} | {cells} | {apart} | | {totals[f'{target} unreported']} |")
    return "\n".join(rows) + "\n"


def _rate(count: int, of: int) -> str:
    return f"{count} ({count / of:.0%})" if of else f"{count} (-)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("look", "held_back", FIRST_CONTACT, "all"), default="look")
    parser.add_argument("--packages", default="", help="only these distributions (comma-separated)")
    parser.add_argument("--targets", default="jax,tf")
    parser.add_argument(
        "--policy", default="fp32", choices=("fp32", "mixed", "bf16", "fp16"), help="the precision policy (fp32)"
    )
    parser.add_argument("--sample", type=int, default=0, metavar="N", help="a seeded random sample of N cases")
    parser.add_argument("--seed", type=int, default=0, metavar="S")
    parser.add_argument(
        "--shard",
        default="0/1",
        metavar="K/N",
        help="every N-th case from the K-th (0-based): N processes, each with a results file of its own",
    )
    parser.add_argument("--site", default=DEFAULT_SITE)
    parser.add_argument("--cases", type=Path, default=CASES, help="the folder of case files")
    parser.add_argument("--results", type=Path, default=HERE / "results" / "run.json")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument(
        "--same-as", type=Path, metavar="RESULTS", help="only the cases an earlier results file ran (a before/after)"
    )
    parser.add_argument(
        "--whole-file",
        action="store_true",
        help="convert each case's whole file, as a user converting the file would, not what its entry reaches",
    )
    parser.add_argument(
        "--vendored", action="store_true", help="the CI slice: the cases of the packages in benchmarks/harvest/vendored"
    )
    args = parser.parse_args(argv)
    from tests.real_models import import_torchvision

    import_torchvision()  # the project's work-around, before any package imports torchvision
    packages = {p for p in args.packages.split(",") if p}
    if args.vendored:  # the copies first, whatever else is installed
        sys.path.insert(0, str(VENDORED))
        spec = yaml.safe_load((HERE / "vendored.yaml").read_text(encoding="utf-8"))
        packages, args.split = {item["distribution"] for item in spec["packages"]}, "all"
    else:
        sys.path.append(args.site)  # after the pinned stack
    commit = converter_commit()
    data = json.loads(args.results.read_text(encoding="utf-8")) if args.results.exists() else {}
    pairs = select(args.split, packages, args.sample, args.seed, args.cases)
    if args.same_as:
        earlier = json.loads(args.same_as.read_text(encoding="utf-8"))
        ran = {name.split("|")[0] for column in earlier.values() for name in column}
        pairs = [(d, c) for d, c in select("all", set(), 0, 0, args.cases) if c["class"] in ran]
    pairs = sharded(pairs, args.shard)
    results: list[Result] = []
    for document, case in pairs:
        policy = ("" if args.policy == "fp32" else f"/{args.policy}") + ("/whole" if args.whole_file else "")
        key = f"{document['package']}=={document['version']}@{commit}{policy}"
        column = data.setdefault(key, {})
        for target in args.targets.split(","):
            name = f"{case['class']}|{target}"
            if name not in column:
                started = time.perf_counter()
                column[name] = asdict(run_one(document, case, target, args.policy, args.vendored, args.whole_file))
                took = time.perf_counter() - started
                stage = f"not {column[name]['stage']}" if column[name]["stage"] else "verified"
                if Result(**column[name]).not_comparable:
                    stage = "not comparable"
                print(f"{name}: {stage} ({took:.1f} s) {column[name]['problem'][:120]}", file=sys.stderr, flush=True)
                args.results.parent.mkdir(parents=True, exist_ok=True)
                args.results.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
            results.append(Result(**column[name]))
    text = table(results)
    mode = ", whole files" if args.whole_file else ""
    print(f"Harvested corpus run, converter {commit}, policy {args.policy}{mode}, {len(pairs)} cases\n\n{text}", end="")
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
