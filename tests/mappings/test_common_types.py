"""torch.nn.common_types' annotation aliases (`kernel_size: _size_3_t`, pytorchvideo) become plain
types of the runtime (mappings/layers/torch_nn.yaml `symbols:`, runtime/common.py), so an import
made for annotations no longer keeps torch imported when the model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """from torch import nn
from torch.nn.common_types import _size_1_t, _size_2_opt_t, _ratio_any_t


class Conv(nn.Module):
    def __init__(self, kernel: _size_1_t = 3, pool: _size_2_opt_t = None, scale: _ratio_any_t = 1.0):
        super().__init__()
        self.conv = nn.Conv1d(2, 2, kernel)

    def forward(self, x):
        return self.conv(x)
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_aliases_are_plain_types(to: str) -> None:
    result = transpile(SOURCE, to=to)
    assert "common_types" not in result.code and not result.unsupported
    assert "kernel: torch_size_t = 3, pool: torch_size_opt_t = None, scale: torch_ratio_t = 1.0" in result.code


@on_both_targets
def test_annotated_module_verifies_without_torch(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Conv()", ["float32[1,2,8]"], name="typed")
    assert verdict.passed, verdict


SIZE = """import torch
from torch import Size, nn


class Net(nn.Module):
    def __init__(self, shape=(16,)):
        super().__init__()
        self.shape = torch.Size(shape)
        assert isinstance(self.shape, torch.Size)
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        out_shape: Size = x.shape[:-1] + self.shape
        return self.fc(x).reshape(out_shape)
"""


@on_both_targets
def test_torch_size_as_a_value_is_a_tuple(tmp_path: Path, target: str) -> None:
    """`torch.Size` in an annotation or an isinstance check is the runtime's `TorchSize`
    (tuple); a call `torch.Size(s)` is the runtime's `torch_size(s)`, a tuple."""
    code = transpile(SIZE, to=target).code
    assert "isinstance(self.shape, TorchSize)" in code and "self.shape = torch_size(shape)" in code
    verdict = convert_and_verify(tmp_path, SIZE, target, "Net()", ["float32[2,16]"], name="sized")
    assert verdict.passed, verdict


FINAL = """import torch
from torch import nn


class Attn(nn.Module):
    fused_attn: torch.jit.Final[bool]

    def __init__(self, d: int = 8):
        super().__init__()
        self.fused_attn = False
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(x)
"""


@on_both_targets
def test_torchscript_final_is_typing_final(tmp_path: Path, target: str) -> None:
    """timm-style `fused_attn: torch.jit.Final[bool]` is Python's `typing.Final`: the annotation
    no longer keeps torch imported."""
    code = transpile(FINAL, to=target).code
    assert "fused_attn: typing.Final[bool]" in code
    verdict = convert_and_verify(tmp_path, FINAL, target, "Attn()", ["float32[2,8]"], name="final")
    assert verdict.passed, verdict
