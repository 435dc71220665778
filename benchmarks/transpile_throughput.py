"""Transpile throughput: how fast `ptranspile` converts source, and how fast the CLI starts.

Prints a Markdown table. Targets (on the project's 2-core machine): a 1,000-line model
file in under 0.5 s; `ptranspile --help` and a small file's `--check` in under 0.3 s wall.
Times are medians of several runs measured in this one process (machines here are shared and
noisy: compare rows with each other, not with yesterday's numbers).

    python benchmarks/transpile_throughput.py [--repeat N] [--lines N]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BLOCK = '''

class Block{i}(torch.nn.Module):
    """A block that mixes precision the way training code does."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.scale = torch.finfo(torch.float16).eps * width
        self.dtype = torch.bfloat16

    def forward(self, x):
        # upcast for the norm, back down for the matmul
        h = x.float()
        if h.dtype is torch.float32:
            h = h * self.scale
        y = h.to(self.dtype)
        z = y.type_as(x) + torch.sigmoid(x)
        if not z.is_floating_point():
            z = z.to(torch.float32)
        return z.half(), z.element_size(), torch.get_default_dtype()
'''


def synthetic_model(lines: int) -> str:
    header = '"""Synthetic model file for the throughput benchmark."""\n\nimport numpy as np\nimport torch\n'
    parts = [header]
    i = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(BLOCK.format(i=i))
        i += 1
    return "".join(parts)


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def real_files() -> list[Path]:
    """Model files from installed packages, when they are installed (read as text only)."""
    found = []
    for module, rel in [
        ("torchvision", "models/resnet.py"),
        ("torchvision", "models/vision_transformer.py"),
        ("transformers", "models/bert/modeling_bert.py"),
    ]:
        spec = importlib.util.find_spec(module)
        if spec and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / rel
            if path.is_file():
                found.append(path)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--lines", type=int, default=1000)
    args = parser.parse_args()

    from precision_transpiler import transpile
    from precision_transpiler.mappings import load_mappings

    mappings = load_mappings()
    cases = [(f"synthetic {args.lines}-line torch file", synthetic_model(args.lines))]
    cases += [(f"{p.parent.name}/{p.name}", p.read_text()) for p in real_files()]
    rows = ["| input | lines | target | median s | lines/s | rewrites | unsupported |", "|---|---|---|---|---|---|---|"]
    for name, source in cases:
        n = source.count("\n")
        for target in ("jax", "tf"):
            transpile(source, to=target, mappings=mappings)  # warm the caches
            seconds = median_time(lambda s=source, t=target: transpile(s, to=t, mappings=mappings), args.repeat)
            result = transpile(source, to=target, mappings=mappings)
            rows.append(
                f"| {name} | {n} | {target} | {seconds:.3f} | {n / seconds:,.0f} | "
                f"{len(result.rewrites)} | {len(result.unsupported)} |"
            )
    print("## Transpile throughput (in-process, warm)\n")
    print("\n".join(rows))

    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small.py"
        small.write_text("import torch\n\n\ndef f(x):\n    return x.half()\n")
        big = Path(tmp) / "big.py"
        big.write_text(synthetic_model(args.lines))
        exe = [sys.executable, "-m", "precision_transpiler"]
        commands = [
            ("ptranspile --help", [*exe, "--help"]),
            ("ptranspile small.py --to jax --check", [*exe, str(small), "--to", "jax", "--check"]),
            (f"ptranspile big.py ({args.lines} lines) --to jax --check", [*exe, str(big), "--to", "jax", "--check"]),
        ]
        print("\n## Command wall time (new process each run)\n")
        print("| command | median s |\n|---|---|")
        for label, cmd in commands:
            seconds = median_time(lambda c=cmd: subprocess.run(c, capture_output=True, check=False), args.repeat)
            print(f"| {label} | {seconds:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
