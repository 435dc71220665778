"""torch's dropout variants for Flax NNX: Dropout1d/2d/3d (whole channels), AlphaDropout and
FeatureAlphaDropout (SELU-preserving), identity at inference like nnx.Dropout.

Why shims: nnx.Dropout drops elements with a mask shared over `broadcast_dims` fixed at
construction, while torch's channel dropouts take batched or unbatched inputs (the mask covers the
leading (N, C) or (C,) dims), and alpha dropout replaces dropped values by SELU's saturation value
with an affine correction that nnx.Dropout does not have. They keep nnx.Dropout's `deterministic`
switch (`model.eval()`) and its 'dropout' random stream.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp

from precision_transpiler.runtime.common import _ALPHA_PRIME
from precision_transpiler.runtime.flax.functional import _rng_key
from precision_transpiler.runtime.flax.layers import Dropout


class _DropoutNd(Dropout):
    """Shared body: torch's `(p, inplace)` (the runtime's Dropout on nnx.Dropout), one mask value per
    entry of `_mask_shape`."""

    #: trailing (spatial) dims that share one mask value; 0: element-wise
    _n_spatial = 0
    _alpha = False

    def __call__(self, x: jax.Array, *, deterministic: bool | None = None, rngs: Any = None) -> jax.Array:
        off = self.deterministic if deterministic is None else deterministic
        if off or self.rate == 0.0:
            return x
        if self.rate == 1.0 and not self._alpha:
            return jnp.zeros_like(x)
        shape = self._mask_shape(x.shape)
        keep = jax.random.bernoulli(_rng_key(rngs if rngs is not None else self.rngs), 1.0 - self.rate, shape)
        if not self._alpha:
            return jnp.where(keep, x / jnp.asarray(1.0 - self.rate, x.dtype), jnp.zeros((), x.dtype))
        a = 1.0 / math.sqrt((1.0 - self.rate) * (1.0 + self.rate * _ALPHA_PRIME**2)) if self.rate < 1.0 else 0.0
        b = -a * _ALPHA_PRIME * self.rate
        return (a * jnp.where(keep, x, jnp.asarray(_ALPHA_PRIME, x.dtype)) + b).astype(x.dtype)

    def _mask_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The leading dims of `shape`, the `_n_spatial` trailing ones set to 1 (broadcast)."""
        n = self._n_spatial
        return shape[: len(shape) - n] + (1,) * n if 0 < n < len(shape) else shape


class Dropout1d(_DropoutNd):
    """torch.nn.Dropout1d: zero whole channels of (N, C, L) or (C, L) with probability p."""

    _n_spatial = 1


class Dropout2d(_DropoutNd):
    """torch.nn.Dropout2d: zero whole channels of (N, C, H, W) or (C, H, W) with probability p."""

    _n_spatial = 2


class Dropout3d(_DropoutNd):
    """torch.nn.Dropout3d: zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p."""

    _n_spatial = 3


class AlphaDropout(_DropoutNd):
    """torch.nn.AlphaDropout: dropped elements take SELU's saturation value, then an affine map keeps
    mean and variance (for SELU networks)."""

    _alpha = True


class FeatureAlphaDropout(_DropoutNd):
    """torch.nn.FeatureAlphaDropout: alpha dropout of whole channels of (N, C, *)."""

    _alpha = True

    def _mask_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape[:2] + (1,) * (len(shape) - 2)
