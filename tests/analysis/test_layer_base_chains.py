"""A module class derives its torch layer through the file's own classes
(analysis/torch_models.py `layer_bases`): spikingjelly's `class Linear(nn.Linear, StepModule)`
and `class WSLinear(Linear)` reading `self.weight`, which on Flax is the layer's `kernel`
transposed. Also a module's own parameter tied onto a bias-less layer
(`self.decoder.bias = self.bias`), which turns the layer's bias on (`torch_tie`)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import convert_and_verify, on_both_targets

CHAIN = """import torch
import torch.nn.functional as F
from torch import nn


class StepModule:
    step_mode = "s"


class Linear(nn.Linear, StepModule):
    pass


class WSLinear(Linear):
    def get_weight(self):
        mean = torch.mean(self.weight, dim=1, keepdim=True)
        return self.weight - mean

    def forward(self, x):
        return F.linear(x, self.get_weight(), self.bias)
"""

TIED_BIAS = """import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, hidden: int = 16, vocab: int = 32):
        super().__init__()
        self.decoder = nn.Linear(hidden, vocab, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.decoder.bias = self.bias

    def forward(self, x):
        return self.decoder(x)
"""


@on_both_targets
def test_layer_base_through_a_file_class(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, CHAIN, target, "WSLinear(4, 6)", ["float32[2,4]"], name="chain")
    assert verdict.passed, verdict


@on_both_targets
def test_own_parameter_tied_onto_a_biasless_layer(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, TIED_BIAS, target, "Head()", ["float32[2,16]"], name="tied")
    assert verdict.passed, verdict
