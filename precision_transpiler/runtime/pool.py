"""The framework-free half of torch's pooling (runtime/flax/pool.py, runtime/keras/pool.py and
their unpool.py): argument normalisation, torch's output sizes (ceil mode, padding, dilation),
average pooling's divisors, adaptive pooling's bins, MaxUnpool's output size, and the bodies of
LPPool and adaptive pooling, which compute with `ops`, the target's array operations
(`_ArrayOps` of runtime/<target>/functional.py). The target keeps the window reductions of its
framework (`jax.lax.reduce_window`, `keras.ops.max_pool`).
"""

import math
from typing import Any

import numpy as np

from precision_transpiler.runtime.common import _tuple


def _pool_args(
    n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Normalise torch's pooling arguments; stride None (or empty) means stride = kernel_size."""
    k = _tuple(kernel_size, n, "kernel_size")
    empty = stride is None or (not isinstance(stride, int) and len(tuple(stride)) == 0)
    s = k if empty else _tuple(stride, n, "stride")
    return k, s, _tuple(padding, n, "padding"), _tuple(dilation, n, "dilation")


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


def _adaptive_bins(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive pooling bins: start = floor(i*in/out), end = ceil((i+1)*in/out)."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_sizes(output_size: Any, n: int, spatial: Any) -> tuple[int, ...]:
    """Adaptive pooling's output sizes over the last `n` axes: an int, a tuple, or None entries
    that keep the input's size."""
    sizes = (output_size,) * n if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != n:
        raise ValueError(f"output_size must have {n} elements, got {output_size!r}")
    return tuple(spatial[i] if out is None else int(out) for i, out in enumerate(sizes))


def _adaptive_taps(size: int, out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The input positions of adaptive pooling's `out` bins over `size`, for a gather: indices
    (out * width, flat; each clamped into its bin, so repeats cannot change a max), which of the
    (out, width) taps are in their bin, and the bins' sizes."""
    starts, ends = _adaptive_bins(size, out)
    width = int((ends - starts).max())
    positions = starts[:, None] + np.arange(width)[None, :]
    index = np.minimum(positions, ends[:, None] - 1)
    return index.reshape(-1), positions < ends[:, None], ends - starts


def _max_pool_windows(
    spatial: Any, n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool
) -> tuple[Any, Any, Any, list[tuple[int, int]], list[int]]:
    """torch max pooling's windows over the spatial sizes: kernel, stride, dilation, the (lo, hi)
    padding of each spatial dim (the high side grown for ceil_mode's last window) and the output
    sizes."""
    k, s, p, d = _pool_args(n, kernel_size, stride, padding, dilation)
    pairs, outs = [], []
    for size, kk, ss, pp, dd in zip(spatial, k, s, p, d, strict=True):
        eff = dd * (kk - 1) + 1
        if pp > eff // 2:
            raise ValueError("pad should be at most half of effective kernel size")
        out = _pool_out_size(size, eff, ss, pp, ceil_mode)
        outs.append(out)
        pairs.append((pp, max((out - 1) * ss + eff - size - pp, 0)))
    return k, s, d, pairs, outs


def _unpool_size(
    spatial: Any, n: int, kernel_size: Any, stride: Any, padding: Any, output_size: Any
) -> tuple[int, ...]:
    """MaxUnpool's output spatial sizes: torch's (in - 1) * stride - 2 * padding + kernel, or the
    trailing `n` sizes of `output_size`."""
    if output_size is not None:
        return tuple(int(v) for v in output_size)[-n:]
    k, s, p, _ = _pool_args(n, kernel_size, stride, padding, 1)
    return tuple((i - 1) * ss - 2 * pp + kk for i, kk, ss, pp in zip(spatial, k, s, p, strict=True))


def _avg_pool_windows(
    spatial: Any, n: int, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool
) -> tuple[Any, Any, list[tuple[int, int]], np.ndarray]:
    """torch average pooling's windows over the spatial sizes: kernel, stride, the (lo, hi)
    padding of each spatial dim and torch's divisor of every output cell (float64)."""
    k, s, p, _ = _pool_args(n, kernel_size, stride, padding, 1)
    pairs = []
    divisor = np.ones((), np.float64)
    for size, kk, ss, pp in zip(spatial, k, s, p, strict=True):
        if pp > kk // 2:
            raise ValueError("pad should be at most half of kernel size")
        out = _pool_out_size(size, kk, ss, pp, ceil_mode)
        pairs.append((pp, max((out - 1) * ss + kk - size - pp, 0)))
        divisor = np.multiply.outer(divisor, _avg_pool_divisor(size, kk, ss, pp, out, count_include_pad))
    return k, s, pairs, divisor


def _lp_pool(x: Any, n: int, p: float, kernel_size: Any, stride: Any, ceil_mode: bool, avg_pool: Any, ops: Any) -> Any:
    """torch's LPPool: (sum over the window of x^p)^(1/p), from the average of x^p (the target's
    `_avg_pool_nd`) times the window size, negative sums clamped to 0 before the root."""
    k, _, _, _ = _pool_args(n, kernel_size, stride, 0, 1)
    mean = avg_pool(ops.power(x, p), n, kernel_size, stride, 0, ceil_mode, True, None)
    total = ops.sign(mean) * ops.relu(ops.abs(mean)) * math.prod(k)
    return ops.power(total, 1.0 / p)


def _no_indices(return_indices: bool) -> None:
    """Adaptive pooling's indices are not reproduced (max pooling's are: the targets' unpool.py)."""
    if return_indices:
        raise NotImplementedError("return_indices=True is not supported by adaptive pooling's shims")


def _adaptive_pool_axis(x: Any, axis: int, out: int, op: str, ops: Any) -> Any:
    """Adaptive max or mean along one axis (torch's bins); rectangle bins make 2D and 3D adaptive
    pooling separable. Sizes that divide reshape; others gather each bin's taps."""
    size = x.shape[axis]
    if size % out == 0:
        xr = ops.reshape(x, (-1, *x.shape[1:axis], out, size // out, *x.shape[axis + 1 :]))
        return ops.max(xr, axis=axis + 1) if op == "max" else ops.mean(xr, axis=axis + 1)
    index, valid, counts = _adaptive_taps(size, out)
    width = valid.shape[1]
    gathered = ops.take(x, index, axis=axis)
    gathered = ops.reshape(gathered, (-1, *x.shape[1:axis], out, width, *x.shape[axis + 1 :]))
    if op == "max":  # indices are clamped into the bin: repeats cannot change a max
        return ops.max(gathered, axis=axis + 1)
    trailing = (1,) * (len(x.shape) - axis - 1)
    valid = valid.reshape(out, width, *trailing)
    total = ops.sum(ops.where(valid, gathered, ops.zeros_like(gathered)), axis=axis + 1)
    return total / ops.cast(counts.reshape(out, *trailing), x.dtype)


def _adaptive_pool(x: Any, n: int, output_size: Any, op: str, ops: Any) -> Any:
    """torch's adaptive pooling ('avg' or 'max') over the last n axes of a batched (N, C, *)
    input: output_size an int, a tuple, None entries keeping the size; means in at least float32."""
    sizes = _adaptive_sizes(output_size, n, x.shape[2:])
    y = x if op == "max" else ops.cast(x, ops.stats_dtype(x.dtype))
    for i, out in enumerate(sizes):
        y = _adaptive_pool_axis(y, 2 + i, out, op, ops)
    return ops.cast(y, x.dtype)
