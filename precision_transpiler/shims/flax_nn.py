"""Flax NNX classes and functions with torch's signatures and torch's exact semantics.

Why this module exists: a torch model converted to Flax NNX keeps its torch layouts (NCHW images,
NCL sequences, sequence-first attention) and its torch defaults, but the plain Flax/JAX API differs
silently in exactly those places (docs/background.md#framework-defaults-that-differ): Flax convolutions are NHWC
with 'SAME' padding, JAX's SAME padding and pooling strides differ from torch's, Flax BatchNorm's
momentum is the decay of the old statistics and its running variance is biased, Flax attention masks
use the opposite polarity, `jax.nn.gelu` is the tanh approximation, ... Layers with identical
semantics are mapped to nnx directly by the converter (nnx.Linear, nnx.Embed, nnx.LayerNorm with
`epsilon`); everything else is mapped to the definitions below.

Rules this source keeps (tests/test_flax_shims.py guards them), because the converter copies the
definitions a converted file needs into that file:

- It imports exactly `SHIM_IMPORTS`; converted code never imports torch, neither do the shims.
- Every top-level definition is copyable alone, together with the top-level names it references
  (transitively). Module-level state is limited to constants and helper functions.

Conventions:

- Inputs and outputs use torch layouts (channels at axis 1). Unbatched inputs are accepted where
  torch accepts them.
- Parameters use Flax names and layouts: `kernel` (spatial..., in/groups, out), `bias`, `scale`,
  BatchNorm statistics `mean`/`var`/`num_batches_tracked` (`nnx.BatchStat`). MultiheadAttention
  keeps torch's names (`in_proj_weight` (3E, E), `in_proj_bias`, `out_proj` an `nnx.Linear`).
  `precision_transpiler.weights.load_torch_state_dict` maps a torch `state_dict` onto them.
- `dtype` / `param_dtype` have Flax's meaning: `dtype` is the compute/output dtype (None: the
  promotion of inputs and parameters), `param_dtype` the storage dtype (torch's `dtype=` argument).
  Normalisation statistics and pooling sums are computed in at least float32.
- Train/eval: modules start in training mode like torch; `nnx.Module.eval()` / `.train()` toggle
  `use_running_average` (BatchNorm) and `deterministic` (MultiheadAttention), the attribute names
  nnx's own BatchNorm and Dropout use. Dropout in training mode needs `rngs` (a 'dropout' stream).
- Activation and other parameter-free torch modules (ReLU, GELU, Flatten, Dropout, ...) live in
  `flax_modules`; `Identity` is here for the containers.
- On GPU/TPU, JAX's default float32 matmul/convolution precision may use TF32/bf16 passes; pass
  `precision=` to the layers or set `jax_default_matmul_precision` when comparing against torch.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

# The import block copied definitions need (the converter emits it once per converted file).
SHIM_IMPORTS = (
    "import math\n"
    "from typing import Any\n"
    "\n"
    "import jax\n"
    "import jax.numpy as jnp\n"
    "import numpy as np\n"
    "from flax import nnx\n"
)

_PADDING_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}

# ----------------------------------------------------------------------------------------------------
# helpers


def _tuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    """torch's `_single`/`_pair`/`_triple`: an int is repeated n times, a sequence must have n entries."""
    if isinstance(value, int | np.integer):
        return (int(value),) * n
    out = tuple(int(v) for v in value)
    if len(out) == 1 and n > 1:
        return out * n
    if len(out) != n:
        raise ValueError(f"{name} must be an int or a sequence of {n} ints, got {value!r}")
    return out


def _promote(dtype: Any, *arrays: Any) -> tuple[Any, ...]:
    """Flax's dtype rule: cast inputs and parameters to `dtype`, or to their common type when None."""
    target = jnp.result_type(*[a for a in arrays if a is not None]) if dtype is None else dtype
    return tuple(None if a is None else jnp.asarray(a, target) for a in arrays)


def _stats_dtype(dtype: Any) -> Any:
    """Statistics and sums in at least float32, as torch's CPU kernels accumulate (bf16 in, fp32 inside)."""
    return jnp.promote_types(dtype, jnp.float32)


def _uniform(key: jax.Array, shape: tuple[int, ...], dtype: Any, bound: float) -> jax.Array:
    """U(-bound, bound): torch's default init of conv weights and biases (kaiming_uniform with a=sqrt(5))."""
    return jax.random.uniform(key, shape, dtype, -bound, bound)


def _value(variable: Any) -> Any:
    """The array held by an optional nnx.Variable (None stays None)."""
    return None if variable is None else variable[...]


def _rng_key(rngs: Any) -> jax.Array:
    """A PRNG key from an nnx.Rngs ('dropout' stream), an nnx.RngStream or a key array."""
    if rngs is None:
        raise ValueError("dropout in training mode needs `rngs` (an nnx.Rngs with a 'dropout' stream, or a key)")
    if isinstance(rngs, nnx.Rngs):
        return rngs["dropout"]()
    if isinstance(rngs, nnx.RngStream):
        return rngs()
    return rngs


def _dropout_apply(x: jax.Array, p: float, key: jax.Array) -> jax.Array:
    """Zero each element with probability p and scale the rest by 1/(1-p) (torch's inverted dropout)."""
    if p >= 1.0:
        return jnp.zeros_like(x)
    keep = 1.0 - p
    mask = jax.random.bernoulli(key, keep, x.shape)
    return jnp.where(mask, x / jnp.asarray(keep, x.dtype), jnp.zeros_like(x))


def _add_batch(x: jax.Array, n_spatial: int) -> tuple[jax.Array, bool]:
    """torch accepts unbatched (C, *spatial) inputs for conv and pooling layers: add the batch axis."""
    if x.ndim == n_spatial + 1:
        return x[None], True
    if x.ndim != n_spatial + 2:
        raise ValueError(f"expected a {n_spatial + 1}D (unbatched) or {n_spatial + 2}D input, got shape {x.shape}")
    return x, False


def _channel_shape(ndim: int) -> tuple[int, ...]:
    """Broadcast shape of a per-channel vector against an (N, C, *spatial) array."""
    return (1, -1, *([1] * (ndim - 2)))


# ----------------------------------------------------------------------------------------------------
# convolutions


def _conv_dimension_numbers(n: int) -> tuple[str, str, str]:
    """lax dimension numbers for torch's channels-first input and Flax's spatial-first kernel."""
    spatial = "DHW"[3 - n :]
    return ("NC" + spatial, spatial + "IO", "NC" + spatial)


def _conv_padding_pairs(padding: Any, kernel_size: tuple[int, ...], dilation: tuple[int, ...]) -> list[tuple[int, int]]:
    """Explicit (lo, hi) pairs for torch's padding argument.

    'same' puts the odd pixel on the high side, as torch's `_convolution_mode` does; explicit pairs
    keep JAX's own 'SAME' rule (computed from the strided output size) out of it.
    """
    if padding == "valid":
        return [(0, 0)] * len(kernel_size)
    if padding == "same":
        pairs = []
        for k, d in zip(kernel_size, dilation, strict=True):
            total = d * (k - 1)
            pairs.append((total // 2, total - total // 2))
        return pairs
    return [(p, p) for p in padding]


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


class _ConvNd(nnx.Module):
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
        *,
        dtype: Any = None,
        param_dtype: Any = jnp.float32,
        precision: Any = None,
        rngs: nnx.Rngs,
    ) -> None:
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


class _ConvTransposeNd(nnx.Module):
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
        *,
        dtype: Any = None,
        param_dtype: Any = jnp.float32,
        precision: Any = None,
        rngs: nnx.Rngs,
    ) -> None:
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


# ----------------------------------------------------------------------------------------------------
# normalisation


