"""The Keras 3 torch-semantics runtime (precision_transpiler/runtime/keras) against the real torch layers and functions.

Every comparison runs both frameworks on the same random input, with the torch weights (constant-
initialised parameters and buffers perturbed first) copied by name through
`load_torch_state_dict_keras`, and checks the relative L2 error in float32.
"""

from __future__ import annotations

import ast
import collections
import functools
import importlib
import inspect
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")

import torch.nn.functional as F  # noqa: E402
from keras import ops  # noqa: E402
from torch import nn  # noqa: E402

from precision_transpiler.runtime import PACKAGE, SHARED  # noqa: E402
from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras  # noqa: E402
from tests.compare import TOL, assert_within, perturb, rand, relative_l2, top_level_definitions  # noqa: E402
from tests.runtime import runtime_namespace  # noqa: E402

# the Keras runtime modules torch layers and functions are converted to (K: layers, KF: functions)
KERAS_SUBJECTS = (
    "conv",
    "pool",
    "norm",
    "attention",
    "functional",
    "losses",
    "activations",
    "containers",
    "modules",
    "layers",
    "module_api",
    "einops",
    "rng",
)
K = KF = runtime_namespace("keras", KERAS_SUBJECTS)

pytestmark = [  # torch's own notes
    pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning"),
    pytest.mark.filterwarnings("ignore:Implicit dimension choice:UserWarning"),
    pytest.mark.needs_torch,
    pytest.mark.needs_tf,
]


def to_np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().float().numpy().astype(np.float64)
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")), np.float64)


def rel_err(got: Any, want: Any) -> float:
    return relative_l2(to_np(got), to_np(want))


def close(got: Any, want: Any, tol: float = TOL) -> None:
    assert_within(rel_err(got, want), tol)


def pair(*shape: int, seed: int = 0) -> tuple[Any, np.ndarray]:
    x = rand(*shape, seed=seed)
    return torch.from_numpy(x.copy()), x


def transfer(torch_module: Any, layer: Any) -> Any:
    """Perturb the torch module and copy its state_dict into the Keras layer by name (strict)."""
    load_torch_state_dict_keras(layer, perturb(torch_module).state_dict())
    return layer


# ------------------------------------------------------------------------------------------------
# linear, embedding, convolutions


def test_linear() -> None:
    ref = nn.Linear(6, 5)
    layer = transfer(ref, K.Linear(6, 5))
    xt, xk = pair(2, 3, 6)
    close(layer(xk), ref(xt))
    no_bias = nn.Linear(6, 4, bias=False)
    close(transfer(no_bias, K.Linear(6, 4, bias=False))(xk), no_bias(xt))
    assert [w.path.split("/")[-1] for w in layer.weights] == ["weight", "bias"]
    assert tuple(layer.weight.shape) == (5, 6)  # torch layout, not Keras' (in, out)


def test_embedding_padding_idx() -> None:
    ref = nn.Embedding(10, 4, padding_idx=2)
    layer = K.Embedding(10, 4, padding_idx=2)
    assert np.all(to_np(layer.weight)[2] == 0.0)  # torch zeroes the padding row at init
    transfer(ref, layer)
    ids = np.array([[0, 2, 9], [2, 5, 1]], np.int64)
    close(layer(ids), ref(torch.from_numpy(ids)))
    with pytest.raises(NotImplementedError):
        K.Embedding(10, 4, max_norm=1.0)


CONV2D_CASES = [
    dict(kernel_size=3),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0)),
    dict(kernel_size=3, dilation=2, padding=2),
    dict(kernel_size=3, dilation=2, stride=2, padding=1),  # TF refuses stride + dilation natively
    dict(kernel_size=3, groups=2, padding=1),
    dict(kernel_size=3, groups=4, bias=False),  # depthwise (channel multiplier 2)
    dict(kernel_size=4, padding="same"),  # even kernel: asymmetric padding, extra on the high side
    dict(kernel_size=(2, 5), padding="same", dilation=(3, 1)),
    dict(kernel_size=3, padding="valid"),
    dict(kernel_size=3, padding=1, padding_mode="reflect"),
    dict(kernel_size=3, padding=(2, 1), stride=2, padding_mode="replicate"),
    dict(kernel_size=3, padding=1, padding_mode="circular"),
    dict(kernel_size=4, padding="same", padding_mode="reflect"),
]


@pytest.mark.parametrize("kwargs", CONV2D_CASES, ids=str)
def test_conv2d(kwargs: dict[str, Any]) -> None:
    ref = nn.Conv2d(4, 8, **kwargs)
    layer = transfer(ref, K.Conv2d(4, 8, **kwargs))
    assert tuple(layer.weight.shape) == tuple(ref.weight.shape)  # OIHW
    xt, xk = pair(2, 4, 9, 10)
    close(layer(xk), ref(xt))
    if kwargs.get("padding_mode", "zeros") != "zeros" or kwargs.get("groups"):
        close(layer(xk[0]), ref(xt[0]))  # unbatched


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(kernel_size=3),
        dict(kernel_size=4, stride=3, padding=2, dilation=2, groups=2),
        dict(kernel_size=4, padding="same"),
    ],
    ids=str,
)
def test_conv1d(kwargs: dict[str, Any]) -> None:
    ref = nn.Conv1d(4, 6, **kwargs)
    layer = transfer(ref, K.Conv1d(4, 6, **kwargs))
    xt, xk = pair(2, 4, 17)
    close(layer(xk), ref(xt))


def test_conv_rejects_what_torch_rejects() -> None:
    with pytest.raises(ValueError, match="strided"):
        K.Conv2d(4, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="groups"):
        K.Conv2d(4, 6, 3, groups=4)
    with pytest.raises(ValueError, match="padding_mode"):
        K.Conv2d(4, 4, 3, padding_mode="edge")


CONVT_CASES = [
    dict(kernel_size=3),
    dict(kernel_size=3, stride=2, padding=1, output_padding=1),
    dict(kernel_size=4, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(0, 1), output_padding=(1, 2)),
    dict(kernel_size=3, stride=2, groups=2, bias=False),
    dict(kernel_size=3, dilation=2, padding=3, stride=2, output_padding=1),
    dict(kernel_size=2, padding=1),  # padding larger than the kernel overhang: crops
]


@pytest.mark.parametrize("kwargs", CONVT_CASES, ids=str)
def test_conv_transpose2d(kwargs: dict[str, Any]) -> None:
    ref = nn.ConvTranspose2d(4, 6, **kwargs)
    layer = transfer(ref, K.ConvTranspose2d(4, 6, **kwargs))
    xt, xk = pair(2, 4, 5, 7)
    close(layer(xk), ref(xt))
    close(layer(xk[0]), ref(xt[0]))


def test_conv_transpose_output_size_and_1d() -> None:
    ref = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    layer = transfer(ref, K.ConvTranspose2d(3, 2, 3, stride=2, padding=1))
    xt, xk = pair(1, 3, 4, 4)
    close(layer(xk, output_size=(8, 8)), ref(xt, output_size=[8, 8]))
    with pytest.raises(ValueError):
        layer(xk, output_size=(10, 10))
    ref1 = nn.ConvTranspose1d(3, 4, 5, stride=3, padding=2, output_padding=2)
    layer1 = transfer(ref1, K.ConvTranspose1d(3, 4, 5, stride=3, padding=2, output_padding=2))
    xt, xk = pair(2, 3, 6)
    close(layer1(xk), ref1(xt))


