"""torch's pooling for Keras 3: max, average and adaptive pooling, functional and as layers, with
torch's output sizes (ceil mode, padding, `count_include_pad`) on channels-first data.
"""

import math
from typing import Any

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.keras.functional import (
    _adaptive_pool_nd,
    _add_batch,
    _ArrayOps,
    _channels_first,
    _channels_last,
    _stats_dtype,
)
from precision_transpiler.runtime.keras.unpool import _max_pool_indices
from precision_transpiler.runtime.padding import _pad_nd
from precision_transpiler.runtime.pool import _avg_pool_windows, _lp_pool, _max_pool_windows, _no_indices


def _lowest(dtype: Any) -> float:
    """The padding value of max pooling: -inf (or the integer minimum), never part of a maximum."""
    dtype = keras.backend.standardize_dtype(dtype)
    return float("-inf") if "float" in dtype else int(np.iinfo(dtype).min)


def _max_pool_nd(x: Any, n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool) -> Any:
    """torch max pooling: implicit -inf padding, ceil_mode, dilation, stride defaulting to the kernel.

    Padding (including the extra high-side cells ceil_mode needs) is explicit, then `ops.max_pool`
    'valid' on channels-last data. Dilated windows (no Keras op) are a maximum over strided slices.
    """
    x, unbatched = _add_batch(x, n)
    k, s, d, pairs, outs = _max_pool_windows(x.shape[2:], n, kernel_size, stride, padding, dilation, ceil_mode)
    x = _pad_nd(x, [(0, 0), (0, 0), *pairs], "constant", _lowest(x.dtype), _ArrayOps)
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
    k, s, pairs, divisor = _avg_pool_windows(x.shape[2:], n, kernel_size, stride, padding, ceil_mode, count_include_pad)
    if divisor_override:
        divisor = np.full(divisor.shape, float(divisor_override))
    sdt = _stats_dtype(x.dtype)
    xs = _pad_nd(ops.cast(x, sdt), [(0, 0), (0, 0), *pairs], "constant", 0, _ArrayOps)
    mean = _channels_first(ops.average_pool(_channels_last(xs), k, s, padding="valid"))
    y = ops.cast(mean * ops.convert_to_tensor(math.prod(k) / divisor, sdt), x.dtype)
    return y[0] if unbatched else y


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
        return _max_pool_indices(input, 1, kernel_size, stride, padding, dilation, ceil_mode)
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
        return _max_pool_indices(input, 2, kernel_size, stride, padding, dilation, ceil_mode)
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
    _no_indices(return_indices)
    return _adaptive_pool_nd(input, 2, output_size, "max")


class _MaxPoolNd(keras.layers.Layer):
    """Shared body of MaxPool1d/2d (torch argument order; no weights)."""

    _n_spatial = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode
        self.built = True

    def call(self, input: Any) -> Any:
        pool = _max_pool_indices if self.return_indices else _max_pool_nd
        return pool(input, self._n_spatial, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class MaxPool1d(_MaxPoolNd):
    """torch.nn.MaxPool1d on (N, C, L): stride = kernel by default, -inf padding, dilation, ceil_mode."""

    _n_spatial = 1


class MaxPool2d(_MaxPoolNd):
    """torch.nn.MaxPool2d on NCHW: stride = kernel by default, -inf padding, dilation, ceil_mode."""

    _n_spatial = 2


class MaxPool3d(_MaxPoolNd):
    """torch.nn.MaxPool3d on NCDHW: stride = kernel by default, -inf padding, dilation, ceil_mode."""

    _n_spatial = 3


class _AvgPoolNd(keras.layers.Layer):
    """Shared body of AvgPool1d/2d (torch argument order; no weights)."""

    _n_spatial = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override
        self.built = True

    def call(self, input: Any) -> Any:
        return _avg_pool_nd(
            input,
            self._n_spatial,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AvgPool1d(_AvgPoolNd):
    """torch.nn.AvgPool1d on (N, C, L) with torch's divisor (count_include_pad, ceil_mode)."""

    _n_spatial = 1

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad, None, **kwargs)


class AvgPool2d(_AvgPoolNd):
    """torch.nn.AvgPool2d on NCHW with torch's divisor (count_include_pad, ceil_mode, divisor_override)."""

    _n_spatial = 2


class AvgPool3d(_AvgPoolNd):
    """torch.nn.AvgPool3d on NCDHW with torch's divisor (count_include_pad, ceil_mode, divisor_override)."""

    _n_spatial = 3


class _AdaptivePoolNd(keras.layers.Layer):
    """Shared body of the adaptive pools: torch's bins start=floor(i*in/out), end=ceil((i+1)*in/out)."""

    _n_spatial = 2
    _op = "avg"

    def __init__(self, output_size: Any, return_indices: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _no_indices(return_indices)
        self.output_size = output_size
        self.built = True

    def call(self, input: Any) -> Any:
        return _adaptive_pool_nd(input, self._n_spatial, self.output_size, self._op)


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool1d on (N, C, L): torch's overlapping bins for any output size."""

    _n_spatial = 1
    _op = "avg"


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool2d on NCHW (int, pair, None entries keep the input size; any output size)."""

    _n_spatial = 2
    _op = "avg"


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool3d on NCDHW."""

    _n_spatial = 3
    _op = "avg"


class AdaptiveMaxPool1d(_AdaptivePoolNd):
    """torch.nn.AdaptiveMaxPool1d on (N, C, L)."""

    _n_spatial = 1
    _op = "max"


class AdaptiveMaxPool2d(_AdaptivePoolNd):
    """torch.nn.AdaptiveMaxPool2d on NCHW (torch's bins for any output size)."""

    _n_spatial = 2
    _op = "max"


class AdaptiveMaxPool3d(_AdaptivePoolNd):
    """torch.nn.AdaptiveMaxPool3d on NCDHW."""

    _n_spatial = 3
    _op = "max"


class _LPPoolNd(keras.layers.Layer):
    """Shared body of LPPool1d/2d/3d: (sum over the window of x^p)^(1/p), no padding, torch's
    stride (the kernel by default) and ceil_mode; computed as torch does, from the average of x^p
    times the window size, negative sums clamped to 0 before the root."""

    _n_spatial = 2

    def __init__(
        self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode
        self.built = True

    def call(self, input: Any) -> Any:
        n, p = self._n_spatial, self.norm_type
        return _lp_pool(input, n, p, self.kernel_size, self.stride, self.ceil_mode, _avg_pool_nd, _ArrayOps)


class LPPool1d(_LPPoolNd):
    """torch.nn.LPPool1d(norm_type, kernel_size, stride, ceil_mode) on (N, C, L)."""

    _n_spatial = 1


class LPPool2d(_LPPoolNd):
    """torch.nn.LPPool2d(norm_type, kernel_size, stride, ceil_mode) on NCHW."""

    _n_spatial = 2


class LPPool3d(_LPPoolNd):
    """torch.nn.LPPool3d(norm_type, kernel_size, stride, ceil_mode) on NCDHW."""

    _n_spatial = 3
