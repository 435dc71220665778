"""The Flax NNX runtime (precision_transpiler/runtime/flax) against the real torch layers and
functions, and torch -> Flax weight transfer.

Every comparison runs both frameworks on the same random input, with the torch weights copied
through `load_torch_state_dict` (constant-initialised parameters and buffers perturbed first), and
checks the relative L2 error in float32.
"""

from __future__ import annotations

import ast
import collections
import functools
import importlib
import inspect
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")

import jax.numpy as jnp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from precision_transpiler.runtime import PACKAGE, SHARED  # noqa: E402
from precision_transpiler.weights import (  # noqa: E402
    flax_state_to_torch_keys,
    load_torch_state_dict,
    torch_keys_to_flax_paths,
)
from tests.compare import TOL, assert_within, perturb, rand, relative_l2, top_level_definitions  # noqa: E402
from tests.runtime import runtime_namespace  # noqa: E402

# the Flax runtime modules torch layers and functions are converted to
FLAX_SUBJECTS = (
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
S = runtime_namespace("flax", FLAX_SUBJECTS)

pytestmark = [
    pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning"),  # torch's own note
    pytest.mark.needs_torch,
    pytest.mark.needs_jax,
]


def rel_err(got: Any, want: Any) -> float:
    got = np.asarray(got, np.float64)
    want = want.detach().numpy().astype(np.float64) if isinstance(want, torch.Tensor) else np.asarray(want, np.float64)
    return relative_l2(got, want)


def close(got: Any, want: Any, tol: float = TOL) -> None:
    assert_within(rel_err(got, want), tol)


def pair(*shape: int, seed: int = 0) -> tuple[Any, Any]:
    x = rand(*shape, seed=seed)
    return torch.from_numpy(x.copy()), jnp.asarray(x)


def transfer(torch_module: Any, factory: Any) -> Any:
    """Build the shim abstractly (no random init: fast) and fill it from the torch module's state_dict."""
    shim = nnx.eval_shape(factory)
    load_torch_state_dict(shim, torch_module.state_dict())
    return shim


RNGS = nnx.Rngs(0)

# ------------------------------------------------------------------------------------------------
# convolutions

CONV2D_CASES = [
    dict(kernel_size=3),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0)),
    dict(kernel_size=3, dilation=2, padding=2),
    dict(kernel_size=3, groups=2, padding=1),
    dict(kernel_size=3, groups=4, bias=False),
    dict(kernel_size=4, padding="same"),
    dict(kernel_size=(2, 5), padding="same", dilation=(3, 1)),
    dict(kernel_size=3, padding="valid"),
    dict(kernel_size=3, padding=1, padding_mode="reflect"),
    dict(kernel_size=3, padding=(2, 1), stride=2, padding_mode="replicate"),
    dict(kernel_size=3, padding=1, padding_mode="circular"),
    dict(kernel_size=4, padding="same", padding_mode="reflect"),
]


@pytest.mark.parametrize("kwargs", CONV2D_CASES, ids=lambda k: str(k))
def test_conv2d(kwargs: dict[str, Any]) -> None:
    ref = nn.Conv2d(4, 8, **kwargs)
    shim = transfer(ref, lambda: S.Conv2d(4, 8, **kwargs, rngs=nnx.Rngs(0)))
    xt, xj = pair(2, 4, 9, 10)
    close(shim(xj), ref(xt))
    if kwargs.get("padding_mode", "zeros") != "zeros" or kwargs.get("groups"):
        close(shim(xj[0]), ref(xt[0]))  # unbatched


@pytest.mark.parametrize(
    ("kwargs", "size"),
    [
        (dict(kernel_size=3, padding=1), (2, 2)),  # ResNet's last stage: the kernel is larger than the image
        (dict(kernel_size=3, padding=1, stride=2, bias=False), (2, 1)),
        (dict(kernel_size=(3, 5), padding=(1, 4), dilation=(1, 2)), (1, 3)),
        (dict(kernel_size=7, padding=3, padding_mode="reflect"), (4, 4)),
    ],
    ids=str,
)
def test_conv2d_on_images_smaller_than_the_kernel(kwargs: dict[str, Any], size: tuple[int, int]) -> None:
    """The patches-times-kernel path (XLA's CPU convolution is ~8x slower there) computes what
    torch computes, unbatched too."""
    ref = nn.Conv2d(4, 8, **kwargs)
    shim = transfer(ref, lambda: S.Conv2d(4, 8, **kwargs, rngs=nnx.Rngs(0)))
    xt, xj = pair(2, 4, *size)
    close(shim(xj), ref(xt))
    close(shim(xj[0]), ref(xt[0]))


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
    shim = transfer(ref, lambda: S.Conv1d(4, 6, **kwargs, rngs=nnx.Rngs(0)))
    xt, xj = pair(2, 4, 17)
    close(shim(xj), ref(xt))


def test_conv3d() -> None:
    ref = nn.Conv3d(2, 4, kernel_size=(2, 3, 3), stride=(1, 2, 1), padding=(0, 1, 1))
    shim = transfer(
        ref, lambda: S.Conv3d(2, 4, kernel_size=(2, 3, 3), stride=(1, 2, 1), padding=(0, 1, 1), rngs=nnx.Rngs(0))
    )
    xt, xj = pair(2, 2, 5, 7, 6)
    close(shim(xj), ref(xt))


def test_functional_conv() -> None:
    ref = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
    xt, xj = pair(2, 4, 9, 9)
    w, b = ref.weight.detach().numpy(), ref.bias.detach().numpy()
    close(S.conv2d(xj, w, b, stride=2, padding=1, groups=2), ref(xt))
    w1 = rand(5, 4, 3, seed=1)
    xt1, xj1 = pair(2, 4, 11)
    close(S.conv1d(xj1, w1, None, 1, "same", 2), F.conv1d(xt1, torch.from_numpy(w1), None, 1, "same", 2))


def test_conv_rejects_torch_errors() -> None:
    with pytest.raises(ValueError, match="strided"):
        S.Conv2d(2, 2, 3, stride=2, padding="same", rngs=RNGS)
    with pytest.raises(ValueError, match="groups"):
        S.Conv2d(3, 2, 3, groups=2, rngs=RNGS)


CONVT_CASES = [
    dict(kernel_size=3),
    dict(kernel_size=3, stride=2, padding=1, output_padding=1),
    dict(kernel_size=4, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(2, 0), output_padding=(1, 2)),
    dict(kernel_size=3, stride=2, groups=2, bias=False),
    dict(kernel_size=3, stride=1, dilation=2, padding=3),
    dict(kernel_size=3, stride=3, dilation=2, padding=1, output_padding=1, groups=4),
]