# ------------------------------------------------------------------------------------------------
# normalisation


@pytest.mark.parametrize(
    ("momentum", "track", "affine"), [(0.1, True, True), (None, True, True), (0.3, False, True), (0.1, True, False)]
)
def test_batchnorm2d_train_then_eval(momentum: float | None, track: bool, affine: bool) -> None:
    ref = nn.BatchNorm2d(5, momentum=momentum, track_running_stats=track, affine=affine)
    layer = transfer(ref, K.BatchNorm2d(5, momentum=momentum, track_running_stats=track, affine=affine))
    ref.train()
    for step in range(2):  # running stats after two steps (unbiased running_var, torch momentum)
        xt, xk = pair(4, 5, 3, 6, seed=step)
        close(layer(xk, training=True), ref(xt))
    if track:
        close(layer.running_mean, ref.running_mean)
        close(layer.running_var, ref.running_var)
        assert int(layer.num_batches_tracked.numpy()) == int(ref.num_batches_tracked) == 2
    ref.eval()
    xt, xk = pair(3, 5, 4, 4, seed=9)
    close(layer(xk), ref(xt))  # training=None: inference, as Keras defaults
    close(layer(xk, training=False), ref(xt))


def test_batchnorm1d_2d_and_3d_inputs() -> None:
    ref = nn.BatchNorm1d(6)
    layer = transfer(ref, K.BatchNorm1d(6))
    for shape in [(8, 6), (4, 6, 5)]:
        ref.train()
        xt, xk = pair(*shape)
        close(layer(xk, training=True), ref(xt))
        close(layer.running_var, ref.running_var)
        ref.eval()
        close(layer(xk), ref(xt))
    with pytest.raises(ValueError, match="more than 1 value"):
        layer(rand(1, 6), training=True)
    with pytest.raises(ValueError):
        K.BatchNorm2d(6)(rand(4, 6))


@pytest.mark.parametrize(("groups", "affine"), [(1, True), (2, True), (6, False)])
def test_group_norm(groups: int, affine: bool) -> None:
    ref = nn.GroupNorm(groups, 6, affine=affine)
    layer = transfer(ref, K.GroupNorm(groups, 6, affine=affine))
    xt, xk = pair(3, 6, 4, 5)
    close(layer(xk), ref(xt))


@pytest.mark.parametrize(
    ("shape", "kwargs"),
    [(8, {}), ((4, 8), {}), (8, dict(elementwise_affine=False)), (8, dict(bias=False)), (8, dict(eps=1e-3))],
    ids=str,
)
def test_layer_norm(shape: Any, kwargs: dict[str, Any]) -> None:
    ref = nn.LayerNorm(shape, **kwargs)
    layer = transfer(ref, K.LayerNorm(shape, **kwargs))
    xt, xk = pair(2, 3, 4, 8)
    xt, xk = xt * 0.01, xk * 0.01  # small variance: the eps default (torch 1e-5, Keras 1e-3) matters
    close(layer(xk), ref(xt))


def test_layer_norm_default_eps_is_torchs() -> None:
    assert K.LayerNorm(8).eps == 1e-5
    assert K.BatchNorm2d(3).eps == 1e-5
    assert K.GroupNorm(1, 3).eps == 1e-5


def test_dropout() -> None:
    layer = K.Dropout(0.25)
    x = np.ones((64, 64), np.float32)
    close(layer(x), x)  # inference by default
    y = to_np(layer(x, training=True))
    assert np.allclose(y[y != 0], 1.0 / 0.75)
    assert 0.2 < float((y == 0).mean()) < 0.3
    assert np.all(to_np(K.Dropout(1.0)(x, training=True)) == 0.0)
    with pytest.raises(ValueError):
        K.Dropout(1.5)


# ------------------------------------------------------------------------------------------------
# pooling

MAXPOOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0)),
    dict(kernel_size=3, stride=1, dilation=2),
    dict(kernel_size=2, stride=2, dilation=(2, 1), padding=1, ceil_mode=True),
]


@pytest.mark.parametrize("kwargs", MAXPOOL_CASES, ids=str)
def test_max_pool2d(kwargs: dict[str, Any]) -> None:
    xt, xk = pair(2, 3, 9, 10)
    want = nn.MaxPool2d(**kwargs)(xt)
    close(K.MaxPool2d(**kwargs)(xk), want)
    close(K.MaxPool2d(**kwargs)(xk[0]), want[0])
    close(KF.max_pool2d(xk, **kwargs), F.max_pool2d(xt, **kwargs))


AVGPOOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1)),
    dict(kernel_size=3, padding=1, divisor_override=4),
]


@pytest.mark.parametrize("kwargs", AVGPOOL_CASES, ids=str)
def test_avg_pool2d(kwargs: dict[str, Any]) -> None:
    xt, xk = pair(2, 3, 9, 10)
    close(K.AvgPool2d(**kwargs)(xk), nn.AvgPool2d(**kwargs)(xt))
    close(KF.avg_pool2d(xk, **kwargs), F.avg_pool2d(xt, **kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), dict(kernel_size=2), dict(kernel_size=4, stride=3)],
    ids=str,
)
def test_pool1d(kwargs: dict[str, Any]) -> None:
    xt, xk = pair(2, 3, 13)
    close(K.MaxPool1d(**kwargs)(xk), nn.MaxPool1d(**kwargs)(xt))
    close(K.AvgPool1d(**kwargs)(xk), nn.AvgPool1d(**kwargs)(xt))
    close(KF.max_pool1d(xk, **kwargs), F.max_pool1d(xt, **kwargs))
    close(KF.avg_pool1d(xk, count_include_pad=False, **kwargs), F.avg_pool1d(xt, count_include_pad=False, **kwargs))


@pytest.mark.parametrize("size", [1, 3, (2, 5), (None, 3), (7, 4), (10, 10)], ids=str)
def test_adaptive_pool2d(size: Any) -> None:
    xt, xk = pair(2, 3, 10, 9)
    close(K.AdaptiveAvgPool2d(size)(xk), nn.AdaptiveAvgPool2d(size)(xt))
    close(K.AdaptiveMaxPool2d(size)(xk), nn.AdaptiveMaxPool2d(size)(xt))
    close(KF.adaptive_avg_pool2d(xk, size), F.adaptive_avg_pool2d(xt, size))
    close(KF.adaptive_max_pool2d(xk, size), F.adaptive_max_pool2d(xt, size))


@pytest.mark.parametrize("size", [1, 4, 7, 13])
def test_adaptive_pool1d(size: int) -> None:
    xt, xk = pair(2, 3, 10)
    close(K.AdaptiveAvgPool1d(size)(xk), nn.AdaptiveAvgPool1d(size)(xt))
    close(K.AdaptiveMaxPool1d(size)(xk), nn.AdaptiveMaxPool1d(size)(xt))
    close(KF.adaptive_avg_pool1d(xk, size), F.adaptive_avg_pool1d(xt, size))


