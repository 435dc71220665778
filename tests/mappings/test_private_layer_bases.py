"""torch's private layer bases (`_ConvNd`, `_BatchNorm`, `_NormBase`, `_InstanceNorm`,
`_DropoutNd`, the pooling bases) in annotations, isinstance checks and as bases of user layers
become the runtime's bases of the converted layers (mappings/layers/torch_nn.yaml `symbols:`), so
the import no longer keeps torch alive and the checks hold for converted layers."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """from typing import Type

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.conv import _ConvNd
from torch.nn.modules.dropout import _DropoutNd


class BatchNormThroughTime(_BatchNorm):
    # a user norm layer on torch's private base: its own forward over the base's statistics
    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)


class Net(nn.Module):
    def __init__(self, conv: Type[_ConvNd] = nn.Conv2d):
        super().__init__()
        self.conv = conv(3, 4, 3)
        self.norm = BatchNormThroughTime(4)
        self.drop = nn.Dropout2d(0.1)
        self.kinds = [isinstance(m, (_ConvNd, _BatchNorm, _DropoutNd)) for m in (self.conv, self.norm, self.drop)]
        assert all(self.kinds), self.kinds

    def forward(self, x):
        return self.drop(self.norm(self.conv(x)))
"""


@on_both_targets
def test_private_bases_convert_and_verify(tmp_path: Path, target: str) -> None:
    result = transpile(SOURCE, to=target)
    assert not result.unsupported, [d.format() for d in result.unsupported]
    lines = result.code.splitlines()
    assert not [line for line in lines if line.startswith(("import torch", "from torch"))]
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,3,6,6]"], name="bases")
    assert verdict.passed, verdict