@pytest.mark.parametrize("kwargs", CONVT_CASES, ids=str)
def test_conv_transpose2d(kwargs: dict[str, Any]) -> None:
    ref = nn.ConvTranspose2d(4, 8, **kwargs)
    shim = transfer(ref, lambda: S.ConvTranspose2d(4, 8, **kwargs, rngs=nnx.Rngs(0)))
    xt, xj = pair(2, 4, 5, 6)
    close(shim(xj), ref(xt))


def test_conv_transpose_output_size() -> None:
    ref = nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1)
    shim = transfer(ref, lambda: S.ConvTranspose2d(3, 5, 3, stride=2, padding=1, rngs=nnx.Rngs(0)))
    xt, xj = pair(1, 3, 4, 5)
    close(shim(xj, output_size=(8, 10)), ref(xt, output_size=(8, 10)))
    ref1 = nn.ConvTranspose1d(3, 4, 5, stride=3, padding=2, output_padding=1)
    shim1 = transfer(ref1, lambda: S.ConvTranspose1d(3, 4, 5, stride=3, padding=2, output_padding=1, rngs=nnx.Rngs(0)))
    xt1, xj1 = pair(2, 3, 7)
    close(shim1(xj1), ref1(xt1))


# ------------------------------------------------------------------------------------------------
# normalisation


@pytest.mark.parametrize(
    ("momentum", "track", "affine"),
    [(0.1, True, True), (0.3, True, False), (None, True, True), (0.1, False, True)],
)
def test_batchnorm2d_train_then_eval(momentum: float | None, track: bool, affine: bool) -> None:
    ref = perturb(nn.BatchNorm2d(5, eps=1e-3, momentum=momentum, affine=affine, track_running_stats=track))
    shim = transfer(
        ref, lambda: S.BatchNorm2d(5, eps=1e-3, momentum=momentum, affine=affine, track_running_stats=track)
    )
    ref.train()
    shim.train()
    for step in range(2):
        xt, xj = pair(4, 5, 3, 3, seed=step)
        close(shim(xj), ref(xt))
    if track:
        close(shim.mean[...], ref.running_mean)
        close(shim.var[...], ref.running_var)
        assert int(shim.num_batches_tracked[...]) == int(ref.num_batches_tracked) == 2
    ref.eval()
    shim.eval()
    assert shim.use_running_average is True
    xt, xj = pair(3, 5, 4, 2, seed=7)
    close(shim(xj), ref(xt))


def test_batchnorm1d_and_3d() -> None:
    for shape in [(6, 4), (3, 4, 7)]:
        ref = perturb(nn.BatchNorm1d(4))
        shim = transfer(ref, lambda: S.BatchNorm1d(4))
        xt, xj = pair(*shape)
        close(shim(xj), ref(xt))
        close(shim.var[...], ref.running_var)
        ref.eval()
        shim.eval()
        close(shim(xj), ref(xt))
    ref3 = perturb(nn.BatchNorm3d(3)).eval()
    shim3 = transfer(ref3, lambda: S.BatchNorm3d(3))
    shim3.eval()
    xt, xj = pair(2, 3, 2, 3, 4)
    close(shim3(xj), ref3(xt))
    with pytest.raises(ValueError, match="more than 1 value"):
        S.BatchNorm1d(4)(jnp.ones((1, 4)))


def test_batchnorm_updates_under_jit() -> None:
    ref = perturb(nn.BatchNorm2d(3, momentum=None))
    shim = transfer(ref, lambda: S.BatchNorm2d(3, momentum=None))
    step = nnx.jit(lambda m, x: m(x))
    for i in range(2):
        xt, xj = pair(2, 3, 4, 4, seed=i)
        close(step(shim, xj), ref(xt))
    close(shim.var[...], ref.running_var)
    assert int(shim.num_batches_tracked[...]) == 2


@pytest.mark.parametrize(("groups", "affine"), [(1, True), (2, True), (6, False)])
def test_group_norm(groups: int, affine: bool) -> None:
    ref = perturb(nn.GroupNorm(groups, 6, eps=1e-4, affine=affine))
    shim = transfer(ref, lambda: S.GroupNorm(groups, 6, eps=1e-4, affine=affine))
    xt, xj = pair(2, 6, 3, 5)
    close(shim(xj), ref(xt))
    close(S.group_norm(xj, groups, shim.scale, shim.bias, 1e-4), F.group_norm(xt, groups, ref.weight, ref.bias, 1e-4))


@pytest.mark.parametrize(
    ("shape", "kwargs"),
    [((5,), {}), ((3, 5), {}), ((3, 5), dict(bias=False)), ((2, 3, 5), dict(elementwise_affine=False))],
)
def test_layer_norm(shape: tuple[int, ...], kwargs: dict[str, Any]) -> None:
    ref = perturb(nn.LayerNorm(shape, eps=1e-6, **kwargs))
    shim = transfer(ref, lambda: S.LayerNorm(shape, eps=1e-6, **kwargs))
    xt, xj = pair(4, 2, 3, 5)
    close(shim(xj), ref(xt))
    close(S.layer_norm(xj, shape, shim.scale, shim.bias, 1e-6), F.layer_norm(xt, shape, ref.weight, ref.bias, 1e-6))


def test_functional_batch_norm() -> None:
    mean, var = rand(4, seed=1), np.abs(rand(4, seed=2)) + 0.5
    w, b = rand(4, seed=3), rand(4, seed=4)
    xt, xj = pair(3, 4, 5)
    t = [torch.from_numpy(a.copy()) for a in (mean, var, w, b)]
    close(S.batch_norm(xj, mean, var, w, b, False, 0.1, 1e-5), F.batch_norm(xt, *t[:2], *t[2:], False, 0.1, 1e-5))
    running = [nnx.BatchStat(jnp.asarray(mean)), nnx.BatchStat(jnp.asarray(var))]
    close(
        S.batch_norm(xj, *running, w, b, training=True, momentum=0.2), F.batch_norm(xt, *t, training=True, momentum=0.2)
    )
    close(running[0][...], t[0])
    close(running[1][...], t[1])


# ------------------------------------------------------------------------------------------------
# pooling

MAXPOOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), ceil_mode=True),
    dict(kernel_size=2, stride=2, dilation=2, padding=1),
    dict(kernel_size=3, stride=3, padding=1, ceil_mode=True),
]


@pytest.mark.parametrize("kwargs", MAXPOOL_CASES, ids=str)
def test_max_pool2d(kwargs: dict[str, Any]) -> None:
    xt, xj = pair(2, 3, 7, 8)
    close(S.MaxPool2d(**kwargs)(xj), nn.MaxPool2d(**kwargs)(xt))
    close(S.max_pool2d(xj, **kwargs), F.max_pool2d(xt, **kwargs))
    close(S.MaxPool2d(**kwargs)(xj[0]), nn.MaxPool2d(**kwargs)(xt[0]))


AVGPOOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 0), ceil_mode=True),
    dict(kernel_size=3, padding=1, divisor_override=4),
]


