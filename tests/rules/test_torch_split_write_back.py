"""Chunks of `x.split(size, dim)` changed in place in a loop are written back into `x`
(rules/torch_split_write_back_model.py, analysis/split_chunks.py): memory-efficient-attention's
flash attention accumulates into row blocks of its output through those views, and converted,
the output stayed zero. The no-op cases are loops the write-back cannot be sure of."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

BLOCKWISE = """import torch
from torch import nn


class Blockwise(nn.Module):
    def __init__(self, d=8, bucket=2):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.bucket = bucket

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        o = torch.zeros_like(q)
        row_sums = torch.zeros(*q.shape[:-1], 1)
        row_splits = zip(q.split(self.bucket, dim=-2), o.split(self.bucket, dim=-2), row_sums.split(self.bucket, -2))
        for ind, (qc, oc, sums) in enumerate(row_splits):
            for kc, vc in zip(k.split(self.bucket, dim=-2), v.split(self.bucket, dim=-2)):
                w = torch.exp(qc @ kc.transpose(-1, -2))
                oc.mul_(1.0).add_(w @ vc)
                sums.add_(w.sum(-1, keepdim=True))
            oc.div_(sums)
        for chunk in o.split(3, dim=1):  # no counter: one is added
            chunk += 1.0
        for part in torch.zeros_like(o).split(2):  # not a name split: nothing to write back into
            part.add_(1.0)
        return o, row_sums
"""


def test_the_loops_write_their_chunks_back() -> None:
    code = transpile(BLOCKWISE, to="jax").code
    assert "            o = torch_write_split(o, oc, ind, self.bucket, -2)\n" in code
    assert "            row_sums = torch_write_split(row_sums, sums, ind, self.bucket, -2)\n" in code
    assert "for chunk_index, chunk in enumerate(torch_split(o, 3, 1)):" in code
    assert "            o = torch_write_split(o, chunk, chunk_index, 3, 1)\n" in code
    assert code.count("torch_write_split(") == 4  # the definition and three write-backs
    result = transpile(BLOCKWISE, to="tf")
    assert not [d for d in result.diagnostics if d.code == "inplace-alias"]


@on_both_targets
def test_written_back_chunks_give_torchs_values(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, BLOCKWISE, target, "Blockwise()", ["float32[2,5,8]"], name="blockwise")
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize(
    "loop",
    [
        "for c in o.split([1, 2], dim=-1):\n        c.add_(1.0)\n",  # sizes of their own
        "for c in o.split(2, dim=d):\n        c.add_(1.0)\n",  # a dim not written out
        "for c in o.split(2, dim=-1):\n        c.add_(1.0)\n        if c.sum() > 0:\n            return o\n",  # returns
        "for c in o.split(2, dim=-1):\n        y = c + 1.0\n",  # nothing changed in place
        "for c in o.split(len(x), dim=-1):\n        c.add_(1.0)\n",  # a size computed by a call
        "for c in o.split(2, dim=-1):\n        c.add_(1.0)\n        o = x\n",  # the source rebound
        "for c in o.split(2, dim=-1):\n        c.add_(1.0)\n        o.mul_(2.0)\n",  # the source changed
        "for c in o.split(2, dim=-1):\n        c = c * 2\n        c.add_(1.0)\n",  # the chunk rebound
    ],
    ids=[
        "sections",
        "dim-name",
        "return",
        "not-changed",
        "size-call",
        "source-rebound",
        "source-changed",
        "chunk-rebound",
    ],
)
def test_loops_left_as_they_are(loop: str) -> None:
    source = f"import torch\n\n\ndef f(o: torch.Tensor, x, d: int):\n    {loop}    return o\n"
    result = transpile(source, to="jax")
    assert "torch_write_split" not in result.code
    assert not [r for r in result.rewrites if r.rule == "torch-split-write-back"]


LEAVING = """import torch
from torch import nn


class Ring(nn.Module):
    def __init__(self, skip=True):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.skip = skip

    def forward(self, x):
        o = torch.zeros_like(x)
        for i, (oc, xc) in enumerate(zip(o.split(2, dim=1), x.split(2, dim=1))):
            if self.skip and i == 1: continue
            oc.add_(self.lin(xc))
            for inner in range(2):
                if inner:
                    break  # the inner loop's own: nothing written back there
            if i == 2:
                break
        return o
"""


def test_continue_and_break_write_the_chunks_back_first() -> None:
    # ring-attention's flash attention skips blocks with `if causal: ... continue`: every
    # chunk's changes were lost, and the output was 0 / 0
    code = transpile(LEAVING, to="jax").code
    assert code.count("o = torch_write_split(o, oc, i, 2, 1)") == 3, code
    assert (
        "if self.skip and i == 1:\n                o = torch_write_split(o, oc, i, 2, 1)\n                continue"
        in code
    )


@on_both_targets
def test_loops_left_early_give_torchs_values(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, LEAVING, target, "Ring()", ["float32[2,8,4]"], name="ring")
    assert verdict.passed, verdict.failures
