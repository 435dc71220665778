"""Huge input files: wall time and peak memory of `ptranspile FILE --to jax|tf` against file size.

Generates realistic torch model files of about 100 KB, 1 MB and 5 MB (many nn.Module classes
with nn.Linear / nn.Conv2d / nn.LayerNorm layers, forward methods with torch ops and
`.half()` / `.float()` casts, helper functions: varied blocks repeated under different names),
converts each in a fresh child process and prints a Markdown table: wall and CPU seconds, CPU
seconds per 100 KB, peak resident MB and MB per 100 KB. Conversion should be linear in the
file's size: the per-100 KB columns should stay flat down a target's rows. CPU seconds (user +
system) are the comparable number on a shared machine, where wall time also counts waiting.

Peak memory is the child's `ru_maxrss` (`resource.getrusage(RUSAGE_CHILDREN)` read in a fresh
intermediate process per measurement, so that no earlier child's peak is counted).

    python benchmarks/huge_files.py [--sizes 100k,1m,5m] [--targets jax,tf] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

HEADER = '''"""A generated model file: many blocks, for measuring conversion of huge inputs."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
'''

# Varied blocks; {i} makes every name unique.
BLOCKS = (
    '''

class MlpBlock{i}(nn.Module):
    """Two linear layers with a norm, computed in half precision."""

    def __init__(self, width: int = {w}, hidden: int = {h}) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width, bias=False)
        self.scale = torch.finfo(torch.float16).eps * width

    def forward(self, x):
        h = self.norm(x.float())
        h = F.gelu(self.fc1(h.half())).float()
        y = self.fc2(h) * self.scale
        return x + y.to(x.dtype)
''',
    '''

class ConvBlock{i}(nn.Module):
    """A conv stack with a residual connection."""

    def __init__(self, channels: int = {c}) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=1)
        self.act = nn.ReLU()

    def forward(self, x):
        h = self.act(self.conv1(x))
        h = self.conv2(h.half()).float()
        h = torch.clamp(h, min=-{w}.0, max={w}.0)
        return torch.relu(x + h)
''',
    '''

def scaled_softmax_{i}(scores, dim: int = -1):
    """Softmax in float32 whatever the input dtype."""
    scores = scores.float() / math.sqrt({w})
    weights = torch.softmax(scores, dim=dim)
    return weights.half()


def masked_mean_{i}(x, mask):
    total = torch.sum(x * mask, dim=1)
    count = torch.clamp(torch.sum(mask, dim=1), min=1.0)
    return (total / count).float()
''',
    '''

class Attention{i}(nn.Module):
    """Self-attention with the scores in float32."""

    def __init__(self, width: int = {w}, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width, eps=1e-5)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        scores = torch.matmul(q.float(), k.float().transpose(-2, -1))
        weights = scaled_softmax_{j}(scores)
        out = torch.matmul(weights, v.half())
        return self.proj(out.float()) + x
''',
    """

class Head{i}(nn.Module):
    def __init__(self, width: int = {w}, classes: int = {h}) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, classes)
        self.dropout = nn.Dropout(p=0.1)

    def forward(self, x):
        h = torch.flatten(self.pool(x), 1)
        h = self.dropout(h.float())
        logits = self.fc(h)
        return F.log_softmax(logits, dim=-1).half()
""",
)

SIZES = {"100k": 100 * 1024, "300k": 300 * 1024, "500k": 500 * 1024, "1m": 1024 * 1024, "5m": 5 * 1024 * 1024}


def generate(size: int) -> str:
    """A torch model file of about `size` bytes (at least one of each block)."""
    parts = [HEADER]
    total = len(HEADER)
    i = 0
    while total < size or i < len(BLOCKS):
        block = BLOCKS[i % len(BLOCKS)]
        group = i // len(BLOCKS)
        text = block.format(i=i, j=group * len(BLOCKS) + 2, w=32 + 8 * (i % 7), h=64 + 16 * (i % 5), c=3 + i % 13)
        parts.append(text)
        total += len(text)
        i += 1
    return "".join(parts)


_CHILD = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout={timeout})
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({{"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss,
                  "rc": proc.returncode, "err": proc.stderr[-400:]}}))
"""


def measure(path: Path, target: str, timeout: float) -> dict[str, object]:
    """Convert `path` in a fresh grandchild, measured by a fresh child (its RUSAGE_CHILDREN is
    that one conversion only)."""
    # --max-file-mb: the 5 MB file is over the default limit, which is what this measures for
    command = [sys.executable, "-m", "precision_transpiler", str(path), "--to", target, "--max-file-mb", "1000"]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD.format(timeout=timeout), *command],
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        return {"error": (child.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(child.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100k,1m,5m", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--targets", default="jax,tf", help="comma-separated, of jax, tf")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one conversion may take")
    parser.add_argument("--keep", type=Path, help="write the generated files to this folder")
    args = parser.parse_args()
    sizes = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)} (choose from {', '.join(SIZES)})")
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            path = folder / f"huge_{size}.py"
            path.write_text(generate(SIZES[size]), encoding="utf-8")
            kb = path.stat().st_size / 1024
            lines = path.read_text(encoding="utf-8").count("\n")
            for target in targets:
                result = measure(path, target, args.timeout)
                if "error" in result:
                    rows.append(f"| {size} | {kb:,.0f} | {lines:,} | {target} | failed: {result['error']} | | | | |")
                    continue
                per = kb / 100
                wall = float(result["wall"])  # type: ignore[arg-type]
                cpu = float(result["cpu"])  # type: ignore[arg-type]
                peak = int(result["maxrss_kb"]) / 1024  # type: ignore[call-overload]
                rc = result["rc"]
                note = "" if rc in (0, 1) else f" (exit {rc})"
                rows.append(
                    f"| {size} | {kb:,.0f} | {lines:,} | {target} | {wall:.1f}{note} | {cpu:.1f} | {cpu / per:.2f} "
                    f"| {peak:,.0f} | {peak / per:.1f} |"
                )
                print(rows[-1], file=sys.stderr, flush=True)
    print("## Huge files (`ptranspile FILE --to TARGET`, one fresh process each)\n")
    print("| size | KB | lines | target | wall s | CPU s | CPU s per 100 KB | peak MB | MB per 100 KB |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print(f"\nPython {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
