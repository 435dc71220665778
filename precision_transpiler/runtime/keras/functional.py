"""torch.nn.functional for Keras 3 (`keras.ops`), and the helpers the other Keras runtime modules
share: `linear`, `embedding`, `one_hot`, activations with torch's defaults (exact `gelu`),
`dropout`, `pad` (torch's modes, including those TensorFlow lacks), `interpolate`,
`grid_sample`/`affine_grid`, `unfold`/`fold`, `pixel_shuffle`/`pixel_unshuffle`,
`cosine_similarity`, and torch.nn.utils.rnn's `pad_sequence`.

torch's activation functions whose Keras counterparts take other arguments or defaults (`elu`,
`leaky_relu`, `hardtanh`, `softplus`, `softmin`, `glu`, `normalize`, `rrelu`, `prelu`, ...) are
here with torch's signatures: model code passes them around as values (`act=F.elu`,
`partial(F.leaky_relu, negative_slope=0.2)`, `getattr(F, name)`) and calls them with torch's
positional and keyword arguments, so a reference to one converts to a reference to its function
here. The activation layers (activations.py) compute through them. `inplace` is accepted and
ignored, and the in-place variants (`elu_`, `relu_`, ...) return the result: backend tensors are
immutable.
"""

import math
import types
from typing import Any

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.common import (
    _NN_OPS,
    _NUMPY_OPS,
    _affine_base,
    _grid_source,
    _im2col_positions,
    _softmax_dim,
    _tuple,
)
from precision_transpiler.runtime.padding import _pad
from precision_transpiler.runtime.pool import _adaptive_pool
from precision_transpiler.runtime.upsampling import _interpolate


def _stats_dtype(dtype: Any) -> str:
    """Statistics and sums in at least float32, as torch's CPU kernels accumulate (bf16 in, fp32 inside)."""
    return "float64" if keras.backend.standardize_dtype(dtype) == "float64" else "float32"


def _is_floating(x: Any) -> bool:
    """Whether x (a tensor or what keras.ops.convert_to_tensor takes) holds floating-point numbers."""
    return "float" in keras.backend.standardize_dtype(ops.convert_to_tensor(x).dtype)


def _numel(x: Any) -> Any:
    """The number of elements as a Python int (`keras.ops.size` gives a tensor); a scalar tensor
    for dims known only at run time."""
    return math.prod(ops.shape(x))


def _xlogy(x: Any, y: Any) -> Any:
    """x * log(y), 0 where x is 0 (torch.xlogy; keras.ops has none)."""
    zero = x == 0
    return ops.where(zero, ops.zeros_like(x), x * ops.log(ops.where(zero, ops.ones_like(y), y)))


#: The array operations of Keras that the framework-free halves of the runtime (runtime/pool.py,
#: padding.py, losses.py, margin_losses.py, upsampling.py) compute with (`ops` there): the
#: keras.ops functions runtime/common.py names, and a few of Keras' own, under the names
#: runtime/flax/functional.py's `_ArrayOps` gives JAX's. A namespace (not a class body), so that
#: copying it brings no same-named function of this module along.
_ArrayOps = types.SimpleNamespace(
    **{name: getattr(ops, name) for name in (*_NUMPY_OPS, *_NN_OPS)},
    asarray=ops.convert_to_tensor,
    cast=ops.cast,
    is_floating=_is_floating,
    numel=_numel,
    stats_dtype=_stats_dtype,
    xlogy=_xlogy,
)


def _add_batch(x: Any, n_spatial: int) -> tuple[Any, bool]:
    """torch accepts unbatched (C, *spatial) inputs for conv and pooling layers: add the batch axis."""
    if len(x.shape) == n_spatial + 1:
        return ops.expand_dims(x, 0), True
    if len(x.shape) != n_spatial + 2:
        raise ValueError(f"expected a {n_spatial + 1}D (unbatched) or {n_spatial + 2}D input, got shape {x.shape}")
    return x, False


def _channels_last(x: Any) -> Any:
    """(N, C, *spatial) -> (N, *spatial, C): TensorFlow's CPU conv/pool kernels are channels-last only."""
    return ops.transpose(x, (0, *range(2, len(x.shape)), 1))


