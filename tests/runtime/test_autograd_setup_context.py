"""torch >= 2.0's autograd.Function form converts: a static `forward(*args)` without ctx and a
static `setup_context(ctx, inputs, output)` that saves what `backward` needs. The runtime's
`Function` (runtime/common.py's TorchFunctionBase) calls `forward` and `setup_context` the way
torch does, honours `ctx.mark_non_differentiable` and `ctx.set_materialize_grads`, and the
backward stays the gradient rule, so a surrogate gradient of a step function (spiking networks'
Heaviside) is torch's on both targets. A Function copied in from a sibling module keeps its
`setup_context` and `backward`, which nothing in the converted code names (convert/class_reach.py).
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import numpy as np
import pytest

from precision_transpiler import transpile
from precision_transpiler.convert.class_reach import is_autograd_function, kept_members
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

FUNCTIONS = """import torch
from torch import nn


class Heaviside(torch.autograd.Function):
    @staticmethod
    def forward(x, alpha):
        return (x >= 0).to(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, alpha = inputs
        ctx.save_for_backward(x)
        ctx.alpha = alpha

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None
        s = torch.sigmoid(ctx.alpha * x)
        return grad_output * ctx.alpha * s * (1 - s), None


class TwiceAndSign(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 2, torch.sign(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, grad, grad_sign):
        return grad * 2 + grad_sign * 100


class ThriceAndSign(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x * 3, torch.sign(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.set_materialize_grads(False)
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, grad, grad_sign):
        return grad * 3 + (0.0 if grad_sign is None else grad_sign * 100)
"""

SOURCE = (
    FUNCTIONS
    + """

def surrogate(x):
    twice, sign = TwiceAndSign.apply(x)
    thrice, sign3 = ThriceAndSign.apply(x)
    return Heaviside.apply(x, 4.0) + twice + sign + thrice + sign3


class Net(nn.Module):
    def __init__(self, d: int = 8):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return surrogate(self.fc(x))
"""
)

X = np.linspace(-1.5, 1.5, 16, dtype=np.float32).reshape(2, 8)
WEIGHTS = np.arange(1.0, 17.0, dtype=np.float32).reshape(2, 8)


def _torch_values_and_grads() -> tuple[np.ndarray, np.ndarray]:
    import torch

    namespace: dict[str, object] = {}
    exec(compile(SOURCE, "torch_source.py", "exec"), namespace)
    x = torch.tensor(X, requires_grad=True)
    y = namespace["surrogate"](x)
    (y * torch.tensor(WEIGHTS)).sum().backward()
    return y.detach().numpy(), x.grad.numpy()


def _load(code: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(code, f"{name}.py", "exec"), module.__dict__)
    return module


def test_jax_gets_torch_values_and_the_surrogate_gradient() -> None:
    import jax
    import jax.numpy as jnp

    result = transpile(SOURCE, to="jax")
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = _load(result.code, "surrogate_jax")

    def loss(x: jax.Array) -> jax.Array:
        return (converted.surrogate(x) * jnp.asarray(WEIGHTS)).sum()

    want_values, want_grads = _torch_values_and_grads()
    np.testing.assert_allclose(np.asarray(converted.surrogate(jnp.asarray(X))), want_values, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.grad(loss)(jnp.asarray(X))), want_grads, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(loss))(jnp.asarray(X))), want_grads, rtol=1e-5)


def test_keras_gets_torch_values_and_the_surrogate_gradient() -> None:
    import tensorflow as tf

    result = transpile(SOURCE, to="tf")
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = _load(result.code, "surrogate_tf")
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        values = converted.surrogate(x)
        total = tf.reduce_sum(values * tf.constant(WEIGHTS))
    want_values, want_grads = _torch_values_and_grads()
    np.testing.assert_allclose(values.numpy(), want_values, rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(total, x).numpy(), want_grads, rtol=1e-5)


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_function_from_a_sibling_module_keeps_its_autograd_methods(tmp_path: Path, target: str) -> None:
    """Copied in from another module and pruned to the entry, the Function keeps `setup_context`
    and `backward` (only `apply` and `forward` are named), and the model verifies."""
    package = tmp_path / "spiking"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "surrogate.py").write_text(FUNCTIONS)
    model = package / "model.py"
    imports = "import torch\nfrom torch import nn\nfrom .surrogate import Heaviside, ThriceAndSign, TwiceAndSign\n"
    model.write_text(SOURCE.replace(FUNCTIONS, imports))
    result = transpile(model.read_text(), to=target, path=str(model), entry="Net()", prune_to_entry=True)
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    classes = {n.name: n for n in ast.parse(result.code).body if isinstance(n, ast.ClassDef)}
    for name in ("Heaviside", "TwiceAndSign", "ThriceAndSign"):
        methods = [m.name for m in classes[name].body if isinstance(m, ast.FunctionDef)]
        assert methods == ["forward", "setup_context", "backward"], (name, methods)
    converted = package / f"model_{target}.py"
    converted.write_text(result.code)
    verdict = verify_files(model, converted, VerifyOptions(entry="Net()", inputs=["float32[2,8]"]))
    assert verdict.passed, verdict.failures


def test_which_classes_count_as_autograd_functions() -> None:
    """A subclass of a local Function subclass has no `Function` base to see, but a static
    `forward`; an nn.Module has neither and keeps only what is reached."""
    tree = ast.parse(
        FUNCTIONS + "\n\nclass Sub(Heaviside):\n    @staticmethod\n    def forward(x, alpha):\n        return x\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return g, None\n\n\n"
        "class Block(nn.Module):\n    def forward(self, x):\n        return x\n\n    def backward(self, g):\n"
        "        return g\n"
    )
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    assert all(is_autograd_function(classes[name]) for name in ("Heaviside", "TwiceAndSign", "Sub"))
    assert not is_autograd_function(classes["Block"])
    assert [m.name for m in kept_members(classes["Sub"], set())] == ["forward", "backward"]
    assert [m.name for m in kept_members(classes["Block"], set())] == ["forward"]
