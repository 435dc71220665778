"""torch's upsampling layers for Flax NNX: Upsample, UpsamplingNearest2d, UpsamplingBilinear2d,
PixelShuffle and PixelUnshuffle, on channels-first inputs.

Why shims: `jax.image.resize` is half-pixel with antialiasing and no `align_corners`, and Flax has
no pixel shuffle; these compute through the runtime's `interpolate` (torch's sample positions)
and reshape in torch's (C, r, r) channel order.
"""

from typing import Any

import jax

from precision_transpiler.runtime.flax.functional import interpolate
from precision_transpiler.runtime.flax.layers import TorchLayer


class Upsample(TorchLayer):
    """torch.nn.Upsample(size, scale_factor, mode, align_corners, recompute_scale_factor)."""

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
        *,
        rngs: Any = None,
    ) -> None:
        self.size = size
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def __call__(self, x: jax.Array) -> jax.Array:
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners, self.recompute_scale_factor)


class UpsamplingNearest2d(Upsample):
    """torch.nn.UpsamplingNearest2d(size, scale_factor): nearest (torch's floor rule) on NCHW."""

    def __init__(self, size: Any = None, scale_factor: Any = None, *, rngs: Any = None) -> None:
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """torch.nn.UpsamplingBilinear2d(size, scale_factor): bilinear with align_corners=True on NCHW."""

    def __init__(self, size: Any = None, scale_factor: Any = None, *, rngs: Any = None) -> None:
        super().__init__(size, scale_factor, "bilinear", True)


class _Shuffle(TorchLayer):
    """Shared body of PixelShuffle/PixelUnshuffle: the factor `r` and torch's (C, r, r) ordering."""

    def __init__(self, factor: int) -> None:
        self.factor = factor

    def _split(self, x: jax.Array, shape: tuple[int, ...], order: tuple[int, ...], out: tuple[int, ...]) -> jax.Array:
        """Reshape the trailing (C, H, W) to `shape`, permute those dims by `order`, reshape to `out`."""
        lead = x.shape[:-3]
        k = len(lead)
        y = x.reshape(*lead, *shape).transpose(*range(k), *(k + i for i in order))
        return y.reshape(*lead, *out)


class PixelShuffle(_Shuffle):
    """torch.nn.PixelShuffle(upscale_factor): (*, C r^2, H, W) -> (*, C, H r, W r)."""

    def __init__(self, upscale_factor: int, *, rngs: Any = None) -> None:
        super().__init__(upscale_factor)
        self.upscale_factor = upscale_factor

    def __call__(self, x: jax.Array) -> jax.Array:
        r = self.factor
        c, h, w = x.shape[-3:]
        if c % (r * r):
            raise ValueError(f"PixelShuffle: {c} channels are not divisible by upscale_factor**2 = {r * r}")
        return self._split(x, (c // (r * r), r, r, h, w), (0, 3, 1, 4, 2), (c // (r * r), h * r, w * r))


class PixelUnshuffle(_Shuffle):
    """torch.nn.PixelUnshuffle(downscale_factor): (*, C, H r, W r) -> (*, C r^2, H, W)."""

    def __init__(self, downscale_factor: int, *, rngs: Any = None) -> None:
        super().__init__(downscale_factor)
        self.downscale_factor = downscale_factor

    def __call__(self, x: jax.Array) -> jax.Array:
        r = self.factor
        c, h, w = x.shape[-3:]
        if h % r or w % r:
            raise ValueError(f"PixelUnshuffle: spatial size {(h, w)} is not divisible by downscale_factor {r}")
        return self._split(x, (c, h // r, r, w // r, r), (0, 2, 4, 1, 3), (c * r * r, h // r, w // r))
