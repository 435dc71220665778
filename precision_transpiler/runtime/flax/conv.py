"""torch's convolutions for Flax NNX: `Conv1d`/`Conv2d`/`Conv3d`, `ConvTranspose1d`/`2d` and the
functional `conv1d`/`conv2d`, with torch's NCHW layouts, padding modes and 'same' rule (JAX's
own 'SAME' puts the odd pixel elsewhere and Flax convolutions are NHWC).
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import _channel_shape, _conv_padding_pairs, _tuple
from precision_transpiler.runtime.flax.functional import _PADDING_MODES, _add_batch, _promote, _uniform, _value
from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.flax.rng import default_rngs


def _conv_dimension_numbers(n: int) -> tuple[str, str, str]:
    """lax dimension numbers for torch's channels-first input and Flax's spatial-first kernel."""
    spatial = "DHW"[3 - n :]
    return ("NC" + spatial, spatial + "IO", "NC" + spatial)


def _conv_nd(
    x: jax.Array,
    kernel: jax.Array,
    bias: Any,
    stride: tuple[int, ...],
    pairs: list[tuple[int, int]],
    dilation: tuple[int, ...],
    groups: int,
    padding_mode: str,
    dtype: Any,
    precision: Any,
) -> jax.Array:
    """Channels-first convolution with a spatial-first (HWIO) kernel and torch's padding modes."""
    n = kernel.ndim - 2
    x, unbatched = _add_batch(x, n)
    if padding_mode != "zeros":
        x = jnp.pad(x, [(0, 0), (0, 0), *pairs], mode=_PADDING_MODES[padding_mode])
        pairs = [(0, 0)] * n
    x, kernel, bias = _promote(dtype, x, kernel, bias)
    numbers = _conv_dimension_numbers(n)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel.shape[:n], dilation, strict=True)]
    if groups == 1 and all(size < e for size, e in zip(x.shape[2:], extent, strict=True)):
        # A kernel larger than the image (ResNet's last stage: 3x3 on 2x2): XLA's CPU convolution
        # takes ~20 ms there (measured, 512 channels), patches times the kernel ~2.4 ms, same sums.
        patches = jax.lax.conv_general_dilated_patches(
            x, kernel.shape[:n], stride, pairs, rhs_dilation=dilation, dimension_numbers=numbers, precision=precision
        )
        # patch features are ordered (C, *kernel window); the HWIO kernel becomes (C * window, O)
        flat = jnp.moveaxis(kernel, n, 0).reshape(-1, kernel.shape[-1])
        y = jnp.einsum("np...,po->no...", patches, flat, precision=precision)
    else:
        y = jax.lax.conv_general_dilated(
            x,
            kernel,
            window_strides=stride,
            padding=pairs,
            rhs_dilation=dilation,
            dimension_numbers=numbers,
            feature_group_count=groups,
            precision=precision,
        )
    if bias is not None:
        y = y + bias.reshape(_channel_shape(y.ndim))
    return y[0] if unbatched else y


