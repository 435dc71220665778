"""torch.nn.functional for Flax NNX, and the helpers the other Flax runtime modules share: `linear`,
`embedding`, activations with torch's defaults (exact `gelu`, the implicit softmax dim), `dropout`,
`pad` (torch's modes), `flatten`/`unflatten`, `interpolate` (torch's sampling grid), `one_hot`,
`grid_sample`/`affine_grid`, `unfold`/`fold`, `pixel_shuffle`/`pixel_unshuffle`,
`cosine_similarity`, and torch.nn.utils.rnn's `pad_sequence`.

torch's activation functions whose JAX counterparts take other arguments (`elu`, `leaky_relu`,
`hardtanh`, `softplus`, `softmin`, `glu`, `normalize`, `rrelu`, `prelu`, ...) are here with torch's
signatures: model code passes them around as values (`act=F.elu`, `partial(F.leaky_relu,
negative_slope=0.2)`, `getattr(F, name)`) and calls them with torch's positional and keyword
arguments, so a reference to one converts to a reference to its function here. The activation
layers (activations.py) compute through them. `inplace` is accepted and ignored, and the in-place
variants (`elu_`, `relu_`, ...) return the result: JAX arrays are immutable.
"""

import math
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from precision_transpiler.runtime.common import (
    _NN_OPS,
    _NUMPY_OPS,
    _affine_base,
    _grid_source,
    _im2col_positions,
    _softmax_dim,
    _tuple,
)
from precision_transpiler.runtime.flax.rng import _random_key
from precision_transpiler.runtime.padding import _pad
from precision_transpiler.runtime.pool import _adaptive_pool
from precision_transpiler.runtime.upsampling import _interpolate

_PADDING_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _stats_dtype(dtype: Any) -> Any:
    """Statistics and sums in at least float32, as torch's CPU kernels accumulate (bf16 in, fp32 inside)."""
    return jnp.promote_types(dtype, jnp.float32)


def _is_floating(x: Any) -> bool:
    """Whether x (an array or what jnp.asarray takes) holds floating-point numbers."""
    return bool(jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating))


#: The array operations of JAX that the framework-free halves of the runtime (runtime/pool.py,
#: padding.py, losses.py, margin_losses.py, upsampling.py) compute with (`ops` there): the
#: jax.numpy and jax.nn functions runtime/common.py names, and a few of JAX's own;
#: runtime/keras/functional.py's `_ArrayOps` has the same names over keras.ops. A namespace (not
#: a class body), so that copying it brings no same-named function of this module along.
_ArrayOps = types.SimpleNamespace(
    **{name: getattr(jnp, name) for name in _NUMPY_OPS},
    **{name: getattr(jax.nn, name) for name in _NN_OPS},
    asarray=jnp.asarray,
    cast=jnp.asarray,
    is_floating=_is_floating,
    numel=jnp.size,
    stats_dtype=_stats_dtype,
    xlogy=jax.scipy.special.xlogy,
)


def _promote(dtype: Any, *arrays: Any) -> tuple[Any, ...]:
    """Flax's dtype rule: cast inputs and parameters to `dtype`, or to their common type when None."""
    target = jnp.result_type(*[a for a in arrays if a is not None]) if dtype is None else dtype
    return tuple(None if a is None else jnp.asarray(a, target) for a in arrays)


def _uniform(key: jax.Array, shape: tuple[int, ...], dtype: Any, bound: float) -> jax.Array:
    """U(-bound, bound): torch's default init of conv weights and biases (kaiming_uniform with a=sqrt(5)).

    Outside a trace the numbers come from NumPy, seeded by the key's bits: `jax.random.uniform`
    compiles one XLA program per shape, which made constructing a CNN eagerly on CPU take
    seconds per distinct layer size; the key's bits are the same for every shape. The values
    are as reproducible from the key as JAX's own (not the same numbers)."""
    if isinstance(key, jax.core.Tracer):
        return jax.random.uniform(key, shape, dtype, -bound, bound)
    bits = np.asarray(jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key)
    draws = np.random.default_rng(bits.astype(np.uint64).ravel()).uniform(-bound, bound, shape)
    return jnp.asarray(draws, dtype)