@pytest.mark.parametrize("kwargs", AVGPOOL_CASES, ids=str)
def test_avg_pool2d(kwargs: dict[str, Any]) -> None:
    xt, xj = pair(2, 3, 7, 8)
    close(S.AvgPool2d(**kwargs)(xj), nn.AvgPool2d(**kwargs)(xt))
    close(S.avg_pool2d(xj, **kwargs), F.avg_pool2d(xt, **kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)],
    ids=str,
)
def test_pool1d(kwargs: dict[str, Any]) -> None:
    xt, xj = pair(2, 3, 10)
    close(S.AvgPool1d(**kwargs)(xj), nn.AvgPool1d(**kwargs)(xt))
    close(S.avg_pool1d(xj, **kwargs), F.avg_pool1d(xt, **kwargs))
    mkw = {k: v for k, v in kwargs.items() if k != "count_include_pad"}
    close(S.MaxPool1d(**mkw)(xj), nn.MaxPool1d(**mkw)(xt))
    close(S.max_pool1d(xj, **mkw), F.max_pool1d(xt, **mkw))


def test_pool3d() -> None:
    xt, xj = pair(1, 2, 5, 6, 7)
    kw = dict(kernel_size=(2, 3, 3), stride=2, padding=1, ceil_mode=True)
    close(S.MaxPool3d(**kw)(xj), nn.MaxPool3d(**kw)(xt))
    close(S.AvgPool3d(**kw)(xj), nn.AvgPool3d(**kw)(xt))
    close(S.AdaptiveAvgPool3d((2, 4, 3))(xj), nn.AdaptiveAvgPool3d((2, 4, 3))(xt))


@pytest.mark.parametrize("size", [1, 3, (2, 5), (None, 3), (7, 4), (10, 10)], ids=str)
def test_adaptive_pool2d(size: Any) -> None:
    xt, xj = pair(2, 3, 7, 9)
    close(S.AdaptiveAvgPool2d(size)(xj), nn.AdaptiveAvgPool2d(size)(xt))
    close(S.AdaptiveMaxPool2d(size)(xj), nn.AdaptiveMaxPool2d(size)(xt))
    close(S.adaptive_avg_pool2d(xj, size), F.adaptive_avg_pool2d(xt, size))
    close(S.adaptive_max_pool2d(xj, size), F.adaptive_max_pool2d(xt, size))


@pytest.mark.parametrize("size", [1, 4, 7, 13])
def test_adaptive_pool1d(size: int) -> None:
    xt, xj = pair(2, 3, 10)
    close(S.AdaptiveAvgPool1d(size)(xj), nn.AdaptiveAvgPool1d(size)(xt))
    close(S.adaptive_avg_pool1d(xj, size), F.adaptive_avg_pool1d(xt, size))
    close(S.AdaptiveMaxPool1d(size)(xj), nn.AdaptiveMaxPool1d(size)(xt))
    close(S.adaptive_max_pool1d(xj, size), F.adaptive_max_pool1d(xt, size))


def test_pool_errors_like_torch() -> None:
    with pytest.raises(ValueError, match="half"):
        S.max_pool2d(jnp.ones((1, 1, 4, 4)), 2, padding=2)
    with pytest.raises(NotImplementedError):  # max pooling's indices are supported, adaptive pooling's not
        S.AdaptiveMaxPool2d(2, return_indices=True)


# ------------------------------------------------------------------------------------------------
# attention


def _mha_pair(embed: int = 8, heads: int = 2, **kwargs: Any) -> tuple[Any, Any]:
    ref = perturb(nn.MultiheadAttention(embed, heads, **kwargs)).eval()
    shim = transfer(ref, lambda: S.MultiheadAttention(embed, heads, **kwargs, rngs=nnx.Rngs(0)))
    shim.eval()
    return ref, shim


MHA_CASES = [
    dict(),
    dict(batch_first=True),
    dict(bias=False),
    dict(kdim=6, vdim=5),
    dict(add_bias_kv=True),
    dict(add_zero_attn=True, batch_first=True),
    dict(add_bias_kv=True, add_zero_attn=True, kdim=3, vdim=7),
]
MASK_CASES = ["none", "kpm_bool", "kpm_float", "attn_bool", "attn_float3d", "both"]


def _masks(kind: str, n: int, heads: int, lq: int, lk: int) -> tuple[Any, Any, Any, Any]:
    """(torch key_padding_mask, torch attn_mask, shim kpm, shim attn_mask)."""
    rng = np.random.default_rng(3)
    kpm = attn = None
    if kind in ("kpm_bool", "both"):
        kpm = rng.random((n, lk)) < 0.3
        kpm[:, 0] = False  # keep every row attendable: fully masked rows are NaN in torch too
    if kind == "kpm_float":
        kpm = rng.standard_normal((n, lk)).astype(np.float32)
    if kind in ("attn_bool", "both"):
        attn = rng.random((lq, lk)) < 0.3
        attn[:, 1] = False
        if kind == "both":
            attn[:, 0] = False
    if kind == "attn_float3d":
        attn = rng.standard_normal((n * heads, lq, lk)).astype(np.float32)

    def t(a: Any) -> Any:
        return None if a is None else torch.from_numpy(a.copy())

    def j(a: Any) -> Any:
        return None if a is None else jnp.asarray(a)

    return t(kpm), t(attn), j(kpm), j(attn)


# every layer configuration with both masks, every mask kind with the default configuration
MHA_MATRIX = (
    [(kwargs, "both") for kwargs in MHA_CASES]
    + [({}, m) for m in MASK_CASES if m != "both"]
    + [
        (dict(batch_first=True), "attn_float3d"),
        (dict(kdim=6, vdim=5), "kpm_float"),
    ]
)


@pytest.mark.parametrize(("kwargs", "masks"), MHA_MATRIX, ids=str)
def test_multihead_attention(kwargs: dict[str, Any], masks: str) -> None:
    ref, shim = _mha_pair(**kwargs)
    n, lq, lk = 3, 4, 5
    kdim, vdim = kwargs.get("kdim", 8), kwargs.get("vdim", 8)
    if kwargs.get("batch_first"):
        (qt, qj), (kt, kj), (vt, vj) = pair(n, lq, 8, seed=1), pair(n, lk, kdim, seed=2), pair(n, lk, vdim, seed=3)
    else:
        (qt, qj), (kt, kj), (vt, vj) = pair(lq, n, 8, seed=1), pair(lk, n, kdim, seed=2), pair(lk, n, vdim, seed=3)
    kpm_t, attn_t, kpm_j, attn_j = _masks(masks, n, 2, lq, lk)
    for need_weights, average in [(True, True), (True, False), (False, True)]:
        out_t, w_t = ref(qt, kt, vt, key_padding_mask=kpm_t, need_weights=need_weights, attn_mask=attn_t,
                         average_attn_weights=average)  # fmt: skip
        out_j, w_j = shim(qj, kj, vj, key_padding_mask=kpm_j, need_weights=need_weights, attn_mask=attn_j,
                          average_attn_weights=average)  # fmt: skip
        close(out_j, out_t)
        if need_weights:
            close(w_j, w_t)
        else:
            assert w_j is None and w_t is None


