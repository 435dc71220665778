"""Every torch layer with both a Flax and a Keras counterpart, against torch, parametrized over both.

Why this test exists: the Flax NNX runtime (precision_transpiler/runtime/flax) and the Keras 3
runtime (precision_transpiler/runtime/keras) are twins, the same torch behaviour written in two
frameworks. test_flax_runtime.py and test_keras_runtime.py each probe their own runtime in depth;
this file holds both to the one answer that matters, torch's, with one parametrized test: for
every layer of the layer table (mappings/layers/torch_nn.yaml) that has both a `jax` and a `tf`
target, it builds the class the converter emits (`target.shim`, or `target.reference` for a
direct counterpart: a class with torch's signature) with the torch constructor arguments of
`CASES`, loads the (perturbed) torch layer's `state_dict()` through the project's own weight
loaders, runs it in eval mode on the same float32 input and compares with torch. A layer added
to the table with both targets needs a case in `CASES` (or a reason in `NOT_NUMERIC`), else
`test_every_twin_layer_has_a_case` fails.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# (a framework that is not installed skips this module through tests/conftest.py, with the reason;
# one that is installed but broken fails it)
import jax.numpy as jnp
import torch
from flax import nnx
from keras import ops

from precision_transpiler.mappings import load_mappings
from precision_transpiler.weights.torch_to_flax import load_torch_state_dict
from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras
from tests.compare import perturb, rand

pytestmark = [
    pytest.mark.filterwarnings("ignore:Implicit dimension choice:UserWarning"),  # torch's own note
    pytest.mark.needs_torch,
    pytest.mark.needs_jax,
    pytest.mark.needs_tf,
    pytest.mark.slow,
]

TARGETS = ("jax", "tf")
RTOL, ATOL = 1e-4, 1e-5  # float32; ATOL is relative to the output scale (max |torch output|)

#: layers that compute nothing themselves, with the reason they are not compared numerically
NOT_NUMERIC = {
    "torch.nn.Sequential": "container: computes only what its layers do (paths and API in test_*_runtime.py)",
    "torch.nn.ModuleList": "container: holds layers, has no forward of its own (paths in test_*_runtime.py)",
    "torch.nn.ModuleDict": "container: holds layers, has no forward of its own (paths in test_*_runtime.py)",
    "torch.nn.ParameterList": "container: holds parameters, no forward (verified in test_parameter_containers.py)",
    "torch.nn.ParameterDict": "container: holds parameters, no forward (verified in test_parameter_containers.py)",
    **{
        symbol: "no forward: its arithmetic methods are verified in test_float_functional.py"
        for symbol in (
            "torch.nn.quantized.FloatFunctional",
            "torch.ao.nn.quantized.FloatFunctional",
            "torch.nn.quantized.modules.functional_modules.FloatFunctional",
            "torch.ao.nn.quantized.modules.functional_modules.FloatFunctional",
        )
    },
}

#: torch layer symbol -> (constructor args, constructor kwargs, input shape); a tuple of shapes is
#: several inputs (MultiheadAttention's query, key, value); the Embedding input is integer ids
CASES: dict[str, tuple[tuple[Any, ...], dict[str, Any], tuple[Any, ...]]] = {
    "torch.nn.Linear": ((6, 5), {}, (2, 3, 6)),
    "torch.nn.Embedding": ((10, 4), {"padding_idx": 2}, (2, 5)),
    "torch.nn.LayerNorm": (((3, 6),), {"eps": 1e-4}, (2, 3, 6)),
    "torch.nn.RMSNorm": (((3, 6),), {}, (2, 3, 6)),
    "einops.layers.torch.Rearrange": (("b c (h p) w -> b (c p) h w",), {"p": 2}, (2, 3, 4, 5)),
    "einops.layers.torch.Reduce": (("b c (h p) w -> b c h", "max"), {"p": 2}, (2, 3, 4, 5)),
    "torch.nn.Dropout": ((0.5,), {}, (2, 3, 6)),
    "torch.nn.Conv1d": ((3, 4, 3), {"padding": 1, "stride": 2}, (2, 3, 11)),
    "torch.nn.Conv2d": ((3, 4, 3), {"padding": 1, "stride": 2}, (2, 3, 9, 9)),
    "torch.nn.Conv3d": ((3, 4, 3), {"padding": 1, "stride": (1, 2, 2)}, (2, 3, 5, 7, 7)),
    "torch.nn.ConvTranspose1d": ((3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (2, 3, 6)),
    "torch.nn.ConvTranspose2d": ((3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (2, 3, 5, 5)),
    "torch.nn.BatchNorm1d": ((4,), {}, (3, 4, 7)),
    "torch.nn.BatchNorm2d": ((4,), {"eps": 1e-3}, (2, 4, 5, 5)),
    "torch.nn.GroupNorm": ((2, 4), {}, (2, 4, 5, 5)),
    "torch.nn.MaxPool1d": ((3,), {"stride": 2, "padding": 1}, (2, 3, 9)),
    "torch.nn.MaxPool2d": ((2,), {}, (2, 3, 8, 8)),
    "torch.nn.AvgPool1d": ((3,), {"stride": 2, "padding": 1}, (2, 3, 9)),
    "torch.nn.AvgPool2d": ((3,), {"stride": 2, "padding": 1}, (2, 3, 8, 8)),
    "torch.nn.AdaptiveAvgPool1d": ((3,), {}, (2, 3, 8)),
    "torch.nn.AdaptiveAvgPool2d": (((3, 2),), {}, (2, 3, 7, 8)),
    "torch.nn.AdaptiveMaxPool2d": ((3,), {}, (2, 3, 7, 8)),
    "torch.nn.MultiheadAttention": ((8, 2), {"batch_first": True}, ((2, 5, 8), (2, 6, 8), (2, 6, 8))),
    "torch.nn.Identity": ((), {}, (2, 3)),
    "torch.nn.Flatten": ((), {}, (2, 3, 4, 5)),
    "torch.nn.ReLU": ((), {}, (2, 3, 5)),
    "torch.nn.ReLU6": ((), {}, (2, 3, 5)),
    "torch.nn.GELU": ((), {}, (2, 3, 5)),
    "torch.nn.SiLU": ((), {}, (2, 3, 5)),
    "torch.nn.Sigmoid": ((), {}, (2, 3, 5)),
    "torch.nn.Tanh": ((), {}, (2, 3, 5)),
    "torch.nn.Softmax": ((), {"dim": 1}, (2, 3, 5)),
    "torch.nn.LogSoftmax": ((), {"dim": -1}, (2, 3, 5)),
    "torch.nn.Hardswish": ((), {}, (2, 3, 5)),
    "torch.nn.Hardsigmoid": ((), {}, (2, 3, 5)),
    "torch.nn.LeakyReLU": ((0.2,), {}, (2, 3, 5)),
    "torch.nn.ELU": ((), {"alpha": 0.7}, (2, 3, 5)),
    "torch.nn.Mish": ((), {}, (2, 3, 5)),
    "torch.nn.Softplus": ((), {"beta": 2.0, "threshold": 5.0}, (2, 3, 5)),
}

#: (symbol, target) -> reason: a converted layer that genuinely disagrees with torch (a known bug)
KNOWN_MISMATCHES: dict[tuple[str, str], str] = {}


def _twin_layers() -> dict[str, Any]:
    """Layer symbol -> LayerSpec, for every layer of the table with both a `jax` and a `tf` target."""
    return {
        symbol: spec
        for symbol, spec in load_mappings().layers.items()
        if all(spec.targets.get(t) is not None for t in TARGETS)
    }


TWINS = _twin_layers()


def _resolve(qualified: str) -> Any:
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _inputs(symbol: str, shape: tuple[Any, ...]) -> list[np.ndarray]:
    """The case's inputs as NumPy arrays: 3 * standard normal float32 (reaching the saturating
    regions of the activations), integer ids below num_embeddings for Embedding."""
    if symbol == "torch.nn.Embedding":
        num = CASES[symbol][0][0]
        return [np.random.default_rng(0).integers(0, num, shape).astype(np.int64)]
    shapes = shape if isinstance(shape[0], tuple) else (shape,)
    return [3.0 * rand(*s, seed=i) for i, s in enumerate(shapes)]


def _first(out: Any) -> Any:
    """MultiheadAttention returns (output, weights): compare the output."""
    return out[0] if isinstance(out, tuple) else out


def _torch_layer(symbol: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The torch layer, seeded, with every floating parameter and buffer randomised (norms: random
    running statistics and affine parameters, so eval mode is not the identity), in eval mode."""
    torch.manual_seed(0)
    module, _, name = symbol.rpartition(".")
    layer = getattr(importlib.import_module(module), name)(*args, **kwargs)  # torch.nn, einops.layers.torch
    return perturb(layer).eval()


