"""Ivy's transpiler on the cases of cases.py: the baseline ptranspile is compared with.

Run it with the Python of Ivy's own environment (requirements.txt, made by setup.sh): Ivy
1.0.0.5's generated code does not run on the project's main stack.

    .venv-ivy/bin/python benchmarks/ivy_baseline/run_ivy.py [--cases mlp,cnn] [--targets jax,tf]
        [--timeout 300] [--json ivy.json] [--markdown ivy.md]

Every case and target runs in its own subprocess, in a fresh temporary folder (Ivy writes
`ivy_logs.txt`, a ruff cache and its translated packages into the working folder) and under a
timeout, so one hang or crash costs one row, not the run. The worker transpiles the torch class
with `ivy.transpile(cls, source="torch", target=...)`, counts what Ivy wrote, builds the
translated model, copies the torch weights in with `ivy.sync_models`, runs both on the same input
and compares. Failures are data: the first line of the error goes into the row.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cases as shared  # noqa: E402  (the folder is not a package; both runners import it by path)

IVY_TARGET = {"jax": "jax", "tf": "tensorflow"}  # ptranspile's target names -> Ivy's
OUTPUT_DIR = "ivy_transpiled_outputs/"  # relative: Ivy imports the result as a package of the cwd


def count_python(folder: Path) -> tuple[int, int]:
    """(.py files, lines) under a folder: the size of what Ivy generated."""
    files = sorted(folder.rglob("*.py")) if folder.is_dir() else []
    return len(files), sum(len(f.read_text(encoding="utf-8", errors="replace").splitlines()) for f in files)


def generated_class_source(folder: Path, cls: str) -> str:
    """The translated class's source (Ivy renames `MLP` to `jax_MLP`/`tensorflow_MLP`), looked up
    in the target framework's output folder only: the intermediate stages are not the result."""
    for path in sorted(folder.rglob("*.py")):
        found = shared.class_source(path.read_text(encoding="utf-8", errors="replace"), cls)
        if found:
            return found
    return ""


def worker(case_name: str, target: str) -> dict[str, Any]:
    """One case and target, in the current (temporary) folder. Never raises: errors become data."""
    case = shared.select(case_name)[0]
    row = shared.empty_result(case, target, "ivy")
    row["weights"] = "n/a"
    # Ivy imports what it wrote as a package of the working folder, which a script's sys.path lacks.
    sys.path.insert(0, os.getcwd())
    stage = "import ivy"
    try:
        import numpy as np

        with contextlib.redirect_stdout(io.StringIO()):  # Ivy animates a progress line on stdout
            import ivy

        stage = "load the torch model"
        cls = shared.load_class(case)
        torch_model, x = shared.build_torch(case)
        expected, row["lowp_effect"] = shared.torch_outputs(case, torch_model, x)
        row["torch_dtype"] = shared.dtype_name(expected)

        stage = "ivy.transpile"
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            translated = ivy.transpile(cls, source="torch", target=IVY_TARGET[target], output_dir=OUTPUT_DIR)
        row["transpile_s"] = round(time.perf_counter() - started, 2)
        row["transpiled"] = True
        out_root = Path(OUTPUT_DIR)
        row["files"], row["lines"] = count_python(out_root / f"{IVY_TARGET[target]}_outputs")
        row["files_all"], row["lines_all"] = count_python(out_root)
        row["markers"] = shared.markers_in(generated_class_source(out_root / f"{IVY_TARGET[target]}_outputs", case.cls))

        stage = "build the translated model"
        if target == "jax":
            import jax.numpy as jnp

            inputs = jnp.asarray(x)
        else:
            import tensorflow as tf

            inputs = tf.constant(x)
        model = translated()
        if hasattr(model, "eval"):
            model.eval()
        model(inputs)  # Keras layers create their weights on the first call

        stage = "ivy.sync_models"
        with contextlib.redirect_stdout(io.StringIO()):
            ivy.sync_models(torch_model, model)
        row["weights"] = "synced"
        if hasattr(model, "eval"):
            model.eval()

        stage = "run the translated model"
        output = model(inputs)
        row["ran"] = True
        row["out_dtype"] = shared.dtype_name(output)
        got, want = shared.to_float64(output), shared.to_float64(expected)
        if got.shape != want.shape:
            row["error"] = f"output shape {list(got.shape)} vs torch {list(want.shape)}"
            return row
        row["max_abs_err"] = float(np.max(np.abs(got - want)))
        row["rel_err"] = shared.rel_l2(got, want)
        dtype_ok = row["out_dtype"] == row["torch_dtype"]
        row["precision_kept"] = shared.precision_verdict(case, True, row["rel_err"], row["lowp_effect"], dtype_ok)
        row["passed"] = dtype_ok and row["rel_err"] <= 1e-5
    except BaseException as exc:  # anything Ivy or its output raises (SystemExit too) is the result
        row["error"] = f"{stage}: {type(exc).__name__}: {shared.first_line(str(exc))}"
        row["precision_kept"] = shared.precision_verdict(case, False, None, None, False)
    return row


