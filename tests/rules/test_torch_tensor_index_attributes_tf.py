"""A known tensor read at index tensors the module keeps in plain attributes, on Keras
(rules/torch_tensor_index_tf.py): Swin's `self.pos_embedding[self.relative_indices[:, :, 0],
self.relative_indices[:, :, 1]]`, the indices made once in the constructor and neither a buffer
nor a parameter (and the read the value of an augmented assignment, `dots += ...`). TensorFlow
took them for strided-slice bounds; `torch_at` gathers them, and reads
an attribute that holds an int as TensorFlow does."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_tf]

SWIN = """import numpy as np
import torch
from torch import nn


def relative_distances(window_size):
    indices = torch.tensor(np.array([[x, y] for x in range(window_size) for y in range(window_size)]))
    return indices[None, :, :] - indices[:, None, :]


class WindowAttention(nn.Module):
    def __init__(self, window_size=2):
        super().__init__()
        self.window_size = window_size
        self.relative_indices = relative_distances(window_size) + window_size - 1
        self.pos_embedding = nn.Parameter(torch.randn(2 * window_size - 1, 2 * window_size - 1))

    def forward(self, dots):
        bias = self.pos_embedding[self.relative_indices[:, :, 0], self.relative_indices[:, :, 1]]
        out = dots * 2.0
        out += self.pos_embedding[self.relative_indices[:, :, 0], self.relative_indices[:, :, 1]]
        return out + bias + self.pos_embedding[self.window_size - 1, 0]
"""


def test_index_tensors_in_plain_attributes_gather(tmp_path: Path) -> None:
    code = transpile(SWIN, to="tf").code
    assert "torch_at(self.pos_embedding)[self.relative_indices[:, :, 0]" in code
    verdict = convert_and_verify(tmp_path, SWIN, "tf", "WindowAttention()", ["float32[1,4,4]"], name="swin")
    assert verdict.passed, verdict
