"""Speed of precision policies: forward time of the converted model / the fp32 original.

Measured side by side in one process (medians after warm-up), because absolute times on these
shared machines swing 2-4x. Targets on the project's CPU (issue 3): ResNet-18 batch 8 under
`--policy mixed` <= 0.5 of fp32.

    python benchmarks/policy_speed.py [--repeat N] [--batch N] [--size N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from precision_transpiler import transpile
from tests.real_models import import_torchvision, load_beside, package_file


def median_forward(model, batch, repeat: int) -> float:
    import torch

    with torch.no_grad():
        for _ in range(2):
            model(batch)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            model(batch)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()

    import torch

    import_torchvision()
    import torchvision.models.resnet as original

    path = package_file("torchvision", "models/resnet.py")
    rows = ["| model | variant | median s | ratio to fp32 |", "|---|---|---|---|"]
    converted = {
        policy: load_beside(
            transpile(path.read_text(), to="torch", policy=policy).code,
            "torchvision.models",
            f"_ptx_resnet_{policy.replace('-', '_')}",
        )
        for policy in ("mixed", "bf16")
    }
    batch = torch.randn(args.batch, 3, args.size, args.size)
    for arch in ("resnet18",):
        reference = getattr(original, arch)().eval()
        fp32 = median_forward(reference, batch, args.repeat)
        rows.append(f"| {arch} | fp32 original | {fp32:.3f} | 1.00 |")

        class Autocast(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return self.inner(x)

        t = median_forward(Autocast(reference), batch, args.repeat)
        rows.append(f"| {arch} | plain torch.autocast(cpu, bf16) | {t:.3f} | {t / fp32:.2f} |")
        for policy, module in converted.items():
            model = getattr(module, arch)().eval()
            model.load_state_dict(reference.state_dict())
            t = median_forward(model, batch, args.repeat)
            rows.append(f"| {arch} | ptranspile --policy {policy} | {t:.3f} | {t / fp32:.2f} |")
            cl = model.to(memory_format=torch.channels_last)
            t = median_forward(cl, batch.contiguous(memory_format=torch.channels_last), args.repeat)
            rows.append(f"| {arch} | ptranspile --policy {policy}, channels_last | {t:.3f} | {t / fp32:.2f} |")
    print(f"## Policy speed, batch {args.batch}x3x{args.size}x{args.size}, torch {torch.__version__}\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
