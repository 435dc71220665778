"""torch's NumPy-style keywords (`keyword_aliases` in mappings/frameworks.yaml, matched by
rewrite/templates.py): torch's argument parser takes `axis` for `dim` and `keepdims` for
`keepdim` (`mask.sum(axis=1)`, pytorchvideo), so the op patterns match them as the names they
alias. A keyword no pattern names stays a
mismatch (reported), and `axis` of a pattern that names `axis` itself is its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return y.sum(axis=1) + torch.mean(y, axis=-1, keepdims=False) + y.max(axis=1).values
"""


@pytest.mark.parametrize(("to", "ops"), [("jax", "jnp"), ("tf", "keras.ops")])
def test_numpy_keywords_match_torch_patterns(to: str, ops: str) -> None:
    result = transpile(SOURCE, to=to)
    assert not result.unsupported, result.unsupported
    assert f"{ops}.sum(y, axis=1)" in result.code and f"{ops}.mean(y, axis=-1, keepdims=False)" in result.code
    reported = transpile("import torch\n\n\ndef f(x: torch.Tensor):\n    return x.sum(axes=1)\n", to=to)
    assert reported.unsupported  # not an alias torch takes


@on_both_targets
def test_numpy_keywords_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,4]"], name="axis")
    assert verdict.passed, verdict
