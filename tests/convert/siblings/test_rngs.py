"""`rngs` passed on to module classes copied from sibling modules (convert/siblings/rngs.py):
without it, every copied block made `nnx.Rngs(0)` of its own and started from the same weights."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.convert.siblings.rngs import thread_sibling_rngs

CODE = """
class Block(TorchModule):
    def __init__(self, d, *, rngs=None):
        pass


class Plain(TorchModule):
    pass


class Wide(Block):
    pass


def build(d, *, rngs=None):
    return Block(d, rngs=rngs)


class Net(TorchModule):
    def __init__(self, d, *, rngs=None):
        self.a = Block(d)
        self.b = Wide(d, *extra)
        self.c = Plain()
        self.d = Block(
            d,  # width
        )
        self.e = build(d, **options)
        self.f = Block()

    def __call__(self, x):
        return Block(4)(x)
"""


def test_calls_inside_functions_with_rngs_pass_them_on() -> None:
    threaded = thread_sibling_rngs(CODE)
    ast.parse(threaded)
    assert "self.a = Block(d, rngs=rngs)" in threaded
    assert "self.b = Wide(d, *extra, rngs=rngs)" in threaded  # the base's constructor takes rngs
    assert "self.c = Plain()" in threaded  # nn.Module's constructor: no rngs
    assert "            d,  # width\n            rngs=rngs,\n        )" in threaded
    assert "self.e = build(d, **options)" in threaded  # the keywords may hold rngs already
    assert "self.f = Block(rngs=rngs)" in threaded
    assert "return Block(4)(x)" in threaded  # no rngs in __call__
    assert thread_sibling_rngs(threaded) == threaded


LAYERS = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(torch.relu(self.fc(x)))
"""

MODEL = """
from torch import nn

from .layers import Block


class Net(nn.Module):
    def __init__(self, d=4, n=3):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""


@pytest.mark.needs_jax
def test_copied_blocks_start_from_different_weights(tmp_path: Path) -> None:
    import numpy as np

    package = tmp_path / "rngpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(LAYERS)
    model = package / "model.py"
    model.write_text(MODEL)
    result = transpile(MODEL, to="jax", path=str(model))
    assert "Block(d, rngs=rngs)" in result.code
    namespace: dict = {}
    exec(compile(result.code, "converted_model.py", "exec"), namespace)
    net = namespace["Net"]()
    kernels = [np.asarray(block.fc.kernel[...]) for block in net.blocks]
    assert not np.allclose(kernels[0], kernels[1]) and not np.allclose(kernels[1], kernels[2])


def test_code_without_rngs_takers_is_unchanged() -> None:
    plain = (
        "class Block:\n    def __init__(self, d):\n        pass\n\n\ndef build(d, *, rngs=None):\n    return Block(d)\n"
    )
    assert thread_sibling_rngs(plain) is plain  # `Block` takes no rngs: no call changes
    assert thread_sibling_rngs("x = 1\n") == "x = 1\n"  # no `rngs` at all
    broken = "def f(*, rngs=None):\n    return f(\n"
    assert thread_sibling_rngs(broken) is broken  # not Python: left for the pipeline to report
