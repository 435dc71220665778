"""torch's forward hooks and pre-hooks (`register_forward_hook`, `register_forward_pre_hook`) on
any layer: a target library's layer (Flax's `nnx.Linear`), a runtime layer, a converted module.
The converter writes `register_forward_hook(m, hook)` of runtime/common.py, which gives the
module a class (same name) whose calls run the hooks as torch's `Module.__call__` does; the
handle's `remove()` takes a hook off. Each case converts, builds, takes the torch weights and
computes what torch computes, torch-free, on both targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

HOOKS = """import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return self.proj(x).relu()


class Net(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)
        self.c = Scaled(d)
        self.norm = nn.LayerNorm(d)
        self.a.register_forward_hook(self._shift)
        # a pre-hook may return one value instead of a tuple
        self.b.register_forward_pre_hook(lambda module, args: args[0] * 2)
        self.c.register_forward_hook(lambda module, args, output: output + args[0])
        handle = self.norm.register_forward_hook(self._shift)
        handle.remove()

    def _shift(self, module, inputs, output):
        return output + 1

    def forward(self, x):
        return self.norm(self.c(self.b(self.a(x))))
"""

SELF_HOOK = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        # a hook on the module itself, registered from its constructor
        self.register_forward_pre_hook(self._halve)

    def _halve(self, module, args):
        return (args[0] / 2,)

    def forward(self, x):
        return self.body(x)
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
@pytest.mark.parametrize("source", [HOOKS, SELF_HOOK], ids=["child-hooks", "self-pre-hook"])
def test_hooks_convert_and_verify(tmp_path: Path, target: str, source: str) -> None:
    original = tmp_path / "model.py"
    original.write_text(source, encoding="utf-8")
    result = transpile(source, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert "register_forward_hook(self." in result.code or "register_forward_pre_hook(self," in result.code
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    options = VerifyOptions(entry="Net()", inputs=["float32[2,5,8]"], torch_free=True)
    verdict = verify_files(original, converted, options)
    assert verdict.passed, verdict.failures


def test_hooked_module_under_nnx_jit() -> None:
    """The hooks are static state of the nnx module: they survive nnx.split / merge and run under
    nnx.jit, a bound method of the parent included."""
    import jax.numpy as jnp
    from flax import nnx

    from precision_transpiler.runtime.common import register_forward_hook, register_forward_pre_hook

    class Parent(nnx.Module):
        def __init__(self) -> None:
            self.child = nnx.Linear(3, 3, rngs=nnx.Rngs(0))
            register_forward_hook(self.child, self.add_one)

        def add_one(self, module, args, output):
            return output + 1

        def __call__(self, x):
            return self.child(x)

    model = Parent()
    x = jnp.ones((2, 3))
    plain = x @ model.child.kernel[...] + model.child.bias[...]
    assert type(model.child).__name__ == "Linear"
    assert jnp.allclose(model(x), plain + 1)
    assert jnp.allclose(nnx.jit(lambda m, v: m(v))(model, x), plain + 1)
    merged = nnx.merge(*nnx.split(model))
    assert jnp.allclose(merged(x), plain + 1)
    handle = register_forward_pre_hook(model.child, lambda module, args: (args[0] * 0,))
    assert jnp.allclose(model(x), model.child.bias[...] + 1)
    handle.remove()
    assert jnp.allclose(model(x), plain + 1)
