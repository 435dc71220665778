"""Empty container attributes a module class fills later (analysis/containers.py).

`self._params = {}` then `self._params[name] = self.add_weight(...)` (a recurrent cell keeping
its Parameters in a dict beside the registered ones): Flax NNX refuses a plain dict attribute
that comes to hold Variables, when the model is built. The JAX module rule makes such an
attribute NNX data; containers nothing fills, local dicts and classes that are not modules stay
as written. The cell converts, builds, loads and verifies on both targets.
"""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
import torch.nn as nn


class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self._params = {}
        self._params["w"] = self.add_weight("w", torch.ones(4))
        self.names = []
        self.names.append("w")
        self.lin = nn.Linear(4, 4)
        self.sizes = []  # nothing fills it: as written
        lookup = {}  # a local dict: as written
        lookup["a"] = 1

    def add_weight(self, name, value):
        param = nn.Parameter(value)
        self.register_parameter(name, param)
        return param

    def forward(self, x):
        return self.lin(x) * self._params[self.names[0]]


class Registry:
    def __init__(self):
        self.items = {}
        self.items["x"] = 1


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = Cell()

    def forward(self, x):
        return self.cell(x)
"""


def test_filled_attributes_become_nnx_data_and_nothing_else() -> None:
    code = transpile(SOURCE, to="jax").code
    assert "self._params = nnx.data({})" in code
    assert "self.names = nnx.data([])" in code  # Python values in NNX data stay static
    assert "self.sizes = []" in code
    assert "lookup = {}" in code
    assert "self.items = {}" in code  # not a module class


@on_both_targets
def test_a_cell_keeping_parameters_in_a_dict_verifies(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Outer()", ["float32[2,4]"], name="cell")
    assert verdict.passed, verdict


ROUTER = """from collections import defaultdict

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, dim=4, depth=2):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
        self.router = defaultdict(list)
        for i, layer in enumerate(self.layers):
            self.router[i % 2].append(layer)

    def forward(self, x):
        for layer in self.router[0]:
            x = layer(x)
        return x
"""


@on_both_targets
def test_a_defaultdict_filled_through_its_entries_is_data(tmp_path: Path, target: str) -> None:
    """block-recurrent-transformer-pytorch's `self.read_state_router = defaultdict(list)`, filled
    with `self.read_state_router[layer].append(container)`: NNX data on Flax."""
    code = transpile(ROUTER, to=target).code
    if target == "jax":
        assert "self.router = nnx.data(defaultdict(list))" in code
    verdict = convert_and_verify(tmp_path, ROUTER, target, "Net()", ["float32[2,4]"], name="router")
    assert verdict.passed, verdict