def _value(variable: Any) -> Any:
    """The array held by an optional nnx.Variable (None stays None)."""
    return None if variable is None else variable[...]


def _rng_key(rngs: Any) -> jax.Array:
    """A PRNG key for dropout: an nnx.Rngs' 'dropout' stream (or its default), or whatever
    rng.py's key sources take (a stream, a converted module's `torch_rng`, a key, None: the
    process-wide keys)."""
    if isinstance(rngs, nnx.Rngs):
        return rngs["dropout"]()
    return _random_key(rngs)


def _dropout_apply(x: jax.Array, p: float, key: jax.Array) -> jax.Array:
    """Zero each element with probability p and scale the rest by 1/(1-p) (torch's inverted dropout)."""
    if p >= 1.0:
        return jnp.zeros_like(x)
    keep = 1.0 - p
    mask = jax.random.bernoulli(key, keep, x.shape)
    return jnp.where(mask, x / jnp.asarray(keep, x.dtype), jnp.zeros_like(x))


def _add_batch(x: jax.Array, n_spatial: int) -> tuple[jax.Array, bool]:
    """torch accepts unbatched (C, *spatial) inputs for conv and pooling layers: add the batch axis."""
    if x.ndim == n_spatial + 1:
        return x[None], True
    if x.ndim != n_spatial + 2:
        raise ValueError(f"expected a {n_spatial + 1}D (unbatched) or {n_spatial + 2}D input, got shape {x.shape}")
    return x, False


def _adaptive_pool_nd(x: jax.Array, n: int, output_size: Any, op: str) -> jax.Array:
    """torch adaptive pooling over the last n axes (runtime/pool.py's `_adaptive_pool`), unbatched inputs too."""
    x, unbatched = _add_batch(x, n)
    y = _adaptive_pool(x, n, output_size, op, _ArrayOps)
    return y[0] if unbatched else y


def linear(input: jax.Array, weight: jax.Array, bias: Any = None, *, precision: Any = None) -> jax.Array:
    """torch.nn.functional.linear with torch's weight layout (out, in): x @ W.T + b (nnx: kernel (in, out))."""
    y = jnp.matmul(input, jnp.swapaxes(weight, -1, -2), precision=precision)
    return y if bias is None else y + bias


