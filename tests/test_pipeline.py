"""The pipeline remembers sibling modules it converted (pipeline._CONVERTED_SIBLINGS): a second
model of the same package reuses them, and a changed sibling is converted again."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import pipeline, transpile

LAYERS = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x)){extra}
"""

MODEL = """
from torch import nn

from .layers import Block


class {name}(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.block = Block(d)

    def forward(self, x):
        return self.block(x)
"""


def _sibling_keys(path: Path) -> list[tuple[int, str, bool, str, str]]:
    return [key for key in pipeline._CONVERTED_SIBLINGS if key[3] == str(path)]


def test_sibling_conversions_are_reused_and_refreshed(tmp_path: Path) -> None:
    package = tmp_path / "cachepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    layers = package / "layers.py"
    layers.write_text(LAYERS.format(extra=""))
    first, second = package / "first.py", package / "second.py"
    first.write_text(MODEL.format(name="First"))
    second.write_text(MODEL.format(name="Second"))

    one = transpile(first.read_text(), to="jax", path=str(first))
    assert "class Block(TorchModule)" in one.code
    assert len(_sibling_keys(layers)) == 1
    two = transpile(second.read_text(), to="jax", path=str(second))
    assert len(_sibling_keys(layers)) == 1  # served from memory
    assert one.code.replace("First", "Second") == two.code

    # the sibling changed on disk: converted again, and the output says what it now does
    layers.write_text(LAYERS.format(extra=" * 2"))
    three = transpile(second.read_text(), to="jax", path=str(second))
    assert len(_sibling_keys(layers)) == 2
    assert "* 2" in three.code and "* 2" not in two.code
    # another target is another conversion
    keras = transpile(second.read_text(), to="tf", path=str(second))
    assert "keras" in keras.code and len(_sibling_keys(layers)) == 3
