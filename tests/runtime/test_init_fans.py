"""torch.nn.init's fan arithmetic in the runtime (runtime/common.py): initialisers compute
their scale from it (`fan_in = init._calculate_correct_fan(w, "fan_in")`, pfrl's LeCun normal).
The values are torch's for the same shapes; converted code reads the weight in torch's layout
(`torch_parameter`), so a Linear's fan is torch's on both targets."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from precision_transpiler.runtime.common import torch_calculate_correct_fan, torch_calculate_fan_in_and_fan_out
from tests.helpers import convert_and_verify, on_both_targets


@pytest.mark.parametrize("shape", [(8, 4), (16, 3, 5, 5), (6, 2, 3), (4, 4, 1, 1, 2)])
def test_fans_are_torchs(shape: tuple[int, ...]) -> None:
    weight = torch.empty(shape)
    assert torch_calculate_fan_in_and_fan_out(weight) == torch.nn.init._calculate_fan_in_and_fan_out(weight)
    for mode in ("fan_in", "fan_out", "FAN_IN"):
        assert torch_calculate_correct_fan(weight, mode) == torch.nn.init._calculate_correct_fan(weight, mode)
    with pytest.raises(ValueError):
        torch_calculate_fan_in_and_fan_out(torch.empty(3))


SOURCE = """import math

import torch
from torch import nn


def lecun_scale(layer):
    fan_in = nn.init._calculate_correct_fan(layer.weight, "fan_in")
    return 1.0 / math.sqrt(fan_in)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.scale = lecun_scale(self.lin)  # 1 / sqrt(4) on every framework

    def forward(self, x):
        return self.lin(x) * self.scale
"""


@on_both_targets
def test_an_initialiser_reading_the_fan_verifies(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,4]"], name="fans")
    assert verdict.passed, verdict
