"""torch's nn.Module API on converted modules (runtime/flax/modules.py and
runtime/keras/modules.py `TorchModule`), checked against torch's own answers on the same model:
module walks with the same names in the same order, the same parameter and buffer counts (and on
Keras, which keeps torch's names, the same names), `apply` visiting every module children-first,
`train()`/`eval()` returning the module and flipping `training`, `get_submodule`, `state_dict`
under torch's keys."""

from __future__ import annotations

import pytest

from precision_transpiler import transpile

pytestmark = [pytest.mark.needs_torch]

MODEL = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc(self.norm(x))


class Net(nn.Module):
    def __init__(self, d=8, depth=12):
        super().__init__()
        self.stem = nn.Linear(4, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(depth)])
        self.heads = nn.ModuleList([nn.Linear(d, 2), nn.Linear(d, 3)])
        self.bn = nn.BatchNorm1d(d)
        self.register_buffer("scale", torch.ones(d))
        extra = ("extra", nn.Identity())
        self.add_module(*extra)  # timm's `self.add_module(*stage)`: not rewritten, the method
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.extra(self.bn(self.blocks(self.stem(x)))) * self.scale
        return torch.cat([h(x) for h in self.heads], dim=-1)
"""


def _build(code: str):
    namespace: dict = {}
    exec(compile(code, "<model>", "exec"), namespace)
    return namespace["Net"]()


@pytest.fixture(scope="module")
def reference():
    return _build(MODEL)


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_module_api_answers_as_torch_does(to: str, reference) -> None:
    pytest.importorskip("flax" if to == "jax" else "keras")
    result = transpile(MODEL, to=to, path="net.py")
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    model = _build(result.code)

    # walks: same names, same order (12 blocks: "10" and "11" after "9")
    assert [n for n, _ in model.named_modules()] == [n for n, _ in reference.named_modules()]
    assert [n for n, _ in model.named_children()] == [n for n, _ in reference.named_children()]
    assert len(model.modules()) == len(list(reference.modules()))
    assert len(model.children()) == len(list(reference.children()))

    # parameters and buffers: same counts; the same modules hold them, in torch's order
    torch_params = [n for n, _ in reference.named_parameters()]
    params = [n for n, _ in model.named_parameters()]
    assert len(params) == len(torch_params) == len(list(model.parameters()))
    assert [n.rsplit(".", 1)[0] for n in params] == [n.rsplit(".", 1)[0] for n in torch_params]
    torch_buffers = [n for n, _ in reference.named_buffers()]
    buffers = [n for n, _ in model.named_buffers()]
    assert len(buffers) == len(torch_buffers) == len(list(model.buffers()))
    # state_dict: torch's keys in torch's order on both targets (tests/runtime/test_state_dict_torch_names.py)
    assert list(model.state_dict()) == list(reference.state_dict())
    if to == "tf":  # the Keras runtime keeps torch's names
        assert params == torch_params and sorted(buffers) == sorted(torch_buffers)
    else:  # the converted layers' own names stay reachable
        assert sorted(model.flax_state_dict()) == sorted(params + buffers)

    # apply: every module once, children before parents
    visited: list = []
    assert model.apply(visited.append) is model
    assert len(visited) == len(list(reference.modules())) and visited[-1] is model
    assert visited.index(model.get_submodule("blocks.11")) < visited.index(model.get_submodule("blocks"))
    # on a container too (pfrl's `self.mlp.apply(init)` on an nn.ModuleList): its modules, then it
    in_heads: list = []
    heads = model.get_submodule("heads")
    assert heads.apply(in_heads.append) is heads and in_heads[-1] is heads
    assert len(in_heads) == len(list(reference.get_submodule("heads").modules()))

    # modes: eval()/train() return the module and flip `training` below it
    assert model.eval() is model and not model.training
    assert not model.get_submodule("blocks.3").training
    assert model.train() is model and model.training and model.get_submodule("blocks.3").training
    model.eval()

    # lookups and no-ops torch code calls
    assert model.get_submodule("blocks.11.fc") is dict(model.named_modules())["blocks.11.fc"]
    assert model.get_parameter(params[0]) is next(model.parameters())
    assert model.requires_grad_(True) is model and model.zero_grad() is None
    with pytest.raises(AttributeError):
        model.get_submodule("blocks.99")


def test_flax_casts_change_the_parameter_dtypes() -> None:
    pytest.importorskip("flax")
    import jax.numpy as jnp
    import numpy as np

    model = _build(transpile(MODEL, to="jax", path="net.py").code)
    assert model.half() is model
    assert {p[...].dtype for p in model.parameters()} == {jnp.dtype(jnp.float16)}
    model.to(jnp.float32)
    assert {p[...].dtype for p in model.parameters()} == {jnp.dtype(jnp.float32)}
    state = model.state_dict()
    key = next(k for k in state if k.endswith(".weight"))  # a parameter the walks call `kernel`
    state[key] = np.asarray(state[key], dtype=np.float64) + 1
    model.load_state_dict(state)
    assert float(model.state_dict()[key].sum()) == float(state[key].sum())
    assert model.state_dict()[key].dtype == jnp.float32  # cast to the variable's dtype


def test_keras_casts_to_another_dtype_are_refused() -> None:
    pytest.importorskip("keras")
    model = _build(transpile(MODEL, to="tf", path="net.py").code)
    assert model.float() is model and model.to("cpu") is model
    with pytest.raises(NotImplementedError, match="policy"):
        model.half()
