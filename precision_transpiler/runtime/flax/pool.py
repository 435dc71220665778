"""torch's pooling for Flax NNX: max, average and adaptive pooling, functional and as modules, with
torch's output sizes (ceil mode, padding, `count_include_pad`, `divisor_override`) in NCHW.
"""

from typing import Any

import jax
import jax.numpy as jnp

from precision_transpiler.runtime.flax.functional import _adaptive_pool_nd, _add_batch, _ArrayOps, _stats_dtype
from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.flax.unpool import _max_pool_indices
from precision_transpiler.runtime.pool import _avg_pool_windows, _lp_pool, _max_pool_windows, _no_indices


def _max_pool_nd(
    x: jax.Array, n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool
) -> jax.Array:
    """torch max pooling: implicit -inf padding, dilation, ceil_mode, stride defaulting to the kernel."""
    x, unbatched = _add_batch(x, n)
    k, s, d, pairs, _ = _max_pool_windows(x.shape[2:], n, kernel_size, stride, padding, dilation, ceil_mode)
    if jnp.issubdtype(x.dtype, jnp.floating):
        init = jnp.array(-jnp.inf, x.dtype)
    else:
        init = jnp.array(jnp.iinfo(x.dtype).min, x.dtype)
    y = jax.lax.reduce_window(
        x,
        init,
        jax.lax.max,
        window_dimensions=(1, 1, *k),
        window_strides=(1, 1, *s),
        padding=[(0, 0), (0, 0), *pairs],
        window_dilation=(1, 1, *d),
    )
    return y[0] if unbatched else y


