"""torch's max pooling with indices and its inverse for Flax NNX: `MaxPool*d(return_indices=True)`
and MaxUnpool1d/2d/3d.

Why shims: JAX's reduce_window returns only the maxima; torch's pooling can also return where each
maximum came from (the flat index within its (N, C) plane of the input: the first maximum in window
order, a NaN winning, as torch's CPU kernels pick it), and MaxUnpool puts values back at those
indices in a zero output of torch's size, `(in - 1) * stride - 2 * padding + kernel` or `output_size`.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from precision_transpiler.runtime.flax.functional import _add_batch
from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.pool import _max_pool_windows, _unpool_size


def _max_pool_indices(
    x: jax.Array, n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool
) -> tuple[jax.Array, jax.Array]:
    """torch's max pooling (padding, dilation, ceil_mode) with the index of every maximum."""
    x, unbatched = _add_batch(x, n)
    spatial = x.shape[2:]
    k, s, d, pairs, outs = _max_pool_windows(spatial, n, kernel_size, stride, padding, dilation, ceil_mode)
    floating = jnp.issubdtype(x.dtype, jnp.floating)
    lowest = -jnp.inf if floating else jnp.iinfo(x.dtype).min
    xp = jnp.pad(x, [(0, 0), (0, 0), *pairs], constant_values=lowest)
    flat = np.pad(np.arange(math.prod(spatial)).reshape(spatial), pairs, constant_values=-1)
    best, best_index = None, None
    for offsets in np.ndindex(*k):  # kernel taps in torch's scan order
        spans = tuple(
            slice(o * dd, o * dd + (m - 1) * ss + 1, ss) for o, dd, ss, m in zip(offsets, d, s, outs, strict=True)
        )
        tap, tap_index = xp[(slice(None), slice(None), *spans)], jnp.asarray(flat[spans])
        if best is None:
            best, best_index = tap, jnp.broadcast_to(tap_index, tap.shape)
            continue
        take = (tap > best) | jnp.isnan(tap) if floating else tap > best
        best, best_index = jnp.where(take, tap, best), jnp.where(take, tap_index, best_index)
    return (best[0], best_index[0]) if unbatched else (best, best_index)


class _MaxUnpoolNd(TorchLayer):
    """Shared body of MaxUnpool1d/2d/3d: torch's `(kernel_size, stride=None, padding=0)`."""

    _n_spatial = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, *, rngs: Any = None) -> None:
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def __call__(self, x: jax.Array, indices: jax.Array, output_size: Any = None) -> jax.Array:
        n = self._n_spatial
        xb, unbatched = _add_batch(x, n)
        size = _unpool_size(xb.shape[2:], n, self.kernel_size, self.stride, self.padding, output_size)
        planes = xb.shape[0] * xb.shape[1]
        out = jnp.zeros((planes, math.prod(size)), x.dtype)
        rows = jnp.arange(planes)[:, None]
        out = out.at[rows, jnp.reshape(indices, (planes, -1))].set(xb.reshape(planes, -1))
        y = out.reshape(*xb.shape[:2], *size)
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
