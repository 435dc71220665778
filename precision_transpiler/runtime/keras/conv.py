"""torch's convolutions for Keras 3: `Conv1d`/`Conv2d`, `ConvTranspose1d`/`2d` and the functional
`conv1d`/`conv2d`, channels-first with torch's OIHW weights (transposed to Keras' layout around
`ops.conv`, since TensorFlow on CPU has no channels-first kernels) and torch's padding rules.
"""

import math
from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import _conv_padding_pairs, _tuple
from precision_transpiler.runtime.keras.functional import (
    _add_batch,
    _add_bias,
    _ArrayOps,
    _cast,
    _channels_first,
    _channels_last,
    _keras_dtype,
    _uniform,
)
from precision_transpiler.runtime.keras.module_api import ReplacesVariables
from precision_transpiler.runtime.padding import _pad_nd


def _conv_nd(
    x: Any,
    weight: Any,
    bias: Any,
    stride: tuple[int, ...],
    pairs: list[tuple[int, int]],
    dilation: tuple[int, ...],
    groups: int,
    padding_mode: str,
) -> Any:
    """Channels-first convolution with a torch (out, in/groups, *k) weight and torch's padding modes.

    Padding is applied explicitly (then 'valid'); stride together with dilation, which TensorFlow
    refuses, runs at stride 1 and subsamples (same result). Grouped convolutions go through
    `ops.conv` with an (in/groups) kernel (Keras compiles them with XLA on CPU).
    """
    n = len(weight.shape) - 2
    x, unbatched = _add_batch(x, n)
    if x.shape[1] is not None and x.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"expected input with {weight.shape[1] * groups} channels, got shape {x.shape}")
    x = _pad_nd(x, [(0, 0), (0, 0), *pairs], "constant" if padding_mode == "zeros" else padding_mode, 0, _ArrayOps)
    kernel = ops.transpose(weight, (*range(2, n + 2), 1, 0))
    both = any(s > 1 for s in stride) and any(d > 1 for d in dilation)
    y = ops.conv(_channels_last(x), kernel, strides=1 if both else stride, padding="valid", dilation_rate=dilation)
    if both:
        y = y[(slice(None), *(slice(None, None, s) for s in stride), slice(None))]
    y = _channels_first(_add_bias(y, bias))
    return y[0] if unbatched else y


def conv1d(
    input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1
) -> Any:
    """torch.nn.functional.conv1d on (N, C, L) with a torch (out, in/groups, k) weight."""
    k, d = _tuple(weight.shape[2:], 1, "kernel_size"), _tuple(dilation, 1, "dilation")
    pairs = _conv_padding_pairs(padding if isinstance(padding, str) else _tuple(padding, 1, "padding"), k, d)
    return _conv_nd(input, weight, bias, _tuple(stride, 1, "stride"), pairs, d, groups, "zeros")


def conv2d(
    input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1
) -> Any:
    """torch.nn.functional.conv2d on NCHW with a torch OIHW weight (Keras: NHWC, HWIO, 'valid').

    `padding` is an int, a pair, 'valid' or 'same' (odd total padding goes on the high side, as torch).
    """
    k, d = _tuple(weight.shape[2:], 2, "kernel_size"), _tuple(dilation, 2, "dilation")
    pairs = _conv_padding_pairs(padding if isinstance(padding, str) else _tuple(padding, 2, "padding"), k, d)
    return _conv_nd(input, weight, bias, _tuple(stride, 2, "stride"), pairs, d, groups, "zeros")