def embedding(
    input: jax.Array,
    weight: jax.Array,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> jax.Array:
    """torch.nn.functional.embedding: rows of `weight`; rows at `padding_idx` get no gradient, as in torch."""
    if max_norm is not None:
        raise NotImplementedError("embedding(max_norm=...) renormalises weights in place; not supported")
    out = jnp.take(weight, input, axis=0)
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        out = jnp.where((input == padding_idx)[..., None], jax.lax.stop_gradient(out), out)
    return out


def softmax(input: jax.Array, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> jax.Array:
    """torch.nn.functional.softmax (input cast to `dtype` first, as torch does)."""
    x = input if dtype is None else input.astype(dtype)
    return jax.nn.softmax(x, axis=_softmax_dim(x.ndim) if dim is None else dim)


def log_softmax(input: jax.Array, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> jax.Array:
    """torch.nn.functional.log_softmax (input cast to `dtype` first, as torch does)."""
    x = input if dtype is None else input.astype(dtype)
    return jax.nn.log_softmax(x, axis=_softmax_dim(x.ndim) if dim is None else dim)


def gelu(input: jax.Array, approximate: str = "none") -> jax.Array:
    """torch.nn.functional.gelu: exact erf form by default (`jax.nn.gelu` defaults to the tanh form)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return jax.nn.gelu(input, approximate=approximate == "tanh")


def elu(input: jax.Array, alpha: float = 1.0, inplace: bool = False) -> jax.Array:
    """torch.nn.functional.elu: x above 0, alpha * (exp(x) - 1) below."""
    return jax.nn.elu(input, alpha=alpha)


def elu_(input: jax.Array, alpha: float = 1.0) -> jax.Array:
    """torch.nn.functional.elu_: `elu`'s result as a new array (JAX arrays are immutable)."""
    return elu(input, alpha)


def celu(input: jax.Array, alpha: float = 1.0, inplace: bool = False) -> jax.Array:
    """torch.nn.functional.celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return jax.nn.celu(input, alpha=alpha)


def celu_(input: jax.Array, alpha: float = 1.0) -> jax.Array:
    """torch.nn.functional.celu_: `celu`'s result as a new array (JAX arrays are immutable)."""
    return celu(input, alpha)


def selu(input: jax.Array, inplace: bool = False) -> jax.Array:
    """torch.nn.functional.selu: scale * elu(x, alpha) with torch's (and JAX's) constants."""
    return jax.nn.selu(input)


def selu_(input: jax.Array) -> jax.Array:
    """torch.nn.functional.selu_: `selu`'s result as a new array (JAX arrays are immutable)."""
    return selu(input)


def relu_(input: jax.Array) -> jax.Array:
    """torch.nn.functional.relu_: `relu`'s result as a new array (JAX arrays are immutable)."""
    return jax.nn.relu(input)


def leaky_relu(input: jax.Array, negative_slope: float = 0.01, inplace: bool = False) -> jax.Array:
    """torch.nn.functional.leaky_relu: x, or negative_slope * x below 0 (torch's default slope 0.01)."""
    return jax.nn.leaky_relu(input, negative_slope=negative_slope)


def leaky_relu_(input: jax.Array, negative_slope: float = 0.01) -> jax.Array:
    """torch.nn.functional.leaky_relu_: `leaky_relu`'s result as a new array (JAX arrays are immutable)."""
    return leaky_relu(input, negative_slope)


def hardtanh(input: jax.Array, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> jax.Array:
    """torch.nn.functional.hardtanh: x clipped to [min_val, max_val] (`jax.nn.hard_tanh` fixes
    the bounds at -1 and 1)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return jnp.clip(input, min_val, max_val)


def hardtanh_(input: jax.Array, min_val: float = -1.0, max_val: float = 1.0) -> jax.Array:
    """torch.nn.functional.hardtanh_: `hardtanh`'s result as a new array (JAX arrays are immutable)."""
    return hardtanh(input, min_val, max_val)


def _threshold(x: jax.Array, threshold: float, value: float) -> jax.Array:
    """`value` where x <= threshold, else x (NaN stays NaN, as in torch). Apart from `threshold`,
    whose parameter of that name hides the function from `threshold_`."""
    return jnp.where(x <= threshold, jnp.asarray(value, x.dtype), x)


def threshold(input: jax.Array, threshold: float, value: float, inplace: bool = False) -> jax.Array:
    """torch.nn.functional.threshold: `value` where x <= threshold, else x."""
    return _threshold(input, threshold, value)


def threshold_(input: jax.Array, threshold: float, value: float) -> jax.Array:
    """torch.nn.functional.threshold_: `threshold`'s result as a new array (JAX arrays are immutable)."""
    return _threshold(input, threshold, value)


def softplus(input: jax.Array, beta: float = 1.0, threshold: float = 20.0) -> jax.Array:
    """torch.nn.functional.softplus: log(1 + exp(beta * x)) / beta, and x itself where
    beta * x > threshold (`jax.nn.softplus` has neither argument)."""
    scaled = input * beta
    return jnp.where(scaled > threshold, input, jax.nn.softplus(scaled) / beta)


def softsign(input: jax.Array) -> jax.Array:
    """torch.nn.functional.softsign: x / (1 + |x|)."""
    return jax.nn.soft_sign(input)


def softshrink(input: jax.Array, lambd: float = 0.5) -> jax.Array:
    """torch.nn.functional.softshrink: x - lambd above lambd, x + lambd below -lambd, else 0
    (x * 0, as torch: NaN stays NaN)."""
    return jnp.where(input > lambd, input - lambd, jnp.where(input < -lambd, input + lambd, input * 0))


def hardshrink(input: jax.Array, lambd: float = 0.5) -> jax.Array:
    """torch.nn.functional.hardshrink: 0 where -lambd <= x <= lambd, else x (NaN stays NaN, as in torch)."""
    return jnp.where((input >= -lambd) & (input <= lambd), jnp.zeros((), input.dtype), input)


def tanhshrink(input: jax.Array) -> jax.Array:
    """torch.nn.functional.tanhshrink: x - tanh(x)."""
    return input - jnp.tanh(input)


def softmin(input: jax.Array, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> jax.Array:
    """torch.nn.functional.softmin: softmax(-x) over `dim` (torch's legacy implicit dim when
    None; the input cast to `dtype` first, as torch does)."""
    return softmax(-input, dim, _stacklevel, dtype)


def glu(input: jax.Array, dim: int = -1) -> jax.Array:
    """torch.nn.functional.glu: first half * sigmoid(second half) of `dim` (its size must be even)."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    return jax.nn.glu(input, axis=dim)


def normalize(
    input: jax.Array, p: float = 2.0, dim: int | tuple[int, ...] = 1, eps: float = 1e-12, out: Any = None
) -> jax.Array:
    """torch.nn.functional.normalize: x / max(||x||_p over `dim`, eps), the vector p-norm over
    one dim or several (a tuple)."""
    if out is not None:
        raise NotImplementedError("normalize(out=...) writes into a tensor in place; JAX arrays are immutable")
    norm = jnp.linalg.vector_norm(input, ord=p, axis=dim if isinstance(dim, int) else tuple(dim), keepdims=True)
    return input / jnp.maximum(norm, eps)


def rrelu(
    input: jax.Array,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
    *,
    rngs: Any = None,
) -> jax.Array:
    """torch.nn.functional.rrelu: x, or slope * x below 0; the slope is (lower + upper) / 2 unless
    `training` (torch's default False), where each element draws its own from U(lower, upper).

    torch draws from a global generator; JAX needs an explicit key: an nnx.Rngs (its 'dropout'
    stream), an nnx.RngStream, a converted module or a key (None: the process-wide keys), as
    `dropout` takes.
    """
    if training:
        slope = jax.random.uniform(_rng_key(rngs), input.shape, input.dtype, lower, upper)
    else:
        slope = jnp.asarray((lower + upper) / 2, input.dtype)
    return jnp.where(input >= 0, input, input * slope)


def rrelu_(
    input: jax.Array, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, *, rngs: Any = None
) -> jax.Array:
    """torch.nn.functional.rrelu_: `rrelu`'s result as a new array (JAX arrays are immutable)."""
    return rrelu(input, lower, upper, training, rngs=rngs)


def prelu(input: jax.Array, weight: jax.Array) -> jax.Array:
    """torch.nn.functional.prelu: x, or weight * x below 0; a weight of several elements holds
    one slope per channel, dim 1 of the input."""
    w = jnp.asarray(weight).astype(input.dtype)
    if w.size > 1 and input.ndim >= 2:
        w = w.reshape((-1,) + (1,) * (input.ndim - 2))
    return jnp.where(input >= 0, input, w * input)


def dropout(
    input: jax.Array, p: float = 0.5, training: bool = True, inplace: bool = False, *, rngs: Any = None
) -> jax.Array:
    """torch.nn.functional.dropout: active when `training` (torch's default True).

    torch draws from a global generator; JAX needs an explicit key: the converter passes the key
    source in reach (`rngs=self` in a module's methods); an nnx.Rngs (its 'dropout' stream), an
    nnx.RngStream or a key work too.
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    return _dropout_apply(input, p, _rng_key(rngs))


def flatten(input: jax.Array, start_dim: int = 0, end_dim: int = -1) -> jax.Array:
    """torch.flatten: merge dims start_dim..end_dim (inclusive); jnp.ravel flattens everything."""
    if input.ndim == 0:
        return input.reshape(1)
    start = start_dim % input.ndim
    end = end_dim % input.ndim
    if start > end:
        raise ValueError("flatten() has invalid args: start_dim cannot come after end_dim")
    merged = math.prod(input.shape[start : end + 1])
    return input.reshape(*input.shape[:start], merged, *input.shape[end + 1 :])


def unflatten(input: jax.Array, dim: int, sizes: Any) -> jax.Array:
    """torch.unflatten: split dim into `sizes` (one entry may be -1)."""
    axis = dim % input.ndim
    return input.reshape(*input.shape[:axis], *tuple(sizes), *input.shape[axis + 1 :])


def pad(input: jax.Array, pad: Any, mode: str = "constant", value: float | None = None) -> jax.Array:
    """torch.nn.functional.pad: pairs are given last dim first, (left, right, top, bottom, ...);
    jnp.pad takes one pair per dim, first dim first. Modes constant, reflect, replicate, circular,
    negative widths cropping (runtime/padding.py)."""
    return _pad(input, pad, mode, value, _ArrayOps)


def interpolate(
    input: jax.Array,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> jax.Array:
    """torch.nn.functional.interpolate on (N, C, *spatial) inputs.

    Modes nearest, nearest-exact, linear/bilinear/trilinear, bicubic (A=-0.75, clamped borders),
    area; `align_corners`; a given `scale_factor` sets the coordinate step (1/scale) unless
    `recompute_scale_factor=True`, as in torch. `jax.image.resize` uses half-pixel centres with
    antialiasing and no align_corners, and its 'nearest' rounds differently: it cannot reproduce these.
    """
    return _interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias, _ArrayOps)


def one_hot(tensor: jax.Array, num_classes: int = -1) -> jax.Array:
    """torch.nn.functional.one_hot: int64 one-hot vectors as a new last axis (`jax.nn.one_hot`
    makes floats). `num_classes=-1` infers max + 1 from the values, as torch does (concrete
    values: not under jax.jit)."""
    if num_classes == -1:
        num_classes = int(jnp.max(tensor)) + 1
    return jax.nn.one_hot(tensor, num_classes, dtype=jnp.int64)


def grid_sample(
    input: jax.Array,
    grid: jax.Array,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> jax.Array:
    """torch.nn.functional.grid_sample of an NCHW input at an (N, H_out, W_out, 2) grid of (x, y)
    points in [-1, 1]: bilinear or nearest (half to even, as torch), outside points reading zeros
    or the border ('border'), align_corners as torch (False by default)."""
    if input.ndim != 4 or mode not in ("bilinear", "nearest") or padding_mode not in ("zeros", "border"):
        raise NotImplementedError("grid_sample: 4-d inputs, bilinear/nearest, zeros/border padding only")
    n, c, h, w = input.shape
    ix = _grid_source(grid[..., 0].astype(input.dtype), w, bool(align_corners))
    iy = _grid_source(grid[..., 1].astype(input.dtype), h, bool(align_corners))
    if padding_mode == "border":
        ix, iy = jnp.clip(ix, 0, w - 1), jnp.clip(iy, 0, h - 1)
    flat = input.reshape(n, c, h * w)

    def read(yi: jax.Array, xi: jax.Array) -> jax.Array:
        inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
        where = (jnp.clip(yi, 0, h - 1) * w + jnp.clip(xi, 0, w - 1)).reshape(n, 1, -1)
        values = jnp.take_along_axis(flat, where, axis=2).reshape(n, c, *xi.shape[1:])
        return jnp.where(inside[:, None], values, 0)

    if mode == "nearest":
        return read(jnp.round(iy).astype(jnp.int32), jnp.round(ix).astype(jnp.int32))
    x0, y0 = jnp.floor(ix), jnp.floor(iy)
    left, right, up, down = x0 + 1 - ix, ix - x0, y0 + 1 - iy, iy - y0  # torch's corner weights
    x0, y0 = x0.astype(jnp.int32), y0.astype(jnp.int32)
    corners = ((y0, x0, left * up), (y0, x0 + 1, right * up), (y0 + 1, x0, left * down), (y0 + 1, x0 + 1, right * down))
    return sum(read(yi, xi) * weight[:, None] for yi, xi, weight in corners)


def affine_grid(theta: jax.Array, size: Any, align_corners: bool | None = None) -> jax.Array:
    """torch.nn.functional.affine_grid: for a batch of (N, 2, 3) or (N, 3, 4) affine matrices and
    an (N, C, H, W) or (N, C, D, H, W) size, the (N, H, W, 2) or (N, D, H, W, 3) grid of points
    grid_sample reads, torch's base coordinates (align_corners False by default) times theta^T."""
    base = jnp.asarray(_affine_base(size, bool(align_corners)), theta.dtype)
    grid = jnp.matmul(base, jnp.swapaxes(theta, 1, 2))
    return grid.reshape((size[0], *size[2:], len(size) - 2))


def unfold(input: jax.Array, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> jax.Array:
    """torch.nn.functional.unfold (im2col) of an (N, C, H, W) or (C, H, W) input: every sliding
    window's values as a column, (N, C * kH * kW, L), in torch's order."""
    x, unbatched = _add_batch(input, 2)
    rows, _, pads = _im2col_positions(x.shape[1], x.shape[2:], kernel_size, dilation, padding, stride)
    flat = jnp.pad(x, [(0, 0), (0, 0), *[(pp, pp) for pp in pads]]).reshape(x.shape[0], -1)
    columns = flat[:, rows]
    return columns[0] if unbatched else columns


def fold(
    input: jax.Array, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> jax.Array:
    """torch.nn.functional.fold (col2im): the columns of an (N, C * kH * kW, L) or (C * kH * kW, L)
    input summed back into an (N, C, *output_size) image, overlapping windows adding up."""
    x = input[None] if input.ndim == 2 else input
    size = _tuple(output_size, 2, "output_size")
    channels = x.shape[1] // math.prod(_tuple(kernel_size, 2, "kernel_size"))
    rows, padded, pads = _im2col_positions(channels, size, kernel_size, dilation, padding, stride)
    image = jnp.zeros((x.shape[0], channels * math.prod(padded)), x.dtype).at[:, rows].add(x)
    image = image.reshape(x.shape[0], channels, *padded)
    image = image[(slice(None), slice(None), *[slice(pp, pp + n) for pp, n in zip(pads, size, strict=True)])]
    return image[0] if input.ndim == 2 else image


def pixel_shuffle(input: jax.Array, upscale_factor: int) -> jax.Array:
    """torch.nn.functional.pixel_shuffle: (*, C * r * r, H, W) -> (*, C, H * r, W * r)."""
    r = upscale_factor
    *lead, c, h, w = input.shape
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    x = jnp.transpose(x, (*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: jax.Array, downscale_factor: int) -> jax.Array:
    """torch.nn.functional.pixel_unshuffle: (*, C, H * r, W * r) -> (*, C * r * r, H, W)."""
    r = downscale_factor
    *lead, c, h, w = input.shape
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    n = len(lead)
    x = jnp.transpose(x, (*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return x.reshape(*lead, c * r * r, h // r, w // r)


def cosine_similarity(x1: jax.Array, x2: jax.Array, dim: int = 1, eps: float = 1e-8) -> jax.Array:
    """torch.nn.functional.cosine_similarity: each input divided by its 2-norm over `dim` (at
    least eps), then the dot product, as torch computes it (broadcasting the inputs)."""
    x1, x2 = jnp.broadcast_arrays(x1, x2)
    n1 = jnp.maximum(jnp.linalg.vector_norm(x1, axis=dim, keepdims=True), eps)
    n2 = jnp.maximum(jnp.linalg.vector_norm(x2, axis=dim, keepdims=True), eps)
    return jnp.sum((x1 / n1) * (x2 / n2), axis=dim)


def pad_sequence(
    sequences: Any, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> jax.Array:
    """torch.nn.utils.rnn.pad_sequence: (L_i, *) tensors padded with `padding_value` to the longest
    (on the right, or the left with padding_side="left") and stacked as (L, B, *), or (B, L, *) with
    batch_first, in the first tensor's dtype."""
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        widths = [(extra, 0) if padding_side == "left" else (0, extra)] + [(0, 0)] * (s.ndim - 1)
        padded.append(jnp.pad(s, widths, constant_values=padding_value).astype(sequences[0].dtype))
    out = jnp.stack(padded)
    return out if batch_first else jnp.swapaxes(out, 0, 1)
