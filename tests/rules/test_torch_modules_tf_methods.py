"""rules/torch_modules_tf.py: methods of a module class that Keras owns. keras.layers.Layer
wraps `quantize` when the layer is made (vector-quantize's `LatentQuantize.quantize(self, z)`
then ran Keras' quantization) and calls `build(input_shape)` at the first call; a module class's
own method of such a name is renamed with a trailing underscore, its `self.` uses with it, with a
note. Methods of other names, and those of classes that are no modules, keep their names."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify

SOURCE = """import torch
from torch import nn


class Quant(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def quantize(self, z):
        return torch.round(z * 4) / 4

    def build(self):
        return self.proj

    def describe(self):
        return "quant"

    def forward(self, x):
        return self.quantize(self.build()(x))


class Helper:
    def build(self):
        return 1
"""


def test_methods_keras_owns_are_renamed_and_verify(tmp_path: Path) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, "tf", "Quant()", ["float32[2,4]"])
    assert verdict.passed, verdict.failures
    code = (tmp_path / "model_tf.py").read_text()
    assert "def quantize_(self, z):" in code and "self.quantize_(self.build_()(x))" in code
    assert "def describe(self):" in code
    assert "class Helper:\n    def build(self):" in code  # not a module: as written


def test_the_renames_are_said_and_jax_keeps_the_names() -> None:
    result = transpile(SOURCE, to="tf")
    said = [d for d in result.diagnostics if d.code == "keras-reserved-attribute"]
    assert [(d.line, d.severity) for d in said] == [(10, "note"), (13, "note")], [d.format() for d in said]
    assert "def quantize(self, z):" in transpile(SOURCE, to="jax").code
