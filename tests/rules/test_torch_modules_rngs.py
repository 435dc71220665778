"""`rngs` is written only where it is in scope, and converted modules build without one.

torch layers draw their initial values from a global generator; Flax NNX layers take `rngs`. The
converter threads `rngs` through the functions that build layers (rules/torch_modules_jax.py),
but code also builds layers where no builder's `rngs` reaches: a layer factory called in a
default argument (`norm=make_norm()`, evaluated where the `def` is), a lambda returned by a
factory or handed to a constructor, a layer built at module level, a helper called without one.
Each case converts to JAX and to Keras, imports, builds from its entry, takes the torch weights
and computes what torch computes (the verifier, torch-free).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

FACTORIES = '''import functools

from torch import nn


def make_norm(eps=1e-5):
    """A factory returning a lambda that builds the layer later."""
    return lambda channels: nn.BatchNorm2d(channels, eps=eps)


def lambda_relu(inplace=True):
    """pytorchcv's activation factories: a lambda building a layer that takes no rngs."""
    return lambda: nn.ReLU(inplace=inplace)


def _helper_conv(channels):
    return nn.Conv2d(channels, channels, 1)


SHARED = nn.Linear(4, 4)  # a layer built at module level


class Block(nn.Module):
    def __init__(
        self,
        channels,
        norm=make_norm(),
        act=nn.ReLU(),
        gate=lambda c: nn.GroupNorm(2, c),
        proj=functools.partial(nn.Conv2d, kernel_size=1),
        activation=lambda_relu(),
        bn=lambda *args, **kwargs: nn.BatchNorm2d(*args, **kwargs),
    ):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = norm(channels)
        self.gate = gate(channels)
        self.proj = proj(channels, channels)
        self.act = act
        self.act2 = activation()
        self.bn = bn(num_features=channels)  # a maker taking **kwargs: rngs comes before them
        self.order = sorted([3, 1], key=lambda v: -v)  # no layer: left as written

    def forward(self, x):
        return self.bn(self.proj(self.gate(self.act2(self.act(self.norm(self.conv(x)))))))


class Net(nn.Module):
    def __init__(self, channels=4):
        super().__init__()
        build = lambda: _helper_conv(channels)  # noqa: E731 - a lambda calling a helper
        self.blocks = nn.Sequential(Block(channels), Block(channels, norm=make_norm(1e-3)), build())
        self.head = self._make_head(channels)

    def _make_head(self, channels):
        return nn.Conv2d(channels, 2, 1)

    def forward(self, x):
        return self.head(self.blocks(x))
'''


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_factories_defaults_and_lambdas_build_and_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, FACTORIES, target, "Net()", ["float32[2,4,6,6]"], name="factories")
    assert verdict.passed, verdict


def test_rngs_appears_only_where_a_builder_has_it() -> None:
    code = transpile(FACTORIES, to="jax").code
    tree = ast.parse(code)
    block = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Block")
    init = next(n for n in block.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    for default in [*init.args.defaults, *init.args.kw_defaults]:
        if default is None:
            continue
        names = {n.id for n in ast.walk(default) if isinstance(n, ast.Name)}
        lambda_params = {a.arg for n in ast.walk(default) if isinstance(n, ast.Lambda) for a in n.args.kwonlyargs}
        assert "rngs" not in names - lambda_params, ast.unparse(default)
    # a helper method takes an optional rngs, drawn from the runtime's seedable sequence without one
    net = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Net")
    helper = next(n for n in net.body if isinstance(n, ast.FunctionDef) and n.name == "_make_head")
    assert [ast.unparse(d) for d in helper.args.kw_defaults] == ["None"]
    assert "default_rngs()" in ast.unparse(helper.body[0])
    # the module-level layer draws from the same sequence
    shared = next(n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "SHARED")
    assert "default_rngs()" in ast.unparse(shared.value)


def test_default_rngs_follows_manual_seed() -> None:
    from precision_transpiler.runtime.flax.layers import Linear
    from precision_transpiler.runtime.flax.rng import default_rngs, manual_seed

    manual_seed(3)
    first = Linear(3, 3).kernel[...]
    second = Linear(3, 3).kernel[...]
    manual_seed(3)
    again = Linear(3, 3).kernel[...]
    assert (first == again).all() and not (first == second).all()  # torch-like: one global sequence
    assert default_rngs() is not default_rngs()