def test_pool_errors_like_torch() -> None:
    x = rand(1, 1, 6, 6)
    with pytest.raises(ValueError, match="half"):
        K.MaxPool2d(2, padding=2)(x)
    with pytest.raises(ValueError, match="half"):
        K.AvgPool2d(2, padding=2)(x)
    with pytest.raises(NotImplementedError):  # max pooling's indices are supported, adaptive pooling's not
        K.AdaptiveMaxPool2d(2, return_indices=True)


# ------------------------------------------------------------------------------------------------
# attention


def _mha_pair(embed: int = 8, heads: int = 2, **kwargs: Any) -> tuple[Any, Any]:
    ref = nn.MultiheadAttention(embed, heads, **kwargs).eval()
    return ref, transfer(ref, K.MultiheadAttention(embed, heads, **kwargs))


def _masks(kind: str, n: int, heads: int, lq: int, lk: int) -> tuple[Any, Any]:
    """(key_padding_mask, attn_mask) as numpy arrays; torch polarity True = blocked."""
    rng = np.random.default_rng(3)
    kpm = attn = None
    if "kpm" in kind:
        kpm = np.zeros((n, lk), bool)
        kpm[0, -2:] = True
    if "bool" in kind:
        attn = rng.random((lq, lk)) < 0.3
        attn[:, 0] = False  # no fully blocked row
    if "float" in kind:
        attn = rng.standard_normal((lq, lk)).astype(np.float32)
    if "3d" in kind:
        attn = rng.standard_normal((n * heads, lq, lk)).astype(np.float32)
    return kpm, attn


MHA_MATRIX = [
    (dict(), "none"),
    (dict(batch_first=True), "kpm"),
    (dict(), "bool"),
    (dict(batch_first=True), "float+kpm"),
    (dict(), "3d"),
    (dict(bias=False, batch_first=True), "bool+kpm"),
    (dict(kdim=6, vdim=5), "kpm"),
    (dict(add_bias_kv=True, add_zero_attn=True, batch_first=True), "float+kpm"),
]


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask:UserWarning")
@pytest.mark.parametrize(("kwargs", "masks"), MHA_MATRIX, ids=str)
def test_multihead_attention(kwargs: dict[str, Any], masks: str) -> None:
    ref, layer = _mha_pair(**kwargs)
    n, lq, lk = 2, 4, 5
    bf = kwargs.get("batch_first", False)
    q = rand(*((n, lq, 8) if bf else (lq, n, 8)), seed=1)
    k = rand(*((n, lk, kwargs.get("kdim", 8)) if bf else (lk, n, kwargs.get("kdim", 8))), seed=2)
    v = rand(*((n, lk, kwargs.get("vdim", 8)) if bf else (lk, n, kwargs.get("vdim", 8))), seed=3)
    kpm, attn = _masks(masks, n, 2, lq, lk)
    tt = {"key_padding_mask": None if kpm is None else torch.from_numpy(kpm)}
    tt["attn_mask"] = None if attn is None else torch.from_numpy(attn)
    kk = {"key_padding_mask": kpm, "attn_mask": attn}
    for need, average in [(True, True), (True, False), (False, True)]:
        want_out, want_w = ref(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), **tt,
                               need_weights=need, average_attn_weights=average)  # fmt: skip
        got_out, got_w = layer(q, k, v, need_weights=need, average_attn_weights=average, **kk)
        close(got_out, want_out)
        if need:
            close(got_w, want_w)
        else:
            assert got_w is None and want_w is None


def test_multihead_attention_unbatched_causal_and_positional_args() -> None:
    ref, layer = _mha_pair(8, 4)
    x = rand(5, 8)
    causal = np.triu(np.ones((5, 5), bool), 1)
    want, want_w = ref(*(torch.from_numpy(x),) * 3, attn_mask=torch.from_numpy(causal))
    got, got_w = layer(x, x, x, attn_mask=causal)
    close(got, want)
    close(got_w, want_w)
    want, _ = ref(*(torch.from_numpy(x),) * 3, None, False, torch.from_numpy(causal), True, True)
    got, _ = layer(x, x, x, None, False, causal, True, True)  # torch's positional order, is_causal hint
    close(got, want)


def test_multihead_attention_weight_names_and_dropout() -> None:
    layer = K.MultiheadAttention(8, 2, dropout=0.5)
    names = sorted(w.path.split("/")[-1] for w in layer.weights)
    assert names == ["bias", "in_proj_bias", "in_proj_weight", "weight"]
    assert tuple(layer.in_proj_weight.shape) == (24, 8)
    x = rand(3, 2, 8)
    a, _ = layer(x, x, x)
    b, _ = layer(x, x, x)
    close(a, b, 0.0)  # inference: deterministic
    c, _ = layer(x, x, x, training=True)
    assert rel_err(c, a) > 1e-3


@pytest.mark.parametrize("case", ["plain", "bool", "float", "causal", "scale", "gqa", "masked_row"])
def test_scaled_dot_product_attention(case: str) -> None:
    q, k, v = rand(2, 4, 5, 8, seed=1), rand(2, 4, 6, 8, seed=2), rand(2, 4, 6, 8, seed=3)
    kwargs: dict[str, Any] = {}
    if case == "bool":
        mask = np.random.default_rng(0).random((5, 6)) > 0.3
        mask[:, 0] = True
        kwargs["attn_mask"] = mask
    elif case == "float":
        kwargs["attn_mask"] = rand(2, 1, 5, 6, seed=4)
    elif case == "causal":
        kwargs["is_causal"] = True
    elif case == "scale":
        kwargs["scale"] = 0.3
    elif case == "gqa":
        k, v = k[:, :2], v[:, :2]
        kwargs["enable_gqa"] = True
    elif case == "masked_row":
        mask = np.ones((5, 6), bool)
        mask[1] = False
        kwargs["attn_mask"] = mask
    tkwargs = {key: torch.from_numpy(val) if isinstance(val, np.ndarray) else val for key, val in kwargs.items()}
    want = F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), **tkwargs)
    close(KF.scaled_dot_product_attention(q, k, v, **kwargs), want)


MHAF_CASES = [
    "packed",
    "separate",
    "no_weights",
    "per_head",
    "kpm",
    "attn_bool",
    "attn_float3d",
    "bias_kv",
    "zero_attn",
    "no_bias",
    "causal_hint",
    "unbatched",
]