def run_one(case: shared.Case, target: str, timeout: float) -> dict[str, Any]:
    """The worker for one case and target in a subprocess, in a fresh temporary folder."""
    env = dict(os.environ)
    # Ivy formats what it writes with `ruff`, found on PATH: the venv's bin comes first.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with tempfile.TemporaryDirectory(prefix=f"ivy_{case.name}_{target}_") as tmp:
        result_path = Path(tmp) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", case.name, target, str(result_path)]
        started = time.perf_counter()
        try:
            proc = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            row = shared.empty_result(case, target, "ivy")
            row.update(error=f"timed out after {timeout:.0f} s", weights="n/a")
            row["precision_kept"] = shared.precision_verdict(case, False, None, None, False)
            return row
        if result_path.is_file():
            row = json.loads(result_path.read_text(encoding="utf-8"))
        else:  # the worker died (a segfault, an abort in a framework)
            row = shared.empty_result(case, target, "ivy")
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()
            row["error"] = f"worker exited {proc.returncode}: {shared.first_line(tail[-1] if tail else '')}"
        row["wall_s"] = round(time.perf_counter() - started, 2)
        return row


def fmt(value: Any, spec: str = ".1e") -> str:
    """A table cell: '-' for nothing, numbers formatted."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def markdown(payload: dict[str, Any]) -> str:
    """One tool's results as a Markdown table (compare.py puts two side by side)."""
    header = f"{payload['tool']} run {payload['date']}, {payload['seconds']:.0f} s; " + ", ".join(
        f"{k} {v}" for k, v in payload["versions"].items()
    )
    rows = [
        header,
        "",
        "| case | to | transpiled | ran | rel L2 err | max abs err | transpile (s) | files / lines "
        "| precision kept | markers | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in payload["results"]:
        size = "-" if r["files"] is None else f"{r['files']} / {r['lines']}"
        rows.append(
            f"| {r['case']} | {r['target']} | {fmt(r['transpiled'])} | {fmt(r['ran'])} | {fmt(r['rel_err'])} "
            f"| {fmt(r['max_abs_err'])} | {fmt(r['transpile_s'], '.2f')} | {size} | {fmt(r['precision_kept'])} "
            f"| {', '.join(r['markers']) or '-'} | {r['error'].replace('|', '/')} |"
        )
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--targets", default=",".join(shared.TARGETS))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case and target")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--worker", nargs=3, metavar=("CASE", "TARGET", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        case_name, target, result = args.worker
        Path(result).write_text(json.dumps(worker(case_name, target), indent=2) + "\n", encoding="utf-8")
        return 0

    started = time.perf_counter()
    results = []
    for case in shared.select(args.cases):
        for target in args.targets.split(","):
            row = run_one(case, target, args.timeout)
            results.append(row)
            status = "ran" if row["ran"] else ("transpiled" if row["transpiled"] else "failed")
            message = f"ivy: {case.name} -> {target}: {status} ({row.get('wall_s', '-')} s) {row['error']}"
            print(message, file=sys.stderr, flush=True)
    payload = {
        "tool": "ivy",
        "date": time.strftime("%Y-%m-%d"),
        "seconds": round(time.perf_counter() - started, 1),
        "versions": shared.versions(),
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
