"""torch.nn.functional counterparts for Keras 3 (`keras.ops`), with torch's exact semantics.

Why this module exists: converted torch code keeps its channels-first (NCHW / NCL) tensors and
torch's defaults, and the Keras/TensorFlow API differs silently in exactly those places
(docs/background.md#framework-defaults-that-differ): Keras pooling and convolutions default to channels-last and
'valid' padding, TensorFlow's CPU kernels reject channels-first convolution and pooling, `ops.gelu`
defaults to the tanh approximation, `ops.pad` on TensorFlow knows neither 'replicate' nor
'circular', TensorFlow refuses strided and dilated convolutions together, ... Each function below
takes torch's arguments and returns what torch returns (relative error <= 1e-5 in float32,
tests/test_keras_shims.py).

Rules this source keeps, because the converter copies the definitions a converted file needs into
that file (precision_transpiler/convert/vendor.py):

- It imports exactly `SHIM_IMPORTS` (keras, keras.ops, numpy, math, typing); never torch.
- Every top-level definition is copyable alone, together with the top-level helpers it references.
  `keras_nn` imports its private helpers from here (the converter follows that import), so this
  module never imports `keras_nn`.

Conventions:

- Inputs and outputs use torch layouts (channels at axis 1); unbatched inputs are accepted where
  torch accepts them. Channels-first data are transposed to channels-last around `ops.conv` /
  `ops.max_pool` / `ops.average_pool` (TensorFlow on CPU has no channels-first kernels).
- Weights use torch layouts: `linear` takes (out, in), `conv2d` takes OIHW.
- Channel and spatial sizes must be static (known when tracing); the batch axis may be dynamic.
- Statistics (norms, pooling sums, softmax of attention scores) are computed in at least float32;
  results have the input's dtype.
"""

import math
from typing import Any

import keras
import numpy as np
from keras import ops

# The import block copied definitions need (the converter emits it once per converted file).
SHIM_IMPORTS = "import math\nfrom typing import Any\n\nimport keras\nimport numpy as np\nfrom keras import ops\n"

# ----------------------------------------------------------------------------------------------------
# helpers (keras_nn.py imports them too)


def _tuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    """torch's `_single`/`_pair`/`_triple`: an int is repeated n times, a sequence must have n entries."""
    if isinstance(value, int | np.integer):
        return (int(value),) * n
    out = tuple(int(v) for v in value)
    if len(out) == 1 and n > 1:
        return out * n
    if len(out) != n:
        raise ValueError(f"{name} must be an int or a sequence of {n} ints, got {value!r}")
    return out


def _stats_dtype(dtype: Any) -> str:
    """Statistics and sums in at least float32, as torch's CPU kernels accumulate (bf16 in, fp32 inside)."""
    return "float64" if keras.backend.standardize_dtype(dtype) == "float64" else "float32"


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


