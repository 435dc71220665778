"""The framework-free half of torch's resampling (`interpolate` in runtime/flax/functional.py and
runtime/keras/functional.py, which their upsampling.py layers call): torch's argument checks,
output sizes and scales, and its float32 sample positions and weights (nearest's floor rule,
nearest-exact, linear, bicubic with A = -0.75 and clamped borders, area as adaptive averaging),
written once over `ops`, the target's array operations (`_ArrayOps` of
runtime/<target>/functional.py): each axis is a gather (`ops.take`) and a weighted sum.
"""

import math
from typing import Any

import numpy as np

from precision_transpiler.runtime.common import _scale_f32, _source_index, _tuple
from precision_transpiler.runtime.pool import _adaptive_pool

#: the spatial dims of the interpolating modes, and how each samples
_INTERPOLATING = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_KINDS = {"linear": "linear", "bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}


def _cubic_weights(lam: np.ndarray) -> list[np.ndarray]:
    """torch's bicubic convolution coefficients (A = -0.75) for the 4 taps around each sample."""
    a, one = np.float32(-0.75), np.float32(1.0)

    def near(t: np.ndarray) -> np.ndarray:
        return ((a + 2) * t - (a + 3)) * t * t + 1

    def far(t: np.ndarray) -> np.ndarray:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    return [far(lam + one), near(lam), near(one - lam), far(one - lam + one)]


def _nearest_index(in_size: int, out_size: int, scale: float | None, mode: str) -> np.ndarray | None:
    """The source index of each output position of 'nearest' (torch's floor rule, not
    round-half) or 'nearest-exact'; None where torch keeps the axis as it is."""
    s = _scale_f32(in_size, out_size, scale, False)
    dst = np.arange(out_size)
    if mode == "nearest" and out_size == in_size:  # torch's `nearest_idx` shortcuts, whatever the scale
        return None
    if mode == "nearest" and out_size == 2 * in_size:
        src = dst // 2
    elif mode == "nearest":
        src = np.floor(dst.astype(np.float32) * s)
    else:
        src = np.floor(((dst + 0.5) * np.float64(s)).astype(np.float32))
    return np.minimum(src.astype(np.int64), in_size - 1)


def _resize_taps(
    in_size: int, out_size: int, scale: float | None, mode: str, align_corners: bool
) -> list[tuple[np.ndarray, np.ndarray | None]] | None:
    """Resampling one axis as torch does, in float32 as its CPU kernels: (source index, weight)
    per tap, the output the weighted sum of the gathered taps (weight None: the tap alone); None
    where the axis is kept as it is."""
    if mode in ("nearest", "nearest-exact"):
        index = _nearest_index(in_size, out_size, scale, mode)
        return None if index is None else [(index, None)]
    if in_size == out_size and mode == "linear":
        return None
    s = _scale_f32(in_size, out_size, scale, align_corners)
    real = _source_index(s, out_size, align_corners, mode == "cubic")
    base = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    lam = np.clip(real - base.astype(np.float32), np.float32(0.0), np.float32(1.0)).astype(np.float32)
    if mode == "linear":
        upper = base + (base < in_size - 1).astype(np.int64)
        return [(base, np.float32(1.0) - lam), (upper, lam)]
    return [(np.clip(base - 1 + j, 0, in_size - 1), c.astype(np.float32)) for j, c in enumerate(_cubic_weights(lam))]


def _resize_axis(
    x: Any, axis: int, out_size: int, scale: float | None, mode: str, align_corners: bool, ops: Any
) -> Any:
    """Resample one axis of x with torch's sample positions and weights."""
    taps = _resize_taps(x.shape[axis], out_size, scale, mode, align_corners)
    if taps is None:
        return x
    trailing = (1,) * (len(x.shape) - axis - 1)
    y = None
    for index, weight in taps:
        term = ops.take(x, index, axis=axis)
        if weight is not None:
            term = ops.cast(weight.reshape(out_size, *trailing), x.dtype) * term
        y = term if y is None else y + term
    return y


def _interpolate(
    input: Any,
    size: Any,
    scale_factor: Any,
    mode: str,
    align_corners: bool | None,
    recompute_scale_factor: bool | None,
    antialias: bool,
    ops: Any,
) -> Any:
    """torch.nn.functional.interpolate (the targets' `interpolate` says how); the interpolating
    modes compute in at least float32."""
    if antialias:
        raise NotImplementedError("interpolate(antialias=True) is not supported by the shims")
    n = len(input.shape) - 2
    if n < 1:
        raise ValueError(f"interpolate expects a batched (N, C, *spatial) input, got shape {input.shape}")
    if mode in _INTERPOLATING and _INTERPOLATING[mode] != n:
        raise ValueError(f"mode {mode!r} expects {_INTERPOLATING[mode] + 2}D input, got {len(input.shape)}D")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes")
    elif mode not in _INTERPOLATING:
        raise ValueError(f"unsupported interpolation mode {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("exactly one of size or scale_factor must be given")
    if size is not None:
        out_sizes = _tuple(size, n, "size")
        scales: tuple[float | None, ...] = (None,) * n
    else:
        single = isinstance(scale_factor, int | float)
        factors = (float(scale_factor),) * n if single else tuple(float(f) for f in scale_factor)
        if len(factors) != n:
            raise ValueError(f"scale_factor must have {n} elements, got {scale_factor!r}")
        out_sizes = tuple(math.floor(s * f) for s, f in zip(input.shape[2:], factors, strict=True))
        scales = (None,) * n if recompute_scale_factor else factors
    if mode == "area":
        return _adaptive_pool(input, n, out_sizes, "avg", ops)
    kind = _KINDS.get(mode, mode)
    y = input if kind in ("nearest", "nearest-exact") else ops.cast(input, ops.stats_dtype(input.dtype))
    for i in range(n):
        y = _resize_axis(y, 2 + i, out_sizes[i], scales[i], kind, bool(align_corners), ops)
    return ops.cast(y, input.dtype)
