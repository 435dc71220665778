"""torch's reshaping layers for Flax NNX: Unflatten, ChannelShuffle, and Unfold/Fold (im2col/col2im).

Why shims: these are module forms of tensor reshapes that Flax has as functions only, or not at all
(Unfold's channel-major (C * kh * kw, L) block layout, Fold's summed overlaps); keeping them modules
keeps a converted `nn.Sequential` (and its weight paths) as torch builds it.
"""

from typing import Any

import jax
import jax.numpy as jnp

from precision_transpiler.runtime.common import _patch_geometry, _tuple
from precision_transpiler.runtime.flax.functional import unflatten
from precision_transpiler.runtime.flax.layers import TorchLayer


class Unflatten(TorchLayer):
    """torch.nn.Unflatten(dim, unflattened_size): split `dim` into `unflattened_size` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size: Any, *, rngs: Any = None) -> None:
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def __call__(self, x: jax.Array) -> jax.Array:
        return unflatten(x, self.dim, self.unflattened_size)


class ChannelShuffle(TorchLayer):
    """torch.nn.ChannelShuffle(groups) on (N, C, *): channel g*k + i moves to i*groups + g (ShuffleNet)."""

    def __init__(self, groups: int, *, rngs: Any = None) -> None:
        self.groups = groups

    def __call__(self, x: jax.Array) -> jax.Array:
        n, c = x.shape[0], x.shape[1]
        if c % self.groups:
            raise ValueError(f"ChannelShuffle: {c} channels are not divisible by groups {self.groups}")
        y = x.reshape(n, self.groups, c // self.groups, *x.shape[2:]).swapaxes(1, 2)
        return y.reshape(x.shape)


class Unfold(TorchLayer):
    """torch.nn.Unfold(kernel_size, dilation=1, padding=0, stride=1): (N, C, H, W) -> (N, C * kh * kw, L)
    sliding blocks, channel-major then kernel position as torch orders them."""

    def __init__(
        self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1, *, rngs: Any = None
    ) -> None:
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def __call__(self, x: jax.Array) -> jax.Array:
        unbatched = x.ndim == 3
        xb = x[None] if unbatched else x
        k, d, p, s, (oh, ow) = _patch_geometry(xb.shape[2:], self.kernel_size, self.dilation, self.padding, self.stride)
        xb = jnp.pad(xb, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
        taps = [
            xb[:, :, i * d[0] : i * d[0] + (oh - 1) * s[0] + 1 : s[0], j * d[1] : j * d[1] + (ow - 1) * s[1] + 1 : s[1]]
            for i in range(k[0])
            for j in range(k[1])
        ]
        y = jnp.stack(taps, axis=2).reshape(xb.shape[0], -1, oh * ow)
        return y[0] if unbatched else y


class Fold(TorchLayer):
    """torch.nn.Fold(output_size, kernel_size, dilation=1, padding=0, stride=1): (N, C * kh * kw, L) ->
    (N, C, H, W), overlapping block values summed (col2im, the adjoint of Unfold)."""

    def __init__(
        self,
        output_size: Any,
        kernel_size: Any,
        dilation: Any = 1,
        padding: Any = 0,
        stride: Any = 1,
        *,
        rngs: Any = None,
    ) -> None:
        self.output_size = _tuple(output_size, 2, "output_size")
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def __call__(self, x: jax.Array) -> jax.Array:
        unbatched = x.ndim == 2
        xb = x[None] if unbatched else x
        h, w = self.output_size
        k, d, p, s, (oh, ow) = _patch_geometry((h, w), self.kernel_size, self.dilation, self.padding, self.stride)
        if xb.shape[1] % (k[0] * k[1]) or xb.shape[2] != oh * ow:
            raise ValueError(f"Fold: input of shape {x.shape} does not hold {k} blocks of a {(h, w)} output")
        blocks = xb.reshape(xb.shape[0], -1, k[0], k[1], oh, ow)
        out = jnp.zeros((xb.shape[0], blocks.shape[1], h + 2 * p[0], w + 2 * p[1]), x.dtype)
        for i in range(k[0]):
            for j in range(k[1]):
                rows = slice(i * d[0], i * d[0] + (oh - 1) * s[0] + 1, s[0])
                cols = slice(j * d[1], j * d[1] + (ow - 1) * s[1] + 1, s[1])
                out = out.at[:, :, rows, cols].add(blocks[:, :, i, j])
        y = out[:, :, p[0] : p[0] + h, p[1] : p[1] + w]
        return y[0] if unbatched else y
