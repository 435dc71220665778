"""ptranspile on the cases of cases.py, with the columns of run_ivy.py, for the side-by-side.

Run it with the project's environment (torch, jax, flax, tensorflow, keras and the project):

    python benchmarks/ivy_baseline/ours.py [--cases mlp] [--targets jax,tf] [--out-dir DIR]
        [--json ours.json] [--markdown ours.md]

Per case and target this does what `ptranspile FILE --to T --entry CLS --prune-to-entry -o OUT
--verify --input SPEC --report-json R` does, through the library (`transpile`, then `verify_files` on the
written file): convert only what the entry class reaches, write it, and run the converted model
against the torch original on identical, perturbed weights. The transpile time is the
`transpile()` call alone (no framework is imported by it); the numbers come from the
verification. Failures are data: an unsupported construct or a verification error becomes the
row's first error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))  # the repository, when the project is not installed

import cases as shared  # noqa: E402  (the folder is not a package; both runners import it by path)
from run_ivy import markdown  # noqa: E402  (the same table layout as Ivy's run)


def run_case(case: shared.Case, target: str, out_dir: Path) -> dict[str, Any]:
    """Convert and verify one case; never raises (an exception is the row's error)."""
    from precision_transpiler import transpile
    from precision_transpiler.verify import VerifyOptions, verify_files

    row = shared.empty_result(case, target, "ptranspile")
    problems: list[str] = []
    try:
        source = case.file.read_text(encoding="utf-8")
        started = time.perf_counter()
        result = transpile(source, to=target, path=str(case.file), entry=f"{case.cls}()", prune_to_entry=True)
        row["transpile_s"] = round(time.perf_counter() - started, 2)
        row["transpiled"] = not result.errors
        row["files"] = row["files_all"] = 1
        row["lines"] = row["lines_all"] = len(result.code.splitlines())
        row["markers"] = shared.markers_in(shared.class_source(result.code, case.cls))
        flagged = [*result.errors, *(d for d in result.diagnostics if d.severity == "unsupported")]
        problems += [shared.first_line(d.format().replace(str(case.file.parent) + "/", "")) for d in flagged[:1]]
        if result.errors:
            row["error"] = "; ".join(problems)
            row["precision_kept"] = shared.precision_verdict(case, False, None, None, False)
            return row
        out = out_dir / f"{case.name}_{target}.py"
        out.write_text(result.code, encoding="utf-8")

        torch_model, x = shared.build_torch(case)
        expected, row["lowp_effect"] = shared.torch_outputs(case, torch_model, x)
        row["torch_dtype"] = shared.dtype_name(expected)
        options = VerifyOptions(entry=f"{case.cls}()", inputs=[case.input_spec], layers=False)
        verdict = verify_files(case.file, out, options)
        row["ran"] = True
        row["weights"] = "copied"  # verification copies the original's (perturbed) weights in
        row["passed"] = verdict.passed
        row["max_abs_err"], row["rel_err"] = verdict.max_abs_err, verdict.max_rel_err
        if verdict.outputs:
            row["out_dtype"] = verdict.outputs[0].dtype_converted
            row["torch_dtype"] = verdict.outputs[0].dtype_original
        if not verdict.passed:
            problems.append(shared.first_line("; ".join(verdict.failures) or "verification failed"))
        dtype_ok = row["out_dtype"] == row["torch_dtype"]
        rel_to_fp32 = None
        if case.precision:  # the same comparison against the original with its precision constructs off
            with shared.without_precision_constructs():
                plain = verify_files(case.file, out, options)
            rel_to_fp32 = plain.max_rel_err
            row["lowp_effect"] = verdict.tolerance.get("reference_err") or row["lowp_effect"]
        row["precision_kept"] = shared.precision_verdict(
            case, True, row["rel_err"], row["lowp_effect"], dtype_ok, rel_to_fp32
        )
    except Exception as exc:  # VerifyError and model errors alike: recorded, the run goes on
        problems.append(f"{type(exc).__name__}: {shared.first_line(str(exc))}")
        row["precision_kept"] = shared.precision_verdict(case, False, None, None, False)
    row["error"] = "; ".join(problems).replace(f"{out_dir}/", "")
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--targets", default=",".join(shared.TARGETS))
    parser.add_argument("--out-dir", type=Path, help="keep the converted files here (default: a temporary folder)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="ptranspile_ivy_baseline_") as tmp:
        out_dir = args.out_dir or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for case in shared.select(args.cases):
            for target in args.targets.split(","):
                row = run_case(case, target, out_dir)
                results.append(row)
                status = "verified" if row["passed"] else ("ran" if row["ran"] else "failed")
                print(f"ptranspile: {case.name} -> {target}: {status} {row['error']}", file=sys.stderr, flush=True)
    payload = {
        "tool": "ptranspile",
        "date": time.strftime("%Y-%m-%d"),
        "seconds": round(time.perf_counter() - started, 1),
        "versions": {**shared.versions(), **shared.versions(("precision_transpiler",))},
        "python": sys.executable,
        "results": results,
    }
    table = markdown(payload)
    print(table)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
