"""The torch.nn layers the catalogue maps (padding, upsampling, reshaping, dropout variants,
activations, norms, 3d pooling, recurrent and Transformer layers, distances, losses), against torch.

Why this test exists: mappings/layers/torch_nn.yaml names a torch-signature class in
precision_transpiler/runtime/{flax,keras}/ for each of these layers; the converter copies that
class into converted code, so it must compute what torch computes with torch's weights. For each
layer of `CASES` (one small constructor configuration and input each) and each target, this builds
the (perturbed) torch layer, the target class the table names with the same arguments, loads the
torch `state_dict()` through the project's weight loaders, runs both in eval mode on the same
float32 input and compares every output array (max error relative to the output's scale). The
layers of the table that test_twins.py does not cover need a case here (test_twins.py checks it);
`test_converted_model_matches_torch` converts one model source using several of them with
`precision_transpiler.transpile` and verifies it end to end.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import jax.numpy as jnp
import torch
from flax import nnx
from keras import ops

from precision_transpiler import transpile
from precision_transpiler.mappings import load_mappings
from precision_transpiler.verify import VerifyOptions, verify_files
from precision_transpiler.weights.torch_to_flax import load_torch_state_dict
from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras
from tests.compare import assert_max_relative, perturb, rand

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning"),  # torch's notes (oneDNN LSTM projections, ...)
    pytest.mark.filterwarnings("ignore:`NLLLoss2d` has been deprecated:FutureWarning"),
    pytest.mark.needs_torch,
    pytest.mark.needs_jax,
    pytest.mark.needs_tf,
]

TARGETS = ("jax", "tf")
RTOL = 1e-5  # float32: max |got - torch| / max |torch| per output array


@dataclass(frozen=True)
class Sub:
    """A layer passed as a constructor argument (TransformerEncoder's layer, its norm): built per
    framework from the same table entry."""

    symbol: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Inputs = tuple[Any, ...] | Callable[[np.random.Generator], list[np.ndarray]]


def _ints(high: int, *shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.integers(0, high, shape).astype(np.int64)


def _probs(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.uniform(0.05, 0.95, shape).astype(np.float32)


def _log_probs(*shape: int, dim: int = 1) -> Callable[[np.random.Generator], np.ndarray]:
    def make(rng: np.random.Generator) -> np.ndarray:
        x = rng.standard_normal(shape)
        return (x - np.log(np.exp(x).sum(dim, keepdims=True))).astype(np.float32)

    return make


def _signs(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0).astype(np.float32)


def _normal(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def _pooled(
    n: int, shape: tuple[int, ...], kernel: int, stride: int
) -> Callable[[np.random.Generator], list[np.ndarray]]:
    """MaxUnpool's inputs: torch's max pooling of a random input, values and indices."""

    def make(rng: np.random.Generator) -> list[np.ndarray]:
        x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
        values, indices = getattr(torch.nn.functional, f"max_pool{n}d")(x, kernel, stride, return_indices=True)
        return [values.numpy(), indices.numpy()]

    return make


def _draw(*makers: Callable[[np.random.Generator], np.ndarray]) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [make(rng) for make in makers]


#: torch layer symbol -> (constructor args, constructor kwargs, inputs): input shapes (3 * standard
#: normal float32; a tuple of shapes is several inputs) or a function drawing the inputs
CASES: dict[str, tuple[tuple[Any, ...], dict[str, Any], Inputs]] = {
    "torch.nn.ZeroPad1d": ((2,), {}, (2, 3, 5)),
    "torch.nn.ZeroPad2d": (((1, 2, 0, 1),), {}, (2, 3, 4, 5)),
    "torch.nn.ZeroPad3d": ((1,), {}, (1, 2, 3, 4, 5)),
    "torch.nn.ConstantPad1d": ((2, 0.5), {}, (2, 3, 5)),
    "torch.nn.ConstantPad2d": (((1, 2, 0, 1), -1.0), {}, (3, 4, 5)),
    "torch.nn.ConstantPad3d": ((1, 0.3), {}, (1, 2, 3, 4, 5)),
    "torch.nn.ReflectionPad1d": ((2,), {}, (2, 3, 5)),
    "torch.nn.ReflectionPad2d": (((1, 2, 2, 1),), {}, (2, 3, 4, 5)),
    "torch.nn.ReflectionPad3d": ((1,), {}, (1, 2, 3, 4, 5)),
    "torch.nn.ReplicationPad1d": ((2,), {}, (2, 3, 5)),
    "torch.nn.ReplicationPad2d": (((1, 2, 2, 1),), {}, (2, 3, 4, 5)),
    "torch.nn.ReplicationPad3d": ((1,), {}, (1, 2, 3, 4, 5)),
    "torch.nn.CircularPad1d": ((2,), {}, (2, 3, 5)),
    "torch.nn.CircularPad2d": (((1, 2, 2, 1),), {}, (2, 3, 4, 5)),
    "torch.nn.CircularPad3d": ((1,), {}, (1, 2, 3, 4, 5)),
    "torch.nn.Upsample": ((), {"scale_factor": 2, "mode": "bilinear", "align_corners": False}, (2, 3, 4, 5)),
    "torch.nn.UpsamplingNearest2d": ((), {"scale_factor": 2}, (2, 3, 4, 5)),
    "torch.nn.UpsamplingBilinear2d": ((), {"size": (7, 9)}, (2, 3, 4, 5)),
    "torch.nn.PixelShuffle": ((2,), {}, (2, 8, 3, 4)),
    "torch.nn.PixelUnshuffle": ((2,), {}, (2, 2, 4, 6)),
    "torch.nn.Unflatten": ((1, (2, 3)), {}, (2, 6, 4)),
    "torch.nn.ChannelShuffle": ((2,), {}, (2, 6, 3, 3)),
    "torch.nn.Unfold": ((3,), {"padding": 1, "stride": 2, "dilation": (1, 2)}, (2, 3, 7, 8)),
    "torch.nn.Fold": (((7, 8), 3), {"padding": 1, "stride": 2, "dilation": (1, 2)}, (2, 27, 12)),
    "torch.nn.EmbeddingBag": (
        (10, 4),
        {"mode": "sum", "padding_idx": 3},
        _draw(_ints(10, 7), lambda rng: np.array([0, 2, 2, 5], np.int64), _normal(7)),
    ),
    "torch.nn.Dropout1d": ((0.3,), {}, (2, 3, 5)),
    "torch.nn.Dropout2d": ((0.3,), {}, (2, 3, 4, 5)),
    "torch.nn.Dropout3d": ((0.3,), {}, (1, 2, 3, 4, 5)),
    "torch.nn.AlphaDropout": ((0.3,), {}, (2, 3, 5)),
    "torch.nn.FeatureAlphaDropout": ((0.3,), {}, (2, 3, 4, 5)),
    "torch.nn.PReLU": ((3,), {}, (2, 3, 5)),
    "torch.nn.SELU": ((), {}, (2, 3, 5)),
    "torch.nn.CELU": ((), {"alpha": 0.7}, (2, 3, 5)),
    "torch.nn.GLU": ((), {"dim": 1}, (2, 4, 5)),
    "torch.nn.Hardtanh": ((-0.5, 2.0), {}, (2, 3, 5)),
    "torch.nn.Threshold": ((0.1, -2.0), {}, (2, 3, 5)),
    "torch.nn.Softshrink": ((0.7,), {}, (2, 3, 5)),
    "torch.nn.Hardshrink": ((0.7,), {}, (2, 3, 5)),
    "torch.nn.Tanhshrink": ((), {}, (2, 3, 5)),
    "torch.nn.Softsign": ((), {}, (2, 3, 5)),
    "torch.nn.LogSigmoid": ((), {}, (2, 3, 5)),
    "torch.nn.Softmax2d": ((), {}, (2, 3, 4, 5)),
    "torch.nn.Softmin": ((), {"dim": 1}, (2, 3, 5)),
    "torch.nn.RReLU": ((0.1, 0.3), {}, (2, 3, 5)),
    "torch.nn.BatchNorm3d": ((3,), {}, (2, 3, 3, 4, 5)),
    "torch.nn.SyncBatchNorm": ((3,), {}, (2, 3, 4, 5)),
    "torch.nn.InstanceNorm1d": ((3,), {"affine": True, "track_running_stats": True}, (2, 3, 7)),
    "torch.nn.InstanceNorm2d": ((3,), {"affine": True}, (2, 3, 4, 5)),
    "torch.nn.InstanceNorm3d": ((3,), {}, (3, 3, 4, 5)),
    "torch.nn.LocalResponseNorm": ((3,), {"alpha": 0.1, "k": 2.0}, (2, 5, 4, 4)),
    "torch.nn.MaxPool3d": ((2,), {}, (1, 2, 4, 6, 6)),
    "torch.nn.AvgPool3d": ((3,), {"stride": 2, "padding": 1}, (1, 2, 5, 6, 6)),
    "torch.nn.AdaptiveAvgPool3d": (((2, 3, 2),), {}, (1, 2, 5, 7, 4)),
    "torch.nn.AdaptiveMaxPool1d": ((3,), {}, (2, 3, 8)),
    "torch.nn.AdaptiveMaxPool3d": ((2,), {}, (1, 2, 5, 6, 4)),
    "torch.nn.MaxUnpool1d": ((3, 2), {}, _pooled(1, (2, 3, 9), 3, 2)),
    "torch.nn.MaxUnpool2d": ((2,), {}, _pooled(2, (2, 3, 6, 8), 2, 2)),
    "torch.nn.MaxUnpool3d": ((2, 1), {}, _pooled(3, (1, 2, 3, 4, 4), 2, 1)),
    "torch.nn.LPPool1d": ((2, 3), {"stride": 2}, (2, 3, 9)),
    "torch.nn.LPPool2d": ((2, 2), {"ceil_mode": True}, (2, 3, 5, 5)),
    "torch.nn.LPPool3d": ((2, 2), {}, (1, 2, 4, 4, 4)),
    "torch.nn.ConvTranspose3d": ((3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (1, 3, 3, 4, 4)),
    "torch.nn.RNN": ((4, 5), {"num_layers": 2, "nonlinearity": "relu"}, (6, 2, 4)),
    "torch.nn.LSTM": ((4, 5), {"num_layers": 2, "bidirectional": True, "batch_first": True, "proj_size": 3}, (2, 6, 4)),
    "torch.nn.GRU": ((4, 5), {"bidirectional": True}, (6, 2, 4)),
    "torch.nn.RNNCell": ((4, 5), {"nonlinearity": "tanh"}, (3, 4)),
    "torch.nn.LSTMCell": ((4, 5), {}, (3, 4)),
    "torch.nn.GRUCell": ((4, 5), {}, (3, 4)),
    "torch.nn.TransformerEncoderLayer": ((8, 2, 16), {"batch_first": True}, (2, 5, 8)),
    "torch.nn.TransformerDecoderLayer": (
        (8, 2, 16),
        {"norm_first": True, "activation": "gelu"},
        ((4, 2, 8), (5, 2, 8)),
    ),
    "torch.nn.TransformerEncoder": (
        (Sub("torch.nn.TransformerEncoderLayer", (8, 2, 16), {"batch_first": True}), 2),
        {"norm": Sub("torch.nn.LayerNorm", (8,))},
        (2, 5, 8),
    ),
    "torch.nn.TransformerDecoder": (
        (Sub("torch.nn.TransformerDecoderLayer", (8, 2, 16)), 2),
        {},
        ((4, 2, 8), (5, 2, 8)),
    ),
    "torch.nn.Transformer": ((8, 2, 1, 1, 16), {"batch_first": True}, ((2, 5, 8), (2, 4, 8))),
    "torch.nn.CosineSimilarity": ((), {"dim": 1}, ((2, 5, 3), (2, 5, 3))),
    "torch.nn.PairwiseDistance": ((), {"p": 3.0}, ((3, 5), (3, 5))),
    "torch.nn.Bilinear": ((3, 4, 5), {}, ((2, 3), (2, 4))),
    "torch.nn.CrossEntropyLoss": ((), {"label_smoothing": 0.1}, _draw(_normal(4, 5), _ints(5, 4))),
    "torch.nn.NLLLoss": ((), {}, _draw(_log_probs(4, 5), _ints(5, 4))),
    "torch.nn.NLLLoss2d": ((), {"reduction": "sum"}, _draw(_log_probs(2, 3, 4, 4), _ints(3, 2, 4, 4))),
    "torch.nn.MSELoss": ((), {}, ((3, 4), (3, 4))),
    "torch.nn.L1Loss": ((), {"reduction": "sum"}, ((3, 4), (3, 4))),
    "torch.nn.BCEWithLogitsLoss": ((), {}, _draw(_normal(3, 4), _probs(3, 4))),
    "torch.nn.BCELoss": ((), {}, _draw(_probs(3, 4), _probs(3, 4))),
    "torch.nn.SmoothL1Loss": ((), {"beta": 0.5}, ((3, 4), (3, 4))),
    "torch.nn.HuberLoss": ((), {"delta": 0.7}, ((3, 4), (3, 4))),
    "torch.nn.KLDivLoss": ((), {"reduction": "batchmean"}, _draw(_log_probs(3, 4), _probs(3, 4))),
    "torch.nn.SoftMarginLoss": ((), {}, _draw(_normal(3, 4), _signs(3, 4))),
    "torch.nn.MarginRankingLoss": ((), {"margin": 0.2}, _draw(_normal(6), _normal(6), _signs(6))),
    "torch.nn.HingeEmbeddingLoss": ((), {"margin": 0.5}, _draw(_normal(3, 4), _signs(3, 4))),
    "torch.nn.CosineEmbeddingLoss": ((), {"margin": 0.1}, _draw(_normal(4, 6), _normal(4, 6), _signs(4))),
    "torch.nn.TripletMarginLoss": ((), {"p": 1.5, "swap": True}, ((4, 6), (4, 6), (4, 6))),
    "torch.nn.TripletMarginWithDistanceLoss": ((), {"margin": 2.0}, ((4, 6), (4, 6), (4, 6))),
    "torch.nn.MultiMarginLoss": ((), {"p": 2, "margin": 0.7}, _draw(_normal(4, 5), _ints(5, 4))),
    "torch.nn.MultiLabelMarginLoss": (
        (),
        {},
        _draw(_normal(3, 5), lambda rng: np.array([[3, 0, -1, 1, 4], [1, 2, 4, 0, 3], [-1, 2, 0, 0, 0]], np.int64)),
    ),
    "torch.nn.MultiLabelSoftMarginLoss": (
        (),
        {},
        _draw(_normal(4, 5), lambda rng: rng.integers(0, 2, (4, 5)).astype(np.float32)),
    ),
    "torch.nn.GaussianNLLLoss": ((), {"full": True}, _draw(_normal(4, 3), _normal(4, 3), _probs(4))),
    "torch.nn.PoissonNLLLoss": (
        (),
        {"full": True},
        _draw(_normal(3, 4), lambda rng: rng.poisson(2.0, (3, 4)).astype(np.float32)),
    ),
}

LAYERS = load_mappings().layers


def _class(symbol: str, target: str) -> tuple[Any, bool]:
    """The class the table converts `symbol` to for `target`, and whether it takes `rngs`."""
    spec = LAYERS[symbol].targets[target]
    module, _, name = (spec.shim or spec.reference).rpartition(".")
    return getattr(importlib.import_module(module), name), spec.rngs


def _build(symbol: str, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The layer in `target` ("torch" for torch itself), layer-valued arguments built alike."""

    def resolve(value: Any) -> Any:
        return _build(value.symbol, target, value.args, value.kwargs) if isinstance(value, Sub) else value

    args = tuple(resolve(a) for a in args)
    kwargs = {k: resolve(v) for k, v in kwargs.items()}
    if target == "torch":
        return getattr(torch.nn, symbol.rpartition(".")[2])(*args, **kwargs)
    cls, rngs = _class(symbol, target)
    extra = {"rngs": nnx.Rngs(0)} if target == "jax" and rngs else {}
    return cls(*args, **kwargs, **extra)


def _inputs(symbol: str, inputs: Inputs) -> list[np.ndarray]:
    if callable(inputs):
        return inputs(np.random.default_rng(sum(map(ord, symbol))))
    shapes = inputs if isinstance(inputs[0], tuple) else (inputs,)
    return [3.0 * rand(*shape, seed=i) for i, shape in enumerate(shapes)]


def _arrays(out: Any) -> list[np.ndarray]:
    """Every array of a (nested tuple) output, as NumPy, in order (LSTM: output, h_n, c_n)."""
    if isinstance(out, tuple | list):
        return [a for item in out for a in _arrays(item)]
    if isinstance(out, torch.Tensor):
        return [out.detach().numpy()]
    return [np.asarray(ops.convert_to_numpy(out))]


def test_every_case_names_a_layer_mapped_to_both_targets() -> None:
    stale = sorted(s for s in CASES if s not in LAYERS or any(t not in LAYERS[s].targets for t in TARGETS))
    assert not stale, f"CASES names layers the table does not map to both targets: {stale}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("symbol", sorted(CASES))
def test_layer_matches_torch(symbol: str, target: str) -> None:
    args, kwargs, inputs = CASES[symbol]
    torch.manual_seed(0)
    ref = perturb(_build(symbol, "torch", args, kwargs)).eval()
    xs = _inputs(symbol, inputs)
    with torch.no_grad():
        want = _arrays(ref(*[torch.from_numpy(x.copy()) for x in xs]))
    layer = _build(symbol, target, args, kwargs)
    if target == "jax":
        load_torch_state_dict(layer, ref.state_dict())
        layer.eval()  # nnx: deterministic dropout, running statistics
        got = _arrays(layer(*[jnp.asarray(x) for x in xs]))
    else:
        load_torch_state_dict_keras(layer, ref.state_dict())
        got = _arrays(layer(*xs, training=False))
    assert len(got) == len(want), (len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, (i, g.shape, w.shape)
        assert_max_relative(g.astype(np.float64), w.astype(np.float64), f"{symbol} [{target}] output {i}", RTOL)


#: MaxPool with `return_indices=True` (what MaxUnpool takes): overlapping windows, padding, dilation,
#: ceil_mode; inputs rounded so that windows hold ties (torch takes the first maximum)
POOL_INDICES = {
    "1d": ("torch.nn.MaxPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 10)),
    "2d": ("torch.nn.MaxPool2d", ((3, 2),), {"stride": 1, "dilation": (1, 2)}, (2, 3, 6, 7)),
    "3d": ("torch.nn.MaxPool3d", (2,), {"padding": 1}, (1, 2, 3, 4, 5)),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(POOL_INDICES))
def test_max_pool_indices_match_torch(case: str, target: str) -> None:
    symbol, args, kwargs, shape = POOL_INDICES[case]
    x = np.round(rand(*shape, seed=3))
    x.reshape(-1)[5] = np.nan  # a NaN is the maximum of every window holding it, as in torch
    kwargs = {**kwargs, "return_indices": True}
    with torch.no_grad():
        want = _arrays(_build(symbol, "torch", args, kwargs)(torch.from_numpy(x.copy())))
    layer = _build(symbol, target, args, kwargs)
    got = _arrays(layer(jnp.asarray(x)) if target == "jax" else layer(x))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


#: one model using representative catalogue layers, converted from source and verified end to end
MODEL = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.pad = nn.ZeroPad2d((1, 0, 1, 0))
        self.norm = nn.InstanceNorm2d(4, affine=True)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.shuffle = nn.PixelShuffle(2)
        self.lstm = nn.LSTM(16, 8, batch_first=True)
        self.encoder = nn.TransformerEncoderLayer(8, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, x):
        y = self.shuffle(self.up(self.norm(self.pad(x))))
        seq, _ = self.lstm(y.reshape(y.shape[0], 16, 16))
        return self.encoder(seq)
"""


@pytest.mark.parametrize("to", TARGETS)
def test_converted_model_matches_torch(tmp_path: Path, to: str) -> None:
    original = tmp_path / "catalogue_model.py"
    original.write_text(MODEL)
    result = transpile(MODEL, to=to, policy="fp32", path=str(original))
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    for name in ("ZeroPad2d", "InstanceNorm2d", "Upsample", "PixelShuffle", "LSTM", "TransformerEncoderLayer"):
        assert f"class {name}(" in result.code, name  # the runtime class, copied in
    converted = tmp_path / f"catalogue_model_{to}.py"
    converted.write_text(result.code)
    verdict = verify_files(
        original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4,3,3]"], policy="fp32")
    )
    assert verdict.passed, verdict.failures