def _channels_first(x: Any) -> Any:
    """(N, *spatial, C) -> (N, C, *spatial), back to torch's layout."""
    n = len(x.shape)
    return ops.transpose(x, (0, n - 1, *range(1, n - 1)))


def _add_bias(y: Any, bias: Any) -> Any:
    """y + bias; in float32 when y is 16-bit, rounded once: torch's fused bias add (addmm, oneDNN
    convolutions) does not round the bias to 16 bits nor the sum twice."""
    if bias is None:
        return y
    if keras.backend.standardize_dtype(y.dtype) in ("bfloat16", "float16"):
        return ops.cast(ops.cast(y, "float32") + ops.cast(bias, "float32"), y.dtype)
    return y + bias


def _linear(x: Any, weight: Any, bias: Any) -> Any:
    """x @ W.T + b with torch's (out, in) weight layout (Keras Dense: kernel (in, out))."""
    return _add_bias(ops.matmul(x, ops.transpose(weight)), bias)


def _adaptive_pool_nd(x: Any, n: int, output_size: Any, op: str) -> Any:
    """torch adaptive pooling over the last n axes (runtime/pool.py's `_adaptive_pool`), unbatched inputs too."""
    x, unbatched = _add_batch(x, n)
    y = _adaptive_pool(x, n, output_size, op, _ArrayOps)
    return y[0] if unbatched else y


def _gelu(x: Any, approximate: str) -> Any:
    """torch's GELU: exact erf form for 'none' (`ops.gelu` defaults to approximate=True), tanh form for 'tanh'."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return ops.gelu(x, approximate=approximate == "tanh")


def _dropout(x: Any, p: float, seed: Any) -> Any:
    """Zero each element with probability p and scale the rest by 1/(1-p) (torch's inverted dropout)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 1.0:
        return ops.zeros_like(x)
    return keras.random.dropout(x, p, seed=seed)


def interpolate(
    input: Any,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Any:
    """torch.nn.functional.interpolate on (N, C, *spatial) inputs, torch's exact sample positions.

    Modes nearest (torch's floor rule, not round-half), nearest-exact, linear/bilinear, bicubic
    (A=-0.75, clamped borders), area; `align_corners`; a given `scale_factor` sets the coordinate
    step (1/scale) unless `recompute_scale_factor=True`, as in torch. `keras.ops.image.resize` is
    channels-last, has no align_corners and derives coordinates from the sizes only; this
    reproduces torch's float32 index arithmetic instead.
    """
    return _interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias, _ArrayOps)


def linear(input: Any, weight: Any, bias: Any = None) -> Any:
    """torch.nn.functional.linear with torch's weight layout (out, in): x @ W.T + b."""
    return _linear(input, weight, bias)


def pad(input: Any, pad: Any, mode: str = "constant", value: float | None = None) -> Any:
    """torch.nn.functional.pad: `pad` lists (lo, hi) pairs from the LAST dim backwards (torch's order).

    Modes constant (negative widths crop), reflect, replicate, circular.
    """
    return _pad(input, pad, mode, value, _ArrayOps)


def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False, *, seed: Any = None) -> Any:
    """torch.nn.functional.dropout: active when `training` (torch's default True), inverted scaling.

    torch draws from a global generator; pass `seed` (a keras.random.SeedGenerator) inside traced code.
    """
    return _dropout(input, p, seed) if training else input


def gelu(input: Any, approximate: str = "none") -> Any:
    """torch.nn.functional.gelu: exact erf form by default (`keras.ops.gelu` defaults to the tanh form)."""
    return _gelu(input, approximate)


