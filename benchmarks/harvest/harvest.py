"""The harvester: turn pinned torch packages into a corpus of runnable model classes, by rule.

The wild corpus (benchmarks/wild) is 168 hand-written cases; a hand-picked corpus says how the
converter does on what someone chose. This one is made without choosing: for each package of a
pinned list (benchmarks/harvest/packages.yaml) it

1. enumerates every torch.nn.Module subclass the package defines (discover.py; modules that fail
   to import are counted by reason, their classes found from their syntax);
2. builds each class from its defaults or small values chosen by rule from parameter names and
   annotations, and finds an input by rule from the first parametric layer (rules.py, build.py),
   in a worker process per package with time limits (worker.py);
3. classifies it: runnable (built, and one forward returned a tensor in under a second), trivial
   (no parameters and at most one submodule: reported, not counted in rates) or not buildable,
   by reason;
4. freezes the result into benchmarks/harvest/cases/<package>.yaml: the package version, and per
   class its qualified name, file (relative to the package), line, constructor expression (as
   evaluated in that file's namespace) and input specs (the syntax of `ptranspile verify
   --input`), with the counts by reason. These files are the corpus; run.py converts and
   verifies them.

    python benchmarks/harvest/harvest.py [--packages a,b] [--split look|held_back|all]
                                         [--site DIR] [--jobs N] [--limit N] [--markdown OUT.md]
    python benchmarks/harvest/harvest.py --summary      # the tables of the case files as they are
    python benchmarks/harvest/harvest.py --check-split  # packages.yaml's split follows its rule

The packages are installed with `pip install --no-deps --target DIR -r
benchmarks/harvest/requirements.txt` (`make bench-harvest`), and DIR goes on the path after the
project's own environment, so the pinned torch/JAX/TensorFlow stack is what runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PACKAGES = HERE / "packages.yaml"
CASES = HERE / "cases"
DEFAULT_SITE = os.environ.get("HARVEST_SITE", str(REPO / "build" / "harvest-site"))  # as `make bench-harvest`
SPLIT_SEED = 2026
DISCOVERY_LIMIT_S = 900  # importing a whole package
STALL_LIMIT_S = 45  # one class (its own alarms stop it after ~10 s; this catches C code that ignores them)


@dataclass
class Package:
    distribution: str
    version: str
    import_name: str
    domain: str
    split: str = ""


def load_packages(path: Path = PACKAGES) -> list[Package]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        Package(p["distribution"], str(p["version"]), p["import"], p["domain"], p.get("split", ""))
        for p in data["packages"]
    ]


#: packages added after the split, measured at first contact (see check_split)
FIRST_CONTACT = "first_contact"


def split_packages(distributions: list[str], seed: int = SPLIT_SEED) -> dict[str, str]:
    """The look / held_back split: sorted names shuffled by random.Random(seed), first half `look`."""
    order = sorted(distributions)
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    return {name: ("look" if i < half else "held_back") for i, name in enumerate(order)}


@dataclass
class PackageResult:
    package: Package
    modules: int = 0
    failed_modules: dict[str, str] = field(default_factory=dict)
    classes: list[list[Any]] = field(default_factory=list)  # [name, file, line] per imported class
    unimported: list[list[Any]] = field(default_factory=list)  # [module, qualname, file, line, reason]
    records: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> class record
    seconds: float = 0.0
    error: str = ""


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip().startswith("{") and line.strip().endswith("}")]


def _run_worker(pkg: Package, out: Path, start: int, site: str, limit: int, log: Path) -> str:
    """Run one worker from class `start`; "done", "died" or "stalled" (then killed)."""
    command = [sys.executable, str(HERE / "worker.py"), pkg.import_name, "--out", str(out), "--start", str(start)]
    command += ["--site", site, "--limit", str(limit)]
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env["PYTHONPATH"] = str(REPO)  # the harvested site is appended by the worker, after the pinned stack
    with log.open("a", encoding="utf-8") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=sink, env=env, cwd=REPO, start_new_session=True)
        seen, last_change, discovered = -1, time.monotonic(), False
        while proc.poll() is None:
            time.sleep(0.5)
            records = _read(out)
            if len(records) != seen:
                seen, last_change = len(records), time.monotonic()
                discovered = discovered or any(r["kind"] == "discovered" for r in records[-3:]) or start > 0
            limit_s = STALL_LIMIT_S if discovered else DISCOVERY_LIMIT_S
            if time.monotonic() - last_change > limit_s:
                os.killpg(proc.pid, 9)
                proc.wait()
                return "stalled"
    return "done" if any(r["kind"] == "done" for r in _read(out)) else "died"


def harvest_package(pkg: Package, site: str, limit: int = 0, keep: Path | None = None) -> PackageResult:
    """Harvest one package with as many workers as its crashes need (see worker.py)."""
    result = PackageResult(pkg)
    scratch = Path(tempfile.mkdtemp(prefix=f"harvest-{pkg.import_name}-"))
    out, log = scratch / "records.jsonl", (keep or scratch) / f"{pkg.import_name}.log"
    started, start = time.monotonic(), 0
    while True:
        status = _run_worker(pkg, out, start, site, limit, log)
        records = _read(out)
        discovered = [r for r in records if r["kind"] == "discovered"]
        if not discovered:
            result.error = f"the worker {status} before listing the classes (see {log})"
            break
        first = discovered[0]
        result.modules, result.failed_modules = first["modules"], first["failed"]
        result.classes, result.unimported = first["classes"], first["unimported"]
        result.records = {r["index"]: r for r in records if r["kind"] == "class"}
        if status == "done":
            break
        begun = [r["index"] for r in records if r["kind"] == "begin"]
        culprit = begun[-1] if begun else start
        if culprit in result.records:  # died between classes
            culprit += 1
            if culprit >= len(result.classes):
                break
        reason = "too slow" if status == "stalled" else "crashed"
        detail = f"the worker {status} on this class (killed after {STALL_LIMIT_S} s without progress)"
        if status == "died":
            detail = "the worker process died on this class (a crash, or over its memory limit)"
        result.records[culprit] = {"kind": "class", "index": culprit, "status": "not buildable", "reason": reason}
        result.records[culprit]["detail"] = detail
        with out.open("a", encoding="utf-8") as sink:
            sink.write(json.dumps(result.records[culprit]) + "\n")
        start = culprit + 1
        if start >= len(result.classes) or (limit and start >= limit):
            break
    result.seconds = time.monotonic() - started
    return result


_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_SITE_PATH = re.compile(r"\S*/(site-packages|harvest-site)/")


def stable(text: str) -> str:
    """A detail without what changes from machine to machine (install prefixes, addresses)."""
    return _ADDRESS.sub("0x…", _SITE_PATH.sub("", text))


def counts(result: PackageResult) -> dict[str, Any]:
    """found, runnable, trivial, not buildable by reason (import errors included), and the rate."""
    reasons: Counter[str] = Counter()
    runnable = trivial = 0
    for index in range(len(result.classes)):
        record = result.records.get(index)
        if record is None:
            reasons["not tried"] += 1
        elif record["status"] == "runnable":
            runnable += 1
        elif record["status"] == "trivial":
            trivial += 1
        else:
            reasons[record["reason"]] += 1
    reasons["import error"] += len(result.unimported)
    found = len(result.classes) + len(result.unimported)
    counted = found - trivial
    return {
        "found": found,
        "runnable": runnable,
        "trivial": trivial,
        "not_buildable": sum(reasons.values()),
        "rate": round(runnable / counted, 3) if counted else 0.0,
        "reasons": dict(sorted(((k, v) for k, v in reasons.items() if v), key=lambda kv: (-kv[1], kv[0]))),
    }


def case_document(result: PackageResult, date: str, versions: dict[str, str]) -> dict[str, Any]:
    """The case file's content (see the module docstring); sorted by file and line as found."""
    pkg = result.package
    cases, trivial, unbuildable = [], [], []
    for index, (name, file, line) in enumerate(result.classes):
        record = result.records.get(index, {"status": "not buildable", "reason": "not tried", "detail": ""})
        item: dict[str, Any] = {"class": name, "file": file, "line": line}
        if record["status"] == "not buildable":
            item.update(reason=record["reason"], detail=stable(record.get("detail", "")))
            unbuildable.append(item)
            continue
        item.update(entry=record["entry"], inputs=record["inputs"], params=record["params"], how=record["how"])
        (cases if record["status"] == "runnable" else trivial).append(item)
    for module, qualname, file, line, reason in result.unimported:
        unbuildable.append(
            {"class": f"{module}.{qualname}", "file": file, "line": line, "reason": "import error", "detail": reason}
        )
    return {
        "package": pkg.distribution,
        "version": pkg.version,
        "import": pkg.import_name,
        "domain": pkg.domain,
        "split": pkg.split,
        "harvested": {"date": date, **versions},
        "summary": {
            **counts(result),
            "modules": result.modules,
            "modules_failed": dict(Counter(result.failed_modules.values()).most_common()),
        },
        "cases": cases,
        "trivial": trivial,
        "not_buildable": unbuildable,
    }