def test_multihead_attention_self_unbatched_causal() -> None:
    ref, shim = _mha_pair(batch_first=True)
    xt, xj = pair(2, 5, 8)
    with torch.no_grad():  # eval + no_grad + batch_first self-attention: torch's native fast path
        close(shim(xj, xj, xj, need_weights=False)[0], ref(xt, xt, xt, need_weights=False)[0])
    causal_t = nn.Transformer.generate_square_subsequent_mask(5)
    causal_bool = np.triu(np.ones((5, 5), bool), 1)
    for need_weights in (True, False):
        out_t, _ = ref(xt, xt, xt, attn_mask=causal_t, is_causal=True, need_weights=need_weights)
        out_j, _ = shim(xj, xj, xj, attn_mask=jnp.asarray(causal_bool), is_causal=True, need_weights=need_weights)
        close(out_j, out_t)
    # unbatched (L, E) input, key padding mask (S,)
    kpm = np.array([False, True, False, False, True])
    out_t, w_t = ref(xt[0], xt[0], xt[0], key_padding_mask=torch.from_numpy(kpm))
    out_j, w_j = shim(xj[0], xj[0], xj[0], key_padding_mask=jnp.asarray(kpm))
    close(out_j, out_t)
    close(w_j, w_t)
    with pytest.raises(ValueError, match="attn_mask"):
        shim(xj, xj, xj, is_causal=True)


def test_multihead_attention_param_paths_and_dropout() -> None:
    shim = S.MultiheadAttention(8, 2, dropout=0.5, rngs=nnx.Rngs(0))
    keys = set(flax_state_to_torch_keys(shim).values())
    assert keys == set(nn.MultiheadAttention(8, 2).state_dict())
    x = jnp.asarray(rand(3, 2, 8))
    shim.train()
    a, _ = shim(x, x, x)
    b, _ = shim(x, x, x)
    assert not np.allclose(a, b)  # fresh dropout masks from the module's stream
    shim.eval()
    c, _ = shim(x, x, x)
    d, _ = shim(x, x, x)
    np.testing.assert_array_equal(c, d)


