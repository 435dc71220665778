"""torch.nn.ParameterList and ParameterDict convert to the runtime's containers
(runtime/flax/containers.py, runtime/keras/containers.py): entries are parameters under torch's
names (`b.0`, `scale.a`), so the weights load and the converted model computes what torch does."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

CROSS = """import torch
from torch import nn


class CrossNetwork(nn.Module):
    def __init__(self, input_dim=4, num_layers=2):
        super().__init__()
        self.num_layers = num_layers
        self.w = nn.ModuleList([nn.Linear(input_dim, 1, bias=False) for _ in range(num_layers)])
        self.b = nn.ParameterList([nn.Parameter(torch.zeros((input_dim,))) for _ in range(num_layers)])
        self.extra = nn.ParameterList()
        self.extra.append(nn.Parameter(torch.ones(input_dim)))
        self.scale = nn.ParameterDict({"a": nn.Parameter(torch.ones(input_dim))})

    def forward(self, x):
        x0 = x
        for i in range(self.num_layers):
            x = x0 * self.w[i](x) + self.b[i] + x
        for p in self.extra:
            x = x * p
        return x * self.scale["a"] + len(self.b) + ("a" in self.scale)
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_parameter_containers_load_torch_weights_and_verify(tmp_path: Path, target: str) -> None:
    original = tmp_path / "cross.py"
    original.write_text(CROSS, encoding="utf-8")
    result = transpile(CROSS, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = tmp_path / f"cross_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    options = VerifyOptions(entry="CrossNetwork()", inputs=["float32[2,4]"], torch_free=True)
    verdict = verify_files(original, converted, options)
    assert verdict.passed, verdict.failures


def test_the_containers_index_slice_and_name_like_torch() -> None:
    import jax.numpy as jnp
    from flax import nnx

    from precision_transpiler.runtime.flax.containers import ParameterDict, ParameterList

    params = ParameterList([jnp.ones(2), nnx.Param(jnp.zeros(2))])
    params.append(jnp.full(2, 2.0))
    assert len(params) == 3 and len(params[1:]) == 2 and float(params[-1][0]) == 2.0
    table = ParameterDict({"k": jnp.ones(1)})
    table["m"] = jnp.zeros(1)
    assert "m" in table and "x" not in table
    holder = nnx.Dict({"p": params, "t": table})
    paths = sorted(".".join(map(str, path)) for path, v in nnx.iter_graph(holder) if isinstance(v, nnx.Param))
    assert paths == ["p.0", "p.1", "p.2", "t.k", "t.m"]


NESTED = """import torch
from torch import nn
from torch.nn import Parameter, ParameterList


class Nested(nn.Module):
    def __init__(self, dim=4, depth=2):
        super().__init__()
        weights = []
        for _ in range(depth):
            weights.append(ParameterList([Parameter(torch.randn(dim, dim * 2)), Parameter(torch.randn(dim * 2, dim))]))
        self.weights = ParameterList(weights)

    def forward(self, x):
        for w1, w2 in self.weights:
            x = (x @ w1).relu() @ w2 + x
        return x
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_parameter_list_of_parameter_lists_holds_them_as_torch_does(tmp_path: Path, target: str) -> None:
    """titans' per-layer weights: torch keeps a Module entry of a ParameterList as a submodule
    (`weights.1.0`), it does not wrap it in a Parameter."""
    original = tmp_path / "nested.py"
    original.write_text(NESTED, encoding="utf-8")
    result = transpile(NESTED, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = tmp_path / f"nested_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    options = VerifyOptions(entry="Nested()", inputs=["float32[2,4]"], torch_free=True)
    verdict = verify_files(original, converted, options)
    assert verdict.passed, verdict.failures
