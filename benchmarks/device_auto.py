"""`--device auto` speed: forward time of `--policy mixed` over fp32, with and without bf16 kernels.

Runs corpus cases (benchmarks/corpus.py, `--time N`) twice, each in a fresh process:

* as this CPU is;
* with the frameworks' CPU kernels capped below bf16 (`ONEDNN_MAX_CPU_ISA=AVX2`,
  `ATEN_CPU_CAPABILITY=avx2`: what torch, TensorFlow and oneDNN do on a CPU without AVX512-BF16
  or AMX), where the generated code's `--device auto` decision computes in float32.

and prints, per case and target, the converted model's forward time under `--policy mixed`
divided by the fp32 conversion's (medians of N after warm-up, each pair measured in the same
process; ratios, because these shared machines swing 2-4x in absolute time), plus torch's own
autocast over torch fp32 for comparison. The decision itself is in each row: what the generated
code chose where it ran.

    python benchmarks/device_auto.py [--cases resnet18,vit] [--targets torch,jax,tf] [--time N]
                                     [--threads N] [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# TF_ENABLE_ONEDNN_OPTS=0: under a capped ISA, TensorFlow still picks oneDNN bf16 kernels (it reads
# the CPU's flags) that the capped oneDNN refuses, a crash no real CPU meets; its Eigen kernels run.
CAPPED = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "TF_ENABLE_ONEDNN_OPTS": "0"}


def run_corpus(env: dict[str, str], args: argparse.Namespace, out: Path) -> dict[str, object]:
    environ = {k: v for k, v in os.environ.items() if k not in ("PTRANSPILE_COMPUTE_DTYPE", *CAPPED)}
    environ.update(env, TF_CPP_MIN_LOG_LEVEL="3")
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "corpus.py"),
        "--cases",
        args.cases,
        "--targets",
        args.targets,
        "--policies",
        "fp32,mixed",
        "--time",
        str(args.time),
        "--threads",
        str(args.threads),
        "--json",
        str(out),
    ]
    subprocess.run(command, cwd=ROOT, env=environ, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text(encoding="utf-8"))


def ratios(data: dict[str, object]) -> dict[tuple[str, str], dict[str, object]]:
    """(case, target) -> mixed/fp32 of the converted forward, torch autocast/fp32, verified."""
    rows: dict[tuple[str, str], dict[str, dict[str, object]]] = {}
    for outcome in data["outcomes"]:  # type: ignore[union-attr]
        rows.setdefault((outcome["case"], outcome["target"]), {})[outcome["policy"]] = outcome
    table: dict[tuple[str, str], dict[str, object]] = {}
    for key, by_policy in rows.items():
        fp32, mixed = by_policy.get("fp32"), by_policy.get("mixed")
        if not fp32 or not mixed or not fp32.get("forward_converted_s") or not mixed.get("forward_converted_s"):
            table[key] = {"mixed": None, "autocast": None, "verified": False, "decision": "-"}
            continue
        autocast = mixed.get("forward_reference_s")
        base = mixed.get("forward_original_s")
        table[key] = {
            "mixed": mixed["forward_converted_s"] / fp32["forward_converted_s"],
            "autocast": autocast / base if autocast and base else None,
            "verified": bool(mixed["verified"] and fp32["verified"]),
            "decision": mixed.get("device_compute") or "-",
        }
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="resnet18,vit (2 layers),bert,mobilenet_v2")
    parser.add_argument("--targets", default="torch,jax,tf")
    parser.add_argument("--time", type=int, default=10, metavar="N")
    parser.add_argument("--threads", type=int, default=0, metavar="N")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from precision_transpiler.runtime.device import cpu_has_bf16

    native = cpu_has_bf16()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            f"this CPU ({'with' if native else 'without'} bf16 kernels)": run_corpus({}, args, Path(tmp) / "a.json"),
            "kernels capped to AVX2 (no bf16 kernels)": run_corpus(CAPPED, args, Path(tmp) / "b.json"),
        }
    tables = {label: ratios(data) for label, data in runs.items()}
    labels = list(tables)
    keys = sorted({key for table in tables.values() for key in table})
    heads = " | ".join(f"{label}: mixed/fp32 (decided) | torch autocast/fp32" for label in labels)
    lines = [
        f"| case | target | {heads} |",
        "|---|---|" + "---|---|" * len(labels),
    ]
    worst: dict[str, float] = {}
    for case, target in keys:
        cells = []
        for label in labels:
            row = tables[label].get((case, target), {})
            mixed, autocast = row.get("mixed"), row.get("autocast")
            mark = "" if row.get("verified") else " (not verified)"
            cells.append(f"{mixed:.2f} ({row.get('decision')}){mark}" if mixed else "-")
            cells.append(f"{autocast:.2f}" if autocast and target == "torch" else "-")
            if isinstance(mixed, float):
                worst[label] = max(worst.get(label, 0.0), mixed)
        lines.append(f"| {case} | {target} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\n" + "\n".join(f"- worst mixed/fp32, {k}: {v:.2f}" for k, v in worst.items()) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