def _run_flax(cls: Any, spec_rngs: bool, args: tuple[Any, ...], kwargs: dict[str, Any], state: Any, xs: list) -> Any:
    extra = {"rngs": nnx.Rngs(0)} if spec_rngs else {}
    layer = cls(*args, **kwargs, **extra)
    load_torch_state_dict(layer, state)
    layer.eval()  # nnx: deterministic Dropout, running-average BatchNorm
    return np.asarray(_first(layer(*[jnp.asarray(x) for x in xs])))


def _run_keras(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], state: Any, xs: list) -> Any:
    layer = cls(*args, **kwargs)
    if not layer.built:
        layer(*xs, training=False)  # build the variables the state_dict fills
    load_torch_state_dict_keras(layer, state)
    return np.asarray(ops.convert_to_numpy(_first(layer(*xs, training=False))))


def _params() -> list[Any]:
    params = []
    for symbol in TWINS:
        if symbol in NOT_NUMERIC or symbol not in CASES:
            continue
        for target in TARGETS:
            reason = KNOWN_MISMATCHES.get((symbol, target))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(symbol, target, id=f"{symbol.rpartition('.')[2]}-{target}", marks=marks))
    return params


def test_every_twin_layer_has_a_case() -> None:
    """(The layers of the catalogue, padding to Transformer layers and losses, have their cases in
    test_layer_catalogue_execute.py.)"""
    from tests.runtime.test_layer_catalogue_execute import CASES as CATALOGUE_CASES

    assert TWINS, "no layer of mappings/layers/torch_nn.yaml has both a jax and a tf target"
    assert not set(CASES) & set(CATALOGUE_CASES), "a layer has a case here and in test_layer_catalogue_execute.py"
    uncovered = sorted(s for s in TWINS if s not in CASES and s not in NOT_NUMERIC and s not in CATALOGUE_CASES)
    assert not uncovered, f"layers with jax and tf targets but no case in CASES or reason in NOT_NUMERIC: {uncovered}"
    stale = sorted((set(CASES) | set(NOT_NUMERIC)) - set(TWINS))
    assert not stale, f"CASES / NOT_NUMERIC name layers without both targets in the table: {stale}"
    assert not set(CASES) & set(NOT_NUMERIC)


@pytest.mark.parametrize(("symbol", "target"), _params())
def test_twin_matches_torch(symbol: str, target: str) -> None:
    args, kwargs, shape = CASES[symbol]
    spec = TWINS[symbol].targets[target]
    cls = _resolve(spec.shim or spec.reference)
    ref = _torch_layer(symbol, args, kwargs)
    xs = _inputs(symbol, shape)
    with torch.no_grad():
        want = _first(ref(*[torch.from_numpy(x.copy()) for x in xs])).numpy()
    if target == "jax":
        got = _run_flax(cls, spec.rngs, args, kwargs, ref.state_dict(), xs)
    else:
        got = _run_keras(cls, args, kwargs, ref.state_dict(), xs)
    assert got.dtype == want.dtype == np.float32, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = float(np.max(np.abs(want))) or 1.0
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    message = f"{symbol} [{target}]: max abs err {err:.3g}, output scale {scale:.3g}"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale, err_msg=message)
