"""torch's reshaping layers for Keras 3: Unflatten, ChannelShuffle, and Unfold/Fold (im2col/col2im).

Why shims: Keras' Reshape layer excludes the batch dim, and Keras has no channel shuffle, no
channels-first patch extraction in torch's (C * kh * kw, L) layout and no col2im; these keep torch's
dim numbering (batch included) and orderings.
"""

from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import _patch_geometry, _tuple
from precision_transpiler.runtime.keras.functional import unflatten


class Unflatten(keras.layers.Layer):
    """torch.nn.Unflatten(dim, unflattened_size): split `dim` into `unflattened_size` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)
        self.built = True

    def call(self, input: Any) -> Any:
        return unflatten(input, self.dim, self.unflattened_size)


class ChannelShuffle(keras.layers.Layer):
    """torch.nn.ChannelShuffle(groups) on (N, C, *): channel g*k + i moves to i*groups + g (ShuffleNet)."""

    def __init__(self, groups: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.groups = groups
        self.built = True

    def call(self, input: Any) -> Any:
        shape = tuple(input.shape)
        c = shape[1]
        if c % self.groups:
            raise ValueError(f"ChannelShuffle: {c} channels are not divisible by groups {self.groups}")
        y = ops.reshape(input, (-1, self.groups, c // self.groups, *shape[2:]))
        return ops.reshape(ops.swapaxes(y, 1, 2), (-1, *shape[1:]))


def _spread(x: Any, axis: int, step: int) -> Any:
    """Put step - 1 zeros between the entries along `axis` (length (n - 1) * step + 1)."""
    if step == 1:
        return x
    n = x.shape[axis]
    widths = [(0, 0)] * (len(x.shape) + 1)
    widths[axis + 1] = (0, step - 1)
    y = ops.pad(ops.expand_dims(x, axis + 1), widths)
    y = ops.reshape(y, (*ops.shape(x)[:axis], n * step, *ops.shape(x)[axis + 1 :]))
    return y[(slice(None),) * axis + (slice(0, (n - 1) * step + 1),)]


class Unfold(keras.layers.Layer):
    """torch.nn.Unfold(kernel_size, dilation=1, padding=0, stride=1): (N, C, H, W) -> (N, C * kh * kw, L)
    sliding blocks, channel-major then kernel position as torch orders them (TensorFlow's
    extract_patches is channels-last and orders them the other way)."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride
        self.built = True

    def call(self, input: Any) -> Any:
        unbatched = len(input.shape) == 3
        x = ops.expand_dims(input, 0) if unbatched else input
        k, d, p, s, (oh, ow) = _patch_geometry(x.shape[2:], self.kernel_size, self.dilation, self.padding, self.stride)
        x = ops.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
        taps = [
            x[:, :, i * d[0] : i * d[0] + (oh - 1) * s[0] + 1 : s[0], j * d[1] : j * d[1] + (ow - 1) * s[1] + 1 : s[1]]
            for i in range(k[0])
            for j in range(k[1])
        ]
        y = ops.reshape(ops.stack(taps, axis=2), (-1, x.shape[1] * k[0] * k[1], oh * ow))
        return y[0] if unbatched else y


class Fold(keras.layers.Layer):
    """torch.nn.Fold(output_size, kernel_size, dilation=1, padding=0, stride=1): (N, C * kh * kw, L) ->
    (N, C, H, W), overlapping block values summed (col2im, the adjoint of Unfold)."""

    def __init__(
        self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.output_size = _tuple(output_size, 2, "output_size")
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride
        self.built = True

    def call(self, input: Any) -> Any:
        unbatched = len(input.shape) == 2
        x = ops.expand_dims(input, 0) if unbatched else input
        h, w = self.output_size
        k, d, p, s, (oh, ow) = _patch_geometry((h, w), self.kernel_size, self.dilation, self.padding, self.stride)
        if x.shape[1] % (k[0] * k[1]) or x.shape[2] != oh * ow:
            raise ValueError(f"Fold: input of shape {input.shape} does not hold {k} blocks of a {(h, w)} output")
        blocks = ops.reshape(x, (-1, x.shape[1] // (k[0] * k[1]), k[0], k[1], oh, ow))
        span = ((oh - 1) * s[0] + 1, (ow - 1) * s[1] + 1)
        out = None
        for i in range(k[0]):
            for j in range(k[1]):
                placed = _spread(_spread(blocks[:, :, i, j], 2, s[0]), 3, s[1])
                top, left = i * d[0], j * d[1]
                widths = ((0, 0), (0, 0), (top, h + 2 * p[0] - top - span[0]), (left, w + 2 * p[1] - left - span[1]))
                placed = ops.pad(placed, widths)
                out = placed if out is None else out + placed
        y = out[:, :, p[0] : p[0] + h, p[1] : p[1] + w]
        return y[0] if unbatched else y
