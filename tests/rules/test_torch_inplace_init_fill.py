"""`param.data[:] = value` while building (rules/torch_inplace_init_model.py): demucs' LayerScale
sets its scale so, and `conv.bias.data[:] = -2` sets a bias. Like the in-place methods on `.data`
in an initialiser, the statement is dropped with an `init-dropped` note (the torch weights hold
the values), instead of an assignment into a target array that Keras refuses at build."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self, channels=4, init=0.5):
        super().__init__()
        self.scale = nn.Parameter(torch.zeros(channels))
        self.scale.data[:] = init
        self.lin = nn.Linear(channels, channels)
        self.lin.bias.data[:] = -2

    def forward(self, x):
        y = self.lin(x)
        y.data[:] = y.data * 2  # not building: as written
        return self.scale * y
"""


def test_fills_while_building_are_dropped_with_a_note() -> None:
    result = transpile(SOURCE, to="tf")
    notes = [d.message for d in result.diagnostics if d.code == "init-dropped"]
    assert len(notes) == 2 and "self.scale.data[:] = init" in notes[0]
    assert "self.lin.bias.data[:] = -2" in notes[1]
    assert "[:] = init" not in result.code and "[:] = -2" not in result.code


@on_both_targets
def test_a_layer_scale_verifies(tmp_path: Path, target: str) -> None:
    source = SOURCE.replace("        y.data[:] = y.data * 2  # not building: as written\n", "")
    verdict = convert_and_verify(tmp_path, source, target, "Scale()", ["float32[2,4]"], name="scale")
    assert verdict.passed, verdict


HEADS = """import torch
import torch.nn as nn


class Heads(nn.Module):
    def __init__(self, d=4, heads=2):
        super().__init__()
        self.heads, self.per = heads, d // heads
        self.q = nn.Linear(d, d)
        self.init_weight(self.q)

    def init_weight(self, layer):
        for param in layer.parameters():
            if param.ndim > 1:
                for h in range(self.heads):
                    param.data[h * self.per : (h + 1) * self.per, :] += 0.5

    def forward(self, x):
        return self.q(x)
"""


@on_both_targets
def test_an_augmented_write_into_part_of_data_while_building_is_dropped(tmp_path: Path, target: str) -> None:
    """neuraloperator's attention kernel adds a diagonal into each head's rows of a weight while
    building (`param.data[rows, :] += bias`): it became a write into a target array (Keras:
    `'EagerTensor' object does not support item assignment`, nothing reported)."""
    result = transpile(HEADS, to=target)
    notes = [d.message for d in result.diagnostics if d.code == "init-dropped"]
    assert len(notes) == 1 and "param.data[h * self.per : (h + 1) * self.per, :] += 0.5" in notes[0], notes
    verdict = convert_and_verify(tmp_path, HEADS, target, "Heads()", ["float32[2,4]"], name="heads")
    assert verdict.passed, verdict.failures