def _mhaf_arguments(case: str) -> dict[str, Any]:
    """F.multi_head_attention_forward's arguments as numpy arrays (E=8, 2 heads, L=4, S=5, N=3)."""
    e, heads, n, lq, lk = 8, 2, 3, 4, 5
    kdim, vdim = (6, 5) if case == "separate" else (e, e)
    batch = () if case == "unbatched" else (n,)
    rng = np.random.default_rng(7)
    args: dict[str, Any] = dict(
        query=rand(lq, *batch, e, seed=1),
        key=rand(lk, *batch, kdim, seed=2),
        value=rand(lk, *batch, vdim, seed=3),
        embed_dim_to_check=e,
        num_heads=heads,
        in_proj_weight=rand(3 * e, e, seed=4),
        in_proj_bias=rand(3 * e, seed=5),
        bias_k=None,
        bias_v=None,
        add_zero_attn=case == "zero_attn",
        dropout_p=0.0,
        out_proj_weight=rand(e, e, seed=6),
        out_proj_bias=rand(e, seed=7),
        need_weights=case != "no_weights",
        average_attn_weights=case != "per_head",
    )
    if case == "separate":
        args.update(in_proj_weight=None, use_separate_proj_weight=True, q_proj_weight=rand(e, e, seed=8),
                    k_proj_weight=rand(e, kdim, seed=9), v_proj_weight=rand(e, vdim, seed=10))  # fmt: skip
    if case == "no_bias":
        args.update(in_proj_bias=None, out_proj_bias=None)
    if case in ("kpm", "bias_kv", "zero_attn", "unbatched"):
        kpm = rng.random((*batch, lk)) < 0.3
        kpm[..., 0] = False  # fully masked rows are NaN in torch too
        args["key_padding_mask"] = kpm
    if case in ("attn_bool", "bias_kv", "causal_hint"):
        attn = np.triu(np.ones((lq, lk), bool), 1) if case == "causal_hint" else rng.random((lq, lk)) < 0.3
        attn[:, 0] = False
        args["attn_mask"] = attn
    if case in ("attn_float3d", "zero_attn"):
        args["attn_mask"] = rng.standard_normal((n * heads, lq, lk)).astype(np.float32)
    if case == "bias_kv":
        args.update(bias_k=rand(1, 1, e, seed=11), bias_v=rand(1, 1, e, seed=12))
    if case == "causal_hint":
        args.update(is_causal=True, need_weights=False)
    return args


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask:UserWarning")
@pytest.mark.parametrize("case", MHAF_CASES)
def test_multi_head_attention_forward(case: str) -> None:
    args = _mhaf_arguments(case)
    want_out, want_w = F.multi_head_attention_forward(
        **{k: torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    )
    got_out, got_w = KF.multi_head_attention_forward(**args)
    assert tuple(got_out.shape) == tuple(want_out.shape)
    close(got_out, want_out)
    if want_w is None:
        assert got_w is None
    else:
        assert tuple(got_w.shape) == tuple(want_w.shape)
        close(got_w, want_w)


def test_multi_head_attention_forward_checks_and_dropout() -> None:
    args = _mhaf_arguments("packed")
    with pytest.raises(ValueError, match="expecting embedding dimension of 6"):
        KF.multi_head_attention_forward(**{**args, "embed_dim_to_check": 6})
    with pytest.raises(NotImplementedError, match="static_k"):
        KF.multi_head_attention_forward(**args, static_k=np.zeros((6, 5, 4), np.float32))
    with pytest.raises(ValueError, match="attn_mask"):
        KF.multi_head_attention_forward(**{**args, "need_weights": False}, is_causal=True)
    plain, _ = KF.multi_head_attention_forward(**args)
    off, _ = KF.multi_head_attention_forward(**{**args, "dropout_p": 0.5}, training=False)
    close(off, plain, 0.0)  # eval: no dropout
    seed = keras.random.SeedGenerator(0)
    for need_weights in (True, False):
        a, _ = KF.multi_head_attention_forward(**{**args, "dropout_p": 0.5, "need_weights": need_weights}, seed=seed)
        b, _ = KF.multi_head_attention_forward(**{**args, "dropout_p": 0.5, "need_weights": need_weights}, seed=seed)
        assert rel_err(a, plain) > 1e-3 and rel_err(a, b) > 1e-3  # fresh masks from the generator


# ------------------------------------------------------------------------------------------------
# functional


def test_functional_conv_linear_norms() -> None:
    xt, xk = pair(2, 4, 9, 8)
    w, b = rand(6, 2, 3, 3, seed=1), rand(6, seed=2)
    for kwargs in [dict(stride=2, padding=1, groups=2), dict(padding="same", dilation=2, groups=2)]:
        close(KF.conv2d(xk, w, b, **kwargs), F.conv2d(xt, torch.from_numpy(w), torch.from_numpy(b), **kwargs))
    w1 = rand(5, 4, 3, seed=3)
    x1t, x1k = pair(2, 4, 11)
    close(KF.conv1d(x1k, w1, None, 2, 1), F.conv1d(x1t, torch.from_numpy(w1), None, 2, 1))
    lw, lb = rand(3, 8, seed=4), rand(3, seed=5)
    close(KF.linear(xk, lw, lb), F.linear(xt, torch.from_numpy(lw), torch.from_numpy(lb)))
    nw, nb = rand(9, 8, seed=6), rand(9, 8, seed=7)
    close(KF.layer_norm(xk, (9, 8), nw, nb), F.layer_norm(xt, (9, 8), torch.from_numpy(nw), torch.from_numpy(nb)))
    gw, gb = rand(4, seed=8), rand(4, seed=9)
    close(KF.group_norm(xk, 2, gw, gb), F.group_norm(xt, 2, torch.from_numpy(gw), torch.from_numpy(gb)))


def test_functional_batch_norm() -> None:
    xt, xk = pair(4, 3, 5, 5)
    mean, var = rand(3, seed=1), np.abs(rand(3, seed=2)) + 0.5
    w, b = rand(3, seed=3), rand(3, seed=4)
    want = F.batch_norm(xt, torch.from_numpy(mean), torch.from_numpy(var), torch.from_numpy(w), torch.from_numpy(b))
    close(KF.batch_norm(xk, mean, var, w, b), want)
    rm, rv = torch.from_numpy(mean.copy()), torch.from_numpy(var.copy())
    km, kv = keras.Variable(mean.copy()), keras.Variable(var.copy())
    want = F.batch_norm(xt, rm, rv, training=True, momentum=0.2)
    close(KF.batch_norm(xk, km, kv, training=True, momentum=0.2), want)
    close(km, rm)
    close(kv, rv)  # unbiased batch variance into the running variance


INTERP_CASES = [
    dict(scale_factor=2, mode="nearest"),
    dict(size=(7, 5), mode="nearest"),
    dict(scale_factor=1.7, mode="nearest"),
    dict(size=(3, 11), mode="nearest-exact"),
    dict(scale_factor=2, mode="bilinear", align_corners=False),
    dict(scale_factor=2, mode="bilinear", align_corners=True),
    dict(size=(7, 13), mode="bilinear", align_corners=False),
    dict(size=(3, 4), mode="bilinear", align_corners=True),
    dict(scale_factor=1.5, mode="bilinear", recompute_scale_factor=True),
    dict(scale_factor=(0.6, 2.3), mode="bilinear"),
    dict(size=(9, 7), mode="bicubic", align_corners=False),
    dict(size=(3, 4), mode="area"),
]


@pytest.mark.parametrize("kwargs", INTERP_CASES, ids=str)
def test_interpolate(kwargs: dict[str, Any]) -> None:
    xt, xk = pair(2, 3, 6, 8)
    close(KF.interpolate(xk, **kwargs), F.interpolate(xt, **kwargs))


@pytest.mark.parametrize(
    ("pads", "mode"),
    [
        ((1, 2), "constant"),
        ((1, 2, 3, 0), "constant"),
        ((-1, 2, 0, -2), "constant"),
        ((2, 1, 1, 2), "reflect"),
        ((2, 1, 1, 2), "replicate"),
        ((2, 1, 1, 3), "circular"),
        ((1, 1), "replicate"),
    ],
    ids=str,
)
def test_pad(pads: tuple[int, ...], mode: str) -> None:
    xt, xk = pair(2, 3, 5, 6)
    if mode != "constant" and len(pads) == 2:  # torch: non-constant 1D padding needs a 2D/3D input
        xt, xk = xt[0], xk[0]
    close(KF.pad(xk, pads, mode=mode), F.pad(xt, pads, mode=mode))
    if mode == "constant":
        close(KF.pad(xk, pads, value=2.5), F.pad(xt, pads, value=2.5))


def test_functional_activations_dropout_one_hot() -> None:
    xt, xk = pair(2, 3, 4, 5)
    close(KF.gelu(xk), F.gelu(xt))
    close(KF.gelu(xk, approximate="tanh"), F.gelu(xt, approximate="tanh"))
    assert rel_err(ops.gelu(xk), F.gelu(xt)) > 1e-5  # Keras' default is the tanh form
    for dim in (None, 0, 1, -1, 2):
        close(KF.softmax(xk, dim=dim), F.softmax(xt, dim=dim))
        close(KF.log_softmax(xk, dim=dim), F.log_softmax(xt, dim=dim))
    x3t, x3k = pair(2, 3, 4)
    close(KF.softmax(x3k), F.softmax(x3t, dim=0))  # torch's legacy implicit dim for 3D input
    close(KF.dropout(xk, 0.3, training=False), xt)
    assert np.all(to_np(KF.dropout(xk, 1.0)) == 0.0)
    labels = np.array([[0, 3], [2, 1]], np.int64)
    got = KF.one_hot(labels)
    want = F.one_hot(torch.from_numpy(labels))
    assert keras.backend.standardize_dtype(got.dtype) == "int64"
    np.testing.assert_array_equal(ops.convert_to_numpy(got), want.numpy())
    np.testing.assert_array_equal(ops.convert_to_numpy(KF.one_hot(labels, 6)), F.one_hot(torch.from_numpy(labels), 6))


#: torch.nn.functional activations with arguments, called as model code passing them around
#: calls them: (name, positional arguments after the input, keyword arguments); an ndarray
#: argument is a weight, "float32" a dtype
FUNCTIONAL_ACTIVATIONS = [
    ("elu", (0.7,), {}),
    ("elu", (), {"alpha": 1.3, "inplace": False}),
    ("elu_", (0.7,), {}),
    ("celu", (), {"alpha": 0.5}),
    ("celu_", (2.0,), {}),
    ("selu", (), {"inplace": True}),
    ("selu_", (), {}),
    ("relu_", (), {}),
    ("leaky_relu", (0.2,), {}),
    ("leaky_relu", (), {"negative_slope": 0.05, "inplace": True}),
    ("leaky_relu_", (), {"negative_slope": 0.3}),
    ("hardtanh", (-0.5, 2.0), {}),
    ("hardtanh", (), {"min_val": -2.0, "max_val": 0.5}),
    ("hardtanh_", (-0.3,), {"max_val": 0.4}),
    ("threshold", (0.5, -2.0), {}),
    ("threshold", (), {"threshold": -0.1, "value": 3.0, "inplace": True}),
    ("threshold_", (0.2, 1.5), {}),
    ("softplus", (), {}),
    ("softplus", (2.0, 3.0), {}),
    ("softplus", (), {"beta": 0.5, "threshold": 1.0}),
    ("softsign", (), {}),
    ("softshrink", (0.8,), {}),
    ("softshrink", (), {"lambd": 0.5}),
    ("hardshrink", (), {"lambd": 0.5}),
    ("hardshrink", (0.9,), {}),
    ("tanhshrink", (), {}),
    ("softmin", (1,), {}),
    ("softmin", (), {"dim": -1}),
    ("softmin", (0,), {"dtype": "float32"}),
    ("glu", (), {}),
    ("glu", (1,), {}),
    ("glu", (), {"dim": -1}),
    ("normalize", (), {}),
    ("normalize", (3.0, -1), {}),
    ("normalize", (), {"p": 1.0, "dim": 2, "eps": 0.5}),
    ("normalize", (), {"dim": (1, 2)}),
    ("normalize", (float("inf"),), {"dim": 0}),
    ("rrelu", (0.1, 0.3), {}),
    ("rrelu", (), {"lower": 0.2, "upper": 0.4, "training": False}),
    ("rrelu_", (), {"lower": 0.05}),
    ("prelu", (rand(4, seed=5),), {}),
    ("prelu", (), {"weight": np.array([0.3], np.float32)}),
]


def activation_input() -> np.ndarray:
    """3 * standard normal (2, 4, 6), with the boundaries the functions decide at (0, +-0.5) and a
    column whose norm over dim 1 is below normalize's default eps."""
    x = 3.0 * rand(2, 4, 6, seed=3)
    x[1, 0, :3] = (0.5, -0.5, 0.0)
    x[0, :, 0] = 1e-13
    return x


def _torch_argument(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    return getattr(torch, value) if value == "float32" else value


def _case_id(case: tuple[str, tuple, dict[str, Any]]) -> str:
    name, args, kwargs = case
    shown = [("weight" if isinstance(a, np.ndarray) else repr(a)) for a in args]
    shown += [f"{k}={'weight' if isinstance(v, np.ndarray) else repr(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(shown)})"


@pytest.mark.parametrize(("name", "args", "kwargs"), FUNCTIONAL_ACTIVATIONS, ids=map(_case_id, FUNCTIONAL_ACTIVATIONS))
def test_functional_activations_take_torch_arguments(name: str, args: tuple, kwargs: dict[str, Any]) -> None:
    x = activation_input()
    want = getattr(F, name)(
        torch.from_numpy(x.copy()), *map(_torch_argument, args), **{k: _torch_argument(v) for k, v in kwargs.items()}
    )
    got = getattr(KF, name)(ops.convert_to_tensor(x), *args, **kwargs)
    assert keras.backend.standardize_dtype(got.dtype) == "float32" and tuple(got.shape) == tuple(want.shape)
    close(got, want)


def test_functional_activations_check_as_torch_and_draw_rrelu_slopes() -> None:
    x = ops.convert_to_tensor(activation_input())
    with pytest.raises(ValueError, match="min_val cannot be greater"):
        KF.hardtanh(x, 1.0, -1.0)
    with pytest.raises(RuntimeError, match="scalars"):
        KF.glu(ops.convert_to_tensor(1.0))
    with pytest.raises(NotImplementedError, match="out="):
        KF.normalize(x, out=x)
    with pytest.raises(NotImplementedError, match="several dims"):
        KF.normalize(x, 1.0, (1, 2))
    # training: a slope drawn per negative element from U(lower, upper), positives unchanged
    y = ops.convert_to_numpy(KF.rrelu(x, 0.1, 0.3, training=True, seed=keras.random.SeedGenerator(0)))
    xs = ops.convert_to_numpy(x)
    negative = xs < -1e-3
    slopes = y[negative] / xs[negative]
    assert slopes.min() >= 0.1 - 1e-6 and slopes.max() <= 0.3 + 1e-6 and slopes.std() > 0.03
    np.testing.assert_array_equal(y[xs >= 0], xs[xs >= 0])
    first, second = (ops.convert_to_numpy(KF.rrelu_(x, training=True)) for _ in range(2))
    assert not np.array_equal(first, second)


def test_activation_layers() -> None:
    xt, xk = pair(2, 3, 4, 5)
    xt, xk = xt * 4, xk * 4
    cases = [
        (K.ReLU(), nn.ReLU()),
        (K.ReLU6(), nn.ReLU6()),
        (K.GELU(), nn.GELU()),
        (K.GELU("tanh"), nn.GELU("tanh")),
        (K.SiLU(), nn.SiLU()),
        (K.Sigmoid(), nn.Sigmoid()),
        (K.Tanh(), nn.Tanh()),
        (K.Softmax(dim=1), nn.Softmax(dim=1)),
        (K.Softmax(), nn.Softmax()),
        (K.LogSoftmax(dim=-1), nn.LogSoftmax(dim=-1)),
        (K.Hardswish(), nn.Hardswish()),
        (K.Hardsigmoid(), nn.Hardsigmoid()),
        (K.LeakyReLU(), nn.LeakyReLU()),
        (K.LeakyReLU(0.2), nn.LeakyReLU(0.2)),
        (K.ELU(alpha=0.7), nn.ELU(alpha=0.7)),
        (K.Mish(), nn.Mish()),
        (K.Softplus(), nn.Softplus()),
        (K.Softplus(beta=2.0, threshold=3.0), nn.Softplus(beta=2.0, threshold=3.0)),
        (K.Identity(54, unused=1), nn.Identity(54, unused=1)),
        (K.Flatten(), nn.Flatten()),
        (K.Flatten(0, 2), nn.Flatten(0, 2)),
        (K.Flatten(2), nn.Flatten(2)),
    ]
    for layer, ref in cases:
        close(layer(xk), ref(xt)), type(ref).__name__


# ------------------------------------------------------------------------------------------------
# containers, mixed precision, models


def test_sequential_api() -> None:
    seq = K.Sequential(K.Linear(4, 5), K.ReLU(), K.Linear(5, 3))
    assert len(seq) == 3 and isinstance(seq[0], K.Linear) and isinstance(seq[-1], K.Linear)
    assert len(seq.weights) == 4
    assert isinstance(seq[:2], K.Sequential) and len(seq[:2]) == 2
    seq.append(K.Tanh())
    assert list(seq._torch_modules) == ["0", "1", "2", "3"]
    del seq[1]  # renumbers, like torch
    assert list(seq._torch_modules) == ["0", "1", "2"] and isinstance(seq[1], K.Linear)
    seq.insert(1, K.GELU())
    assert isinstance(seq[1], K.GELU) and len(seq) == 4
    seq[2] = K.Linear(5, 3)
    assert len(seq.weights) == 4  # the replaced child is no longer tracked
    assert isinstance(seq.pop(), K.Tanh) and len(seq) == 3
    named = K.Sequential(collections.OrderedDict([("fc", K.Linear(4, 2)), ("act", K.ReLU())]))
    assert list(named._torch_modules) == ["fc", "act"]
    assert tuple(named(rand(3, 4)).shape) == (3, 2)
    assert len(K.Sequential()) == 0


def test_module_list_and_dict_api() -> None:
    ml = K.ModuleList([K.Linear(2, 2) for _ in range(3)])
    assert len(ml) == 3 and len(ml.weights) == 6
    ml.append(K.Linear(2, 2)).extend([K.ReLU()])
    assert len(ml) == 5 and len(ml.weights) == 8
    assert isinstance(ml[1:3], K.ModuleList) and len(ml[1:3]) == 2
    del ml[0]
    ml[0] = K.Linear(2, 2, bias=False)
    assert len(ml.weights) == 5
    assert len(ml + K.ModuleList([K.ReLU()])) == 5
    md = K.ModuleDict({"name": K.Linear(2, 3), "weights": K.ReLU()})  # keys that are Keras attributes
    md["proj"] = K.Linear(3, 1)
    assert list(md) == ["name", "weights", "proj"] and "proj" in md and "x" not in md
    assert len(md.weights) == 4 and isinstance(md["name"], K.Linear)
    md["name"] = K.Linear(2, 3, bias=False)
    assert len(md.weights) == 3 and list(md) == ["name", "weights", "proj"]
    assert [k for k, _ in md.items()] == list(md.keys())


def test_module_dict_entries_are_attributes() -> None:
    """As torch's Module.__getattr__ reads `_modules`: `md.key` is the entry (nanoGPT's
    `self.transformer.wte`), a layer assigned as an attribute is an entry, and missing names raise
    AttributeError (hasattr, copy and pickle rely on it)."""
    md = K.ModuleDict(dict(wte=K.Linear(4, 4)))
    assert md.wte is md["wte"] and tuple(md.wte(rand(2, 4)).shape) == (2, 4)
    md.h = K.ModuleList([K.Linear(4, 4)])
    assert list(md) == ["wte", "h"] and "h" not in vars(md) and md.h is md["h"] and len(md.weights) == 4
    md.note = 3  # not a layer: a plain attribute, as torch
    assert md.note == 3 and "note" not in md
    assert not hasattr(md, "missing")
    del md.h
    assert list(md) == ["wte"]
    copied = K.torch_deepcopy(md)
    assert copied.wte is not md.wte and list(copied) == ["wte"]
    bare = object.__new__(K.ModuleDict)  # before __init__ (Keras reads attributes while it runs)
    assert not hasattr(bare, "wte")


@pytest.mark.parametrize(
    ("make_ref", "make_layer", "shape"),
    [
        (lambda: nn.Conv2d(4, 6, 3, padding=1), lambda d: K.Conv2d(4, 6, 3, padding=1, dtype=d), (2, 4, 8, 8)),
        (lambda: nn.Linear(8, 5), lambda d: K.Linear(8, 5, dtype=d), (3, 8)),
        (lambda: nn.LayerNorm(8), lambda d: K.LayerNorm(8, dtype=d), (3, 4, 8)),
        (lambda: nn.BatchNorm2d(4).eval(), lambda d: K.BatchNorm2d(4, dtype=d), (2, 4, 5, 5)),
        (lambda: nn.GroupNorm(2, 4), lambda d: K.GroupNorm(2, 4, dtype=d), (2, 4, 5, 5)),
        (lambda: nn.ConvTranspose2d(4, 3, 3, stride=2), lambda d: K.ConvTranspose2d(4, 3, 3, 2, dtype=d), (2, 4, 4, 4)),
        (
            lambda: nn.MaxPool2d(3, 2, 1, ceil_mode=True),
            lambda d: K.MaxPool2d(3, 2, 1, ceil_mode=True, dtype=d),
            (2, 3, 8, 9),
        ),
        (
            lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False),
            lambda d: K.AvgPool2d(3, 2, 1, False, False, dtype=d),
            (2, 3, 8, 9),
        ),
        (lambda: nn.GELU(), lambda d: K.GELU(dtype=d), (2, 3, 8)),
    ],
    ids=["conv2d", "linear", "layernorm", "batchnorm", "groupnorm", "convtranspose", "maxpool", "avgpool", "gelu"],
)
def test_mixed_bfloat16_policy(make_ref: Any, make_layer: Any, shape: tuple[int, ...]) -> None:
    ref = perturb(make_ref())
    layer = make_layer("mixed_bfloat16")
    load_torch_state_dict_keras(layer, ref.state_dict())
    assert layer.compute_dtype == "bfloat16" and layer.variable_dtype == "float32"
    assert all(keras.backend.standardize_dtype(w.dtype) in ("float32", "int64") for w in layer.weights)
    xt, xk = pair(*shape)
    got = layer(xk)
    assert keras.backend.standardize_dtype(got.dtype) == "bfloat16"
    close(got, ref(xt), 2e-2)


def test_dtype_argument() -> None:
    assert K.Linear(2, 2, dtype=torch.float64).compute_dtype == "float64"  # torch dtype objects by name
    assert K.Linear(2, 2, dtype=np.float16).variable_dtype == "float16"
    layer = K.Linear(2, 2, dtype=keras.DTypePolicy("mixed_bfloat16"), name="fc", device="cpu")
    assert layer.name == "fc" and layer.dtype_policy.name == "mixed_bfloat16"
    mha = K.MultiheadAttention(8, 2, dtype="mixed_bfloat16")
    assert mha.out_proj.compute_dtype == "bfloat16"
    out, _ = mha(rand(3, 2, 8), rand(3, 2, 8), rand(3, 2, 8))
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"


class TorchNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.GroupNorm(2, 8), nn.GELU()) for _ in range(2)]
        )
        self.heads = nn.ModuleDict({"pool": nn.AdaptiveAvgPool2d(1), "norm": nn.LayerNorm(8)})
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: Any) -> Any:
        x = self.stem(x)
        for block in self.blocks:
            x = x + block(x)
        tokens = self.heads["norm"](x.flatten(2).transpose(1, 2))
        tokens, _ = self.attn(tokens, tokens, tokens, need_weights=False)
        pooled = self.heads["pool"](tokens.transpose(1, 2).reshape(x.shape)).flatten(1)
        return self.fc(pooled)