class _ConvNd(TorchLayer):
    """Shared body of Conv1d/Conv2d/Conv3d: torch's arguments on `lax.conv_general_dilated`, NC... layout."""

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
        *,
        param_dtype: Any = jnp.float32,
        precision: Any = None,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        n = self._n_spatial
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {sorted(_PADDING_MODES)}, got {padding_mode!r}")
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
        self.dtype = dtype
        self.param_dtype = param_dtype
        self.precision = precision
        fan_in = (in_channels // groups) * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        shape = (*self.kernel_size, in_channels // groups, out_channels)
        self.kernel = nnx.Param(_uniform(rngs.params(), shape, param_dtype, bound))
        self.bias = nnx.Param(_uniform(rngs.params(), (out_channels,), param_dtype, bound)) if bias else nnx.data(None)

    @property
    def weight(self) -> jax.Array:
        """torch's `weight` (out, in/groups, *kernel), read-only: the kernel in torch's layout, for
        code that reads it (`conv.weight.dtype`, `F.conv2d(x, conv.weight)`)."""
        n = len(self.kernel_size)
        return jnp.transpose(self.kernel[...], (n + 1, n, *range(n)))

    def __call__(self, x: jax.Array) -> jax.Array:
        pairs = _conv_padding_pairs(self.padding, self.kernel_size, self.dilation)
        return _conv_nd(
            x,
            self.kernel[...],
            _value(self.bias),
            self.stride,
            pairs,
            self.dilation,
            self.groups,
            self.padding_mode,
            self.dtype,
            self.precision,
        )


class Conv1d(_ConvNd):
    """torch.nn.Conv1d on (N, C, L) inputs; nnx.Conv is channels-last with padding='SAME' by default."""

    _n_spatial = 1


class Conv2d(_ConvNd):
    """torch.nn.Conv2d on NCHW inputs (kernel stored HWIO); nnx.Conv is NHWC with padding='SAME'."""

    _n_spatial = 2


class Conv3d(_ConvNd):
    """torch.nn.Conv3d on NCDHW inputs (kernel stored DHWIO); nnx.Conv is channels-last."""

    _n_spatial = 3


def _functional_conv(
    x: jax.Array, weight: jax.Array, bias: Any, stride: Any, padding: Any, dilation: Any, groups: int
) -> jax.Array:
    """F.conv*d with torch's weight layout (out, in/groups, *kernel)."""
    n = weight.ndim - 2
    kernel = jnp.transpose(weight, (*range(2, n + 2), 1, 0))
    kernel_size = tuple(kernel.shape[:n])
    dil = _tuple(dilation, n, "dilation")
    pad = padding if isinstance(padding, str) else _tuple(padding, n, "padding")
    pairs = _conv_padding_pairs(pad, kernel_size, dil)
    return _conv_nd(x, kernel, bias, _tuple(stride, n, "stride"), pairs, dil, groups, "zeros", None, None)


def conv1d(
    input: jax.Array,
    weight: jax.Array,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> jax.Array:
    """torch.nn.functional.conv1d: (N, C, L) input, weight (out, in/groups, k); lax wants explicit layouts."""
    return _functional_conv(input, weight, bias, stride, padding, dilation, groups)


def conv2d(
    input: jax.Array,
    weight: jax.Array,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> jax.Array:
    """torch.nn.functional.conv2d: NCHW input, OIHW weight, torch's symmetric/'same' padding."""
    return _functional_conv(input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose_output_padding(
    in_sizes: tuple[int, ...],
    output_size: Any,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    kernel_size: tuple[int, ...],
    dilation: tuple[int, ...],
) -> tuple[int, ...]:
    """torch's `_output_padding`: the output_padding that yields a requested output size."""
    n = len(in_sizes)
    sizes = [int(s) for s in output_size][-n:]
    if len(sizes) != n:
        raise ValueError(f"output_size must have {n} or {n + 2} elements, got {output_size!r}")
    result = []
    for i in range(n):
        min_size = (in_sizes[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel_size[i] - 1) + 1
        if not min_size <= sizes[i] <= min_size + stride[i] - 1:
            raise ValueError(
                f"requested an output size of {sizes}, but valid sizes range from {min_size} "
                f"to {min_size + stride[i] - 1} (for an input of {in_sizes})"
            )
        result.append(sizes[i] - min_size)
    return tuple(result)


class _ConvTransposeNd(TorchLayer):
    """Shared body of ConvTranspose1d/2d: torch's transposed convolution as a dilated convolution.

    `kernel` is torch's weight (in, out/groups, *k) moved spatial-first: (*k, in, out/groups). The
    call flips it spatially, regroups it to (*k, in/groups, out) and convolves the input dilated by
    `stride` with padding d*(k-1)-p (low) and d*(k-1)-p+output_padding (high): exactly torch's
    output size (in-1)*s - 2p + d*(k-1) + output_padding + 1 and values.
    """

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
        *,
        param_dtype: Any = jnp.float32,
        precision: Any = None,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        n = self._n_spatial
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError("ConvTranspose does not support string padding")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.padding = _tuple(padding, n, "padding")
        self.output_padding = _tuple(output_padding, n, "output_padding")
        self.dilation = _tuple(dilation, n, "dilation")
        for o, s, d in zip(self.output_padding, self.stride, self.dilation, strict=True):
            if o >= s and o >= d:
                raise ValueError("output padding must be smaller than either stride or dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        self.dtype = dtype
        self.param_dtype = param_dtype
        self.precision = precision
        fan_in = (out_channels // groups) * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        shape = (*self.kernel_size, in_channels, out_channels // groups)
        self.kernel = nnx.Param(_uniform(rngs.params(), shape, param_dtype, bound))
        self.bias = nnx.Param(_uniform(rngs.params(), (out_channels,), param_dtype, bound)) if bias else nnx.data(None)

    @property
    def weight(self) -> jax.Array:
        """torch's `weight` (in, out/groups, *kernel), read-only, as for the convolutions."""
        n = len(self.kernel_size)
        return jnp.transpose(self.kernel[...], (n, n + 1, *range(n)))

    def __call__(self, x: jax.Array, output_size: Any = None) -> jax.Array:
        n = self._n_spatial
        x, unbatched = _add_batch(x, n)
        if output_size is None:
            output_padding = self.output_padding
        else:
            output_padding = _conv_transpose_output_padding(
                tuple(x.shape[2:]), output_size, self.stride, self.padding, self.kernel_size, self.dilation
            )
        x, kernel, bias = _promote(self.dtype, x, self.kernel[...], _value(self.bias))
        g = self.groups
        kernel = kernel[(slice(None, None, -1),) * n]
        kernel = kernel.reshape(*self.kernel_size, g, self.in_channels // g, self.out_channels // g)
        kernel = jnp.swapaxes(kernel, n, n + 1).reshape(*self.kernel_size, self.in_channels // g, self.out_channels)
        pairs = []
        for k, p, o, d in zip(self.kernel_size, self.padding, output_padding, self.dilation, strict=True):
            pairs.append((d * (k - 1) - p, d * (k - 1) - p + o))
        y = jax.lax.conv_general_dilated(
            x,
            kernel,
            window_strides=(1,) * n,
            padding=pairs,
            lhs_dilation=self.stride,
            rhs_dilation=self.dilation,
            dimension_numbers=_conv_dimension_numbers(n),
            feature_group_count=g,
            precision=self.precision,
        )
        if bias is not None:
            y = y + bias.reshape(_channel_shape(y.ndim))
        return y[0] if unbatched else y


class ConvTranspose1d(_ConvTransposeNd):
    """torch.nn.ConvTranspose1d on (N, C, L); nnx.ConvTranspose is channels-last with different padding."""

    _n_spatial = 1


class ConvTranspose2d(_ConvTransposeNd):
    """torch.nn.ConvTranspose2d on NCHW (padding, output_padding, groups, dilation, output_size)."""

    _n_spatial = 2


class ConvTranspose3d(_ConvTransposeNd):
    """torch.nn.ConvTranspose3d on NCDHW (padding, output_padding, groups, dilation, output_size)."""

    _n_spatial = 3
