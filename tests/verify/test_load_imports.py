"""Verification says when a conversion from torch imports torch when loaded, and fails it with
`torch_free` (analysis/load_imports.py): such an output runs only where torch is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler.analysis.load_imports import torch_imports_at_load
from precision_transpiler.verify import VerifyOptions, verify_files

ORIGINAL = """import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
"""

CONVERTED = """from flax import nnx
import torch


class Net(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs | None = None):
        self.fc = nnx.Linear(4, 2, rngs=rngs or nnx.Rngs(0))

    def __call__(self, x):
        return self.fc(x)
"""


def test_what_runs_at_load_is_found() -> None:
    code = (
        "import torch\ntry:\n    import torchvision\nexcept ImportError:\n    pass\nimport numpy\n"
        "if True:\n    from torch import nn\n\n\nclass A:\n    import torchaudio\n\n\ndef f():\n    import torch\n"
    )
    assert [(line, module) for line, module, _ in torch_imports_at_load(code)] == [
        (1, "torch"), (8, "torch"), (12, "torchaudio"),
    ]  # fmt: skip


def test_a_sibling_left_imported_that_imports_torch_is_found(tmp_path: Path) -> None:
    (tmp_path / "layers.py").write_text("import torch\n")
    (tmp_path / "plain.py").write_text("import math\n")
    found = torch_imports_at_load("from .layers import Block\nfrom .plain import f\n", tmp_path / "model.py")
    assert [(line, module) for line, module, _ in found] == [(1, "layers")]
    assert "layers.py" in found[0][2]


@pytest.mark.needs_jax
def test_verification_fails_an_output_that_imports_torch(tmp_path: Path) -> None:
    original, converted = tmp_path / "net.py", tmp_path / "net_jax.py"
    original.write_text(ORIGINAL)
    converted.write_text(CONVERTED)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,4]"])  # torch_free by default, as the CLI
    verdict = verify_files(original, converted, options)
    assert not verdict.passed
    assert verdict.max_rel_err is not None and verdict.max_rel_err < 1e-5  # it agrees: torch at load fails it
    assert any(":2: the converted module imports torch when loaded" in f for f in verdict.failures), verdict.failures
    lenient = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=False))
    assert lenient.passed and any("imports torch when loaded" in n for n in lenient.notes)  # said, not failed
    converted.write_text(CONVERTED.replace("import torch\n", ""))
    assert verify_files(original, converted, options).passed