class KerasNet(keras.Model):
    def __init__(self) -> None:
        super().__init__()
        self.stem = K.Sequential(K.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), K.BatchNorm2d(8), K.ReLU())
        self.blocks = K.ModuleList(
            [K.Sequential(K.Conv2d(8, 8, 3, padding=1, groups=8), K.GroupNorm(2, 8), K.GELU()) for _ in range(2)]
        )
        self.heads = K.ModuleDict({"pool": K.AdaptiveAvgPool2d(1), "norm": K.LayerNorm(8)})
        self.attn = K.MultiheadAttention(8, 2, batch_first=True)
        self.fc = K.Linear(8, 4)

    def call(self, x: Any, training: bool | None = None) -> Any:
        x = self.stem(x)
        for block in self.blocks:
            x = x + block(x)
        _, c, h, w = x.shape
        tokens = self.heads["norm"](ops.transpose(ops.reshape(x, (-1, c, h * w)), (0, 2, 1)))
        tokens, _ = self.attn(tokens, tokens, tokens, need_weights=False)
        pooled = self.heads["pool"](ops.reshape(ops.transpose(tokens, (0, 2, 1)), (-1, c, h, w)))
        return self.fc(ops.reshape(pooled, (-1, c)))


def test_nested_model_weights_and_state_dict() -> None:
    ref = perturb(TorchNet()).eval()
    model = KerasNet()
    torch_state = ref.state_dict()
    n_params = len(list(ref.parameters()))
    n_buffers = len(list(ref.buffers()))
    assert len(model.weights) == len(torch_state) == n_params + n_buffers  # before any call
    assert len(model.trainable_weights) == n_params and len(model.non_trainable_weights) == n_buffers
    assert sum(int(np.prod(w.shape)) for w in model.trainable_weights) == sum(p.numel() for p in ref.parameters())
    load_torch_state_dict_keras(model, torch_state)
    xt, xk = pair(2, 3, 12, 12)
    close(model(xk), ref(xt))
    compiled = keras.backend.backend() == "tensorflow"
    if compiled:  # traced with a dynamic batch axis, as model.fit/predict may trace
        import tensorflow as tf

        fn = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec((None, 3, 12, 12), tf.float32)])
        close(fn(xk), ref(xt))
    ref.train()
    close(model(xk, training=True), ref(xt))  # training propagates to the nested BatchNorm
    close(model.stem[1].running_var, ref.stem[1].running_var)
    if compiled:  # running-stat updates inside a traced function
        train_fn = tf.function(lambda x: model(x, training=True))
        xt2, xk2 = pair(2, 3, 12, 12, seed=5)
        close(train_fn(xk2), ref(xt2))
        close(model.stem[1].running_mean, ref.stem[1].running_mean)
        close(model.stem[1].running_var, ref.stem[1].running_var)
        assert int(model.stem[1].num_batches_tracked.numpy()) == 2