def _batch_norm_train_stats(x: jax.Array) -> tuple[jax.Array, jax.Array, int]:
    """Per-channel batch mean and biased variance (two-pass, float32 or wider) and the count per channel."""
    axes = (0, *range(2, x.ndim))
    xs = x.astype(_stats_dtype(x.dtype))
    mean = xs.mean(axes)
    var = jnp.square(xs - mean.reshape(_channel_shape(x.ndim))).mean(axes)
    count = x.size // x.shape[1]
    if count <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {tuple(x.shape)}")
    return mean, var, count


def _batch_norm_apply(
    x: jax.Array, mean: jax.Array, var: jax.Array, scale: Any, bias: Any, eps: float, dtype: Any
) -> jax.Array:
    """(x - mean) / sqrt(var + eps) * scale + bias, computed in float32 or wider, cast to the output dtype."""
    out_dtype = dtype if dtype is not None else jnp.result_type(*[a for a in (x, scale, bias) if a is not None])
    sdt = _stats_dtype(x.dtype)
    shape = _channel_shape(x.ndim)
    y = (x.astype(sdt) - mean.astype(sdt).reshape(shape)) * jax.lax.rsqrt(var.astype(sdt).reshape(shape) + eps)
    if scale is not None:
        y = y * scale.astype(sdt).reshape(shape)
    if bias is not None:
        y = y + bias.astype(sdt).reshape(shape)
    return y.astype(out_dtype)


def _running_update(stat: Any, value: jax.Array, factor: Any) -> None:
    """torch's running-statistic update: (1 - momentum) * running + momentum * batch, in place."""
    old = stat[...]
    stat[...] = ((1.0 - factor) * old.astype(value.dtype) + factor * value).astype(old.dtype)


class _BatchNorm(nnx.Module):
    """Shared body of BatchNorm1d/2d/3d with torch's statistics.

    Differences from nnx.BatchNorm reproduced here: feature axis 1; `momentum` is the weight of the
    new batch (nnx: decay of the old statistics, 0.99); the running variance is updated with the
    unbiased batch variance while normalisation uses the biased one; `momentum=None` is a cumulative
    average over `num_batches_tracked`; `track_running_stats=False` always uses batch statistics.
    `use_running_average` is the attribute `nnx.Module.eval()`/`.train()` toggle (starts False, like
    torch's training mode).
    """

    _input_ndims: tuple[int, ...] = (4,)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        use_running_average: bool = False,
        dtype: Any = None,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        self.use_running_average = use_running_average
        self.dtype = dtype
        self.param_dtype = param_dtype
        if affine:
            self.scale = nnx.Param(jnp.ones((num_features,), param_dtype))
            self.bias = nnx.Param(jnp.zeros((num_features,), param_dtype))
        else:
            self.scale = nnx.data(None)
            self.bias = nnx.data(None)
        if track_running_stats:
            self.mean = nnx.BatchStat(jnp.zeros((num_features,), param_dtype))
            self.var = nnx.BatchStat(jnp.ones((num_features,), param_dtype))
            self.num_batches_tracked = nnx.BatchStat(jnp.zeros((), jnp.int32))
        else:
            self.mean = nnx.data(None)
            self.var = nnx.data(None)
            self.num_batches_tracked = nnx.data(None)

    @property
    def weight(self) -> Any:
        """torch's names for `scale`, `mean` and `var`, for subclasses that read them."""
        return self.scale

    @property
    def running_mean(self) -> Any:
        return self.mean

    @property
    def running_var(self) -> Any:
        return self.var

    def __call__(self, x: jax.Array, *, use_running_average: bool | None = None) -> jax.Array:
        eval_mode = self.use_running_average if use_running_average is None else use_running_average
        if x.ndim not in self._input_ndims:
            raise ValueError(f"{type(self).__name__}: expected {self._input_ndims} dims input (got {x.ndim}D input)")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels, got shape {x.shape}")
        if eval_mode and self.track_running_stats:
            mean, var = self.mean[...], self.var[...]
        else:
            mean, var, count = _batch_norm_train_stats(x)
            if not eval_mode and self.track_running_stats:
                tracked = self.num_batches_tracked[...] + 1
                self.num_batches_tracked[...] = tracked
                factor = self.momentum if self.momentum is not None else 1.0 / tracked.astype(mean.dtype)
                _running_update(self.mean, mean, factor)
                _running_update(self.var, var * (count / (count - 1)), factor)
        return _batch_norm_apply(x, mean, var, _value(self.scale), _value(self.bias), self.eps, self.dtype)


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d on (N, C) or (N, C, L) inputs, torch momentum/variance semantics."""

    _input_ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d on NCHW inputs, torch momentum/variance semantics."""

    _input_ndims = (4,)


class BatchNorm3d(_BatchNorm):
    """torch.nn.BatchNorm3d on NCDHW inputs, torch momentum/variance semantics."""

    _input_ndims = (5,)


def batch_norm(
    input: jax.Array,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> jax.Array:
    """torch.nn.functional.batch_norm (feature axis 1).

    Inference (`training=False`) normalises with the running statistics. Training normalises with
    the biased batch statistics; torch updates `running_mean`/`running_var` in place, which JAX arrays
    cannot do: when they are `nnx.Variable`s (as converted buffers are) they are updated in place
    with torch's rule, plain arrays are left unchanged.
    """
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm with training=False needs running_mean and running_var")
        return _batch_norm_apply(input, _value_of(running_mean), _value_of(running_var), weight, bias, eps, None)
    mean, var, count = _batch_norm_train_stats(input)
    if isinstance(running_mean, nnx.Variable):
        _running_update(running_mean, mean, momentum)
    if isinstance(running_var, nnx.Variable):
        _running_update(running_var, var * (count / (count - 1)), momentum)
    return _batch_norm_apply(input, mean, var, _value_of(weight), _value_of(bias), eps, None)


def _value_of(x: Any) -> Any:
    """An array from an array or an nnx.Variable (functional forms accept both)."""
    return x[...] if isinstance(x, nnx.Variable) else x


def _group_norm(x: jax.Array, num_groups: int, scale: Any, bias: Any, eps: float, dtype: Any) -> jax.Array:
    """Normalise (N, C, *) over each group of C/num_groups channels and all spatial positions."""
    n, c = x.shape[0], x.shape[1]
    if c % num_groups:
        raise ValueError(f"Expected number of channels in input to be divisible by num_groups, got {x.shape}")
    out_dtype = dtype if dtype is not None else jnp.result_type(*[a for a in (x, scale, bias) if a is not None])
    sdt = _stats_dtype(x.dtype)
    xg = x.astype(sdt).reshape(n, num_groups, -1)
    mean = xg.mean(-1, keepdims=True)
    var = jnp.square(xg - mean).mean(-1, keepdims=True)
    y = ((xg - mean) * jax.lax.rsqrt(var + eps)).reshape(x.shape)
    shape = _channel_shape(x.ndim)
    if scale is not None:
        y = y * scale.astype(sdt).reshape(shape)
    if bias is not None:
        y = y + bias.astype(sdt).reshape(shape)
    return y.astype(out_dtype)


class GroupNorm(nnx.Module):
    """torch.nn.GroupNorm on (N, C, *) inputs: groups are contiguous channel blocks of axis 1.

    nnx.GroupNorm normalises the last axis (channels-last); this keeps torch's layout. Params
    `scale`/`bias` of shape (C,).
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        *,
        dtype: Any = None,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        self.dtype = dtype
        self.param_dtype = param_dtype
        if affine:
            self.scale = nnx.Param(jnp.ones((num_channels,), param_dtype))
            self.bias = nnx.Param(jnp.zeros((num_channels,), param_dtype))
        else:
            self.scale = nnx.data(None)
            self.bias = nnx.data(None)

    def __call__(self, x: jax.Array) -> jax.Array:
        return _group_norm(x, self.num_groups, _value(self.scale), _value(self.bias), self.eps, self.dtype)

    @property
    def weight(self) -> Any:
        """torch's name for `scale` (subclasses such as torchvision's LayerNorm2d read it)."""
        return self.scale


def group_norm(input: jax.Array, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> jax.Array:
    """torch.nn.functional.group_norm on (N, C, *) inputs (channel groups on axis 1)."""
    return _group_norm(input, num_groups, _value_of(weight), _value_of(bias), eps, None)


def _layer_norm(x: jax.Array, n_dims: int, scale: Any, bias: Any, eps: float, dtype: Any) -> jax.Array:
    """Normalise over the last n_dims axes (biased variance, eps inside the square root)."""
    out_dtype = dtype if dtype is not None else jnp.result_type(*[a for a in (x, scale, bias) if a is not None])
    sdt = _stats_dtype(x.dtype)
    axes = tuple(range(x.ndim - n_dims, x.ndim))
    xs = x.astype(sdt)
    mean = xs.mean(axes, keepdims=True)
    var = jnp.square(xs - mean).mean(axes, keepdims=True)
    y = (xs - mean) * jax.lax.rsqrt(var + eps)
    if scale is not None:
        y = y * scale.astype(sdt)
    if bias is not None:
        y = y + bias.astype(sdt)
    return y.astype(out_dtype)


class LayerNorm(nnx.Module):
    """torch.nn.LayerNorm, also for a `normalized_shape` of several trailing dims.

    nnx.LayerNorm covers the one-dim case (with `epsilon=1e-5`; its default is 1e-6); this shim
    normalises jointly over all trailing dims of `normalized_shape`. Params `scale`/`bias` have
    shape `normalized_shape`.
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        *,
        dtype: Any = None,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.dtype = dtype
        self.param_dtype = param_dtype
        self.scale = nnx.Param(jnp.ones(shape, param_dtype)) if elementwise_affine else nnx.data(None)
        self.bias = nnx.Param(jnp.zeros(shape, param_dtype)) if elementwise_affine and bias else nnx.data(None)

    def __call__(self, x: jax.Array) -> jax.Array:
        if tuple(x.shape[x.ndim - len(self.normalized_shape) :]) != self.normalized_shape:
            raise ValueError(f"LayerNorm{self.normalized_shape}: input shape {x.shape} does not end with it")
        n = len(self.normalized_shape)
        return _layer_norm(x, n, _value(self.scale), _value(self.bias), self.eps, self.dtype)

    @property
    def weight(self) -> Any:
        """torch's name for `scale` (subclasses such as torchvision's LayerNorm2d read it)."""
        return self.scale