@pytest.mark.parametrize(
    "case", ["plain", "bool", "float", "causal", "causal_rect", "scale", "gqa", "fully_masked", "broadcast"]
)
def test_scaled_dot_product_attention(case: str) -> None:
    lq, lk = (3, 5) if case == "causal_rect" else (4, 4)
    kv_heads = 1 if case == "gqa" else 2
    (qt, qj), (kt, kj), (vt, vj) = (
        pair(2, 2, lq, 8, seed=1),
        pair(2, kv_heads, lk, 8, seed=2),
        pair(2, kv_heads, lk, 8, seed=3),
    )
    rng = np.random.default_rng(0)
    kwargs: dict[str, Any] = {}
    mask = None
    if case in ("bool", "fully_masked"):
        mask = rng.random((lq, lk)) < 0.6
        mask[:, 0] = True
        if case == "fully_masked":
            mask[1] = False
    elif case == "float":
        mask = rng.standard_normal((2, 2, lq, lk)).astype(np.float32)
    elif case == "broadcast":
        mask = rng.random((2, 1, 1, lk)) < 0.7
        mask[..., 0] = True
    if case.startswith("causal"):
        kwargs["is_causal"] = True
    if case == "scale":
        kwargs["scale"] = 0.3
    if case == "gqa":
        kwargs["enable_gqa"] = True
    want = F.scaled_dot_product_attention(
        qt, kt, vt, attn_mask=None if mask is None else torch.from_numpy(mask.copy()), **kwargs
    )
    got = S.scaled_dot_product_attention(qj, kj, vj, attn_mask=None if mask is None else jnp.asarray(mask), **kwargs)
    close(got, want)


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
    got_out, got_w = S.multi_head_attention_forward(
        **{k: jnp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    )
    assert got_out.shape == tuple(want_out.shape)
    close(got_out, want_out)
    if want_w is None:
        assert got_w is None
    else:
        assert got_w.shape == tuple(want_w.shape)
        close(got_w, want_w)


def test_multi_head_attention_forward_checks_and_dropout() -> None:
    args = {k: jnp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in _mhaf_arguments("packed").items()}
    with pytest.raises(ValueError, match="expecting embedding dimension of 6"):
        S.multi_head_attention_forward(**{**args, "embed_dim_to_check": 6})
    with pytest.raises(NotImplementedError, match="static_k"):
        S.multi_head_attention_forward(**args, static_k=jnp.zeros((6, 5, 4)))
    with pytest.raises(ValueError, match="attn_mask"):
        S.multi_head_attention_forward(**{**args, "need_weights": False}, is_causal=True)
    plain, _ = S.multi_head_attention_forward(**args)
    off, _ = S.multi_head_attention_forward(**{**args, "dropout_p": 0.5}, training=False)
    np.testing.assert_array_equal(off, plain)  # eval: no dropout
    rngs = nnx.Rngs(0)
    for need_weights in (True, False):
        a, _ = S.multi_head_attention_forward(**{**args, "dropout_p": 0.5, "need_weights": need_weights}, rngs=rngs)
        b, _ = S.multi_head_attention_forward(**{**args, "dropout_p": 0.5, "need_weights": need_weights}, rngs=rngs)
        assert not np.allclose(a, plain) and not np.allclose(a, b)  # fresh masks from the stream


# ------------------------------------------------------------------------------------------------
# interpolation, padding, shapes

INTERP_CASES = [
    dict(size=(5, 7), mode="nearest"),
    dict(size=(13, 4), mode="nearest"),
    dict(scale_factor=2, mode="nearest"),
    dict(scale_factor=(1.7, 0.6), mode="nearest"),
    dict(scale_factor=1.3, mode="nearest"),  # same output size as the input along H
    dict(scale_factor=2.0000001, mode="nearest"),  # torch's out == 2 * in shortcut
    dict(scale_factor=(2.0000001, 1.3), mode="nearest-exact"),
    dict(size=(11, 3), mode="nearest-exact"),
    dict(scale_factor=2.5, mode="nearest-exact"),
    dict(size=(11, 13), mode="bilinear"),
    dict(size=(11, 13), mode="bilinear", align_corners=True),
    dict(size=(4, 3), mode="bilinear"),
    dict(scale_factor=(2.3, 1.5), mode="bilinear"),
    dict(scale_factor=(2.3, 1.5), mode="bilinear", recompute_scale_factor=True),
    dict(scale_factor=0.5, mode="bilinear", align_corners=True),
    dict(size=(12, 9), mode="bicubic"),
    dict(size=(12, 9), mode="bicubic", align_corners=True),
    dict(scale_factor=0.7, mode="bicubic"),
    dict(size=(4, 5), mode="area"),
    dict(size=(6, 7), mode="bilinear"),  # identity sizes
]


@pytest.mark.parametrize("kwargs", INTERP_CASES, ids=str)
def test_interpolate(kwargs: dict[str, Any]) -> None:
    xt, xj = pair(2, 3, 6, 7)
    close(S.interpolate(xj, **kwargs), F.interpolate(xt, **kwargs))


def test_interpolate_1d_3d() -> None:
    xt, xj = pair(2, 3, 9)
    for kw in [dict(size=14, mode="linear"), dict(scale_factor=0.6, mode="linear", align_corners=True)]:
        close(S.interpolate(xj, **kw), F.interpolate(xt, **kw))
    close(S.interpolate(xj, size=4, mode="nearest"), F.interpolate(xt, size=4, mode="nearest"))
    xt3, xj3 = pair(1, 2, 3, 4, 5)
    close(S.interpolate(xj3, size=(5, 3, 7), mode="trilinear"), F.interpolate(xt3, size=(5, 3, 7), mode="trilinear"))
    with pytest.raises(ValueError, match="align_corners"):
        S.interpolate(xj, size=4, mode="nearest", align_corners=True)


@pytest.mark.parametrize(
    ("pads", "mode"),
    [
        ((1, 2), "constant"),
        ((1, 2, 0, 3), "reflect"),
        ((2, 1, 1, 2), "replicate"),
        ((1, 2, 3, 1), "circular"),
        ((-1, 2, 1, -2), "constant"),
        ((1, 1, 1, 1, 1, 1), "constant"),
    ],
)
def test_pad(pads: tuple[int, ...], mode: str) -> None:
    xt, xj = pair(2, 3, 5, 6)
    value = 1.5 if mode == "constant" else None
    close(S.pad(xj, pads, mode=mode, value=value), F.pad(xt, pads, mode=mode, value=value))


def test_flatten_unflatten() -> None:
    xt, xj = pair(2, 3, 4, 5)
    for start, end in [(0, -1), (1, -1), (1, 2), (2, 2), (-3, -2)]:
        close(S.flatten(xj, start, end), torch.flatten(xt, start, end))
    close(S.unflatten(xj, 2, (2, -1)), torch.unflatten(xt, 2, (2, -1)))


# ------------------------------------------------------------------------------------------------
# functional


def test_activations_and_softmax() -> None:
    xt, xj = pair(3, 4, 5)
    close(S.gelu(xj), F.gelu(xt))
    close(S.gelu(xj, approximate="tanh"), F.gelu(xt, approximate="tanh"))
    for dim in (0, 1, -1):
        close(S.softmax(xj, dim), F.softmax(xt, dim))
        close(S.log_softmax(xj, dim=dim), F.log_softmax(xt, dim=dim))


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
    got = getattr(S, name)(jnp.asarray(x), *args, **kwargs)
    assert got.dtype == jnp.float32 and got.shape == tuple(want.shape)
    close(got, want)


def test_functional_activations_check_as_torch_and_draw_rrelu_slopes() -> None:
    x = jnp.asarray(activation_input())
    with pytest.raises(ValueError, match="min_val cannot be greater"):
        S.hardtanh(x, 1.0, -1.0)
    with pytest.raises(RuntimeError, match="scalars"):
        S.glu(jnp.float32(1.0))
    with pytest.raises(NotImplementedError, match="out="):
        S.normalize(x, out=x)
    # training: a slope drawn per negative element from U(lower, upper), positives unchanged
    y = np.asarray(S.rrelu(x, 0.1, 0.3, training=True, rngs=nnx.Rngs(dropout=0)))
    xs = np.asarray(x)
    negative = xs < -1e-3
    slopes = y[negative] / xs[negative]
    assert slopes.min() >= 0.1 - 1e-6 and slopes.max() <= 0.3 + 1e-6 and slopes.std() > 0.03
    np.testing.assert_array_equal(y[xs >= 0], xs[xs >= 0])
    assert not np.array_equal(np.asarray(S.rrelu_(x, training=True)), np.asarray(S.rrelu_(x, training=True)))


def test_linear_embedding() -> None:
    xt, xj = pair(3, 4, 5)
    w, b = rand(6, 5, seed=1), rand(6, seed=2)
    close(S.linear(xj, w, b), F.linear(xt, torch.from_numpy(w), torch.from_numpy(b)))
    close(S.linear(xj, w), F.linear(xt, torch.from_numpy(w)))
    table = rand(10, 4, seed=3)
    ids = np.array([[1, 0, 9], [3, 3, 0]])
    close(
        S.embedding(jnp.asarray(ids), table, padding_idx=0), F.embedding(torch.from_numpy(ids), torch.from_numpy(table))
    )
    grad = jax.grad(lambda t: S.embedding(jnp.asarray(ids), t, padding_idx=0).sum())(jnp.asarray(table))
    tt = torch.from_numpy(table.copy()).requires_grad_()
    F.embedding(torch.from_numpy(ids), tt, padding_idx=0).sum().backward()
    close(grad, tt.grad)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        dict(reduction="sum"),
        dict(reduction="none"),
        dict(ignore_index=2),
        dict(label_smoothing=0.1),
        dict(label_smoothing=0.2, ignore_index=1, reduction="none"),
        dict(weight=True),
        dict(weight=True, label_smoothing=0.15, ignore_index=0),
        dict(weight=True, label_smoothing=0.15, reduction="sum"),
    ],
    ids=str,
)
def test_cross_entropy(kwargs: dict[str, Any]) -> None:
    kwargs = dict(kwargs)
    weight = rand(5, seed=9) ** 2 + 0.1 if kwargs.pop("weight", False) else None
    target = np.random.default_rng(1).integers(0, 5, (4, 3))
    xt, xj = pair(4, 5, 3)
    want = F.cross_entropy(xt, torch.from_numpy(target), None if weight is None else torch.from_numpy(weight), **kwargs)
    close(S.cross_entropy(xj, jnp.asarray(target), weight, **kwargs), want)
    # (N, C) logits and probability targets
    xt2, xj2 = pair(6, 5, seed=2)
    t2 = target.reshape(-1)[:6]
    wt = None if weight is None else torch.from_numpy(weight)
    close(
        S.cross_entropy(xj2, jnp.asarray(t2), weight, **kwargs),
        F.cross_entropy(xt2, torch.from_numpy(t2), wt, **kwargs),
    )
    probs = np.asarray(jax.nn.softmax(jnp.asarray(rand(6, 5, seed=4)), -1))
    kw = {k: v for k, v in kwargs.items() if k != "ignore_index"}
    close(
        S.cross_entropy(xj2, jnp.asarray(probs), weight, **kw),
        F.cross_entropy(xt2, torch.from_numpy(probs.copy()), wt, **kw),
    )