def test_functional_api_model_fits() -> None:
    inputs = keras.Input((3, 8, 8))
    body = K.Sequential(K.Conv2d(3, 4, 3, padding=1), K.BatchNorm2d(4), K.ReLU(), K.Dropout(0.1), K.MaxPool2d(2))
    head = K.Sequential(K.AdaptiveAvgPool2d(1), K.Flatten(), K.Linear(4, 2))
    model = keras.Model(inputs, head(body(inputs)))
    assert tuple(model.output.shape) == (None, 2) and len(model.weights) == 9
    model.compile(optimizer="sgd", loss="mse")
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((10, 3, 8, 8)).astype(np.float32), rng.standard_normal((10, 2)).astype(np.float32)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # batches of 4, 4, 2
    assert int(body[1].num_batches_tracked.numpy()) == 3
    assert not np.allclose(body[1].running_mean.numpy(), 0.0)


def test_state_dict_loader_errors() -> None:
    ref = TorchNet()
    model = KerasNet()
    state = dict(ref.state_dict())
    state["fc.weight"] = torch.zeros(3, 3)
    state["nope.weight"] = torch.zeros(1)
    del state["stem.1.running_mean"]
    with pytest.raises(ValueError) as error:
        load_torch_state_dict_keras(model, state)
    message = str(error.value)
    assert "fc.weight: torch shape (3, 3)" in message and "nope" in message and "running_mean" in message
    partial = {k: v for k, v in ref.state_dict().items() if k.startswith("fc.")}
    missing = load_torch_state_dict_keras(model, partial, strict=False)
    assert len(missing) == len(model.weights) - 2
    close(model.fc.weight, ref.fc.weight)