def layer_norm(
    input: jax.Array, normalized_shape: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> jax.Array:
    """torch.nn.functional.layer_norm: joint statistics over the trailing `normalized_shape` dims."""
    n = 1 if isinstance(normalized_shape, int) else len(tuple(normalized_shape))
    return _layer_norm(input, n, _value_of(weight), _value_of(bias), eps, None)


# ----------------------------------------------------------------------------------------------------
# pooling


def _pool_out_size(size: int, eff_kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """torch's pooling output size, including the ceil_mode rule that the last window starts inside."""
    span = size + 2 * pad - eff_kernel
    if span < 0:
        raise ValueError(f"pooling output size is too small (input {size}, padding {pad}, kernel {eff_kernel})")
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + pad:
            out -= 1
    else:
        out = span // stride + 1
    return out


def _pool_args(
    n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Normalise torch's pooling arguments; stride None (or empty) means stride = kernel_size."""
    k = _tuple(kernel_size, n, "kernel_size")
    s = (
        k
        if stride is None or (not isinstance(stride, int) and len(tuple(stride)) == 0)
        else _tuple(stride, n, "stride")
    )
    return k, s, _tuple(padding, n, "padding"), _tuple(dilation, n, "dilation")


def _max_pool_nd(
    x: jax.Array, n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool
) -> jax.Array:
    """torch max pooling: implicit -inf padding, dilation, ceil_mode, stride defaulting to the kernel."""
    x, unbatched = _add_batch(x, n)
    k, s, p, d = _pool_args(n, kernel_size, stride, padding, dilation)
    pairs = []
    for size, kk, ss, pp, dd in zip(x.shape[2:], k, s, p, d, strict=True):
        eff = dd * (kk - 1) + 1
        if pp > eff // 2:
            raise ValueError("pad should be at most half of effective kernel size")
        out = _pool_out_size(size, eff, ss, pp, ceil_mode)
        pairs.append((pp, max((out - 1) * ss + eff - size - pp, 0)))
    if jnp.issubdtype(x.dtype, jnp.floating):
        init = jnp.array(-jnp.inf, x.dtype)
    else:
        init = jnp.array(jnp.iinfo(x.dtype).min, x.dtype)
    y = jax.lax.reduce_window(
        x,
        init,
        jax.lax.max,
        window_dimensions=(1, 1, *k),
        window_strides=(1, 1, *s),
        padding=[(0, 0), (0, 0), *pairs],
        window_dilation=(1, 1, *d),
    )
    return y[0] if unbatched else y


def _avg_pool_divisor(size: int, k: int, s: int, p: int, out: int, count_include_pad: bool) -> np.ndarray:
    """Per-output window sizes along one axis, as torch's avg_pool computes its divisor."""
    counts = []
    for o in range(out):
        start = o * s - p
        end = min(start + k, size + p)
        pool = end - start
        start, end = max(start, 0), min(end, size)
        counts.append(pool if count_include_pad else end - start)
    return np.asarray(counts, np.float64)


def _avg_pool_nd(
    x: jax.Array,
    n: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> jax.Array:
    """torch average pooling: zero padding, ceil_mode windows, count_include_pad and divisor_override."""
    x, unbatched = _add_batch(x, n)
    k, s, p, _ = _pool_args(n, kernel_size, stride, padding, 1)
    pairs = []
    divisor = np.ones((), np.float64)
    for size, kk, ss, pp in zip(x.shape[2:], k, s, p, strict=True):
        if pp > kk // 2:
            raise ValueError("pad should be at most half of kernel size")
        out = _pool_out_size(size, kk, ss, pp, ceil_mode)
        pairs.append((pp, max((out - 1) * ss + kk - size - pp, 0)))
        divisor = np.multiply.outer(divisor, _avg_pool_divisor(size, kk, ss, pp, out, count_include_pad))
    sdt = _stats_dtype(x.dtype)
    total = jax.lax.reduce_window(
        x.astype(sdt),
        jnp.array(0, sdt),
        jax.lax.add,
        window_dimensions=(1, 1, *k),
        window_strides=(1, 1, *s),
        padding=[(0, 0), (0, 0), *pairs],
    )
    y = total / jnp.asarray(divisor_override if divisor_override else divisor, sdt)
    y = y.astype(x.dtype)
    return y[0] if unbatched else y


def _adaptive_bins(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive pooling bins: start = floor(i*in/out), end = ceil((i+1)*in/out)."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_pool_axis(x: jax.Array, axis: int, out: int, op: str) -> jax.Array:
    """Adaptive max/mean along one axis; rectangle bins make 2D/3D adaptive pooling separable."""
    size = x.shape[axis]
    if size % out == 0:
        xr = x.reshape(*x.shape[:axis], out, size // out, *x.shape[axis + 1 :])
        return xr.max(axis + 1) if op == "max" else xr.mean(axis + 1)
    starts, ends = _adaptive_bins(size, out)
    width = int((ends - starts).max())
    positions = starts[:, None] + np.arange(width)[None, :]
    index = np.minimum(positions, ends[:, None] - 1)
    gathered = jnp.take(x, index.reshape(-1), axis=axis)
    gathered = gathered.reshape(*x.shape[:axis], out, width, *x.shape[axis + 1 :])
    if op == "max":  # indices are clamped into the bin: repeats cannot change a max
        return gathered.max(axis + 1)
    trailing = (1,) * (x.ndim - axis - 1)
    valid = (positions < ends[:, None]).reshape(out, width, *trailing)
    total = jnp.where(valid, gathered, jnp.zeros((), x.dtype)).sum(axis + 1)
    return total / jnp.asarray((ends - starts).reshape(out, *trailing), x.dtype)


def _adaptive_pool_nd(x: jax.Array, n: int, output_size: Any, op: str) -> jax.Array:
    """torch adaptive pooling over the last n axes (output_size int, tuple, None entries keep the size)."""
    x, unbatched = _add_batch(x, n)
    sizes = (output_size,) * n if output_size is None or isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != n:
        raise ValueError(f"output_size must have {n} elements, got {output_size!r}")
    y = x if op == "max" else x.astype(_stats_dtype(x.dtype))
    for i, out in enumerate(sizes):
        axis = 2 + i
        y = _adaptive_pool_axis(y, axis, x.shape[axis] if out is None else int(out), op)
    y = y.astype(x.dtype)
    return y[0] if unbatched else y


def _no_indices(return_indices: bool) -> None:
    """Pooling indices (for max_unpool) are not reproduced."""
    if return_indices:
        raise NotImplementedError("return_indices=True is not supported by the Flax shims")


def max_pool1d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> jax.Array:
    """torch.nn.functional.max_pool1d on (N, C, L): stride defaults to the kernel (Flax: 1)."""
    _no_indices(return_indices)
    return _max_pool_nd(input, 1, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> jax.Array:
    """torch.nn.functional.max_pool2d on NCHW: -inf padding, dilation, ceil_mode, stride = kernel."""
    _no_indices(return_indices)
    return _max_pool_nd(input, 2, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> jax.Array:
    """torch.nn.functional.max_pool3d on NCDHW."""
    _no_indices(return_indices)
    return _max_pool_nd(input, 3, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool1d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> jax.Array:
    """torch.nn.functional.avg_pool1d on (N, C, L): torch's divisor rules (Flax's avg_pool differs)."""
    return _avg_pool_nd(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> jax.Array:
    """torch.nn.functional.avg_pool2d on NCHW: ceil_mode, count_include_pad, divisor_override."""
    return _avg_pool_nd(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def avg_pool3d(
    input: jax.Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> jax.Array:
    """torch.nn.functional.avg_pool3d on NCDHW."""
    return _avg_pool_nd(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool1d(input: jax.Array, output_size: Any) -> jax.Array:
    """torch.nn.functional.adaptive_avg_pool1d: torch's overlapping bins when sizes do not divide."""
    return _adaptive_pool_nd(input, 1, output_size, "avg")


def adaptive_avg_pool2d(input: jax.Array, output_size: Any) -> jax.Array:
    """torch.nn.functional.adaptive_avg_pool2d on NCHW (JAX has no adaptive pooling)."""
    return _adaptive_pool_nd(input, 2, output_size, "avg")


def adaptive_avg_pool3d(input: jax.Array, output_size: Any) -> jax.Array:
    """torch.nn.functional.adaptive_avg_pool3d on NCDHW."""
    return _adaptive_pool_nd(input, 3, output_size, "avg")


def adaptive_max_pool1d(input: jax.Array, output_size: Any, return_indices: bool = False) -> jax.Array:
    """torch.nn.functional.adaptive_max_pool1d on (N, C, L)."""
    _no_indices(return_indices)
    return _adaptive_pool_nd(input, 1, output_size, "max")


def adaptive_max_pool2d(input: jax.Array, output_size: Any, return_indices: bool = False) -> jax.Array:
    """torch.nn.functional.adaptive_max_pool2d on NCHW (JAX has no adaptive pooling)."""
    _no_indices(return_indices)
    return _adaptive_pool_nd(input, 2, output_size, "max")


class _MaxPoolNd(nnx.Module):
    """Shared body of MaxPool1d/2d/3d (torch argument order; no parameters)."""

    _n_spatial = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        *,
        rngs: Any = None,
    ) -> None:
        _no_indices(return_indices)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.ceil_mode = ceil_mode

    def __call__(self, x: jax.Array) -> jax.Array:
        return _max_pool_nd(
            x, self._n_spatial, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode
        )


class MaxPool1d(_MaxPoolNd):
    """torch.nn.MaxPool1d on (N, C, L); nnx.max_pool is channels-last with stride 1 by default."""

    _n_spatial = 1


class MaxPool2d(_MaxPoolNd):
    """torch.nn.MaxPool2d on NCHW (stride = kernel by default, -inf padding, dilation, ceil_mode)."""

    _n_spatial = 2


class MaxPool3d(_MaxPoolNd):
    """torch.nn.MaxPool3d on NCDHW."""

    _n_spatial = 3


class _AvgPoolNd(nnx.Module):
    """Shared body of AvgPool1d/2d/3d (torch argument order; no parameters)."""

    _n_spatial = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
        *,
        rngs: Any = None,
    ) -> None:
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def __call__(self, x: jax.Array) -> jax.Array:
        return _avg_pool_nd(
            x,
            self._n_spatial,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AvgPool1d(_AvgPoolNd):
    """torch.nn.AvgPool1d on (N, C, L) with torch's divisor (count_include_pad, ceil_mode)."""

    _n_spatial = 1


class AvgPool2d(_AvgPoolNd):
    """torch.nn.AvgPool2d on NCHW with torch's divisor (count_include_pad, ceil_mode, divisor_override)."""

    _n_spatial = 2


class AvgPool3d(_AvgPoolNd):
    """torch.nn.AvgPool3d on NCDHW."""

    _n_spatial = 3


class _AdaptivePoolNd(nnx.Module):
    """Shared body of the adaptive pools: torch's bins, start=floor(i*in/out), end=ceil((i+1)*in/out)."""

    _n_spatial = 2
    _op = "avg"

    def __init__(self, output_size: Any, return_indices: bool = False, *, rngs: Any = None) -> None:
        _no_indices(return_indices)
        self.output_size = output_size

    def __call__(self, x: jax.Array) -> jax.Array:
        return _adaptive_pool_nd(x, self._n_spatial, self.output_size, self._op)


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool1d on (N, C, L)."""

    _n_spatial = 1
    _op = "avg"


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool2d on NCHW (int, tuple, None entries keep the input size)."""

    _n_spatial = 2
    _op = "avg"


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool3d on NCDHW."""

    _n_spatial = 3
    _op = "avg"


class AdaptiveMaxPool1d(_AdaptivePoolNd):
    """torch.nn.AdaptiveMaxPool1d on (N, C, L)."""

    _n_spatial = 1
    _op = "max"


class AdaptiveMaxPool2d(_AdaptivePoolNd):
    """torch.nn.AdaptiveMaxPool2d on NCHW."""

    _n_spatial = 2
    _op = "max"


# ----------------------------------------------------------------------------------------------------
# attention


def _attention_mask_bias(mask: Any, dtype: Any) -> Any:
    """torch MultiheadAttention's `_canonical_mask`: bool True = blocked becomes -inf; float masks are added."""
    if mask is None:
        return None
    mask = jnp.asarray(mask)
    if mask.dtype == jnp.bool_:
        return jnp.where(mask, jnp.asarray(-jnp.inf, dtype), jnp.asarray(0, dtype))
    if not jnp.issubdtype(mask.dtype, jnp.floating):
        raise TypeError("only bool and floating types of masks are supported")
    return mask.astype(dtype)


def scaled_dot_product_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    rngs: Any = None,
) -> jax.Array:
    """torch.nn.functional.scaled_dot_product_attention on (..., heads, L, E) inputs.

    torch's polarity for THIS function: a bool mask is True where attention is allowed (the
    opposite of nn.MultiheadAttention's masks); a float mask is added to the scores. `is_causal`
    is a top-left aligned lower-triangular mask. Rows whose scores are all masked give 0 (torch's
    CPU kernels and safe softmax), not NaN. `enable_gqa` repeats key/value heads. Dropout on the
    attention weights needs `rngs` (torch draws from its global generator).
    """
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
    seq_q, seq_k = query.shape[-2], key.shape[-2]
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa:
        key = jnp.repeat(key, query.shape[-3] // key.shape[-3], axis=-3)
        value = jnp.repeat(value, query.shape[-3] // value.shape[-3], axis=-3)
    out_dtype = jnp.result_type(query, key, value)
    sdt = _stats_dtype(out_dtype)
    scores = jnp.matmul(query, jnp.swapaxes(key, -2, -1)).astype(sdt) * factor
    neg_inf = jnp.asarray(-jnp.inf, sdt)
    if is_causal:
        scores = jnp.where(jnp.tril(jnp.ones((seq_q, seq_k), jnp.bool_)), scores, neg_inf)
    if attn_mask is not None:
        attn_mask = jnp.asarray(attn_mask)
        if attn_mask.dtype == jnp.bool_:
            scores = jnp.where(attn_mask, scores, neg_inf)
        else:
            scores = scores + attn_mask.astype(sdt)
    weights = jax.nn.softmax(scores, axis=-1)
    weights = jnp.where(jnp.all(scores == neg_inf, axis=-1, keepdims=True), jnp.zeros((), sdt), weights)
    if dropout_p > 0.0:
        weights = _dropout_apply(weights, dropout_p, _rng_key(rngs))
    return jnp.matmul(weights.astype(out_dtype), value)


def _xavier_uniform(key: jax.Array, shape: tuple[int, int], dtype: Any) -> jax.Array:
    """torch.nn.init.xavier_uniform_ for a 2D (out, in) weight."""
    return _uniform(key, shape, dtype, math.sqrt(6.0 / (shape[0] + shape[1])))


class MultiheadAttention(nnx.Module):
    """torch.nn.MultiheadAttention: same arguments, layouts, masks, outputs and parameter names.

    What nnx.MultiHeadAttention does differently: batch-first only, mask True = attend, per-head
    (in, heads, head_dim) kernels, no returned weights. Here:

    - inputs are (L, N, E) unless `batch_first=True`, or unbatched (L, E);
    - `key_padding_mask` (N, S) and `attn_mask` (L, S) or (N*num_heads, L, S): bool True = blocked,
      float masks are added; `is_causal` is torch's hint (needs `attn_mask`; used as a causal mask
      only when there is no key_padding_mask and `need_weights=False`, as torch does);
    - returns `(output, weights)`; weights averaged over heads unless `average_attn_weights=False`,
      None when `need_weights=False`; fully masked rows give NaN weights (need_weights) or 0 output
      (SDPA path), as in torch;
    - parameters keep torch's names and layouts: `in_proj_weight` (3E, E) and `in_proj_bias` (3E,),
      or `q_proj_weight`/`k_proj_weight`/`v_proj_weight` when kdim/vdim differ from E; `bias_k`/
      `bias_v` (1, 1, E); `out_proj` is an nnx.Linear (kernel (E, E) = torch weight transposed);
    - dropout on the attention weights when not `deterministic` (eval() sets it), drawn from the
      'dropout' stream of `rngs`.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        *,
        deterministic: bool = False,
        dtype: Any = None,
        param_dtype: Any = jnp.float32,
        precision: Any = None,
        rngs: nnx.Rngs,
    ) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got {embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        e = embed_dim
        self.embed_dim = e
        self.kdim = kdim if kdim is not None else e
        self.vdim = vdim if vdim is not None else e
        self.qkv_same_embed_dim = self.kdim == e and self.vdim == e
        self.num_heads = num_heads
        self.head_dim = e // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.add_zero_attn = add_zero_attn
        self.deterministic = deterministic
        self.dtype = dtype
        self.param_dtype = param_dtype
        self.precision = precision
        if self.qkv_same_embed_dim:
            self.in_proj_weight = nnx.Param(_xavier_uniform(rngs.params(), (3 * e, e), param_dtype))
            self.q_proj_weight = nnx.data(None)
            self.k_proj_weight = nnx.data(None)
            self.v_proj_weight = nnx.data(None)
        else:
            self.in_proj_weight = nnx.data(None)
            self.q_proj_weight = nnx.Param(_xavier_uniform(rngs.params(), (e, e), param_dtype))
            self.k_proj_weight = nnx.Param(_xavier_uniform(rngs.params(), (e, self.kdim), param_dtype))
            self.v_proj_weight = nnx.Param(_xavier_uniform(rngs.params(), (e, self.vdim), param_dtype))
        self.in_proj_bias = nnx.Param(jnp.zeros((3 * e,), param_dtype)) if bias else nnx.data(None)
        bound = 1.0 / math.sqrt(e)
        self.out_proj = nnx.Linear(
            e,
            e,
            use_bias=bias,
            dtype=dtype,
            param_dtype=param_dtype,
            precision=precision,
            kernel_init=lambda key, shape, dtype=param_dtype: _uniform(key, shape, dtype, bound),
            rngs=rngs,
        )
        if add_bias_kv:
            std = math.sqrt(1.0 / e)
            self.bias_k = nnx.Param(std * jax.random.normal(rngs.params(), (1, 1, e), param_dtype))
            self.bias_v = nnx.Param(std * jax.random.normal(rngs.params(), (1, 1, e), param_dtype))
        else:
            self.bias_k = nnx.data(None)
            self.bias_v = nnx.data(None)
        self.rngs = rngs["dropout"].fork() if dropout > 0.0 else nnx.data(None)

    def _projections(self) -> tuple[Any, Any, Any, Any, Any, Any]:
        """(wq, wk, wv, bq, bk, bv) in torch's (out, in) layout."""
        e = self.embed_dim
        if self.qkv_same_embed_dim:
            w = self.in_proj_weight[...]
            wq, wk, wv = w[:e], w[e : 2 * e], w[2 * e :]
        else:
            wq, wk, wv = self.q_proj_weight[...], self.k_proj_weight[...], self.v_proj_weight[...]
        if self.in_proj_bias is None:
            return wq, wk, wv, None, None, None
        b = self.in_proj_bias[...]
        return wq, wk, wv, b[:e], b[e : 2 * e], b[2 * e :]

    def __call__(
        self,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        *,
        deterministic: bool | None = None,
        rngs: Any = None,
    ) -> tuple[jax.Array, jax.Array | None]:
        det = self.deterministic if deterministic is None else deterministic
        batched = query.ndim == 3
        if not batched:
            query, key, value = query[None], key[None], value[None]
            if key_padding_mask is not None:
                key_padding_mask = jnp.asarray(key_padding_mask)[None]
        elif not self.batch_first:
            query, key, value = (jnp.swapaxes(t, 0, 1) for t in (query, key, value))
        n, seq_q, e = query.shape
        heads, head_dim = self.num_heads, self.head_dim
        wq, wk, wv, bq, bk, bv = self._projections()
        query, key, value, wq, wk, wv, bq, bk, bv = _promote(self.dtype, query, key, value, wq, wk, wv, bq, bk, bv)
        cdt = query.dtype

        kpm = _attention_mask_bias(key_padding_mask, cdt)
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal is a hint and needs attn_mask (as in torch)")
        if is_causal and kpm is None and not need_weights:
            mask = None
        else:
            mask = _attention_mask_bias(attn_mask, cdt)
            is_causal = False
        if mask is not None:
            if mask.ndim == 2:
                mask = mask[None, None]
            elif mask.ndim == 3:
                mask = mask.reshape(n, heads, seq_q, mask.shape[-1])
            else:
                raise ValueError(f"attn_mask's dimension {mask.ndim} is not supported")

        q = linear(query, wq, bq, precision=self.precision)
        k = linear(key, wk, bk, precision=self.precision)
        v = linear(value, wv, bv, precision=self.precision)
        if self.bias_k is not None and self.bias_v is not None:
            k = jnp.concatenate([k, jnp.broadcast_to(self.bias_k[...].astype(cdt), (n, 1, e))], axis=1)
            v = jnp.concatenate([v, jnp.broadcast_to(self.bias_v[...].astype(cdt), (n, 1, e))], axis=1)
            mask = None if mask is None else _pad_last(mask, 1)
            kpm = None if kpm is None else _pad_last(kpm, 1)
        q = q.reshape(n, seq_q, heads, head_dim).transpose(0, 2, 1, 3)
        k = k.reshape(n, k.shape[1], heads, head_dim).transpose(0, 2, 1, 3)
        v = v.reshape(n, v.shape[1], heads, head_dim).transpose(0, 2, 1, 3)
        if self.add_zero_attn:
            k = jnp.concatenate([k, jnp.zeros((n, heads, 1, head_dim), cdt)], axis=2)
            v = jnp.concatenate([v, jnp.zeros((n, heads, 1, head_dim), cdt)], axis=2)
            mask = None if mask is None else _pad_last(mask, 1)
            kpm = None if kpm is None else _pad_last(kpm, 1)
        if kpm is not None:
            kpm = kpm[:, None, None, :]
            mask = kpm if mask is None else mask + kpm
        dropout_p = 0.0 if det else self.dropout
        key_for_dropout = _rng_key(rngs if rngs is not None else self.rngs) if dropout_p > 0.0 else None

        if need_weights:
            scores = jnp.einsum("nhld,nhsd->nhls", q * math.sqrt(1.0 / head_dim), k, precision=self.precision)
            if mask is not None:
                scores = scores + mask
            weights = jax.nn.softmax(scores.astype(_stats_dtype(cdt)), axis=-1).astype(cdt)
            if key_for_dropout is not None:
                weights = _dropout_apply(weights, dropout_p, key_for_dropout)
            out = jnp.einsum("nhls,nhsd->nhld", weights, v, precision=self.precision)
            returned: jax.Array | None = weights.mean(axis=1) if average_attn_weights else weights
        else:
            out = scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, rngs=key_for_dropout)
            returned = None
        out = self.out_proj(out.transpose(0, 2, 1, 3).reshape(n, seq_q, e))
        if not batched:
            return out[0], None if returned is None else returned[0]
        if not self.batch_first:
            out = jnp.swapaxes(out, 0, 1)
        return out, returned


def _pad_last(x: jax.Array, count: int) -> jax.Array:
    """Append `count` zeros along the last axis (torch's `pad(mask, (0, 1))` in attention)."""
    return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, count)])


# ----------------------------------------------------------------------------------------------------
# functional


def linear(input: jax.Array, weight: jax.Array, bias: Any = None, *, precision: Any = None) -> jax.Array:
    """torch.nn.functional.linear with torch's weight layout (out, in): x @ W.T + b (nnx: kernel (in, out))."""
    y = jnp.matmul(input, jnp.swapaxes(weight, -1, -2), precision=precision)
    return y if bias is None else y + bias


def embedding(
    input: jax.Array,
    weight: jax.Array,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> jax.Array:
    """torch.nn.functional.embedding: rows of `weight`; rows at `padding_idx` get no gradient, as in torch."""
    if max_norm is not None:
        raise NotImplementedError("embedding(max_norm=...) renormalises weights in place; not supported")
    out = jnp.take(weight, input, axis=0)
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        out = jnp.where((input == padding_idx)[..., None], jax.lax.stop_gradient(out), out)
    return out


def _softmax_dim(ndim: int) -> int:
    """torch's implicit softmax dim when `dim=None` (legacy): 0 for 0D/1D/3D inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: jax.Array, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> jax.Array:
    """torch.nn.functional.softmax (input cast to `dtype` first, as torch does)."""
    x = input if dtype is None else input.astype(dtype)
    return jax.nn.softmax(x, axis=_softmax_dim(x.ndim) if dim is None else dim)


def log_softmax(input: jax.Array, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> jax.Array:
    """torch.nn.functional.log_softmax (input cast to `dtype` first, as torch does)."""
    x = input if dtype is None else input.astype(dtype)
    return jax.nn.log_softmax(x, axis=_softmax_dim(x.ndim) if dim is None else dim)


def gelu(input: jax.Array, approximate: str = "none") -> jax.Array:
    """torch.nn.functional.gelu: exact erf form by default (`jax.nn.gelu` defaults to the tanh form)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return jax.nn.gelu(input, approximate=approximate == "tanh")


def dropout(
    input: jax.Array, p: float = 0.5, training: bool = True, inplace: bool = False, *, rngs: Any = None
) -> jax.Array:
    """torch.nn.functional.dropout: active when `training` (torch's default True); needs `rngs` then.

    torch draws from a global generator; JAX needs an explicit key: pass an nnx.Rngs (its 'dropout'
    stream), an nnx.RngStream or a key.
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    return _dropout_apply(input, p, _rng_key(rngs))


def flatten(input: jax.Array, start_dim: int = 0, end_dim: int = -1) -> jax.Array:
    """torch.flatten: merge dims start_dim..end_dim (inclusive); jnp.ravel flattens everything."""
    if input.ndim == 0:
        return input.reshape(1)
    start = start_dim % input.ndim
    end = end_dim % input.ndim
    if start > end:
        raise ValueError("flatten() has invalid args: start_dim cannot come after end_dim")
    merged = math.prod(input.shape[start : end + 1])
    return input.reshape(*input.shape[:start], merged, *input.shape[end + 1 :])


def unflatten(input: jax.Array, dim: int, sizes: Any) -> jax.Array:
    """torch.unflatten: split dim into `sizes` (one entry may be -1)."""
    axis = dim % input.ndim
    return input.reshape(*input.shape[:axis], *tuple(sizes), *input.shape[axis + 1 :])


def pad(input: jax.Array, pad: Any, mode: str = "constant", value: float | None = None) -> jax.Array:
    """torch.nn.functional.pad: pairs are given last dim first, (left, right, top, bottom, ...).

    jnp.pad takes one pair per dim, first dim first. Modes constant (negative pads crop, as in
    torch), reflect, replicate, circular.
    """
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"Padding length must be divisible by 2 and at most 2*ndim, got {len(pad)}")
    pairs = [(0, 0)] * input.ndim
    for i in range(len(pad) // 2):
        pairs[input.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        fill = jnp.asarray(0 if value is None else value, input.dtype)
        return jax.lax.pad(input, fill, [(lo, hi, 0) for lo, hi in pairs])
    if mode not in ("reflect", "replicate", "circular"):
        raise ValueError(f"Unsupported padding mode {mode!r}")
    if any(lo < 0 or hi < 0 for lo, hi in pairs):
        raise NotImplementedError(f"negative padding with mode={mode!r} is not supported")
    jnp_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    return jnp.pad(input, pairs, mode=jnp_mode)


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """torch's `_Reduction.legacy_get_string` for the deprecated size_average/reduce arguments."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def cross_entropy(
    input: jax.Array,
    target: jax.Array,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> jax.Array:
    """torch.nn.functional.cross_entropy: logits (N, C, *) or (C,), classes on axis 1.

    Class-index targets honour `ignore_index` (excluded from the mean's denominator), `weight`
    (the mean divides by the summed weights of the targets) and `label_smoothing` with torch's
    formula; probability targets (float, same shape as input) are supported too. optax's losses
    take classes on the last axis and have no ignore_index.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = jax.nn.log_softmax(input.astype(_stats_dtype(input.dtype)), axis=class_dim)
    wshape = [1] * input.ndim
    wshape[class_dim] = n_classes
    w = None if weight is None else jnp.asarray(weight, logp.dtype).reshape(wshape)

    if jnp.issubdtype(jnp.asarray(target).dtype, jnp.floating):
        target = jnp.asarray(target, logp.dtype)
        if label_smoothing > 0.0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        terms = logp * target if w is None else logp * target * w
        loss = -terms.sum(class_dim)
        if reduction == "mean":
            count = loss.size if input.ndim > 1 else 1
            return (loss.sum() / count).astype(input.dtype)
        if reduction == "sum":
            return loss.sum().astype(input.dtype)
        return loss.astype(input.dtype)

    target = jnp.asarray(target)
    valid = target != ignore_index
    safe = jnp.where(valid, target, 0)
    picked = jnp.take_along_axis(logp, jnp.expand_dims(safe, class_dim), axis=class_dim).squeeze(class_dim)
    if w is None:
        tw = valid.astype(logp.dtype)
    else:
        tw = jnp.where(valid, jnp.take(jnp.asarray(weight, logp.dtype), safe), 0.0)
    nll = -picked * tw
    if label_smoothing > 0.0:
        smooth = -(logp.sum(class_dim) if w is None else (logp * w).sum(class_dim))
        smooth = jnp.where(valid, smooth, 0.0)
    else:
        smooth = None
    if reduction == "mean":
        denom = tw.sum()
        loss = nll.sum() / denom
        if smooth is not None:
            loss = (1.0 - label_smoothing) * loss + smooth.sum() / denom * (label_smoothing / n_classes)
    elif reduction == "sum":
        loss = nll.sum()
        if smooth is not None:
            loss = (1.0 - label_smoothing) * loss + smooth.sum() * (label_smoothing / n_classes)
    elif reduction == "none":
        loss = nll
        if smooth is not None:
            loss = (1.0 - label_smoothing) * loss + smooth * (label_smoothing / n_classes)
    else:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return loss.astype(input.dtype)


def _reduce_loss(loss: jax.Array, reduction: str) -> jax.Array:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def mse_loss(
    input: jax.Array, target: jax.Array, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> jax.Array:
    """torch.nn.functional.mse_loss (broadcasting input and target, as torch does with a warning)."""
    return _reduce_loss(jnp.square(input - target), _legacy_reduction(size_average, reduce, reduction))


def l1_loss(
    input: jax.Array, target: jax.Array, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> jax.Array:
    """torch.nn.functional.l1_loss."""
    return _reduce_loss(jnp.abs(input - target), _legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(
    input: jax.Array,
    target: jax.Array,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> jax.Array:
    """torch.nn.functional.binary_cross_entropy_with_logits, in torch's stable form:
    (1 - t) * x + (1 + (pw - 1) * t) * softplus(-x), times `weight`."""
    target = jnp.asarray(target, input.dtype)
    log_weight = 1.0 if pos_weight is None else 1.0 + (jnp.asarray(pos_weight, input.dtype) - 1.0) * target
    loss = (1.0 - target) * input + log_weight * jax.nn.softplus(-input)
    if weight is not None:
        loss = loss * jnp.asarray(weight, input.dtype)
    return _reduce_loss(loss, _legacy_reduction(size_average, reduce, reduction))


def nll_loss(
    input: jax.Array,
    target: jax.Array,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> jax.Array:
    """torch.nn.functional.nll_loss on log-probabilities (N, C, *) or (C,): `ignore_index`
    targets are excluded, a weighted mean divides by the targets' summed weights."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    class_dim = 0 if input.ndim == 1 else 1
    target = jnp.asarray(target)
    valid = target != ignore_index
    safe = jnp.where(valid, target, 0)
    picked = jnp.take_along_axis(input, jnp.expand_dims(safe, class_dim), axis=class_dim).squeeze(class_dim)
    tw = valid.astype(input.dtype) if weight is None else jnp.where(valid, jnp.take(jnp.asarray(weight), safe), 0.0)
    loss = -picked * tw
    if reduction == "mean":
        return loss.sum() / tw.sum()
    return _reduce_loss(loss, reduction)


class _Loss(nnx.Module):
    """torch's loss modules: the constructor keeps the options, the call applies the function.
    A class-weight tensor is a torch buffer (`weight`), so it is module state here too."""

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        self.reduction = _legacy_reduction(size_average, reduce, reduction)
        self.weight = nnx.data(None) if weight is None else nnx.Variable(jnp.asarray(weight))


class CrossEntropyLoss(_Loss):
    """torch.nn.CrossEntropyLoss(weight, size_average, ignore_index, reduce, reduction, label_smoothing)."""

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return cross_entropy(
            input,
            target,
            _value(self.weight),
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(_Loss):
    """torch.nn.NLLLoss(weight, size_average, ignore_index, reduce, reduction)."""

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
    ):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return nll_loss(input, target, _value(self.weight), ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    """torch.nn.MSELoss(size_average, reduce, reduction)."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__(None, size_average, reduce, reduction)

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """torch.nn.L1Loss(size_average, reduce, reduction)."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__(None, size_average, reduce, reduction)

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """torch.nn.BCEWithLogitsLoss(weight, size_average, reduce, reduction, pos_weight)."""

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        pos_weight: Any = None,
    ):
        super().__init__(weight, size_average, reduce, reduction)
        self.pos_weight = nnx.data(None) if pos_weight is None else nnx.Variable(jnp.asarray(pos_weight))

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return binary_cross_entropy_with_logits(
            input, target, _value(self.weight), reduction=self.reduction, pos_weight=_value(self.pos_weight)
        )


# ----------------------------------------------------------------------------------------------------
# interpolation


def _scale_f32(in_size: int, out_size: int, scale: float | None, align_corners: bool) -> np.float32:
    """torch's `area_pixel_compute_scale<float>`: the float32 step from output to input coordinates."""
    if align_corners:
        return np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 else np.float32(0.0)
    if scale is not None and scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size) / np.float32(out_size)


def _source_index(scale: np.float32, out_size: int, align_corners: bool, cubic: bool) -> np.ndarray:
    """torch's `area_pixel_compute_source_index` in float32 (clamped at 0 except for cubic)."""
    dst = np.arange(out_size, dtype=np.float32)
    if align_corners:
        return scale * dst
    src = scale * (dst + np.float32(0.5)) - np.float32(0.5)
    return src if cubic else np.maximum(src, np.float32(0.0))


def _resize_axis(
    x: jax.Array, axis: int, out_size: int, scale: float | None, mode: str, align_corners: bool
) -> jax.Array:
    """Resample one axis with torch's index and weight arithmetic (float32, as its CPU kernels)."""
    in_size = x.shape[axis]
    trailing = (1,) * (x.ndim - axis - 1)
    if mode in ("nearest", "nearest-exact"):
        s = _scale_f32(in_size, out_size, scale, False)
        dst = np.arange(out_size)
        if mode == "nearest" and out_size == in_size:  # torch's `nearest_idx` shortcuts, whatever the scale
            return x
        if mode == "nearest" and out_size == 2 * in_size:
            src = dst // 2
        elif mode == "nearest":
            src = np.floor(dst.astype(np.float32) * s)
        else:
            src = np.floor(((dst + 0.5) * np.float64(s)).astype(np.float32))
        index = np.minimum(src.astype(np.int64), in_size - 1)
        return jnp.take(x, index, axis=axis)
    if in_size == out_size and mode == "linear":
        return x
    s = _scale_f32(in_size, out_size, scale, align_corners)
    real = _source_index(s, out_size, align_corners, mode == "cubic")
    base = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    lam = np.clip(real - base.astype(np.float32), np.float32(0.0), np.float32(1.0)).astype(np.float32)
    if mode == "linear":
        upper = base + (base < in_size - 1).astype(np.int64)
        w0 = jnp.asarray((np.float32(1.0) - lam).reshape(out_size, *trailing), x.dtype)
        w1 = jnp.asarray(lam.reshape(out_size, *trailing), x.dtype)
        return w0 * jnp.take(x, base, axis=axis) + w1 * jnp.take(x, upper, axis=axis)
    a = np.float32(-0.75)

    def near(t: np.ndarray) -> np.ndarray:
        return ((a + 2) * t - (a + 3)) * t * t + 1

    def far(t: np.ndarray) -> np.ndarray:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    one = np.float32(1.0)
    coeffs = [far(lam + one), near(lam), near(one - lam), far(one - lam + one)]
    y = None
    for j, c in enumerate(coeffs):
        index = np.clip(base - 1 + j, 0, in_size - 1)
        term = jnp.asarray(c.astype(np.float32).reshape(out_size, *trailing), x.dtype) * jnp.take(x, index, axis=axis)
        y = term if y is None else y + term
    return y


def interpolate(
    input: jax.Array,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> jax.Array:
    """torch.nn.functional.interpolate on (N, C, *spatial) inputs.

    Modes nearest, nearest-exact, linear/bilinear/trilinear, bicubic (A=-0.75, clamped borders),
    area; `align_corners`; a given `scale_factor` sets the coordinate step (1/scale) unless
    `recompute_scale_factor=True`, as in torch. `jax.image.resize` uses half-pixel centres with
    antialiasing and no align_corners, and its 'nearest' rounds differently: it cannot reproduce these.
    """
    if antialias:
        raise NotImplementedError("interpolate(antialias=True) is not supported by the Flax shims")
    n = input.ndim - 2
    if n < 1:
        raise ValueError(f"interpolate expects a batched (N, C, *spatial) input, got shape {input.shape}")
    dims_for_mode = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
    if mode in dims_for_mode and dims_for_mode[mode] != n:
        raise ValueError(f"mode {mode!r} expects {dims_for_mode[mode] + 2}D input, got {input.ndim}D")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes")
    elif mode not in dims_for_mode:
        raise ValueError(f"unsupported interpolation mode {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("exactly one of size or scale_factor must be given")
    in_sizes = tuple(input.shape[2:])
    if size is not None:
        out_sizes = _tuple(size, n, "size")
        scales: tuple[float | None, ...] = (None,) * n
    else:
        factors = (
            (float(scale_factor),) * n
            if isinstance(scale_factor, int | float)
            else tuple(float(f) for f in scale_factor)
        )
        if len(factors) != n:
            raise ValueError(f"scale_factor must have {n} elements, got {scale_factor!r}")
        out_sizes = tuple(math.floor(s * f) for s, f in zip(in_sizes, factors, strict=True))
        scales = (None,) * n if recompute_scale_factor else factors
    if mode == "area":
        return _adaptive_pool_nd(input, n, out_sizes, "avg")
    kind = {"linear": "linear", "bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    sdt = input.dtype if kind in ("nearest", "nearest-exact") else _stats_dtype(input.dtype)
    y = input.astype(sdt)
    for i in range(n):
        y = _resize_axis(y, 2 + i, out_sizes[i], scales[i], kind, bool(align_corners))
    return y.astype(input.dtype)


# ----------------------------------------------------------------------------------------------------
# containers and small modules


class Sequential(nnx.Module):
    """torch.nn.Sequential: children under the names "0", "1", ... (or an OrderedDict's keys).

    Children are attributes named by their torch names, so their nnx graph paths are
    ('0', 'kernel'), ... directly under the Sequential: torch's `named_modules()` names, which
    weight transfer and per-layer verification pair on. Indexing, slicing (a Sequential), iteration,
    len, append/extend/insert/pop and deletion (which renumbers, as torch does) are supported.
    Children may be modules or plain callables.
    """

    def __init__(self, *args: Any, rngs: Any = None) -> None:
        if len(args) == 1 and isinstance(args[0], dict):
            items = [(str(k), m) for k, m in args[0].items()]
        else:
            items = [(str(i), m) for i, m in enumerate(args)]
        self._names: tuple[str, ...] = ()
        for name, module in items:
            self._add(name, module)

    def _add(self, name: str, module: Any) -> None:
        setattr(self, name, module)
        if name not in self._names:
            self._names = (*self._names, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # torch registers a module assigned as an attribute (`self.norm = BatchNorm2d(c)` in a
        # Sequential subclass such as torchvision's _Transition) as the next child
        super().__setattr__(name, value)
        if isinstance(value, nnx.Module) and not name.startswith("_") and name not in self._names:
            super().__setattr__("_names", (*self._names, name))

    def _reset(self, modules: list[Any]) -> None:
        for name in self._names:
            delattr(self, name)
        self._names = ()
        for i, module in enumerate(modules):
            self._add(str(i), module)

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Any:
        return iter([getattr(self, name) for name in self._names])

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            names = self._names[index]
            return Sequential(dict(zip(names, [getattr(self, name) for name in names], strict=True)))
        return getattr(self, self._names[index])

    def __setitem__(self, index: int, module: Any) -> None:
        setattr(self, self._names[index], module)

    def __delitem__(self, index: int | slice) -> None:
        doomed = set(self._names[index]) if isinstance(index, slice) else {self._names[index]}
        self._reset([getattr(self, name) for name in self._names if name not in doomed])

    def append(self, module: Any) -> "Sequential":
        self._add(str(len(self)), module)
        return self

    def add_module(self, name: str, module: Any) -> None:
        self._add(str(name), module)

    def extend(self, modules: Any) -> "Sequential":
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Any) -> "Sequential":
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        modules = list(self)
        modules.insert(index if index >= 0 else index + n, module)
        self._reset(modules)
        return self

    def pop(self, index: int = -1) -> Any:
        module = self[index]
        del self[index]
        return module

    def __call__(self, x: Any) -> Any:
        for module in self:
            x = module(x)
        return x


class ModuleList(nnx.List):
    """torch.nn.ModuleList on nnx.List (flax 0.12 requires nnx.List for lists of modules).

    nnx graph paths of the children are the integers 0, 1, ... directly under the list, so
    `'.'.join(map(str, path))` gives torch's names. Slicing returns a ModuleList, append/extend return
    self, like torch.
    """

    def __init__(self, modules: Any = None, *, rngs: Any = None) -> None:
        super().__init__(modules)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ModuleList(super().__getitem__(index))
        return super().__getitem__(index)

    def append(self, module: Any) -> "ModuleList":
        super().append(module)
        return self

    def extend(self, modules: Any) -> "ModuleList":
        for module in modules:
            super().append(module)
        return self

    def __add__(self, other: Any) -> "ModuleList":
        return ModuleList([*self, *other])


class ModuleDict(nnx.Dict):
    """torch.nn.ModuleDict on nnx.Dict: the keys are the children's nnx path names (torch's names).

    Keys are stored as attributes, so a key equal to a method name (e.g. 'keys', 'items') would
    shadow that method; torch stores children apart and has no such limit.
    """

    def __init__(self, modules: Any = None, *, rngs: Any = None) -> None:
        super().__init__(dict(modules or {}))

    def _has(self, key: Any) -> bool:
        return isinstance(key, str) and not key.startswith("_pytree__") and key in vars(self)

    def __getitem__(self, key: str) -> Any:
        if not self._has(key):
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return self._has(key)

    def add_module(self, name: str, module: Any) -> None:
        setattr(self, str(name), module)


class Identity(nnx.Module):
    """torch.nn.Identity (accepts and ignores constructor arguments, as torch does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, x: Any) -> Any:
        return x
