"""`namespace_aliases` in mappings/frameworks.yaml: a namespace that is another name of one
(`torch.torch` is the torch module), resolved for every member."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from precision_transpiler.mappings import load_mappings
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.torch.Tensor) -> torch.torch.Tensor:
        if not isinstance(x, torch.torch.Tensor):
            raise TypeError("not a tensor")
        return self.fc(x).to(torch.torch.float32)
"""


def test_a_name_under_the_alias_is_the_name_under_the_namespace() -> None:
    torch = load_mappings().frameworks["torch"]
    assert torch.public_name("torch.torch.Tensor") == "torch.Tensor"
    assert torch.public_name("torch.torch.nn.modules.conv.Conv2d") == "torch.nn.Conv2d"
    assert torch.public_name("torch.torchvision") == "torch.torchvision"  # a prefix, not the namespace


@on_both_targets
def test_kornias_torch_torch_tensor_converts(tmp_path: Path, target: str) -> None:
    """kornia's keypoints check `isinstance(keypoints, torch.torch.Tensor)`: reported as unmapped,
    the function kept an import of torch."""
    result = transpile(SOURCE, to=target)
    assert "torch" not in result.code.split("class Net")[1] and not result.unsupported, result.code
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,4]"])
    assert verdict.passed, verdict.failures