def test_dropout() -> None:
    x = jnp.ones((200, 50))
    np.testing.assert_array_equal(S.dropout(x, 0.3, training=False), x)
    np.testing.assert_array_equal(S.dropout(x, 0.0, rngs=nnx.Rngs(0)), x)
    np.testing.assert_array_equal(S.dropout(x, 1.0, rngs=nnx.Rngs(0)), jnp.zeros_like(x))
    y = np.asarray(S.dropout(x, 0.25, rngs=nnx.Rngs(dropout=1)))
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    # without rngs (a free function calling F.dropout): torch's global generator is the
    # runtime's process-wide keys, so two calls drop different elements
    assert not np.array_equal(S.dropout(x, 0.5), S.dropout(x, 0.5))


@pytest.mark.slow
def test_bf16_inputs_follow_flax_dtype_rules() -> None:
    """dtype=None promotes inputs with parameters (Flax's rule); statistics and sums stay float32 inside."""
    bf16 = jnp.bfloat16
    xt, xj = pair(2, 4, 8, 8)
    xb = xj.astype(bf16)
    ref = nn.Conv2d(4, 4, 3, padding=1)
    conv = transfer(ref, lambda: S.Conv2d(4, 4, 3, padding=1, dtype=bf16, rngs=nnx.Rngs(0)))
    assert conv(xb).dtype == bf16
    close(conv(xb), ref(xt), 2e-2)
    bn_ref = perturb(nn.BatchNorm2d(4)).eval()
    bn = transfer(bn_ref, lambda: S.BatchNorm2d(4))
    bn.eval()
    assert bn(xb).dtype == jnp.float32  # bf16 input, float32 params
    close(bn(xb), bn_ref(xt), 2e-2)
    for ours, theirs in [
        (S.max_pool2d(xb, 3, 2, 1), F.max_pool2d(xt, 3, 2, 1)),
        (S.avg_pool2d(xb, 3, 2, 1, True), F.avg_pool2d(xt, 3, 2, 1, True)),
        (S.adaptive_avg_pool2d(xb, 3), F.adaptive_avg_pool2d(xt, 3)),
        (S.interpolate(xb, size=(5, 11), mode="bilinear"), F.interpolate(xt, size=(5, 11), mode="bilinear")),
        (S.group_norm(xb, 2), F.group_norm(xt, 2)),
    ]:
        assert ours.dtype == bf16
        close(ours, theirs, 2e-2)
    mha_ref, _ = _mha_pair(batch_first=True)
    mha = transfer(mha_ref, lambda: S.MultiheadAttention(8, 2, batch_first=True, dtype=bf16, rngs=nnx.Rngs(0)))
    qt, qj = pair(2, 5, 8)
    out, weights = mha(qj, qj, qj)
    assert out.dtype == bf16 and weights.dtype == bf16
    close(out, mha_ref(qt, qt, qt)[0], 3e-2)


def test_models_run_under_jit() -> None:
    """Also guards against aliasing: the loaded arrays must not share memory with the torch
    tensors (torch's in-place running-stat update would otherwise land in the JAX model too)."""
    ref = perturb(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(2)))
    model = transfer(
        ref,
        lambda: S.Sequential(
            S.Conv2d(3, 4, 3, rngs=nnx.Rngs(0)), S.BatchNorm2d(4), jax.nn.relu, S.AdaptiveAvgPool2d(2)
        ),
    )
    step = nnx.jit(lambda m, x: S.interpolate(m(x), scale_factor=1.5, mode="bicubic", align_corners=True))
    for seed in range(2):
        xt, xj = pair(2, 3, 7, 7, seed=seed)
        close(step(model, xj), F.interpolate(ref(xt), scale_factor=1.5, mode="bicubic", align_corners=True))
    close(model[1].mean[...], ref[1].running_mean)
    graphdef, state = nnx.split(model)
    again = nnx.merge(graphdef, state)
    assert len(again) == 4 and isinstance(again[3], S.AdaptiveAvgPool2d)


# ------------------------------------------------------------------------------------------------
# containers and paths


def _paths(model: Any) -> set[str]:
    return {".".join(map(str, path)) for path, _ in nnx.to_flat_state(nnx.state(model, nnx.Param))}


def test_sequential_paths_and_api() -> None:
    seq = S.Sequential(S.Conv2d(3, 4, 3, rngs=RNGS), S.MaxPool2d(1), S.Conv2d(4, 2, 1, rngs=RNGS))
    assert _paths(seq) == {"0.kernel", "0.bias", "2.kernel", "2.bias"}
    assert len(seq) == 3 and isinstance(seq[0], S.Conv2d) and isinstance(seq[-1], S.Conv2d)
    assert [type(m).__name__ for m in seq] == ["Conv2d", "MaxPool2d", "Conv2d"]
    assert len(seq[1:]) == 2 and isinstance(seq[1:], S.Sequential)
    seq.append(S.Identity())
    seq.insert(1, S.Identity())
    assert [type(m).__name__ for m in seq] == ["Conv2d", "Identity", "MaxPool2d", "Conv2d", "Identity"]
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["Conv2d", "MaxPool2d", "Conv2d", "Identity"]
    assert _paths(seq) == {"0.kernel", "0.bias", "2.kernel", "2.bias"}
    named = S.Sequential(collections.OrderedDict(conv=S.Conv2d(3, 4, 3, rngs=RNGS), act=jax.nn.relu))
    assert _paths(named) == {"conv.kernel", "conv.bias"} and isinstance(named[0], S.Conv2d)
    assert named(jnp.ones((1, 3, 5, 5))).shape == (1, 4, 3, 3)


def test_module_list_and_dict_paths() -> None:
    layers = S.ModuleList([nnx.Linear(2, 2, rngs=RNGS) for _ in range(2)])
    layers.append(nnx.Linear(2, 3, rngs=RNGS)).extend([S.Identity()])
    layers.insert(0, nnx.Linear(2, 2, rngs=RNGS))
    assert len(layers) == 5 and isinstance(layers[1:3], S.ModuleList) and layers.index(layers[2]) == 2
    assert _paths(layers) == {f"{i}.{p}" for i in range(4) for p in ("kernel", "bias")}
    blocks = S.ModuleDict({"a": nnx.Linear(2, 2, rngs=RNGS), "b": S.Identity()})
    blocks["c"] = nnx.Linear(2, 1, rngs=RNGS)
    assert list(blocks) == ["a", "b", "c"] and "a" in blocks and "keys" not in blocks
    assert _paths(blocks) == {"a.kernel", "a.bias", "c.kernel", "c.bias"}
    with pytest.raises(KeyError):
        blocks["keys"]
    blocks.d = S.ModuleList([nnx.Linear(2, 2, rngs=RNGS)])  # torch: an attribute assigned is an entry
    assert blocks.a is blocks["a"] and list(blocks) == ["a", "b", "c", "d"] and not hasattr(blocks, "e")


