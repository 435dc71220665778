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


BUILDERS = """
def conv_block(c, *, rngs=None):
    return Conv(c, rngs=rngs)


def res_block():
    return conv_block(8)


def pre_block(width, *args):
    return [res_block() for _ in range(width)]


def scaled(width, scale=2, *, flag=True):
    return conv_block(width * scale)


def passes_through(**kwargs):
    return conv_block(**kwargs)


def plain(x):
    return x + 1


class Poly(TorchModule):
    def __init__(self, block, *, rngs=None):
        self.blocks = [block(rngs=rngs) for _ in range(3)]
"""


def test_functions_building_copied_layers_take_rngs_and_pass_them_on() -> None:
    """pytorchcv's `poly_res_b_block()` returns the copied `conv1x1_block(...)`, and the module it
    is handed to calls `res_block(rngs=rngs)`: it takes an optional `rngs` and passes it on, and
    so do the functions calling it in turn."""
    threaded = thread_sibling_rngs(BUILDERS)
    tree = ast.parse(threaded)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name in ("res_block", "pre_block", "scaled"):
        assert [a.arg for a in functions[name].args.kwonlyargs][-1] == "rngs", name
    assert "def res_block(*, rngs=None):\n    return conv_block(8, rngs=rngs)" in threaded
    assert "def pre_block(width, *args, rngs=None):\n    return [res_block(rngs=rngs) for" in threaded
    assert "def scaled(width, scale=2, *, flag=True, rngs=None):" in threaded
    assert "def passes_through(**kwargs):" in threaded  # `**kwargs` may carry rngs already
    assert "def plain(x):" in threaded


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_factory_of_the_file_building_a_copied_block_verifies(tmp_path: Path, target: str) -> None:
    from precision_transpiler.verify import VerifyOptions, verify_files
    from tests.convert.siblings.packages import write_package

    write_package(
        tmp_path,
        {
            "rngfactorypkg/common.py": """
                from torch import nn

                def conv_block(c_in, c_out):
                    return nn.Sequential(nn.Conv2d(c_in, c_out, 1), nn.ReLU())
            """,
            "rngfactorypkg/model.py": """
                import torch
                from torch import nn

                from .common import conv_block

                def res_block():
                    return conv_block(4, 4)

                class Poly(nn.Module):
                    def __init__(self, block=res_block):
                        super().__init__()
                        self.blocks = nn.ModuleList([block() for _ in range(2)])

                    def forward(self, x):
                        for block in self.blocks:
                            x = x + block(x)
                        return x
            """,
        },
    )
    model = tmp_path / "rngfactorypkg/model.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Poly()", inputs=["float32[1,4,3,3]"], torch_free=True)
    assert verify_files(model, converted, options).passed
