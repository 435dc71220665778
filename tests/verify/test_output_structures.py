"""Model outputs of every structure pair across frameworks by name: a dataclass of tensors
(kornia's `DISK` returns a list of `DISKFeatures`) is compared field by field, as namedtuples
and dicts are."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import convert_and_verify

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

SOURCE = """from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Features:
    keypoints: torch.Tensor
    scores: torch.Tensor
    name: str = "features"


class Detector(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        out = self.head(x)
        return [Features(out[i], out[i].sum(-1)) for i in range(x.shape[0])]
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_dataclass_outputs_are_compared_field_by_field(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Detector()", ["float32[2,3,4]"], name="detector")
    assert verdict.passed, verdict.failures
    assert {o.name for o in verdict.outputs} >= {"out[0].keypoints", "out[1].scores"}