def _avg_pool_nd(
    x: jax.Array,
    n: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> jax.Array:
    """torch average pooling: zero padding, ceil_mode windows, count_include_pad and divisor_override."""
    x, unbatched = _add_batch(x, n)
    k, s, pairs, divisor = _avg_pool_windows(x.shape[2:], n, kernel_size, stride, padding, ceil_mode, count_include_pad)
    sdt = _stats_dtype(x.dtype)
    total = jax.lax.reduce_window(
        x.astype(sdt),
        jnp.array(0, sdt),
        jax.lax.add,
        window_dimensions=(1, 1, *k),
        window_strides=(1, 1, *s),
        padding=[(0, 0), (0, 0), *pairs],
    )
    y = total / jnp.asarray(divisor_override if divisor_override else divisor, sdt)
    y = y.astype(x.dtype)
    return y[0] if unbatched else y


def max_pool1d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> jax.Array:
    """torch.nn.functional.max_pool1d on (N, C, L): stride defaults to the kernel (Flax: 1)."""
    if return_indices:
        return _max_pool_indices(input, 1, kernel_size, stride, padding, dilation, ceil_mode)
    return _max_pool_nd(input, 1, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> jax.Array:
    """torch.nn.functional.max_pool2d on NCHW: -inf padding, dilation, ceil_mode, stride = kernel."""
    if return_indices:
        return _max_pool_indices(input, 2, kernel_size, stride, padding, dilation, ceil_mode)
    return _max_pool_nd(input, 2, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> jax.Array:
    """torch.nn.functional.max_pool3d on NCDHW."""
    if return_indices:
        return _max_pool_indices(input, 3, kernel_size, stride, padding, dilation, ceil_mode)
    return _max_pool_nd(input, 3, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool1d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> jax.Array:
    """torch.nn.functional.avg_pool1d on (N, C, L): torch's divisor rules (Flax's avg_pool differs)."""
    return _avg_pool_nd(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> jax.Array:
    """torch.nn.functional.avg_pool2d on NCHW: ceil_mode, count_include_pad, divisor_override."""
    return _avg_pool_nd(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def avg_pool3d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> jax.Array:
    """torch.nn.functional.avg_pool3d on NCDHW."""
    return _avg_pool_nd(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool1d(input: jax.Array, output_size: Any) -> jax.Array:
    """torch.nn.functional.adaptive_avg_pool1d: torch's overlapping bins when sizes do not divide."""
    return _adaptive_pool_nd(input, 1, output_size, "avg")


def adaptive_avg_pool2d(input: jax.Array, output_size: Any) -> jax.Array:
    """torch.nn.functional.adaptive_avg_pool2d on NCHW (JAX has no adaptive pooling)."""
    return _adaptive_pool_nd(input, 2, output_size, "avg")


def adaptive_avg_pool3d(input: jax.Array, output_size: Any) -> jax.Array:
    """torch.nn.functional.adaptive_avg_pool3d on NCDHW."""
    return _adaptive_pool_nd(input, 3, output_size, "avg")


def adaptive_max_pool1d(input: jax.Array, output_size: Any, return_indices: bool = False) -> jax.Array:
    """torch.nn.functional.adaptive_max_pool1d on (N, C, L)."""
    _no_indices(return_indices)
    return _adaptive_pool_nd(input, 1, output_size, "max")


def adaptive_max_pool2d(input: jax.Array, output_size: Any, return_indices: bool = False) -> jax.Array:
    """torch.nn.functional.adaptive_max_pool2d on NCHW (JAX has no adaptive pooling)."""
    _no_indices(return_indices)
    return _adaptive_pool_nd(input, 2, output_size, "max")


class _MaxPoolNd(TorchLayer):
    """Shared body of MaxPool1d/2d/3d (torch argument order; no parameters)."""

    _n_spatial = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        *,
        rngs: Any = None,
    ) -> None:
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def __call__(self, x: jax.Array) -> Any:
        pool = _max_pool_indices if self.return_indices else _max_pool_nd
        return pool(x, self._n_spatial, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class MaxPool1d(_MaxPoolNd):
    """torch.nn.MaxPool1d on (N, C, L); nnx.max_pool is channels-last with stride 1 by default."""

    _n_spatial = 1


class MaxPool2d(_MaxPoolNd):
    """torch.nn.MaxPool2d on NCHW (stride = kernel by default, -inf padding, dilation, ceil_mode)."""

    _n_spatial = 2


class MaxPool3d(_MaxPoolNd):
    """torch.nn.MaxPool3d on NCDHW."""

    _n_spatial = 3


class _AvgPoolNd(TorchLayer):
    """Shared body of AvgPool1d/2d/3d (torch argument order; no parameters)."""

    _n_spatial = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
        *,
        rngs: Any = None,
    ) -> None:
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def __call__(self, x: jax.Array) -> jax.Array:
        return _avg_pool_nd(
            x,
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


class AvgPool2d(_AvgPoolNd):
    """torch.nn.AvgPool2d on NCHW with torch's divisor (count_include_pad, ceil_mode, divisor_override)."""

    _n_spatial = 2


class AvgPool3d(_AvgPoolNd):
    """torch.nn.AvgPool3d on NCDHW."""

    _n_spatial = 3


class _AdaptivePoolNd(TorchLayer):
    """Shared body of the adaptive pools: torch's bins, start=floor(i*in/out), end=ceil((i+1)*in/out)."""

    _n_spatial = 2
    _op = "avg"

    def __init__(self, output_size: Any, return_indices: bool = False, *, rngs: Any = None) -> None:
        _no_indices(return_indices)
        self.output_size = output_size

    def __call__(self, x: jax.Array) -> jax.Array:
        return _adaptive_pool_nd(x, self._n_spatial, self.output_size, self._op)


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool1d on (N, C, L)."""

    _n_spatial = 1
    _op = "avg"


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool2d on NCHW (int, tuple, None entries keep the input size)."""

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
    """torch.nn.AdaptiveMaxPool2d on NCHW."""

    _n_spatial = 2
    _op = "max"


class AdaptiveMaxPool3d(_AdaptivePoolNd):
    """torch.nn.AdaptiveMaxPool3d on NCDHW."""

    _n_spatial = 3
    _op = "max"


class _LPPoolNd(TorchLayer):
    """Shared body of LPPool1d/2d/3d: (sum over the window of x^p)^(1/p), no padding, torch's
    stride (the kernel by default) and ceil_mode; computed as torch does, from the average of x^p
    times the window size, negative sums clamped to 0 before the root."""

    _n_spatial = 2

    def __init__(
        self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False, *, rngs: Any = None
    ) -> None:
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def __call__(self, x: jax.Array) -> jax.Array:
        n, p = self._n_spatial, self.norm_type
        return _lp_pool(x, n, p, self.kernel_size, self.stride, self.ceil_mode, _avg_pool_nd, _ArrayOps)


class LPPool1d(_LPPoolNd):
    """torch.nn.LPPool1d(norm_type, kernel_size, stride, ceil_mode) on (N, C, L)."""

    _n_spatial = 1


class LPPool2d(_LPPoolNd):
    """torch.nn.LPPool2d(norm_type, kernel_size, stride, ceil_mode) on NCHW."""

    _n_spatial = 2


class LPPool3d(_LPPoolNd):
    """torch.nn.LPPool3d(norm_type, kernel_size, stride, ceil_mode) on NCDHW."""

    _n_spatial = 3