# ------------------------------------------------------------------------------------------------
# the modules are copyable definition by definition


_ALLOWED_IMPORTS = {"import math", "import types", "from typing import Any", "import keras", "import numpy as np",
                    "from keras import ops", "import collections", "import copy", "import dataclasses",
                    "import inspect", "from __future__ import annotations"}  # fmt: skip


@functools.cache
def _source(subject: str) -> tuple[str, ast.Module]:
    source = inspect.getsource(importlib.import_module(f"precision_transpiler.runtime.keras.{subject}"))
    return source, ast.parse(source)


@pytest.mark.parametrize("subject", KERAS_SUBJECTS)
def test_runtime_module_imports_only_the_allowed_modules(subject: str) -> None:
    tree = _source(subject)[1]
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    runtime = [
        n for n in imports if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("precision_transpiler.")
    ]
    # einops.py calls einops, which the converted code that uses its layers imports already
    allowed = _ALLOWED_IMPORTS | ({"import einops"} if subject == "einops" else set())
    assert {ast.unparse(n) for n in imports if n not in runtime} <= allowed
    # helpers come from the framework-free modules (common, pool, losses, ...) or another Keras
    # module (vendor.py follows those imports), never from Flax; functional.py, which the others
    # take helpers from, from the framework-free modules only
    shared = {f"{PACKAGE}.{m}" for m in SHARED}
    for node in runtime:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        assert node.module in shared or node.module.startswith(f"{PACKAGE}.keras."), node.module
        assert subject != "functional" or node.module in shared, node.module
    for node in tree.body:  # no module-level state besides constants, helpers and classes
        assert isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef | ast.Assign | ast.Expr)