def _pad_index(size: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """Source indices along one axis for torch's non-constant padding modes (negative lo/hi crop)."""
    index = np.arange(-lo, size + hi)
    if mode == "replicate":
        return np.clip(index, 0, size - 1)
    if mode == "circular":
        if lo > size or hi > size:
            raise ValueError("circular padding may not be larger than the input size")
        return np.mod(index, size)
    if mode == "reflect":
        if lo >= size or hi >= size:
            raise ValueError(f"reflect padding ({lo}, {hi}) must be smaller than the input size {size}")
        index = np.abs(index)
        return np.where(index >= size, 2 * (size - 1) - index, index)
    raise ValueError(f"Unsupported padding mode {mode!r}")


def _pad_nd(x: Any, pairs: list[tuple[int, int]], mode: str, value: float = 0.0) -> Any:
    """Pad with (lo, hi) per axis of x: torch's constant (negative = crop), reflect, replicate, circular.

    TensorFlow's `ops.pad` has no 'edge'/'wrap' modes and rejects negative widths, so non-constant
    modes gather with precomputed indices (static axis sizes).
    """
    if mode == "constant":
        for axis, (lo, hi) in enumerate(pairs):
            if lo < 0 or hi < 0:
                size = x.shape[axis]
                x = ops.take(x, np.arange(max(-lo, 0), size - max(-hi, 0)), axis=axis)
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
        if any(lo or hi for lo, hi in widths):
            x = ops.pad(x, widths, constant_values=value)
        return x
    for axis, (lo, hi) in enumerate(pairs):
        if lo or hi:
            x = ops.take(x, _pad_index(x.shape[axis], lo, hi, mode), axis=axis)
    return x


def _conv_padding_pairs(padding: Any, kernel_size: tuple[int, ...], dilation: tuple[int, ...]) -> list[tuple[int, int]]:
    """Explicit (lo, hi) pairs for torch's padding argument; 'same' puts the odd pixel on the high side."""
    if padding == "valid":
        return [(0, 0)] * len(kernel_size)
    if padding == "same":
        pairs = []
        for k, d in zip(kernel_size, dilation, strict=True):
            total = d * (k - 1)
            pairs.append((total // 2, total - total // 2))
        return pairs
    return [(p, p) for p in padding]


def _conv_nd(
    x: Any,
    weight: Any,
    bias: Any,
    stride: tuple[int, ...],
    pairs: list[tuple[int, int]],
    dilation: tuple[int, ...],
    groups: int,
    padding_mode: str,
) -> Any:
    """Channels-first convolution with a torch (out, in/groups, *k) weight and torch's padding modes.

    Padding is applied explicitly (then 'valid'); stride together with dilation, which TensorFlow
    refuses, runs at stride 1 and subsamples (same result). Grouped convolutions go through
    `ops.conv` with an (in/groups) kernel (Keras compiles them with XLA on CPU).
    """
    n = len(weight.shape) - 2
    x, unbatched = _add_batch(x, n)
    if x.shape[1] is not None and x.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"expected input with {weight.shape[1] * groups} channels, got shape {x.shape}")
    x = _pad_nd(x, [(0, 0), (0, 0), *pairs], "constant" if padding_mode == "zeros" else padding_mode)
    kernel = ops.transpose(weight, (*range(2, n + 2), 1, 0))
    both = any(s > 1 for s in stride) and any(d > 1 for d in dilation)
    y = ops.conv(_channels_last(x), kernel, strides=1 if both else stride, padding="valid", dilation_rate=dilation)
    if both:
        y = y[(slice(None), *(slice(None, None, s) for s in stride), slice(None))]
    y = _channels_first(_add_bias(y, bias))
    return y[0] if unbatched else y


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


def _lowest(dtype: Any) -> float:
    """The padding value of max pooling: -inf (or the integer minimum), never part of a maximum."""
    dtype = keras.backend.standardize_dtype(dtype)
    return float("-inf") if "float" in dtype else int(np.iinfo(dtype).min)


def _pool_out_size(size: int, eff_kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """torch's pooling output size, including the ceil_mode rule that the last window starts inside."""
    span = size + 2 * pad - eff_kernel
    if span < 0:
        raise ValueError(f"pooling output size is too small (input {size}, padding {pad}, kernel {eff_kernel})")
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + pad:
            out -= 1
    else:
        out = span // stride + 1
    return out


def _pool_args(
    n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Normalise torch's pooling arguments; stride None (or empty) means stride = kernel_size."""
    k = _tuple(kernel_size, n, "kernel_size")
    empty = stride is None or (not isinstance(stride, int) and len(tuple(stride)) == 0)
    s = k if empty else _tuple(stride, n, "stride")
    return k, s, _tuple(padding, n, "padding"), _tuple(dilation, n, "dilation")


def _max_pool_nd(x: Any, n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool) -> Any:
    """torch max pooling: implicit -inf padding, ceil_mode, dilation, stride defaulting to the kernel.

    Padding (including the extra high-side cells ceil_mode needs) is explicit, then `ops.max_pool`
    'valid' on channels-last data. Dilated windows (no Keras op) are a maximum over strided slices.
    """
    x, unbatched = _add_batch(x, n)
    k, s, p, d = _pool_args(n, kernel_size, stride, padding, dilation)
    pairs, outs = [], []
    for size, kk, ss, pp, dd in zip(x.shape[2:], k, s, p, d, strict=True):
        eff = dd * (kk - 1) + 1
        if pp > eff // 2:
            raise ValueError("pad should be at most half of effective kernel size")
        out = _pool_out_size(size, eff, ss, pp, ceil_mode)
        outs.append(out)
        pairs.append((pp, max((out - 1) * ss + eff - size - pp, 0)))
    x = _pad_nd(x, [(0, 0), (0, 0), *pairs], "constant", _lowest(x.dtype))
    if all(dd == 1 for dd in d):
        y = _channels_first(ops.max_pool(_channels_last(x), k, s, padding="valid"))
    else:
        y = None
        for offsets in np.ndindex(*k):  # one strided slice per kernel tap
            taps = zip(offsets, d, s, outs, strict=True)
            spans = tuple(slice(o * dd, o * dd + (m - 1) * ss + 1, ss) for o, dd, ss, m in taps)
            window = x[(slice(None), slice(None), *spans)]
            y = window if y is None else ops.maximum(y, window)
    return y[0] if unbatched else y


def _avg_pool_divisor(size: int, k: int, s: int, p: int, out: int, count_include_pad: bool) -> np.ndarray:
    """Per-output window sizes along one axis, as torch's avg_pool computes its divisor."""
    counts = []
    for o in range(out):
        start = o * s - p
        end = min(start + k, size + p)
        pool = end - start
        start, end = max(start, 0), min(end, size)
        counts.append(pool if count_include_pad else end - start)
    return np.asarray(counts, np.float64)


def _avg_pool_nd(
    x: Any,
    n: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> Any:
    """torch average pooling: zero padding, ceil_mode windows, count_include_pad and divisor_override.

    `ops.average_pool` 'valid' on the explicitly padded input divides by the full window; the result
    is rescaled to torch's divisor (windows overhanging the padded input under ceil_mode, padding
    cells excluded when `count_include_pad=False`).
    """
    x, unbatched = _add_batch(x, n)
    k, s, p, _ = _pool_args(n, kernel_size, stride, padding, 1)
    pairs = []
    divisor = np.ones((), np.float64)
    for size, kk, ss, pp in zip(x.shape[2:], k, s, p, strict=True):
        if pp > kk // 2:
            raise ValueError("pad should be at most half of kernel size")
        out = _pool_out_size(size, kk, ss, pp, ceil_mode)
        pairs.append((pp, max((out - 1) * ss + kk - size - pp, 0)))
        divisor = np.multiply.outer(divisor, _avg_pool_divisor(size, kk, ss, pp, out, count_include_pad))
    if divisor_override:
        divisor = np.full(divisor.shape, float(divisor_override))
    sdt = _stats_dtype(x.dtype)
    xs = _pad_nd(ops.cast(x, sdt), [(0, 0), (0, 0), *pairs], "constant")
    mean = _channels_first(ops.average_pool(_channels_last(xs), k, s, padding="valid"))
    y = ops.cast(mean * ops.convert_to_tensor(math.prod(k) / divisor, sdt), x.dtype)
    return y[0] if unbatched else y


def _adaptive_bins(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive pooling bins: start = floor(i*in/out), end = ceil((i+1)*in/out)."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_pool_axis(x: Any, axis: int, out: int, op: str) -> Any:
    """Adaptive max/mean along one axis; rectangle bins make 2D adaptive pooling separable."""
    size = x.shape[axis]
    if size % out == 0:
        xr = ops.reshape(x, (-1, *x.shape[1:axis], out, size // out, *x.shape[axis + 1 :]))
        return ops.max(xr, axis=axis + 1) if op == "max" else ops.mean(xr, axis=axis + 1)
    starts, ends = _adaptive_bins(size, out)
    width = int((ends - starts).max())
    positions = starts[:, None] + np.arange(width)[None, :]
    index = np.minimum(positions, ends[:, None] - 1)  # clamped into the bin: repeats cannot change a max
    gathered = ops.take(x, index.reshape(-1), axis=axis)
    gathered = ops.reshape(gathered, (-1, *x.shape[1:axis], out, width, *x.shape[axis + 1 :]))
    if op == "max":
        return ops.max(gathered, axis=axis + 1)
    trailing = (1,) * (len(x.shape) - axis - 1)
    valid = (positions < ends[:, None]).reshape(out, width, *trailing)
    total = ops.sum(ops.where(valid, gathered, ops.zeros((), x.dtype)), axis=axis + 1)
    return total / ops.convert_to_tensor((ends - starts).reshape(out, *trailing), x.dtype)


def _adaptive_pool_nd(x: Any, n: int, output_size: Any, op: str) -> Any:
    """torch adaptive pooling over the last n axes (output_size int, tuple, None entries keep the size)."""
    x, unbatched = _add_batch(x, n)
    sizes = (output_size,) * n if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != n:
        raise ValueError(f"output_size must have {n} elements, got {output_size!r}")
    y = x if op == "max" else ops.cast(x, _stats_dtype(x.dtype))
    for i, out in enumerate(sizes):
        axis = 2 + i
        y = _adaptive_pool_axis(y, axis, x.shape[axis] if out is None else int(out), op)
    y = ops.cast(y, x.dtype)
    return y[0] if unbatched else y


def _channel_shape(ndim: int) -> tuple[int, ...]:
    """Broadcast shape of a per-channel vector against an (N, C, *spatial) array."""
    return (1, -1, *([1] * (ndim - 2)))


def _batch_norm_stats(x: Any) -> tuple[Any, Any, Any]:
    """Per-channel batch mean and biased variance (two-pass, float32 or wider) and the count per channel."""
    axes = (0, *range(2, len(x.shape)))
    xs = ops.cast(x, _stats_dtype(x.dtype))
    mean = ops.mean(xs, axis=axes)
    var = ops.mean(ops.square(xs - ops.reshape(mean, _channel_shape(len(x.shape)))), axis=axes)
    count = ops.cast(ops.size(xs) // x.shape[1], xs.dtype)
    return mean, var, count


def _batch_norm_apply(x: Any, mean: Any, var: Any, weight: Any, bias: Any, eps: float) -> Any:
    """(x - mean) / sqrt(var + eps) * weight + bias in float32 or wider, cast back to x's dtype."""
    sdt = _stats_dtype(x.dtype)
    shape = _channel_shape(len(x.shape))
    y = (ops.cast(x, sdt) - ops.reshape(ops.cast(mean, sdt), shape)) * ops.rsqrt(
        ops.reshape(ops.cast(var, sdt), shape) + eps
    )
    if weight is not None:
        y = y * ops.reshape(ops.cast(weight, sdt), shape)
    if bias is not None:
        y = y + ops.reshape(ops.cast(bias, sdt), shape)
    return ops.cast(y, x.dtype)


def _layer_norm(x: Any, n_dims: int, weight: Any, bias: Any, eps: float) -> Any:
    """Normalise over the last n_dims axes (biased variance, eps inside the square root), float32 inside."""
    sdt = _stats_dtype(x.dtype)
    axes = tuple(range(len(x.shape) - n_dims, len(x.shape)))
    xs = ops.cast(x, sdt)
    mean = ops.mean(xs, axis=axes, keepdims=True)
    var = ops.mean(ops.square(xs - mean), axis=axes, keepdims=True)
    y = (xs - mean) * ops.rsqrt(var + eps)
    if weight is not None:
        y = y * ops.cast(weight, sdt)
    if bias is not None:
        y = y + ops.cast(bias, sdt)
    return ops.cast(y, x.dtype)


def _group_norm(x: Any, num_groups: int, weight: Any, bias: Any, eps: float) -> Any:
    """Normalise (N, C, *) over each block of C/num_groups channels and all positions (torch's groups)."""
    c = x.shape[1]
    if c % num_groups:
        raise ValueError(f"Expected number of channels in input to be divisible by num_groups, got {x.shape}")
    sdt = _stats_dtype(x.dtype)
    xg = ops.reshape(ops.cast(x, sdt), (-1, num_groups, (c // num_groups) * math.prod(x.shape[2:])))
    mean = ops.mean(xg, axis=-1, keepdims=True)
    var = ops.mean(ops.square(xg - mean), axis=-1, keepdims=True)
    y = ops.reshape((xg - mean) * ops.rsqrt(var + eps), (-1, *x.shape[1:]))
    shape = _channel_shape(len(x.shape))
    if weight is not None:
        y = y * ops.reshape(ops.cast(weight, sdt), shape)
    if bias is not None:
        y = y + ops.reshape(ops.cast(bias, sdt), shape)
    return ops.cast(y, x.dtype)


def _softmax_dim(ndim: int) -> int:
    """torch's implicit softmax dim when `dim=None` (legacy): 0 for 0D/1D/3D inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


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


def _scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    seed: Any,
) -> Any:
    """torch's math SDPA on (..., heads, L, E): bool mask True = attend, float mask added, causal top-left.

    Scores and softmax in float32 or wider; rows whose scores are all masked give 0 (torch's CPU
    kernels), not NaN.
    """
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa:
        key = ops.repeat(key, query.shape[-3] // key.shape[-3], axis=-3)
        value = ops.repeat(value, query.shape[-3] // value.shape[-3], axis=-3)
    sdt = _stats_dtype(query.dtype)
    scores = ops.cast(ops.matmul(query, ops.swapaxes(key, -2, -1)), sdt) * factor
    neg_inf = ops.convert_to_tensor(float("-inf"), sdt)
    if is_causal:
        rows = ops.arange(ops.shape(query)[-2])[:, None]
        cols = ops.arange(ops.shape(key)[-2])[None, :]
        scores = ops.where(rows >= cols, scores, neg_inf)
    if attn_mask is not None:
        attn_mask = ops.convert_to_tensor(attn_mask)
        if keras.backend.standardize_dtype(attn_mask.dtype) == "bool":
            scores = ops.where(attn_mask, scores, neg_inf)
        else:
            scores = scores + ops.cast(attn_mask, sdt)
    weights = ops.softmax(scores, axis=-1)
    weights = ops.where(ops.all(scores == neg_inf, axis=-1, keepdims=True), ops.zeros((), sdt), weights)
    if dropout_p > 0.0:
        weights = _dropout(weights, dropout_p, seed)
    return ops.matmul(ops.cast(weights, value.dtype), value)


# ----------------------------------------------------------------------------------------------------
# interpolation


def _scale_f32(in_size: int, out_size: int, scale: float | None, align_corners: bool) -> np.float32:
    """torch's `area_pixel_compute_scale<float>`: the float32 step from output to input coordinates."""
    if align_corners:
        return np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 else np.float32(0.0)
    if scale is not None and scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size) / np.float32(out_size)


def _source_index(scale: np.float32, out_size: int, align_corners: bool, cubic: bool) -> np.ndarray:
    """torch's `area_pixel_compute_source_index` in float32 (clamped at 0 except for cubic)."""
    dst = np.arange(out_size, dtype=np.float32)
    if align_corners:
        return scale * dst
    src = scale * (dst + np.float32(0.5)) - np.float32(0.5)
    return src if cubic else np.maximum(src, np.float32(0.0))


def _cubic_weights(lam: np.ndarray) -> list[np.ndarray]:
    """torch's bicubic convolution coefficients (A = -0.75) for the 4 taps around each sample."""
    a, one = np.float32(-0.75), np.float32(1.0)

    def near(t: np.ndarray) -> np.ndarray:
        return ((a + 2) * t - (a + 3)) * t * t + 1

    def far(t: np.ndarray) -> np.ndarray:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    return [far(lam + one), near(lam), near(one - lam), far(one - lam + one)]


def _resize_axis(x: Any, axis: int, out_size: int, scale: float | None, mode: str, align_corners: bool) -> Any:
    """Resample one axis with torch's index and weight arithmetic (float32, as its CPU kernels)."""
    in_size = x.shape[axis]
    trailing = (1,) * (len(x.shape) - axis - 1)
    if mode in ("nearest", "nearest-exact"):
        s = _scale_f32(in_size, out_size, scale, False)
        dst = np.arange(out_size)
        if mode == "nearest" and out_size == in_size:  # torch's `nearest_idx` shortcuts, whatever the scale
            return x
        if mode == "nearest" and out_size == 2 * in_size:
            src = dst // 2
        elif mode == "nearest":
            src = np.floor(dst.astype(np.float32) * s)
        else:
            src = np.floor(((dst + 0.5) * np.float64(s)).astype(np.float32))
        return ops.take(x, np.minimum(src.astype(np.int64), in_size - 1), axis=axis)
    if in_size == out_size and mode == "linear":
        return x
    s = _scale_f32(in_size, out_size, scale, align_corners)
    real = _source_index(s, out_size, align_corners, mode == "cubic")
    base = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    lam = np.clip(real - base.astype(np.float32), np.float32(0.0), np.float32(1.0)).astype(np.float32)
    if mode == "linear":
        upper = base + (base < in_size - 1).astype(np.int64)
        w0 = ops.convert_to_tensor((np.float32(1.0) - lam).reshape(out_size, *trailing), x.dtype)
        w1 = ops.convert_to_tensor(lam.reshape(out_size, *trailing), x.dtype)
        return w0 * ops.take(x, base, axis=axis) + w1 * ops.take(x, upper, axis=axis)
    y = None
    for j, c in enumerate(_cubic_weights(lam)):
        index = np.clip(base - 1 + j, 0, in_size - 1)
        weight = ops.convert_to_tensor(c.astype(np.float32).reshape(out_size, *trailing), x.dtype)
        term = weight * ops.take(x, index, axis=axis)
        y = term if y is None else y + term
    return y


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
    if antialias:
        raise NotImplementedError("interpolate(antialias=True) is not supported by the Keras shims")
    n = len(input.shape) - 2
    if n < 1:
        raise ValueError(f"interpolate expects a batched (N, C, *spatial) input, got shape {input.shape}")
    dims_for_mode = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
    if mode in dims_for_mode and dims_for_mode[mode] != n:
        raise ValueError(f"mode {mode!r} expects {dims_for_mode[mode] + 2}D input, got {len(input.shape)}D")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes")
    elif mode not in dims_for_mode:
        raise ValueError(f"unsupported interpolation mode {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("exactly one of size or scale_factor must be given")
    in_sizes = tuple(input.shape[2:])
    if size is not None:
        out_sizes = _tuple(size, n, "size")
        scales: tuple[float | None, ...] = (None,) * n
    else:
        single = isinstance(scale_factor, int | float)
        factors = (float(scale_factor),) * n if single else tuple(float(f) for f in scale_factor)
        if len(factors) != n:
            raise ValueError(f"scale_factor must have {n} elements, got {scale_factor!r}")
        out_sizes = tuple(math.floor(s * f) for s, f in zip(in_sizes, factors, strict=True))
        scales = (None,) * n if recompute_scale_factor else factors
    if mode == "area":
        return _adaptive_pool_nd(input, n, out_sizes, "avg")
    kind = {"linear": "linear", "bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    y = input if kind in ("nearest", "nearest-exact") else ops.cast(input, _stats_dtype(input.dtype))
    for i in range(n):
        y = _resize_axis(y, 2 + i, out_sizes[i], scales[i], kind, bool(align_corners))
    return ops.cast(y, input.dtype)


# ----------------------------------------------------------------------------------------------------
# public functions


def conv1d(
    input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1
) -> Any:
    """torch.nn.functional.conv1d on (N, C, L) with a torch (out, in/groups, k) weight."""
    k, d = _tuple(weight.shape[2:], 1, "kernel_size"), _tuple(dilation, 1, "dilation")
    pairs = _conv_padding_pairs(padding if isinstance(padding, str) else _tuple(padding, 1, "padding"), k, d)
    return _conv_nd(input, weight, bias, _tuple(stride, 1, "stride"), pairs, d, groups, "zeros")


def conv2d(
    input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1
) -> Any:
    """torch.nn.functional.conv2d on NCHW with a torch OIHW weight (Keras: NHWC, HWIO, 'valid').

    `padding` is an int, a pair, 'valid' or 'same' (odd total padding goes on the high side, as torch).
    """
    k, d = _tuple(weight.shape[2:], 2, "kernel_size"), _tuple(dilation, 2, "dilation")
    pairs = _conv_padding_pairs(padding if isinstance(padding, str) else _tuple(padding, 2, "padding"), k, d)
    return _conv_nd(input, weight, bias, _tuple(stride, 2, "stride"), pairs, d, groups, "zeros")


def linear(input: Any, weight: Any, bias: Any = None) -> Any:
    """torch.nn.functional.linear with torch's weight layout (out, in): x @ W.T + b."""
    return _linear(input, weight, bias)


def max_pool1d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """torch.nn.functional.max_pool1d on (N, C, L): stride defaults to the kernel, -inf padding."""
    if return_indices:
        raise NotImplementedError("return_indices=True is not supported by the Keras shims")
    return _max_pool_nd(input, 1, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """torch.nn.functional.max_pool2d on NCHW: -inf padding, dilation, ceil_mode, stride = kernel."""
    if return_indices:
        raise NotImplementedError("return_indices=True is not supported by the Keras shims")
    return _max_pool_nd(input, 2, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool1d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Any:
    """torch.nn.functional.avg_pool1d on (N, C, L) with torch's divisor rules."""
    return _avg_pool_nd(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Any:
    """torch.nn.functional.avg_pool2d on NCHW: ceil_mode, count_include_pad, divisor_override."""
    return _avg_pool_nd(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:
    """torch.nn.functional.adaptive_avg_pool1d: torch's overlapping bins when sizes do not divide."""
    return _adaptive_pool_nd(input, 1, output_size, "avg")


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:
    """torch.nn.functional.adaptive_avg_pool2d on NCHW (int, pair, None entries keep the size)."""
    return _adaptive_pool_nd(input, 2, output_size, "avg")


def adaptive_max_pool2d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    """torch.nn.functional.adaptive_max_pool2d on NCHW (torch's start/end bin formula)."""
    if return_indices:
        raise NotImplementedError("return_indices=True is not supported by the Keras shims")
    return _adaptive_pool_nd(input, 2, output_size, "max")


def pad(input: Any, pad: Any, mode: str = "constant", value: float | None = None) -> Any:
    """torch.nn.functional.pad: `pad` lists (lo, hi) pairs from the LAST dim backwards (torch's order).

    Modes constant (negative widths crop), reflect, replicate, circular.
    """
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > len(input.shape):
        raise ValueError(f"Padding length must be divisible by 2 and at most twice the rank, got {pad}")
    ndim = len(input.shape)
    pairs = [(0, 0)] * ndim
    for i in range(len(pad) // 2):
        pairs[ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode != "constant" and value:
        raise ValueError(f"Padding mode {mode!r} doesn't take in value argument")
    return _pad_nd(input, pairs, mode, 0.0 if value is None else value)


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    seed: Any = None,
) -> Any:
    """torch.nn.functional.scaled_dot_product_attention on (..., heads, L, E) inputs.

    torch's polarity for THIS function: a bool mask is True where attention is allowed (the
    opposite of nn.MultiheadAttention's masks); a float mask is added to the scores. `is_causal`
    is a top-left aligned lower-triangular mask. Fully masked rows give 0, not NaN. Dropout draws
    from `seed` (a keras.random.SeedGenerator or int; torch draws from its global generator).
    """
    return _scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, seed)


def layer_norm(input: Any, normalized_shape: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    """torch.nn.functional.layer_norm: joint statistics over the trailing `normalized_shape` dims, eps 1e-5.

    (keras.ops.layer_normalization normalises one axis and Keras' LayerNormalization defaults to eps 1e-3.)
    """
    n = 1 if isinstance(normalized_shape, int) else len(tuple(normalized_shape))
    return _layer_norm(input, n, weight, bias, eps)


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    """torch.nn.functional.group_norm on (N, C, *) inputs (contiguous channel groups on axis 1)."""
    return _group_norm(input, num_groups, weight, bias, eps)


def batch_norm(
    input: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """torch.nn.functional.batch_norm (feature axis 1, torch momentum = weight of the new batch).

    Inference normalises with the running statistics. Training normalises with the biased batch
    statistics and, when `running_mean`/`running_var` are Keras Variables, updates them in place with
    torch's rule (running = (1 - momentum) * running + momentum * batch, unbiased batch variance).
    """
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm with training=False needs running_mean and running_var")
        return _batch_norm_apply(input, running_mean, running_var, weight, bias, eps)
    mean, var, count = _batch_norm_stats(input)
    for stat, batch in ((running_mean, mean), (running_var, var * count / (count - 1))):
        if isinstance(stat, keras.Variable):
            old = ops.cast(stat, batch.dtype)
            stat.assign(ops.cast((1.0 - momentum) * old + momentum * batch, stat.dtype))
    return _batch_norm_apply(input, mean, var, weight, bias, eps)


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


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """torch.nn.functional.one_hot: int64 result (Keras: float32), classes appended as the last axis.

    `num_classes=-1` infers max + 1 from the values, as torch does (needs concrete values, not traced).
    """
    if num_classes == -1:
        num_classes = int(ops.convert_to_numpy(ops.max(tensor))) + 1
    return ops.one_hot(tensor, num_classes, dtype="int64")
