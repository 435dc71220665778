"""torch's upsampling layers for Keras 3: Upsample, UpsamplingNearest2d, UpsamplingBilinear2d,
PixelShuffle and PixelUnshuffle, on channels-first inputs.

Why shims: Keras' UpSampling2D and `ops.image.resize` are channels-last without `align_corners`
and TensorFlow's depth_to_space orders channels (r, r, C), not torch's (C, r, r); these compute
through the runtime's `interpolate` (torch's sample positions) and torch's channel order.
"""

from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.keras.functional import interpolate


class Upsample(keras.layers.Layer):
    """torch.nn.Upsample(size, scale_factor, mode, align_corners, recompute_scale_factor)."""

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.size = size
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor
        self.built = True

    def call(self, input: Any) -> Any:
        return interpolate(
            input, self.size, self.scale_factor, self.mode, self.align_corners, self.recompute_scale_factor
        )


class UpsamplingNearest2d(Upsample):
    """torch.nn.UpsamplingNearest2d(size, scale_factor): nearest (torch's floor rule) on NCHW."""

    def __init__(self, size: Any = None, scale_factor: Any = None, **kwargs: Any) -> None:
        super().__init__(size, scale_factor, "nearest", **kwargs)


class UpsamplingBilinear2d(Upsample):
    """torch.nn.UpsamplingBilinear2d(size, scale_factor): bilinear with align_corners=True on NCHW."""

    def __init__(self, size: Any = None, scale_factor: Any = None, **kwargs: Any) -> None:
        super().__init__(size, scale_factor, "bilinear", True, **kwargs)


class _Shuffle(keras.layers.Layer):
    """Shared body of PixelShuffle/PixelUnshuffle: the factor `r` and torch's (C, r, r) ordering."""

    def __init__(self, factor: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.factor = factor
        self.built = True

    def _split(self, x: Any, shape: tuple[int, ...], order: tuple[int, ...], out: tuple[int, ...]) -> Any:
        """Reshape the trailing (C, H, W) to `shape`, permute those dims by `order`, reshape to `out`."""
        lead = tuple(ops.shape(x)[:-3])
        k = len(lead)
        y = ops.transpose(ops.reshape(x, (*lead, *shape)), (*range(k), *(k + i for i in order)))
        return ops.reshape(y, (*lead, *out))


class PixelShuffle(_Shuffle):
    """torch.nn.PixelShuffle(upscale_factor): (*, C r^2, H, W) -> (*, C, H r, W r)."""

    def __init__(self, upscale_factor: int, **kwargs: Any) -> None:
        super().__init__(upscale_factor, **kwargs)
        self.upscale_factor = upscale_factor

    def call(self, input: Any) -> Any:
        r = self.factor
        c, h, w = input.shape[-3:]
        if c % (r * r):
            raise ValueError(f"PixelShuffle: {c} channels are not divisible by upscale_factor**2 = {r * r}")
        return self._split(input, (c // (r * r), r, r, h, w), (0, 3, 1, 4, 2), (c // (r * r), h * r, w * r))


class PixelUnshuffle(_Shuffle):
    """torch.nn.PixelUnshuffle(downscale_factor): (*, C, H r, W r) -> (*, C r^2, H, W)."""

    def __init__(self, downscale_factor: int, **kwargs: Any) -> None:
        super().__init__(downscale_factor, **kwargs)
        self.downscale_factor = downscale_factor

    def call(self, input: Any) -> Any:
        r = self.factor
        c, h, w = input.shape[-3:]
        if h % r or w % r:
            raise ValueError(f"PixelUnshuffle: spatial size {(h, w)} is not divisible by downscale_factor {r}")
        return self._split(input, (c, h // r, r, w // r, r), (0, 2, 4, 1, 3), (c * r * r, h // r, w // r))