def write_cases(document: dict[str, Any], folder: Path = CASES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{document['package']}.yaml"
    header = (
        f"# Harvested corpus: {document['package']} {document['version']}, written by "
        "benchmarks/harvest/harvest.py (do not edit by hand: re-run it).\n"
        "# cases: runnable classes (entry: evaluated in the namespace of `file`; inputs: `ptranspile verify "
        "--input` specs);\n# trivial: no parameters and at most one submodule (not counted in rates); "
        "not_buildable: by reason.\n"
    )
    text = yaml.safe_dump(document, sort_keys=False, width=200, allow_unicode=True)
    path.write_text(header + text, encoding="utf-8")
    return path


def summary_table(documents: list[dict[str, Any]]) -> str:
    """The Markdown table of counts per package and the totals."""
    reasons = sorted({r for d in documents for r in d["summary"]["reasons"]})
    rows = [
        "| package | version | domain | split | modules (failed) | classes | runnable | trivial | not buildable "
        "| rate |" + "".join(f" {r} |" for r in reasons),
        "|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(reasons),
    ]
    total: Counter[str] = Counter()
    for d in documents:
        s = d["summary"]
        failed = sum(s["modules_failed"].values())
        rows.append(
            f"| {d['package']} | {d['version']} | {d['domain']} | {d['split']} | {s['modules']} ({failed}) | "
            f"{s['found']} | {s['runnable']} | {s['trivial']} | {s['not_buildable']} | {s['rate']:.0%} |"
            + "".join(f" {s['reasons'].get(r, 0)} |" for r in reasons)
        )
        total.update({k: s[k] for k in ("found", "runnable", "trivial", "not_buildable", "modules")})
        total.update({f"reason {r}": n for r, n in s["reasons"].items()})
        total["modules failed"] += failed
    counted = total["found"] - total["trivial"]
    rate = total["runnable"] / counted if counted else 0.0
    rows.append(
        f"| **all ({len(documents)})** | | | | {total['modules']} ({total['modules failed']}) | {total['found']} | "
        f"**{total['runnable']}** | {total['trivial']} | {total['not_buildable']} | {rate:.0%} |"
        + "".join(f" {total[f'reason {r}']} |" for r in reasons)
    )
    return "\n".join(rows) + "\n"


def versions() -> dict[str, str]:
    import importlib.metadata as md
    import platform

    found = {"python": platform.python_version()}
    for name in ("torch", "torchvision", "numpy"):
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return found


def check_split(packages: list[Package]) -> list[str]:
    """Packages whose `split` differs from the rule's (empty when packages.yaml follows it).

    Packages added after the split (`split: first_contact`) are outside the rule: each was measured
    once at first contact, before any fix made for it, and may be looked at afterwards."""
    ruled = [p for p in packages if p.split != FIRST_CONTACT]
    expected = split_packages([p.distribution for p in ruled])
    return [
        f"{p.distribution}: {p.split!r}, the rule says {expected[p.distribution]!r}"
        for p in ruled
        if p.split != expected[p.distribution]
    ]


def in_split(package: Package, split: str) -> bool:
    """Whether `--split SPLIT` chooses the package (first-contact packages count as `look` too)."""
    return split in ("all", package.split) or (split == "look" and package.split == FIRST_CONTACT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", default="", help="only these distributions (comma-separated)")
    parser.add_argument("--split", choices=("look", "held_back", FIRST_CONTACT, "all"), default="all")
    parser.add_argument("--site", default=DEFAULT_SITE, help="where the packages are installed (pip --target)")
    parser.add_argument("--jobs", type=int, default=1, help="packages harvested at once (one process each)")
    parser.add_argument("--limit", type=int, default=0, help="at most N classes per package (a quick look)")
    parser.add_argument("--out", type=Path, default=CASES, help="folder of the case files")
    parser.add_argument("--logs", type=Path, default=None, help="keep the workers' output in this folder")
    parser.add_argument("--markdown", type=Path, help="also write the summary table here")
    parser.add_argument("--summary", action="store_true", help="only print the table of the case files in --out")
    parser.add_argument("--check-split", action="store_true", help="check packages.yaml's split against its rule")
    args = parser.parse_args(argv)
    packages = load_packages()
    if args.check_split:
        wrong = check_split(packages)
        print("\n".join(wrong) or f"the split follows the rule ({len(packages)} packages)")
        return 1 if wrong else 0
    wanted = {w for w in args.packages.split(",") if w}
    chosen = [p for p in packages if (not wanted or p.distribution in wanted) and in_split(p, args.split)]
    if args.summary:
        documents = [yaml.safe_load(f.read_text(encoding="utf-8")) for f in sorted(args.out.glob("*.yaml"))]
        order = {p.distribution: i for i, p in enumerate(chosen)}  # packages.yaml's order
        documents = sorted((d for d in documents if d["package"] in order), key=lambda d: order[d["package"]])
        print(summary_table(documents), end="")
        return 0
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    date, stack = time.strftime("%Y-%m-%d"), versions()

    def one(pkg: Package) -> dict[str, Any]:
        result = harvest_package(pkg, args.site, args.limit, args.logs)
        document = case_document(result, date, stack)
        if result.error:
            document["error"] = result.error
        path = write_cases(document, args.out)
        s = document["summary"]
        print(
            f"{pkg.distribution}: {s['found']} classes, {s['runnable']} runnable, {s['trivial']} trivial, "
            f"{s['not_buildable']} not buildable {s['reasons']} in {result.seconds:.0f} s -> {path.name}"
            + (f" [{result.error}]" if result.error else ""),
            file=sys.stderr,
            flush=True,
        )
        return document

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        documents = list(pool.map(one, chosen))
    table = summary_table(documents)
    print(table, end="")
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
