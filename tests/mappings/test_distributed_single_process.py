"""torch.distributed's questions answered for one process (mappings/ops/tensor_ops.yaml `dist_*`).

Model code asks whether it runs in a process group (`dist.is_initialized()`), how many processes
there are and which one it is, to scale losses or gather across devices. A converted model runs
in one process: available (as torch's build is), not initialized, world size 1, rank 0, so the
code takes the path torch takes in a process that never joined a group, and the collectives
behind the guard (reported, kept inside the function) are never reached. Both targets verify,
torch-free.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch.distributed as dist
from torch import nn


def world():
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if dist.is_initialized():
            dist.all_reduce(y)
        rank = dist.get_rank(group=None) if dist.is_initialized() else 0
        return y * world() + rank
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_queries_become_single_process_answers(target: str) -> None:
    result = transpile(SOURCE, to=target)
    code = result.code
    assert "return 1 if True and False else 1" in code
    assert "rank = 0 if False else 0" in code
    # the collective stays, reported, in the function whose guard never holds
    assert [d.message.split(" has")[0] for d in result.diagnostics if d.severity == "unsupported"] == [
        "torch.distributed.all_reduce"
    ]
    assert code.index("import torch.distributed") > code.index("def ")  # not at module level


@on_both_targets
def test_guarded_distributed_code_verifies(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,4]"], name="dist_model")
    assert verdict.passed, verdict
