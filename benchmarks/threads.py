"""One thread count for torch, TensorFlow and XLA, set before they start (benchmarks' --threads).

On a shared 2-core machine a framework running two threads stalls whenever the other core is
busy (measured: a small ViT forward in torch took 122 ms with 2 threads against 0.74 ms with 1),
and not every framework stalls alike, so ratios measured side by side mean more with one thread
each. TensorFlow and XLA read their settings when they start: call `limit_threads` first.
"""

from __future__ import annotations

import os


def limit_threads(n: int) -> None:
    """Run torch, TensorFlow and XLA (JAX) with `n` threads each; 0 leaves their defaults."""
    if n <= 0:
        return
    os.environ["TF_NUM_INTRAOP_THREADS"] = os.environ["TF_NUM_INTEROP_THREADS"] = str(n)
    flags = f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={n}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()
    import torch

    torch.set_num_threads(n)
