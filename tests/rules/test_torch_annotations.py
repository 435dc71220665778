"""rules/torch_annotations_model.py: torch symbols without a counterpart in annotations become
`typing.Any`, so the converted module defines its functions without importing torch; mapped
annotations and other code stay as the other rules make them."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.analysis.load_imports import torch_imports_at_load
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """from typing import Callable, Optional

import torch
from torch import nn
from torch.optim import Optimizer


class VQ(nn.Module):
    def __init__(self, dim: int = 4, opt: Callable[..., Optimizer] = None,
                 sched: Optional[torch.optim.lr_scheduler.LRScheduler] = None):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)
"""


@on_both_targets
def test_unmapped_annotations_become_any_and_the_model_loads_without_torch(tmp_path: Path, target: str) -> None:
    result = transpile(SOURCE, to=target, path=str(tmp_path / "vq.py"))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    notes = [d for d in result.diagnostics if d.code == "annotation-any"]
    assert [n.message.split(" in an")[0] for n in notes] == ["Optimizer", "torch.optim.lr_scheduler.LRScheduler"]
    assert "Callable[..., typing.Any]" in result.code and "Optional[typing.Any]" in result.code
    assert torch_imports_at_load(result.code, tmp_path / "vq.py") == []
    verdict = convert_and_verify(tmp_path, SOURCE, target, "VQ()", ["float32[2,4]"], name="vq")
    assert verdict.passed, verdict


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_mapped_annotations_and_plain_ones_stay(target: str) -> None:
    source = "import torch\n\n\ndef f(x: torch.Tensor, n: int = 2) -> torch.Tensor:\n    return x * n\n"
    result = transpile(source, to=target)
    assert "typing.Any" not in result.code
    assert not [d for d in result.diagnostics if d.code == "annotation-any"]
