"""torch's max pooling with indices and its inverse for Keras 3: `MaxPool*d(return_indices=True)`
and MaxUnpool1d/2d/3d.

Why shims: Keras' pooling returns only the maxima (TensorFlow's max_pool_with_argmax is 2D,
channels-last and indexes the flattened NHWC tensor); torch's pooling can also return where each
maximum came from (the flat index within its (N, C) plane of the input: the first maximum in window
order, a NaN winning, as torch's CPU kernels pick it), and MaxUnpool puts values back at those
indices in a zero output of torch's size, `(in - 1) * stride - 2 * padding + kernel` or `output_size`.
"""

import math
from typing import Any

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.keras.functional import _add_batch, _ArrayOps
from precision_transpiler.runtime.padding import _pad_nd
from precision_transpiler.runtime.pool import _max_pool_windows, _unpool_size


def _max_pool_indices(
    x: Any, n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool
) -> tuple[Any, Any]:
    """torch's max pooling (padding, dilation, ceil_mode) with the index of every maximum."""
    x, unbatched = _add_batch(x, n)
    spatial = tuple(x.shape[2:])
    k, s, d, pairs, outs = _max_pool_windows(spatial, n, kernel_size, stride, padding, dilation, ceil_mode)
    dtype = keras.backend.standardize_dtype(x.dtype)
    floating = "float" in dtype
    xp = _pad_nd(
        x, [(0, 0), (0, 0), *pairs], "constant", float("-inf") if floating else int(np.iinfo(dtype).min), _ArrayOps
    )
    flat = np.pad(np.arange(math.prod(spatial)).reshape(spatial), pairs, constant_values=-1)
    best, best_index = None, None
    for offsets in np.ndindex(*k):  # kernel taps in torch's scan order
        spans = tuple(
            slice(o * dd, o * dd + (m - 1) * ss + 1, ss) for o, dd, ss, m in zip(offsets, d, s, outs, strict=True)
        )
        tap, tap_index = xp[(slice(None), slice(None), *spans)], ops.convert_to_tensor(flat[spans], "int64")
        if best is None:
            best, best_index = tap, ops.broadcast_to(tap_index, ops.shape(tap))
            continue
        take = ops.logical_or(tap > best, ops.isnan(tap)) if floating else tap > best
        best, best_index = ops.where(take, tap, best), ops.where(take, tap_index, best_index)
    return (best[0], best_index[0]) if unbatched else (best, best_index)


class _MaxUnpoolNd(keras.layers.Layer):
    """Shared body of MaxUnpool1d/2d/3d: torch's `(kernel_size, stride=None, padding=0)`."""

    _n_spatial = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.built = True

    def call(self, input: Any, indices: Any, output_size: Any = None) -> Any:
        n = self._n_spatial
        x, unbatched = _add_batch(input, n)
        size = _unpool_size(x.shape[2:], n, self.kernel_size, self.stride, self.padding, output_size)
        planes = x.shape[0] * x.shape[1]
        columns = ops.reshape(ops.cast(indices, "int32"), (planes, -1))
        rows = ops.broadcast_to(ops.expand_dims(ops.arange(planes, dtype="int32"), 1), ops.shape(columns))
        where = ops.reshape(ops.stack([rows, columns], axis=-1), (-1, 2))
        out = ops.zeros((planes, math.prod(size)), x.dtype)
        out = ops.scatter_update(out, where, ops.reshape(x, (-1,)))
        y = ops.reshape(out, (*x.shape[:2], *size))
        return y[0] if unbatched else y


class MaxUnpool1d(_MaxUnpoolNd):
    """torch.nn.MaxUnpool1d on (N, C, L) with the indices of MaxPool1d(return_indices=True)."""

    _n_spatial = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """torch.nn.MaxUnpool2d on NCHW with the indices of MaxPool2d(return_indices=True)."""

    _n_spatial = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """torch.nn.MaxUnpool3d on NCDHW with the indices of MaxPool3d(return_indices=True)."""

    _n_spatial = 3