@pytest.mark.slow
def test_torch_like_initialisation() -> None:
    """Concrete construction: torch's init bounds and shapes (the comparisons above build abstractly)."""
    conv = S.Conv2d(4, 6, 3, groups=2, rngs=nnx.Rngs(0))
    bound = 1 / np.sqrt(2 * 9)
    assert conv.kernel[...].shape == (3, 3, 2, 6) and float(jnp.abs(conv.kernel[...]).max()) <= bound
    assert float(jnp.abs(conv.bias[...]).max()) <= bound and float(jnp.abs(conv.kernel[...]).max()) > bound / 2
    convt = S.ConvTranspose2d(4, 6, 3, groups=2, rngs=nnx.Rngs(0))
    assert convt.kernel[...].shape == (3, 3, 4, 3) and float(jnp.abs(convt.kernel[...]).max()) <= 1 / np.sqrt(27)
    mha = S.MultiheadAttention(8, 2, kdim=4, rngs=nnx.Rngs(0))
    assert mha.in_proj_weight is None and mha.k_proj_weight[...].shape == (8, 4)
    assert float(jnp.abs(mha.in_proj_bias[...]).max()) == 0.0
    bn = S.BatchNorm2d(3)
    assert bn.use_running_average is False and float(bn.var[...].sum()) == 3.0


# ------------------------------------------------------------------------------------------------
# weight transfer


class TorchNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 4, 3, stride=2, padding=1),
            nn.BatchNorm2d(4),
        )
        self.blocks = nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 16)])
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 5)
        self.scale = nn.Parameter(torch.ones(5))
        self.register_buffer("offset", torch.zeros(5))
        self.register_buffer("cache", torch.zeros(2), persistent=False)

    def forward(self, x: Any) -> Any:
        x = self.features(x).flatten(1)
        for block in self.blocks:
            x = F.gelu(block(x))
        return self.head(self.norm(x)) * self.scale + self.offset


class FlaxNet(nnx.Module):
    def __init__(self, *, rngs: Any) -> None:
        self.features = S.Sequential(
            S.Conv2d(3, 8, 3, padding=1, bias=False, rngs=rngs),
            S.BatchNorm2d(8),
            jax.nn.relu,  # plain callables are valid Sequential children
            S.MaxPool2d(2),
            S.Conv2d(8, 4, 3, stride=2, padding=1, rngs=rngs),
            S.BatchNorm2d(4),
        )
        self.blocks = S.ModuleList([nnx.Linear(16, 16, rngs=rngs), nnx.Linear(16, 16, rngs=rngs)])
        self.norm = nnx.LayerNorm(16, epsilon=1e-5, rngs=rngs)
        self.head = nnx.Linear(16, 5, rngs=rngs)
        self.scale = nnx.Param(jnp.ones(5))
        self.offset = nnx.BatchStat(jnp.zeros(5))
        self.cache = nnx.Variable(jnp.zeros(2), persistent=False)  # torch: register_buffer(persistent=False)

    def __call__(self, x: Any) -> Any:
        x = S.flatten(self.features(x), 1)
        for block in self.blocks:
            x = S.gelu(block(x))
        return self.head(self.norm(x)) * self.scale[...] + self.offset[...]