def test_helpers_are_defined_once() -> None:
    seen: dict[str, str] = {}
    for subject in KERAS_SUBJECTS:
        for name in top_level_definitions(_source(subject)[1]):
            assert name not in seen, f"{name} is defined in {seen[name]} and {subject}"
            seen[name] = subject


def _public(subject: str) -> list[tuple[str, str]]:
    defs = top_level_definitions(_source(subject)[1])
    return [(subject, n) for n in defs if not n.startswith("_") and not n.isupper()]


@pytest.mark.parametrize(("subject", "name"), [p for s in KERAS_SUBJECTS for p in _public(s)])
def test_definition_is_copyable(subject: str, name: str) -> None:
    """The converter's copy of one public definition (with every helper it needs, taken from the
    other runtime modules through their imports) runs on its own."""
    from precision_transpiler.convert.vendor import vendor_shims

    code, missing = vendor_shims(
        f"import precision_transpiler\n\nOBJ = precision_transpiler.runtime.keras.{subject}.{name}\n"
    )
    tree = ast.parse(code)
    imported = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not missing and not [i for i in imported if "precision_transpiler" in i], imported
    copied = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert len({n.name for n in copied}) == len(copied)  # each definition copied once
    namespace: dict[str, Any] = {"__name__": "copied_shims"}
    exec(compile(code, f"<copied {name}>", "exec"), namespace)
    obj = namespace["OBJ"]
    assert obj.__doc__ and "torch" in obj.__doc__, f"{name} needs a docstring naming the torch behaviour"
    x = rand(1, 3, 6, 6)
    if name == "Conv2d":
        assert tuple(obj(3, 2, 3)(x).shape) == (1, 2, 4, 4)
    elif name == "MaxPool2d":
        assert tuple(obj(2)(x).shape) == (1, 3, 3, 3)
    elif name == "interpolate":
        assert tuple(obj(x, scale_factor=2, mode="bilinear").shape) == (1, 3, 12, 12)


def test_vendored_definitions_run() -> None:
    from precision_transpiler.convert.vendor import vendor_shims

    code = (
        "import precision_transpiler\n\n"
        "def build():\n"
        "    return precision_transpiler.runtime.keras.containers.Sequential(\n"
        "        precision_transpiler.runtime.keras.conv.Conv2d(3, 4, 3, padding='same'),\n"
        "        precision_transpiler.runtime.keras.norm.BatchNorm2d(4),\n"
        "        precision_transpiler.runtime.keras.activations.GELU(),\n"
        "    )\n\n"
        "def up(x):\n"
        "    return precision_transpiler.runtime.keras.functional.interpolate(x, scale_factor=2, mode='bilinear')\n"
    )
    vendored, missing = vendor_shims(code)
    assert not missing and "import precision_transpiler" not in vendored and "runtime.keras" not in vendored
    # both modules copied into one file: the helpers they share appear once
    assert vendored.count("\ndef _tuple(") == 1
    assert (
        vendored.index("\ndef _tuple(") < vendored.index("\ndef _conv_nd(") < vendored.index("\nclass _ConvNd(")
    )  # helpers first
    namespace: dict[str, Any] = {"__name__": "vendored"}
    exec(compile(vendored, "<vendored>", "exec"), namespace)
    y = namespace["up"](namespace["build"]()(rand(1, 3, 5, 5)))
    assert tuple(y.shape) == (1, 4, 10, 10)


def test_deep_and_shallow_copies_of_built_layers() -> None:
    """`copy.deepcopy(layer)` in converted code: new variables holding the same values, sub-layers
    shared inside the copied value stay shared; `copy.copy` shares the variables, as torch does."""
    x = rand(2, 4)
    first = K.Sequential(K.Linear(4, 4), K.GELU(), K.Linear(4, 3))
    expected = to_np(first(x))
    copies = K.torch_deepcopy([first, first])
    assert copies[0] is copies[1] and copies[0] is not first
    np.testing.assert_array_equal(to_np(copies[0](x)), expected)
    weight = copies[0][0].weight
    assert weight is not first[0].weight
    weight.assign(weight * 0.0)
    np.testing.assert_array_equal(to_np(first(x)), expected)  # the original keeps its weights
    shallow = K.torch_copy(first)
    assert shallow is not first and shallow[0].weight is first[0].weight
    assert K.torch_copy([1, 2]) == [1, 2]


@pytest.mark.parametrize("built", [False, True])
def test_deep_copies_of_layers_with_seed_generators(built: bool) -> None:
    """A layer holding Dropout (its keras.random.SeedGenerator holds the backend module, which
    copy.deepcopy cannot pickle) deep-copies: each copy has its own generator, tracked by the
    copied layer, and draws its own masks, as torch's copies draw from one global generator."""
    x = rand(64, 4)
    first = K.Sequential(K.Linear(4, 4), K.Dropout(0.5))
    if built:
        first(x)
    copies = [K.torch_deepcopy(first) for _ in range(2)]
    for copied in copies:
        generator = copied[1].seed_generator
        assert generator is not first[1].seed_generator and generator.state is not first[1].seed_generator.state
        assert any(g is generator for g in copied[1]._seed_generators)
        np.testing.assert_array_equal(to_np(copied(x)), to_np(first(x)))  # inference: the same weights
    masks = [to_np(layer(x, training=True)) == 0 for layer in (first, *copies)]
    assert all(0.2 < m.mean() < 0.8 for m in masks)
    assert not (masks[1] == masks[2]).all()
    seeded = keras.random.SeedGenerator(3)
    seeded.next()
    kept = K.torch_deepcopy({"generator": seeded, "module": np})  # modules are shared, not copied
    assert kept["module"] is np and kept["generator"] is not seeded
    np.testing.assert_array_equal(to_np(kept["generator"].state.value), to_np(seeded.state.value))


def test_containers_of_their_own_type_keep_their_class() -> None:
    """A module attribute holding a container subclass with no layer in it keeps its class (Keras
    would track it as a plain dict, list or tuple): e3nn's Irreps, a tuple of tuple subclasses,
    became lists and failed when rebuilt (`l must be positive integer, got [1, -1]`)."""

    class Irrep(tuple):
        pass

    class Irreps(tuple):
        pass

    class Config(dict):
        pass

    irreps = Irreps([(1, Irrep((0, 1))), (2, Irrep((1, -1)))])
    module = K.TorchModule()
    module.irreps, module.config, module.irreps_list = irreps, Config(a=1), [irreps, irreps]
    assert type(module.irreps) is Irreps and type(module.irreps[1][1]) is Irrep
    assert type(module.irreps_list[1]) is Irreps  # a plain list of them too
    assert type(module.config) is Config
    module.layers = (K.Linear(2, 2),)  # a container holding a layer is still tracked
    assert len(module._layers) == 1
