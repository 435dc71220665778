"""torch's dropout variants for Keras 3: Dropout1d/2d/3d (whole channels), AlphaDropout and
FeatureAlphaDropout (SELU-preserving), active only when called with `training=True`.

Why shims: Keras' SpatialDropout layers are channels-last and need a batch dim, and Keras'
AlphaDropout draws its own constants; these follow torch's mask shapes on channels-first, batched or
unbatched inputs, and torch's alpha-dropout affine correction.
"""

import math
from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import _ALPHA_PRIME
from precision_transpiler.runtime.keras.layers import Dropout


class _DropoutNd(Dropout):
    """Shared body: torch's `(p, inplace)` (the runtime's Dropout), one mask value per entry of `_mask_shape`."""

    #: trailing (spatial) dims that share one mask value; 0: element-wise
    _n_spatial = 0
    _alpha = False

    def call(self, input: Any, training: bool | None = None) -> Any:
        if not training or self.p == 0.0:
            return input
        if self.p == 1.0 and not self._alpha:
            return ops.zeros_like(input)
        shape = self._mask_shape(tuple(ops.shape(input)))
        keep = keras.random.uniform(shape, seed=self.seed_generator) >= self.p
        if not self._alpha:
            return ops.where(keep, input / (1.0 - self.p), ops.zeros_like(input))
        a = 1.0 / math.sqrt((1.0 - self.p) * (1.0 + self.p * _ALPHA_PRIME**2)) if self.p < 1.0 else 0.0
        b = -a * _ALPHA_PRIME * self.p
        return ops.cast(a * ops.where(keep, input, ops.full_like(input, _ALPHA_PRIME)) + b, input.dtype)

    def _mask_shape(self, shape: tuple[Any, ...]) -> tuple[Any, ...]:
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

    def _mask_shape(self, shape: tuple[Any, ...]) -> tuple[Any, ...]:
        return shape[:2] + (1,) * (len(shape) - 2)
