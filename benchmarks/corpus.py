"""Real-world corpus: convert and verify model files from installed packages, as they are.

For every case of a YAML list (benchmarks/corpus.yaml: package file, entry expression, inputs)
and every target framework and policy asked for, this converts what the entry reaches (what
`ptranspile FILE --to T --policy P --entry EXPR --prune-to-entry` does), then verifies the converted model against
the original on identical random weights and inputs (what `ptranspile verify` does). It prints a
Markdown table (per case and direction: converted, unsupported constructs, verified, error
against the tolerance, transpile time, the first diagnostic of a failure) and the overall rates,
and can write the same as JSON.

    python benchmarks/corpus.py [--quick] [--targets jax,tf] [--policies fp32,mixed] [--time N]
                                [--cases SUBSTRING] [--json OUT.json] [--markdown OUT.md]
                                [--suite corpus|wild] [--half dev|blind|all]

`--suite wild` reads benchmarks/wild/cases.yaml instead: real model code from 16 more sources
(pinned in benchmarks/wild/requirements.txt, `make bench-wild`), split by source into a
development and a blind half (`--half`; the blind half is measured only at the end). Its
summary also groups the outcomes per source, and a case whose package is not installed is
reported as "not installed" rather than as a conversion failure. `--vendored` runs only its CI
slice (the cases marked `ci`) from the copies in benchmarks/wild/vendored (benchmarks/wild/vendor.py
writes them), which is what the test-suite does without the packages installed.

With `--time N` it also reports, for every verified case, one forward of the original (torch
eager under no_grad), of the converted model (`jax.jit`, `tf.function`) and, under a mixed
policy, of the original under torch autocast, as ratios to the torch fp32 forward (medians of N
after warm-up, measured side by side in one process), and the parameter bytes ratio.

Failures are data, not crashes: an exception while converting or verifying a case is recorded
as that case's first diagnostic and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from precision_transpiler import transpile
from precision_transpiler.convert.runtime_module import RUNTIME_MODULES, runtime_module_source
from precision_transpiler.verify import VerifyOptions, verify_files

DEFAULT_CASES = Path(__file__).with_name("corpus.yaml")
SUITES = {"corpus": DEFAULT_CASES, "wild": Path(__file__).with_name("wild") / "cases.yaml"}
VENDORED = Path(__file__).with_name("wild") / "vendored"
NOT_INSTALLED = "not installed"
NOT_COMPARABLE = "not comparable"  # the failure stage of a run whose original draws random numbers


@dataclass
class Case:
    name: str
    package: str
    file: str
    entry: str
    inputs: list[str]
    quick: bool = False
    calibrate_bn: bool = False
    source: str | None = None  # the distribution the code comes from (the wild suite)
    half: str | None = None  # "dev" or "blind" (the wild suite: split by source)
    ci: bool = False  # the wild suite: part of the slice the test-suite runs from benchmarks/wild/vendored


@dataclass
class Outcome:
    case: str
    target: str
    policy: str
    converted: bool = False
    unsupported: int = 0
    torch_at_load: int = 0  # warnings that the output still imports torch when it loads
    verified: bool = False
    max_rel_err: float | None = None
    tolerance: float | None = None
    transpile_s: float = 0.0
    verify_s: float = 0.0
    lines_in: int = 0
    lines_out: int = 0
    first_problem: str = ""
    notes: list[str] = field(default_factory=list)
    # with --time N (verified cases): median seconds of one forward, measured side by side
    forward_original_s: float | None = None
    forward_converted_s: float | None = None
    forward_reference_s: float | None = None  # the original under torch autocast (mixed policies)
    param_bytes_original: int | None = None
    param_bytes_converted: int | None = None
    device_compute: str | None = None  # --device auto: the compute dtype the converted code chose where it ran
    #: a run that failed at a line of the converted file: whether the converter marked that
    #: statement unsupported (`# ptranspile: unsupported:` just above it); None when unknown
    failed_at_marked: bool | None = None
    #: the verification failed and the original's own outputs changed under another seed: its
    #: forward draws random numbers, so its values cannot be compared (VerificationResult.random_forward)
    random_forward: bool = False
    #: every output of the original is NaN/inf (VerificationResult.original_nonfinite): nothing to compare
    original_nonfinite: bool = False


def converter_commit() -> str:
    """The converter's commit (with `+` when the working tree has changes)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "precision_transpiler"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
    except OSError:
        return "unknown"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def load_cases(path: Path) -> list[Case]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [Case(**item) for item in data["cases"]]