def _conv_transpose_nd(
    x: Any,
    weight: Any,
    bias: Any,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    output_padding: tuple[int, ...],
    groups: int,
    dilation: tuple[int, ...],
) -> Any:
    """torch's transposed convolution as a stride-1 convolution (exact for any stride/groups/dilation).

    The input gets stride-1 zeros between its samples, d*(k-1)-p zeros (or a crop) on each side plus
    `output_padding` on the high side, and is convolved with the spatially flipped kernel whose
    (in, out/groups) axes are swapped per group.
    """
    n = len(weight.shape) - 2
    x, unbatched = _add_batch(x, n)
    ks = tuple(weight.shape[2:])
    x = _channels_last(x)
    for i, s in enumerate(stride):
        if s > 1:  # interleave s-1 zeros after every sample (the trailing ones are cropped below)
            axis = 1 + i
            x = ops.pad(ops.expand_dims(x, axis + 1), [(0, 0)] * (axis + 1) + [(0, s - 1)] + [(0, 0)] * (n - i))
            x = ops.reshape(x, (-1, *x.shape[1:axis], x.shape[axis] * s, *x.shape[axis + 2 :]))
    pairs = []
    for k, s, p, op, d in zip(ks, stride, padding, output_padding, dilation, strict=True):
        edge = d * (k - 1) - p
        pairs.append((edge, edge + op - (s - 1)))
    x = _pad_nd(x, [(0, 0), *pairs, (0, 0)], "constant", 0, _ArrayOps)
    cin, cout_g = weight.shape[0], weight.shape[1]
    kernel = ops.flip(weight, axis=tuple(range(2, n + 2)))
    kernel = ops.reshape(kernel, (groups, cin // groups, cout_g, *ks))
    kernel = ops.transpose(kernel, (*range(3, n + 3), 1, 0, 2))
    kernel = ops.reshape(kernel, (*ks, cin // groups, groups * cout_g))
    y = ops.conv(x, kernel, strides=1, padding="valid", dilation_rate=dilation)
    if bias is not None:
        y = y + bias
    y = _channels_first(y)
    return y[0] if unbatched else y


class _ConvNd(ReplacesVariables, keras.layers.Layer):
    """Shared body of Conv1d/Conv2d: torch's arguments and OI* `weight` on channels-first inputs."""

    _n_spatial = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] | str = 0,
        dilation: int | tuple[int, ...] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        n = self._n_spatial
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be zeros, reflect, replicate or circular, got {padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.dilation = _tuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of ['valid', 'same']")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding: Any = padding
        else:
            self.padding = _tuple(padding, n, "padding")
        self.groups = groups
        self.padding_mode = padding_mode
        fan_in = (in_channels // groups) * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = self.add_weight(shape=shape, initializer=_uniform(bound), name="weight")
        self.bias = self.add_weight(shape=(out_channels,), initializer=_uniform(bound), name="bias") if bias else None
        self.built = True

    def call(self, input: Any) -> Any:
        dt = self.compute_dtype
        pairs = _conv_padding_pairs(self.padding, self.kernel_size, self.dilation)
        return _conv_nd(
            ops.cast(input, dt),
            ops.cast(self.weight, dt),
            _cast(self.bias, dt),
            self.stride,
            pairs,
            self.dilation,
            self.groups,
            self.padding_mode,
        )


class Conv1d(_ConvNd):
    """torch.nn.Conv1d on (N, C, L) or (C, L): padding int/'same'/'valid', dilation, groups, padding_mode."""

    _n_spatial = 1


class Conv2d(_ConvNd):
    """torch.nn.Conv2d on NCHW: OIHW `weight`, explicit (asymmetric for 'same') padding, torch padding modes.

    Keras Conv2D is channels-last with an HWIO kernel and 'valid' by default; TensorFlow refuses
    stride together with dilation and has no replicate/circular padding. All handled here.
    """

    _n_spatial = 2


class Conv3d(_ConvNd):
    """torch.nn.Conv3d on NCDHW: OIDHW `weight`, as Conv2d with a depth dim."""

    _n_spatial = 3


class _ConvTransposeNd(ReplacesVariables, keras.layers.Layer):
    """Shared body of ConvTranspose1d/2d: torch's arguments and (in, out/groups, *k) `weight`."""

    _n_spatial = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] = 0,
        output_padding: int | tuple[int, ...] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple[int, ...] = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        n = self._n_spatial
        if padding_mode != "zeros":
            raise ValueError(f"Only 'zeros' padding mode is supported for {type(self).__name__}")
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.padding = _tuple(padding, n, "padding")
        self.output_padding = _tuple(output_padding, n, "output_padding")
        self.dilation = _tuple(dilation, n, "dilation")
        for op, s, d in zip(self.output_padding, self.stride, self.dilation, strict=True):
            if op >= max(s, d):
                raise ValueError("output padding must be smaller than either stride or dilation")
        self.groups = groups
        fan_in = (out_channels // groups) * math.prod(self.kernel_size)  # torch: weight.size(1) * receptive field
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        shape = (in_channels, out_channels // groups, *self.kernel_size)
        self.weight = self.add_weight(shape=shape, initializer=_uniform(bound), name="weight")
        self.bias = self.add_weight(shape=(out_channels,), initializer=_uniform(bound), name="bias") if bias else None
        self.built = True

    def _output_padding(self, input: Any, output_size: Any) -> tuple[int, ...]:
        """torch's `_output_padding`: the extra high-side size that makes the output `output_size`."""
        if output_size is None:
            return self.output_padding
        n = self._n_spatial
        sizes = tuple(int(s) for s in output_size)[-n:]
        spatial = tuple(input.shape[-n:])
        result = []
        for i in range(n):
            k, s, p, d = self.kernel_size[i], self.stride[i], self.padding[i], self.dilation[i]
            smallest = (spatial[i] - 1) * s - 2 * p + d * (k - 1) + 1
            if not smallest <= sizes[i] < smallest + max(s, d):
                raise ValueError(f"requested an output size of {sizes}, but valid sizes start at {smallest}")
            result.append(sizes[i] - smallest)
        return tuple(result)

    def call(self, input: Any, output_size: Any = None) -> Any:
        dt = self.compute_dtype
        return _conv_transpose_nd(
            ops.cast(input, dt),
            ops.cast(self.weight, dt),
            _cast(self.bias, dt),
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(_ConvTransposeNd):
    """torch.nn.ConvTranspose1d on (N, C, L): torch's output size, output_padding, groups, dilation."""

    _n_spatial = 1


class ConvTranspose2d(_ConvTransposeNd):
    """torch.nn.ConvTranspose2d on NCHW: (in, out/groups, kh, kw) `weight`, torch's padding/output_padding.

    Output size (in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1, or the
    `output_size` passed to the call, as torch. Keras Conv2DTranspose is channels-last with a
    (kh, kw, out, in) kernel and only 'same'/'valid' padding.
    """

    _n_spatial = 2


class ConvTranspose3d(_ConvTransposeNd):
    """torch.nn.ConvTranspose3d on NCDHW: (in, out/groups, kd, kh, kw) `weight`, torch's output size."""

    _n_spatial = 3
