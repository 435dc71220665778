"""torch.utils._pytree's `tree_flatten` / `tree_unflatten` / `tree_map` on the target's own trees
(runtime/*/containers.py: JAX's tree_util, Keras' `keras.tree`), torch's argument order kept
(`tree_unflatten(leaves, spec)`): hyper-connection code flattens a residual stream with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """from torch import nn
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        (first, *rest), spec = tree_flatten((x, {"b": x * 2}))
        out = tree_unflatten((self.lin(first), *rest), spec)
        doubled = tree_map(lambda t: t * 2, out)
        return doubled[0] + doubled[1]["b"]
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_pytree_helpers_are_the_runtimes(to: str) -> None:
    result = transpile(SOURCE, to=to)
    assert "import tree_flatten" not in result.code and not result.unsupported
    assert "torch_tree_unflatten((self.lin(first), *rest), spec)" in result.code


@on_both_targets
def test_flattened_streams_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,4]"], name="trees")
    assert verdict.passed, verdict
