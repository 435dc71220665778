"""Parameters and buffers in a tuple or list that `map` goes over (rules/module_variables.py):
rela-transformer's `map(lambda t: repeat(t, "n d -> b n d", b=b), (self.mem_k, self.mem_v))`.
The mapped function sees each element as torch's tensor, and einops asked the converted
variable (an `nnx.Param`, a Keras variable) for a backend and found none; the elements are
handed over as arrays, as a parameter passed directly is. No-op cases: a `map` the file defines,
and elements that are not variables. Both targets verify."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from einops import repeat
from torch import nn


class Memory(nn.Module):
    def __init__(self, n=2, d=4):
        super().__init__()
        self.mem_k = nn.Parameter(torch.randn(n, d))
        self.register_buffer("mem_v", torch.randn(n, d))

    def forward(self, x):
        k, v = map(lambda t: repeat(t, "n d -> b n d", b=x.shape[0]), (self.mem_k, self.mem_v))
        scaled = list(map(lambda t: t * 2, [x, x]))
        return x + k.sum(1, keepdim=True) + v.sum(1, keepdim=True) + scaled[0]
"""

SHADOWED = """import torch
from torch import nn


def map(f, items):
    return [f(item) for item in items]


class Own(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x * map(lambda t: t, (self.w,))[0]
"""


@on_both_targets
def test_variables_mapped_over_are_passed_as_arrays(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Memory()", ["float32[3,2,4]"])
    assert verdict.passed, verdict.failures
    code = (tmp_path / f"model_{target}.py").read_text()
    assert "[x, x]" in code  # not variables: as written


@on_both_targets
def test_a_map_the_file_defines_is_left_alone(target: str) -> None:
    code = transpile(SHADOWED, to=target).code
    assert "map(lambda t: t, (self.w,))" in code, code