def test_load_state_dict_nested_model() -> None:
    ref = perturb(TorchNet(), seed=5).eval()
    model = nnx.eval_shape(lambda: FlaxNet(rngs=nnx.Rngs(0)))
    load_torch_state_dict(model, ref.state_dict())
    model.eval()
    xt, xj = pair(2, 3, 8, 8)
    close(model(xj), ref(xt))
    mapping = flax_state_to_torch_keys(model)
    assert mapping["features.0.kernel"] == "features.0.weight"
    assert mapping["features.1.mean"] == "features.1.running_mean"
    assert mapping["blocks.1.kernel"] == "blocks.1.weight"
    assert mapping["norm.scale"] == "norm.weight" and mapping["scale"] == "scale"
    assert set(torch_keys_to_flax_paths(model)) == set(ref.state_dict())
    shared = S.Sequential(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
    shared.append(shared[0])  # a module under two names: torch's state_dict lists both
    assert set(flax_state_to_torch_keys(shared).values()) == {"0.weight", "0.bias", "1.weight", "1.bias"}
    # NumPy values (no torch needed) and train mode after the copy
    model2 = nnx.eval_shape(lambda: FlaxNet(rngs=nnx.Rngs(1)))
    load_torch_state_dict(model2, {k: v.numpy() for k, v in ref.state_dict().items()})
    ref.train()
    close(model2(xj), ref(xt))
    close(model2.features[1].mean[...], ref.features[1].running_mean)


def test_load_state_dict_strict_errors_and_casts() -> None:
    ref = TorchNet()
    state = dict(ref.state_dict())
    state.pop("head.bias")
    state.pop("features.1.running_var")
    state["extra.weight"] = torch.zeros(1)
    model = nnx.eval_shape(lambda: FlaxNet(rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError) as info:
        load_torch_state_dict(model, state)
    message = str(info.value)
    assert "\n" not in message
    assert "2 missing key(s): features.1.running_var, head.bias" in message
    assert "1 unexpected key(s): extra.weight" in message
    assert isinstance(model.head.kernel.get_raw_value(), jax.ShapeDtypeStruct)  # nothing copied
    load_torch_state_dict(model, state, strict=False)
    close(model.head.kernel[...], ref.head.weight.T)
    assert isinstance(model.head.bias.get_raw_value(), jax.ShapeDtypeStruct)  # not in the state_dict
    bad = dict(ref.state_dict())
    bad["head.weight"] = torch.zeros(5, 3)
    with pytest.raises(ValueError, match=r"head.weight has shape \(5, 3\)"):
        load_torch_state_dict(model, bad)
    # bf16 tensors in, target dtypes kept
    bf16_model = nnx.Linear(4, 3, param_dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    lin = nn.Linear(4, 3).to(torch.bfloat16)
    load_torch_state_dict(bf16_model, lin.state_dict())
    assert bf16_model.kernel[...].dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(bf16_model.kernel[...], np.float32), lin.weight.detach().float().T.numpy())


def test_load_state_dict_direct_nnx_layers() -> None:
    """nnx layers the converter maps directly: Embed, Conv (channels-last), BatchNorm, GroupNorm, RMSNorm."""

    class Holder(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.emb = nnx.Embed(10, 4, rngs=rngs)
            self.conv = nnx.Conv(3, 4, (3, 3), padding="VALID", rngs=rngs)
            self.bn = nnx.BatchNorm(4, use_running_average=True, rngs=rngs)
            self.gn = nnx.GroupNorm(4, num_groups=2, rngs=rngs)
            self.rms = nnx.RMSNorm(4, rngs=rngs)

    torch_state = {
        **{f"emb.{k}": v for k, v in nn.Embedding(10, 4).state_dict().items()},
        **{f"conv.{k}": v for k, v in nn.Conv2d(3, 4, 3).state_dict().items()},
        **{f"bn.{k}": v for k, v in perturb(nn.BatchNorm2d(4)).state_dict().items()},
        **{f"gn.{k}": v for k, v in perturb(nn.GroupNorm(2, 4)).state_dict().items()},
        **{f"rms.{k}": v for k, v in perturb(nn.RMSNorm(4)).state_dict().items()},
    }
    holder = Holder(nnx.Rngs(0))
    load_torch_state_dict(holder, torch_state)
    close(holder.emb.embedding[...], torch_state["emb.weight"])
    xt, xj = pair(2, 3, 6, 6)
    conv = nn.Conv2d(3, 4, 3)
    conv.load_state_dict({k[5:]: v for k, v in torch_state.items() if k.startswith("conv.")})
    close(jnp.transpose(holder.conv(jnp.transpose(xj, (0, 2, 3, 1))), (0, 3, 1, 2)), conv(xt))
    close(holder.bn.var[...], torch_state["bn.running_var"])
    close(holder.gn.scale[...], torch_state["gn.weight"])
    close(holder.rms.scale[...], torch_state["rms.weight"])


# ------------------------------------------------------------------------------------------------
# the runtime is copyable definition by definition

_ALLOWED_IMPORTS = {"import math", "import functools", "import typing", "from typing import Any", "import jax",
                    "import types", "import jax.numpy as jnp", "import numpy as np", "from flax import nnx",
                    "import collections", "import dataclasses", "from __future__ import annotations",
                    "import inspect"}  # fmt: skip


@functools.cache
def _module_tree(subject: str) -> ast.Module:
    return ast.parse(inspect.getsource(importlib.import_module(f"precision_transpiler.runtime.flax.{subject}")))


@pytest.mark.parametrize("subject", FLAX_SUBJECTS)
def test_runtime_module_imports_only_the_allowed_modules(subject: str) -> None:
    tree = _module_tree(subject)
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    runtime = [
        n for n in imports if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("precision_transpiler.")
    ]
    # einops.py calls einops, which the converted code that uses its layers imports already
    allowed = _ALLOWED_IMPORTS | ({"import einops"} if subject == "einops" else set())
    assert {ast.unparse(n) for n in imports if n not in runtime} <= allowed
    # helpers come from the framework-free modules (common, pool, losses, ...) or another Flax
    # module, never from Keras
    shared = {f"{PACKAGE}.{m}" for m in SHARED}
    for node in runtime:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        assert node.module in shared or node.module.startswith(f"{PACKAGE}.flax."), node.module
    for node in tree.body:  # no module-level state besides constants, helpers and classes
        assert isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef | ast.Assign | ast.Expr)
        if isinstance(node, ast.Assign):
            assert all(isinstance(t, ast.Name) and (t.id.isupper() or t.id.startswith("_")) for t in node.targets)


def _public_names() -> list[tuple[str, str]]:
    return [
        (subject, n)
        for subject in FLAX_SUBJECTS
        for n in top_level_definitions(_module_tree(subject))
        if not n.startswith("_") and not n.isupper()
    ]


@pytest.mark.parametrize(("subject", "name"), _public_names())
def test_definition_is_copyable(subject: str, name: str) -> None:
    """The converter's copy of one public definition, with every helper it needs across runtime
    modules, runs on its own."""
    from precision_transpiler.convert.vendor import vendor_shims

    code, missing = vendor_shims(
        f"import precision_transpiler\n\nOBJ = precision_transpiler.runtime.flax.{subject}.{name}\n"
    )
    tree = ast.parse(code)
    imported = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not missing and not [i for i in imported if "precision_transpiler" in i], imported
    copied = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert len({n.name for n in copied}) == len(copied)  # each definition copied once
    namespace: dict[str, Any] = {"__name__": "copied_shims"}
    exec(compile(code, f"<copied {name}>", "exec"), namespace)
    obj = namespace["OBJ"]
    assert obj.__doc__, f"{name} needs a docstring saying which torch behaviour it reproduces"
    if name in ("Conv2d", "MaxPool2d", "interpolate"):  # a copied definition runs on its own
        x = jnp.asarray(rand(1, 3, 6, 6))
        if name == "Conv2d":
            out = obj(3, 2, 3, rngs=nnx.Rngs(0))(x)
        elif name == "MaxPool2d":
            out = obj(2)(x)
        else:
            out = obj(x, scale_factor=2, mode="bilinear")
        assert out.shape[0] == 1


def test_all_public_definitions_have_docstrings() -> None:
    for subject, name in _public_names():
        obj = getattr(S, name)
        if callable(obj) and subject not in ("modules", "module_api"):  # torch's module vocabulary, named so
            assert obj.__doc__ and "torch" in obj.__doc__, name


def test_layer_classes_state_their_constructor_signature() -> None:
    """nnx's metaclass hides a class's constructor behind `(*args, **kwargs)`; torch code asks
    for it (monai's `has_option(norm_type, "num_features")`), so the runtime's layers and
    converted module classes state it, as torch's classes do."""
    import inspect

    assert list(inspect.signature(S.InstanceNorm2d).parameters)[:2] == ["num_features", "eps"]
    assert "in_channels" in inspect.signature(S.Conv2d).parameters

    class Block(S.TorchModule):
        def __init__(self, width: int, act: str = "relu", *, rngs: nnx.Rngs | None = None) -> None:
            self.width = width

    assert list(inspect.signature(Block).parameters) == ["width", "act", "rngs"]
    assert Block(3).width == 3


class _Irrep(tuple):
    """Like e3nn's Irrep: a tuple subclass whose own `__len__` raises."""

    def __new__(cls, degree: int, parity: int) -> _Irrep:
        return super().__new__(cls, (degree, parity))

    def __len__(self) -> int:
        raise NotImplementedError


class _Irreps(tuple):
    """Like e3nn's Irreps: built by parsing a string, holding tuples of (count, _Irrep)."""

    def __new__(cls, text: str) -> _Irreps:
        return super().__new__(cls, [(int(part[0]), _Irrep(int(part[2]), 1)) for part in text.split("+")])


def test_modules_holding_tuple_subclasses_walk_split_and_merge() -> None:
    """nnx walks every tuple as a pytree node, JAX flattens an unknown tuple subclass as one leaf:
    e3nn's modules failed at `eval()`. The runtime registers such classes as pytrees."""

    class Holder(S.TorchModule):
        def __init__(self) -> None:
            self.irreps = _Irreps("2x0e+1x1o")
            self.fc = nnx.Linear(2, 2, rngs=nnx.Rngs(0))

    module = Holder()
    assert module.eval() is module and not module.training
    graph, state = nnx.split(module)
    merged = nnx.merge(graph, state)
    assert type(merged.irreps) is _Irreps and merged.irreps == module.irreps
    assert type(merged.irreps[1][1]) is _Irrep