def package_file(package: str, rel: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is not None and spec.origin and not spec.submodule_search_locations and spec.origin.endswith(".py"):
        return Path(spec.origin).parent / rel  # a single-module distribution: `rel` is the module file
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{package} is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / rel


def installed(package: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_case(
    case: Case, target: str, policy: str, timing: int = 0, runtime: str = "inline", prune_to_entry: bool = True
) -> Outcome:
    """Convert one case (what its entry reaches, or the whole file as a user converting the file
    would with `prune_to_entry=False`) and verify it torch-free."""
    outcome = Outcome(case.name, target, policy)
    if case.source is not None and not installed(case.package):
        outcome.first_problem = NOT_INSTALLED
        return outcome
    try:
        original = package_file(case.package, case.file)
        source = original.read_text(encoding="utf-8")
        outcome.lines_in = source.count("\n")
        start = time.perf_counter()
        result = transpile(
            source,
            to=target,
            policy=policy,
            path=str(original),
            entry=case.entry if prune_to_entry else None,
            prune_to_entry=prune_to_entry,
            runtime=runtime,
        )
        outcome.transpile_s = time.perf_counter() - start
    except Exception as exc:  # recorded, not raised: one broken case must not stop the corpus
        outcome.first_problem = f"conversion raised {type(exc).__name__}: {_short(str(exc))}"
        return outcome
    code, modules = result.code, {}
    if result.runtime_names:  # as `-o` writes it: the runtime in a module beside it
        modules = {RUNTIME_MODULES[target]: runtime_module_source(set(result.runtime_names), target)[0]}
    outcome.lines_out = code.count("\n")
    outcome.converted = not result.errors
    unsupported = [d for d in result.diagnostics if d.severity == "unsupported"]
    outcome.unsupported = len(unsupported)
    outcome.torch_at_load = sum(d.code == "torch-at-load" for d in result.diagnostics)
    problems = [*result.errors, *unsupported]
    if problems:
        outcome.first_problem = _short(problems[0].format().replace(str(original.parent) + "/", ""))
    if not outcome.converted:
        return outcome
    start = time.perf_counter()
    try:
        virtual = original.with_name(f"{original.stem}_ptranspile_corpus_{target}_{policy}.py")
        options = VerifyOptions(
            entry=case.entry,
            inputs=case.inputs,
            calibrate_bn=case.calibrate_bn,
            layers=False,
            timing=timing,
            torch_free=True,  # an output that needs torch at load fails, however close its numbers
        )
        options.modules = modules
        verdict = verify_files(original, virtual, options, converted_code=code)
        outcome.verified = verdict.passed
        outcome.random_forward = verdict.random_forward
        outcome.original_nonfinite = verdict.original_nonfinite
        if verdict.timing:
            outcome.forward_original_s = verdict.timing.get("original")
            outcome.forward_converted_s = verdict.timing.get("converted")
            outcome.forward_reference_s = verdict.timing.get("reference")
        if verdict.param_bytes:
            outcome.param_bytes_original = verdict.param_bytes.get("original")
            outcome.param_bytes_converted = verdict.param_bytes.get("converted")
        if verdict.device:
            outcome.device_compute = verdict.device.get("compute")
        outcome.max_rel_err = verdict.max_rel_err
        outcome.tolerance = verdict.tolerance.get("max_rel_err")
        if not verdict.passed:
            outcome.first_problem = _short("; ".join(verdict.failures) or "verification failed", 240)
    except Exception as exc:  # VerifyError and model errors alike
        if not outcome.verified:
            message = str(exc).replace(str(original.parent) + "/", "").replace(repr(case.entry), "ENTRY")
            outcome.first_problem = _short(f"{type(exc).__name__}: {message}", 240)
            outcome.failed_at_marked = failed_at_marked(message, virtual.name, code)
    outcome.verify_s = time.perf_counter() - start
    return outcome


def failed_at_marked(message: str, converted_name: str, code: str) -> bool | None:
    """Whether the converted file's line the failure names (`name.py:123: TypeError ...`) is a
    statement the converter marked unsupported: a `# ptranspile: unsupported:` comment on it or
    on the lines just above it (a marker stands above the statement it is about, which may span
    lines). None when the message names no line of the converted file."""
    found = re.search(re.escape(converted_name) + r":(\d+):", message)
    if found is None:
        return None
    lines = code.splitlines()
    number = int(found.group(1))
    nearby = lines[max(0, number - 6) : number]
    return any("# ptranspile: unsupported:" in line for line in nearby)


def _ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}"


def _site(text: str) -> str:
    """A diagnostic without the installation prefix of the package it names (shorter, and the same
    on every machine)."""
    return re.sub(r"\S*/site-packages/", "", text)


#: where a converted run failed, from its first problem: the converted file's import, building the
#: entry, the weights, the first forward call, or the comparison of the outputs
_STAGES = (
    ("import", ("cannot import the converted",)),
    ("build", ("--entry",)),
    ("weights", ("does not take the original's weights",)),
    ("first call", ("running the models failed",)),
    ("outputs", ("relative error", "dtype", "shape", "output structure", "non-finite", "to compare")),
)


def failure_stage(outcome: Outcome) -> str:
    """ "" for a verified run; else the stage it failed at: "conversion" (an error, or the converter
    raised), "not comparable" (it ran, but the original's forward draws random numbers or gives
    nothing but NaN/inf, and nothing else was wrong with the output's loading), one of _STAGES,
    or "other"."""
    if outcome.verified:
        return ""
    if not outcome.converted:
        return "conversion"
    if (outcome.random_forward or outcome.original_nonfinite) and not outcome.torch_at_load:
        return NOT_COMPARABLE
    for stage, marks in _STAGES:
        if any(mark in outcome.first_problem for mark in marks):
            return stage
    return "other"


def unreported(outcome: Outcome) -> bool:
    """A converted run that failed at import, build, weights or first call although the conversion
    reported nothing unsupported: the converter should have said so (never silently wrong)."""
    return failure_stage(outcome) in ("import", "build", "weights", "first call") and not outcome.unsupported


def unmarked(outcome: Outcome) -> bool:
    """A converted run that failed at import, build, weights or first call at a statement of the
    converted file that carries no `# ptranspile: unsupported:` marker, whatever else was
    reported: stricter than `unreported` (a failure inside code that a marked call runs, such as
    torch.fx tracing the converted functions, counts too)."""
    stage = failure_stage(outcome)
    return stage in ("import", "build", "weights", "first call") and outcome.failed_at_marked is False


def markdown(outcomes: list[Outcome], header: str, sources: dict[str, str] | None = None) -> str:
    """The tables; with `sources` (case name -> source: the wild suite) also one row per source."""
    timed = any(o.forward_original_s for o in outcomes)
    sized = any(o.param_bytes_original for o in outcomes)
    extra = " fwd torch (ms) | converted / torch | torch autocast / torch |" if timed else ""
    extra += " params converted / torch |" if sized else ""
    rows = [
        header,
        "",
        "| case | to | policy | converted | unsupported | verified | rel err / tolerance | transpile (s) |"
        + extra
        + " first diagnostic |",
        "|---|---|---|---|---|---|---|---|" + "---|" * extra.count("|") + "---|",
    ]
    for o in outcomes:
        err = "-" if o.max_rel_err is None else f"{o.max_rel_err:.1e} / {o.tolerance:.1e}"
        speed = ""
        if timed:
            base = o.forward_original_s
            speed = (
                f" {'-' if base is None else f'{base * 1e3:.1f}'} | {_ratio(o.forward_converted_s, base)} | "
                f"{_ratio(o.forward_reference_s, base)} |"
            )
        if sized:
            speed += f" {_ratio(o.param_bytes_converted, o.param_bytes_original)} |"
        rows.append(
            f"| {o.case} | {o.target} | {o.policy} | {'yes' if o.converted else 'no'} | {o.unsupported} | "
            f"{'yes' if o.verified else 'no'} | {err} | {o.transpile_s:.2f} |{speed} "
            f"{_site(o.first_problem).replace('|', '/')} |"
        )
    rows += [
        "",
        "converted: no error; clean: no unsupported construct reported either (in the file or in what it brings in);",
        "verified: the converted model matched the original within the policy's tolerance;",
        "unreported: failed at import, build, weights or first call with nothing reported unsupported.",
        "",
        "lines out / in: the converted file's lines over the source file's (median of the group; with",
        "--runtime module the runtime module beside it is not counted: it is written once per folder).",
        "",
        "| to | policy | cases | converted | clean | verified | unreported | lines out / in |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in dict.fromkeys((o.target, o.policy) for o in outcomes):
        group = [o for o in outcomes if (o.target, o.policy) == key]
        counts = [
            sum(o.converted for o in group),
            sum(o.converted and not o.unsupported for o in group),
            sum(o.verified for o in group),
        ]
        cells = " | ".join(f"{n} ({n / len(group):.0%})" for n in counts)
        sizes = sorted(o.lines_out / o.lines_in for o in group if o.converted and o.lines_in)
        size = f"{statistics.median(sizes):.2f}" if sizes else "-"
        rows.append(f"| {key[0]} | {key[1]} | {len(group)} | {cells} | {sum(map(unreported, group))} | {size} |")
    failed = [o for o in outcomes if not o.verified]
    if failed:
        stages = {stage: 0 for stage in ("conversion", *(s for s, _ in _STAGES), NOT_COMPARABLE, "other")}
        for o in failed:
            stages[failure_stage(o)] += 1
        shown = ", ".join(f"{stage} {n}" for stage, n in stages.items() if n)
        line = f"Failed runs by stage: {shown}; of these, unreported: {sum(map(unreported, failed))}"
        known = [o for o in failed if o.failed_at_marked is not None]
        if known:
            line += f"; at a statement not marked unsupported: {sum(map(unmarked, known))} of {len(known)} located"
        rows += ["", line + "."]
    if sources is not None:
        rows += per_source(outcomes, sources)
    return "\n".join(rows) + "\n"


def per_source(outcomes: list[Outcome], sources: dict[str, str]) -> list[str]:
    """Rows of the per-source summary: runs (cases x targets x policies), converted, verified, rate
    (verified / runs), and how many runs found the package not installed."""
    rows = [
        "",
        "Per source (runs: cases x targets x policies; rate: verified / runs):",
        "",
        "| source | cases | runs | converted | verified | rate | not installed |",
        "|---|---|---|---|---|---|---|",
    ]
    for source in dict.fromkeys(sources.get(o.case, "?") for o in outcomes):
        group = [o for o in outcomes if sources.get(o.case, "?") == source]
        cases = len({o.case for o in group})
        targets = len({o.target for o in group})
        policies = len({o.policy for o in group})
        verified = sum(o.verified for o in group)
        missing = sum(o.first_problem == NOT_INSTALLED for o in group)
        rows.append(
            f"| {source} | {cases} | {len(group)} ({cases} x {targets} x {policies}) | "
            f"{sum(o.converted for o in group)} | {verified} | {verified / len(group):.0%} | {missing} |"
        )
    return rows


def versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    import importlib.metadata as md

    found = {"python": platform.python_version()}
    for name in ("torch", "torchvision", "transformers", "jax", "flax", "keras", "tensorflow-cpu", *extra):
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-file", type=Path, default=None, help="the cases (default: the --suite's file)")
    parser.add_argument(
        "--suite",
        choices=sorted(SUITES),
        default="corpus",
        help="corpus: benchmarks/corpus.yaml (torchvision, transformers); wild: benchmarks/wild/cases.yaml "
        "(16 more sources, pinned in benchmarks/wild/requirements.txt)",
    )
    parser.add_argument(
        "--half",
        choices=("dev", "blind", "all"),
        default="all",
        help="wild suite only: the development half, the blind half (measure it only at the end) or both",
    )
    parser.add_argument("--quick", action="store_true", help="only the cases marked quick")
    parser.add_argument(
        "--vendored",
        action="store_true",
        help="wild suite only: the CI slice (cases marked ci), converted from the copies in "
        "benchmarks/wild/vendored instead of installed packages",
    )
    parser.add_argument("--cases", default="", help="only cases whose name contains one of these (comma-separated)")
    parser.add_argument("--targets", default="jax")
    parser.add_argument("--policies", default="fp32,mixed")
    parser.add_argument(
        "--time",
        type=int,
        default=0,
        metavar="N",
        help="also time one forward of the original, the converted model and (mixed) torch autocast: "
        "medians of N runs after warm-up, side by side in one process (torch eager, jax.jit, tf.function)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        metavar="N",
        help="run torch, TensorFlow and XLA with N threads each (0: their defaults). On a shared machine "
        "1 keeps a busy core from stalling one framework's timing more than another's",
    )
    parser.add_argument(
        "--runtime",
        choices=("inline", "module"),
        default="inline",
        help="verify each output as `-o` writes it with --runtime module (the runtime in a module beside it; "
        "lines out count the file alone) or self-contained (inline)",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the outcomes --json holds from this converter commit and run only the rest (a long run "
        "stopped and started again: the wild corpus takes hours on two shared cores)",
    )
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="only print (and --markdown) the tables of an earlier run's --json"
    )
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    wild = args.suite == "wild"
    if (args.half != "all" or args.vendored) and not wild:
        parser.error("--half and --vendored apply to --suite wild only")
    if args.render is not None:
        data = json.loads(args.render.read_text(encoding="utf-8"))
        versions_text = ", ".join(f"{k} {v}" for k, v in (data.get("versions") or {}).items())
        cases = len({o["case"] for o in data["outcomes"]})
        threads = f", {data['threads']} thread(s) per framework" if data.get("threads") else ""
        title = _title(data.get("suite", "corpus"), data.get("half", "all"))
        # results merged from several runs (each outcome with its `commit`) have no one duration
        took = f", {data['seconds']:.0f} s" if "seconds" in data else f" ({data['note']})" if "note" in data else ""
        header = f"{title} {data['date']}, {cases} cases{took}{threads}; {versions_text}"
        known = {f.name for f in fields(Outcome)}
        outcomes = [Outcome(**{k: v for k, v in o.items() if k in known}) for o in data["outcomes"]]
        table = markdown(outcomes, header, data.get("sources"))
        print(table)
        if args.markdown:
            args.markdown.write_text(table, encoding="utf-8")
        return 0

    from benchmarks.threads import limit_threads

    limit_threads(args.threads)  # before TensorFlow and JAX start
    from tests.real_models import import_torchvision

    import_torchvision()  # before transformers: torchvision's register_fake work-around
    wanted = [w for w in args.cases.split(",") if w] or [""]
    cases = [
        c
        for c in load_cases(args.cases_file or SUITES[args.suite])
        if (c.quick or not args.quick)
        and (c.ci or not args.vendored)
        and any(w in c.name for w in wanted)
        and args.half in ("all", c.half)
    ]
    if args.vendored:
        sys.path.insert(0, str(VENDORED))  # found before any installed copy of the same package
    sources = {c.name: c.source or "?" for c in cases} if wild else None
    extra = tuple(dict.fromkeys(c.source for c in cases if c.source)) if wild else ()
    outcomes: list[Outcome] = []
    commit = converter_commit()
    if args.resume and args.json and args.json.exists():
        earlier = json.loads(args.json.read_text(encoding="utf-8"))
        if earlier.get("commit") == commit:
            known = {f.name for f in fields(Outcome)}
            outcomes = [Outcome(**{k: v for k, v in o.items() if k in known}) for o in earlier["outcomes"]]
    done = {(o.case, o.target, o.policy) for o in outcomes}
    started = time.perf_counter()

    def save(elapsed: float) -> None:
        if args.json:
            payload = {
                "date": time.strftime("%Y-%m-%d"),
                "seconds": elapsed,
                "threads": args.threads,
                "versions": versions(extra),
                "commit": commit,
                "outcomes": [asdict(o) for o in outcomes],
            }
            if wild:
                payload.update(suite=args.suite, half=args.half, sources=sources)
            args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

    for case in cases:
        for target in args.targets.split(","):
            for policy in args.policies.split(","):
                if (case.name, target, policy) in done:
                    continue
                outcome = run_case(case, target, policy, args.time, args.runtime)
                outcomes.append(outcome)
                status = "verified" if outcome.verified else ("converted" if outcome.converted else "failed")
                print(f"{case.name} -> {target} {policy}: {status} {outcome.first_problem}", file=sys.stderr)
        save(time.perf_counter() - started)  # after each case: a run stopped early keeps what it measured
    elapsed = time.perf_counter() - started
    stamp = time.strftime("%Y-%m-%d")
    threads = f", {args.threads} thread(s) per framework" if args.threads > 0 else ""
    header = f"{_title(args.suite, args.half)} {stamp}, {len(cases)} cases, {elapsed:.0f} s{threads}; " + ", ".join(
        f"{k} {v}" for k, v in versions(extra).items()
    )
    table = markdown(outcomes, header, sources)
    print(table)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    save(elapsed)
    return 0


def _title(suite: str, half: str) -> str:
    if suite == "corpus":
        return "Corpus run"
    return f"Wild corpus run ({'both halves' if half == 'all' else f'{half} half'})"


if __name__ == "__main__":
    sys.exit(main())