def softmax(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """torch.nn.functional.softmax over `dim` (torch's legacy implicit dim when None; Keras: last axis)."""
    x = input if dtype is None else ops.cast(input, dtype)
    return ops.softmax(x, axis=_softmax_dim(len(x.shape)) if dim is None else dim)


def log_softmax(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """torch.nn.functional.log_softmax over `dim` (torch's legacy implicit dim when None)."""
    x = input if dtype is None else ops.cast(input, dtype)
    return ops.log_softmax(x, axis=_softmax_dim(len(x.shape)) if dim is None else dim)


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """torch.nn.functional.elu: x above 0, alpha * (exp(x) - 1) below."""
    return ops.elu(input, alpha=alpha)


def elu_(input: Any, alpha: float = 1.0) -> Any:
    """torch.nn.functional.elu_: `elu`'s result as a new tensor (backend tensors are immutable)."""
    return elu(input, alpha)


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    """torch.nn.functional.celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); the exponential
    reads min(x, 0) so that large x give no inf (nor a NaN gradient) in the branch not taken."""
    return ops.where(input > 0, input, alpha * ops.expm1(ops.minimum(input, 0.0) / alpha))


def celu_(input: Any, alpha: float = 1.0) -> Any:
    """torch.nn.functional.celu_: `celu`'s result as a new tensor (backend tensors are immutable)."""
    return celu(input, alpha)


def selu(input: Any, inplace: bool = False) -> Any:
    """torch.nn.functional.selu: scale * elu(x, alpha) with torch's (and Keras') constants."""
    return ops.selu(input)


def selu_(input: Any) -> Any:
    """torch.nn.functional.selu_: `selu`'s result as a new tensor (backend tensors are immutable)."""
    return selu(input)


def relu_(input: Any) -> Any:
    """torch.nn.functional.relu_: `relu`'s result as a new tensor (backend tensors are immutable)."""
    return ops.relu(input)


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    """torch.nn.functional.leaky_relu: x, or negative_slope * x below 0 (torch's default slope
    0.01; `keras.ops.leaky_relu`'s is 0.2)."""
    return ops.leaky_relu(input, negative_slope=negative_slope)


def leaky_relu_(input: Any, negative_slope: float = 0.01) -> Any:
    """torch.nn.functional.leaky_relu_: `leaky_relu`'s result as a new tensor (backend tensors are immutable)."""
    return leaky_relu(input, negative_slope)


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:
    """torch.nn.functional.hardtanh: x clipped to [min_val, max_val] (`keras.ops.hard_tanh` fixes
    the bounds at -1 and 1)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return ops.clip(input, min_val, max_val)


def hardtanh_(input: Any, min_val: float = -1.0, max_val: float = 1.0) -> Any:
    """torch.nn.functional.hardtanh_: `hardtanh`'s result as a new tensor (backend tensors are immutable)."""
    return hardtanh(input, min_val, max_val)


def _threshold(x: Any, threshold: float, value: float) -> Any:
    """`value` where x <= threshold, else x (NaN stays NaN, as in torch). Apart from `threshold`,
    whose parameter of that name hides the function from `threshold_`."""
    return ops.where(x <= threshold, ops.full_like(x, value), x)


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Any:
    """torch.nn.functional.threshold: `value` where x <= threshold, else x."""
    return _threshold(input, threshold, value)


def threshold_(input: Any, threshold: float, value: float) -> Any:
    """torch.nn.functional.threshold_: `threshold`'s result as a new tensor (backend tensors are immutable)."""
    return _threshold(input, threshold, value)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """torch.nn.functional.softplus: log(1 + exp(beta * x)) / beta, and x itself where
    beta * x > threshold (`keras.ops.softplus` has neither argument)."""
    scaled = input * beta
    return ops.where(scaled > threshold, input, ops.softplus(scaled) / beta)


def softsign(input: Any) -> Any:
    """torch.nn.functional.softsign: x / (1 + |x|)."""
    return input / (1.0 + ops.abs(input))


def softshrink(input: Any, lambd: float = 0.5) -> Any:
    """torch.nn.functional.softshrink: x - lambd above lambd, x + lambd below -lambd, else 0
    (x * 0, as torch: NaN stays NaN)."""
    return ops.where(input > lambd, input - lambd, ops.where(input < -lambd, input + lambd, input * 0))


def hardshrink(input: Any, lambd: float = 0.5) -> Any:
    """torch.nn.functional.hardshrink: 0 where -lambd <= x <= lambd, else x (NaN stays NaN, as in torch)."""
    inside = ops.logical_and(input >= -lambd, input <= lambd)
    return ops.where(inside, ops.zeros_like(input), input)


def tanhshrink(input: Any) -> Any:
    """torch.nn.functional.tanhshrink: x - tanh(x)."""
    return input - ops.tanh(input)


def softmin(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """torch.nn.functional.softmin: softmax(-x) over `dim` (torch's legacy implicit dim when
    None; the input cast to `dtype` first, as torch does)."""
    return softmax(-input, dim, _stacklevel, dtype)


def glu(input: Any, dim: int = -1) -> Any:
    """torch.nn.functional.glu: first half * sigmoid(second half) of `dim` (its size must be even)."""
    if len(input.shape) == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    a, b = ops.split(input, 2, axis=dim)
    return a * ops.sigmoid(b)


def normalize(input: Any, p: float = 2.0, dim: int | tuple[int, ...] = 1, eps: float = 1e-12, out: Any = None) -> Any:
    """torch.nn.functional.normalize: x / max(||x||_p over `dim`, eps), the vector p-norm.

    `keras.ops.norm` is a vector norm over one axis but a matrix norm over two: over several
    dims (a tuple) this computes the 2-norm only.
    """
    if out is not None:
        raise NotImplementedError("normalize(out=...) writes into a tensor in place; backend tensors are immutable")
    if isinstance(dim, int):
        norm = ops.norm(input, ord=p, axis=dim, keepdims=True)
    elif p == 2:
        norm = ops.sqrt(ops.sum(ops.square(input), axis=tuple(dim), keepdims=True))
    else:
        raise NotImplementedError(f"normalize(p={p}) over several dims {tuple(dim)} is not supported")
    return input / ops.maximum(norm, eps)


def rrelu(
    input: Any,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
    *,
    seed: Any = None,
) -> Any:
    """torch.nn.functional.rrelu: x, or slope * x below 0; the slope is (lower + upper) / 2 unless
    `training` (torch's default False), where each element draws its own from U(lower, upper).

    torch draws from a global generator; pass `seed` (a keras.random.SeedGenerator) inside traced
    code, as `dropout` takes.
    """
    if training:
        dtype = keras.backend.standardize_dtype(input.dtype)
        slope = keras.random.uniform(ops.shape(input), lower, upper, dtype=dtype, seed=seed)
    else:
        slope = (lower + upper) / 2
    return ops.where(input >= 0, input, input * slope)


def rrelu_(
    input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, *, seed: Any = None
) -> Any:
    """torch.nn.functional.rrelu_: `rrelu`'s result as a new tensor (backend tensors are immutable)."""
    return rrelu(input, lower, upper, training, seed=seed)


def prelu(input: Any, weight: Any) -> Any:
    """torch.nn.functional.prelu: x, or weight * x below 0; a weight of several elements holds
    one slope per channel, dim 1 of the input (Keras' PReLU is channels-last)."""
    w = ops.cast(weight, input.dtype)
    ndim = len(input.shape)
    if math.prod(w.shape) > 1 and ndim >= 2:
        w = ops.reshape(w, (-1,) + (1,) * (ndim - 2))
    return ops.where(input >= 0, input, w * input)


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """torch.nn.functional.one_hot: int64 result (Keras: float32), classes appended as the last axis.

    `num_classes=-1` infers max + 1 from the values, as torch does (needs concrete values, not traced).
    """
    if ops.is_tensor(num_classes):  # computed from the values (`max(indexes.max() + 1, n)`)
        num_classes = int(ops.convert_to_numpy(num_classes))
    if num_classes == -1:
        num_classes = int(ops.convert_to_numpy(ops.max(tensor))) + 1
    return ops.one_hot(tensor, num_classes, dtype="int64")


def _keras_dtype(dtype: Any) -> Any:
    """torch's `dtype=` as Keras' dtype policy: None (global policy) and Keras policies/names pass as is,
    torch or numpy dtype objects become their name ("bfloat16": bf16 variables and compute, as torch)."""
    if dtype is None or isinstance(dtype, str | keras.DTypePolicy):
        return dtype
    return keras.backend.standardize_dtype(dtype)


def _uniform(bound: float) -> Any:
    """U(-bound, bound): torch's default init of linear/conv weights and biases (kaiming_uniform, a=sqrt(5))."""
    return keras.initializers.RandomUniform(-bound, bound)


def _cast(x: Any, dtype: Any) -> Any:
    """ops.cast that keeps None (optional weights)."""
    return None if x is None else ops.cast(x, dtype)


def unflatten(input, dim, sizes):
    """torch.unflatten / Tensor.unflatten: splits dim `dim` into `sizes` (one entry may be -1)."""
    ndim = len(input.shape)
    axis = dim % ndim
    shape = ops.shape(input)
    return ops.reshape(input, (*shape[:axis], *tuple(sizes), *shape[axis + 1 :]))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """torch.nn.functional.embedding: rows of `weight`; rows at `padding_idx` get no gradient, as
    in torch. `max_norm` (in-place renormalisation of `weight`) is not supported."""
    if max_norm is not None:
        raise NotImplementedError("embedding(max_norm=...) renormalises weights in place; not supported")
    out = ops.take(weight, input, axis=0)
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        out = ops.where(ops.expand_dims(ops.equal(input, padding_idx), -1), ops.stop_gradient(out), out)
    return out


def grid_sample(
    input: Any, grid: Any, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: Any = None
) -> Any:
    """torch.nn.functional.grid_sample of an NCHW input at an (N, H_out, W_out, 2) grid of (x, y)
    points in [-1, 1]: bilinear or nearest (half to even, as torch), outside points reading zeros
    or the border ('border'), align_corners as torch (False by default)."""
    if len(input.shape) != 4 or mode not in ("bilinear", "nearest") or padding_mode not in ("zeros", "border"):
        raise NotImplementedError("grid_sample: 4-d inputs, bilinear/nearest, zeros/border padding only")
    n, c, h, w = input.shape
    ix = _grid_source(ops.cast(grid[..., 0], input.dtype), w, bool(align_corners))
    iy = _grid_source(ops.cast(grid[..., 1], input.dtype), h, bool(align_corners))
    if padding_mode == "border":
        ix, iy = ops.clip(ix, 0, w - 1), ops.clip(iy, 0, h - 1)
    flat = ops.reshape(input, (n, c, h * w))

    def read(yi: Any, xi: Any) -> Any:
        inside = ops.logical_and(ops.logical_and(xi >= 0, xi < w), ops.logical_and(yi >= 0, yi < h))
        where = ops.reshape(ops.clip(yi, 0, h - 1) * w + ops.clip(xi, 0, w - 1), (n, 1, -1))
        values = ops.reshape(ops.take_along_axis(flat, where, axis=2), (n, c, *xi.shape[1:]))
        return ops.where(ops.expand_dims(inside, 1), values, ops.zeros_like(values))

    if mode == "nearest":
        return read(ops.cast(ops.round(iy), "int32"), ops.cast(ops.round(ix), "int32"))
    x0, y0 = ops.floor(ix), ops.floor(iy)
    left, right, up, down = x0 + 1 - ix, ix - x0, y0 + 1 - iy, iy - y0  # torch's corner weights
    x0, y0 = ops.cast(x0, "int32"), ops.cast(y0, "int32")
    corners = ((y0, x0, left * up), (y0, x0 + 1, right * up), (y0 + 1, x0, left * down), (y0 + 1, x0 + 1, right * down))
    return sum(read(yi, xi) * ops.expand_dims(weight, 1) for yi, xi, weight in corners)


def affine_grid(theta: Any, size: Any, align_corners: bool | None = None) -> Any:
    """torch.nn.functional.affine_grid: for a batch of (N, 2, 3) or (N, 3, 4) affine matrices and
    an (N, C, H, W) or (N, C, D, H, W) size, the (N, H, W, 2) or (N, D, H, W, 3) grid of points
    grid_sample reads, torch's base coordinates (align_corners False by default) times theta^T."""
    base = ops.convert_to_tensor(_affine_base(size, bool(align_corners)), theta.dtype)
    grid = ops.matmul(base, ops.swapaxes(theta, 1, 2))
    return ops.reshape(grid, (size[0], *size[2:], len(size) - 2))


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Any:
    """torch.nn.functional.unfold (im2col) of an (N, C, H, W) or (C, H, W) input: every sliding
    window's values as a column, (N, C * kH * kW, L), in torch's order."""
    x, unbatched = _add_batch(input, 2)
    rows, _, pads = _im2col_positions(x.shape[1], x.shape[2:], kernel_size, dilation, padding, stride)
    flat = ops.reshape(ops.pad(x, [(0, 0), (0, 0), *[(pp, pp) for pp in pads]]), (x.shape[0], -1))
    columns = ops.take(flat, rows, axis=1)
    return columns[0] if unbatched else columns


def fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Any:
    """torch.nn.functional.fold (col2im): the columns of an (N, C * kH * kW, L) or (C * kH * kW, L)
    input summed back into an (N, C, *output_size) image, overlapping windows adding up."""
    x = ops.expand_dims(input, 0) if len(input.shape) == 2 else input
    size = _tuple(output_size, 2, "output_size")
    channels = x.shape[1] // math.prod(_tuple(kernel_size, 2, "kernel_size"))
    rows, padded, pads = _im2col_positions(channels, size, kernel_size, dilation, padding, stride)
    batch = x.shape[0]
    where = np.stack(np.broadcast_arrays(np.arange(batch)[:, None, None], rows[None]), -1).reshape(-1, 2)
    image = ops.scatter(where, ops.reshape(x, (-1,)), (batch, channels * math.prod(padded)))
    image = ops.reshape(image, (batch, channels, *padded))
    image = image[(slice(None), slice(None), *[slice(pp, pp + n) for pp, n in zip(pads, size, strict=True)])]
    return image[0] if len(input.shape) == 2 else image


def pixel_shuffle(input: Any, upscale_factor: int) -> Any:
    """torch.nn.functional.pixel_shuffle: (*, C * r * r, H, W) -> (*, C, H * r, W * r)."""
    r = upscale_factor
    *lead, c, h, w = input.shape
    x = ops.reshape(input, (*lead, c // (r * r), r, r, h, w))
    n = len(lead)
    x = ops.transpose(x, (*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return ops.reshape(x, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:
    """torch.nn.functional.pixel_unshuffle: (*, C, H * r, W * r) -> (*, C * r * r, H, W)."""
    r = downscale_factor
    *lead, c, h, w = input.shape
    x = ops.reshape(input, (*lead, c, h // r, r, w // r, r))
    n = len(lead)
    x = ops.transpose(x, (*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return ops.reshape(x, (*lead, c * r * r, h // r, w // r))


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """torch.nn.functional.cosine_similarity: each input divided by its 2-norm over `dim` (at
    least eps), then the dot product, as torch computes it (broadcasting the inputs)."""
    shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    x1, x2 = ops.broadcast_to(x1, shape), ops.broadcast_to(x2, shape)
    n1 = ops.maximum(ops.sqrt(ops.sum(ops.square(x1), axis=dim, keepdims=True)), eps)
    n2 = ops.maximum(ops.sqrt(ops.sum(ops.square(x2), axis=dim, keepdims=True)), eps)
    return ops.sum(ops.divide(x1, n1) * ops.divide(x2, n2), axis=dim)


def pad_sequence(
    sequences: Any, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> Any:
    """torch.nn.utils.rnn.pad_sequence: (L_i, *) tensors padded with `padding_value` to the longest
    (on the right, or the left with padding_side="left") and stacked as (L, B, *), or (B, L, *) with
    batch_first, in the first tensor's dtype."""
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        widths = [(extra, 0) if padding_side == "left" else (0, extra)] + [(0, 0)] * (len(s.shape) - 1)
        padded.append(ops.cast(ops.pad(s, widths, constant_values=padding_value), sequences[0].dtype))
    out = ops.stack(padded)
    return out if batch_first else ops.swapaxes(out, 0, 1)
