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


EMPTY = """import torch
from torch import nn


class WithMemory(nn.Module):
    def __init__(self, d=4, mem_len=0, only_memory=False):
        super().__init__()
        self.head = nn.Linear(d, d)
        self.mem_len = mem_len
        self.only_memory = only_memory

    def forward(self, x):
        memory = torch.empty(x.shape[0], self.mem_len, x.shape[-1])  # empty until it fills
        if self.only_memory:
            return memory
        return self.head(x), memory
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_an_empty_output_of_the_same_shape_is_equal_and_not_a_failure(tmp_path: Path, target: str) -> None:
    # compressive-transformer's memories are `torch.empty(b, 0, d)` while the sequence is
    # shorter than the memory: nothing to compare, and nothing differs
    verdict = convert_and_verify(tmp_path, EMPTY, target, "WithMemory()", ["float32[2,3,4]"], name="memory")
    assert verdict.passed, verdict.failures
    assert [o.shape_converted for o in verdict.outputs] == [[2, 3, 4], [2, 0, 4]]


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_only_empty_outputs_never_pass(tmp_path: Path, target: str) -> None:
    entry = "WithMemory(only_memory=True)"
    verdict = convert_and_verify(tmp_path, EMPTY, target, entry, ["float32[2,3,4]"], name="empty")
    assert not verdict.passed
    assert verdict.failures == ["every output is empty (no elements): nothing to compare"]
