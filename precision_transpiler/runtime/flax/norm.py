"""torch's normalisation layers for Flax NNX: BatchNorm (torch's momentum and unbiased running
variance), GroupNorm and LayerNorm, functional and as modules, statistics in at least float32.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import _channel_shape
from precision_transpiler.runtime.flax.functional import _stats_dtype, _value
from precision_transpiler.runtime.flax.layers import TorchLayer


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
    """(x - mean) / sqrt(var + eps) * scale + bias, computed in float32 or wider, cast to the output dtype.

    `mean`/`var` are per channel (C,) or already broadcastable to x (instance norm's (N, C, 1, ...)).
    """
    out_dtype = dtype if dtype is not None else jnp.result_type(*[a for a in (x, scale, bias) if a is not None])
    sdt = _stats_dtype(x.dtype)
    shape = _channel_shape(x.ndim)
    if mean.ndim == 1:
        mean, var = mean.reshape(shape), var.reshape(shape)
    y = (x.astype(sdt) - mean.astype(sdt)) * jax.lax.rsqrt(var.astype(sdt) + eps)
    if scale is not None:
        y = y * scale.astype(sdt).reshape(shape)
    if bias is not None:
        y = y + bias.astype(sdt).reshape(shape)
    return y.astype(out_dtype)


def _running_update(stat: Any, value: jax.Array, factor: Any) -> None:
    """torch's running-statistic update: (1 - momentum) * running + momentum * batch, in place."""
    old = stat[...]
    stat[...] = ((1.0 - factor) * old.astype(value.dtype) + factor * value).astype(old.dtype)


class _BatchNorm(TorchLayer):
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
        bias: bool = True,
        device: Any = None,
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
            self.bias = nnx.Param(jnp.zeros((num_features,), param_dtype)) if bias else nnx.data(None)
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
        """torch's names for `scale`, `mean` and `var`, for subclasses that read or set them
        (lightly's SplitBatchNorm registers a `running_mean` of its own size)."""
        return self.scale

    @weight.setter
    def weight(self, value: Any) -> None:
        self.scale = _as_state(self, "scale", value)

    @property
    def running_mean(self) -> Any:
        return self.mean

    @running_mean.setter
    def running_mean(self, value: Any) -> None:
        self.mean = _as_state(self, "mean", value)

    @property
    def running_var(self) -> Any:
        return self.var

    @running_var.setter
    def running_var(self, value: Any) -> None:
        self.var = _as_state(self, "var", value)

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


class GroupNorm(TorchLayer):
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
        bias: bool = True,
        device: Any = None,
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
            self.bias = nnx.Param(jnp.zeros((num_channels,), param_dtype)) if bias else nnx.data(None)
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


class LayerNorm(TorchLayer):
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
        device: Any = None,
        dtype: Any = None,
        *,
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


def _rms_norm(x: jax.Array, n_dims: int, scale: Any, eps: float | None, dtype: Any) -> jax.Array:
    """x / sqrt(mean(x**2) + eps) over the last n_dims axes, times `scale`; eps None is the input
    dtype's machine epsilon (torch's default)."""
    out_dtype = dtype if dtype is not None else jnp.result_type(*[a for a in (x, scale) if a is not None])
    sdt = _stats_dtype(x.dtype)
    eps = float(jnp.finfo(x.dtype).eps) if eps is None else eps
    axes = tuple(range(x.ndim - n_dims, x.ndim))
    xs = x.astype(sdt)
    y = xs * jax.lax.rsqrt(jnp.square(xs).mean(axes, keepdims=True) + eps)
    if scale is not None:
        y = y * scale.astype(sdt)
    return y.astype(out_dtype)


class RMSNorm(TorchLayer):
    """torch.nn.RMSNorm: root-mean-square normalisation over the trailing `normalized_shape` dims,
    eps None meaning the input dtype's machine epsilon (nnx.RMSNorm: the last axis, eps 1e-6).
    Param `scale` (torch's `weight`) of shape `normalized_shape`."""

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
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

    def __call__(self, x: jax.Array) -> jax.Array:
        if tuple(x.shape[x.ndim - len(self.normalized_shape) :]) != self.normalized_shape:
            raise ValueError(f"RMSNorm{self.normalized_shape}: input shape {x.shape} does not end with it")
        return _rms_norm(x, len(self.normalized_shape), _value(self.scale), self.eps, self.dtype)

    @property
    def weight(self) -> Any:
        """torch's name for `scale`."""
        return self.scale


def layer_norm(
    input: jax.Array, normalized_shape: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> jax.Array:
    """torch.nn.functional.layer_norm: joint statistics over the trailing `normalized_shape` dims."""
    n = 1 if isinstance(normalized_shape, int) else len(tuple(normalized_shape))
    return _layer_norm(input, n, _value_of(weight), _value_of(bias), eps, None)


class SyncBatchNorm(_BatchNorm):
    """torch.nn.SyncBatchNorm on (N, C, *) as BatchNorm: one process, so no cross-device statistics
    to gather (`process_group` is accepted and unused)."""

    _input_ndims = (2, 3, 4, 5)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any = None,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, bias=bias, dtype=dtype, param_dtype=param_dtype
        )


def _instance_stats(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-(sample, channel) mean and biased variance over the spatial dims, shapes (N, C, 1, ...)."""
    xs = x.astype(_stats_dtype(x.dtype))
    axes = tuple(range(2, x.ndim))
    mean = xs.mean(axes, keepdims=True)
    return mean, jnp.square(xs - mean).mean(axes, keepdims=True)


class _InstanceNorm(_BatchNorm):
    """Shared body of InstanceNorm1d/2d/3d: statistics per sample and channel over the spatial dims.

    torch's defaults differ from BatchNorm's (affine=False, track_running_stats=False); with running
    statistics, training updates them with the batch average of the per-instance statistics
    (unbiased variance) and eval mode normalises with them, as torch. Unbatched (C, *) inputs work.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
        use_running_average: bool = False,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        super().__init__(
            num_features,
            eps,
            momentum,
            affine,
            track_running_stats,
            bias=bias,
            use_running_average=use_running_average,
            dtype=dtype,
            param_dtype=param_dtype,
        )

    def __call__(self, x: jax.Array, *, use_running_average: bool | None = None) -> jax.Array:
        eval_mode = self.use_running_average if use_running_average is None else use_running_average
        batched = self._input_ndims[-1]
        if x.ndim not in (batched - 1, batched):
            raise ValueError(f"{type(self).__name__}: expected {batched - 1}D or {batched}D input, got {x.ndim}D")
        unbatched = x.ndim == batched - 1
        xb = x[None] if unbatched else x
        if self.affine and xb.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels, got shape {x.shape}")
        if eval_mode and self.track_running_stats:
            mean, var = self.mean[...], self.var[...]
        else:
            mean, var = _instance_stats(xb)
            if not eval_mode and self.track_running_stats:
                count = math.prod(xb.shape[2:])
                _running_update(self.mean, mean.mean(0).reshape(-1), self.momentum)
                _running_update(self.var, (var * (count / max(count - 1, 1))).mean(0).reshape(-1), self.momentum)
        y = _batch_norm_apply(xb, mean, var, _value(self.scale), _value(self.bias), self.eps, self.dtype)
        return y[0] if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """torch.nn.InstanceNorm1d on (N, C, L) or (C, L)."""

    _input_ndims = (3,)


class InstanceNorm2d(_InstanceNorm):
    """torch.nn.InstanceNorm2d on NCHW or CHW."""

    _input_ndims = (4,)


class InstanceNorm3d(_InstanceNorm):
    """torch.nn.InstanceNorm3d on NCDHW or CDHW."""

    _input_ndims = (5,)


class LocalResponseNorm(TorchLayer):
    """torch.nn.LocalResponseNorm(size, alpha, beta, k) on (N, C, *): x / (k + alpha * mean of x^2 over
    `size` neighbouring channels)^beta, the window zero-padded by size // 2 before, (size - 1) // 2 after.
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0, *, rngs: Any = None) -> None:
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def __call__(self, x: jax.Array) -> jax.Array:
        if x.ndim < 3:
            raise ValueError(f"LocalResponseNorm: expected 3D or higher input, got {x.ndim}D")
        sdt = _stats_dtype(x.dtype)
        sq = jnp.square(x.astype(sdt))
        pads = [(0, 0)] * x.ndim
        pads[1] = (self.size // 2, (self.size - 1) // 2)
        sq = jnp.pad(sq, pads)
        c = x.shape[1]
        window = sum(jax.lax.slice_in_dim(sq, i, i + c, axis=1) for i in range(self.size)) / self.size
        return (x.astype(sdt) / (window * self.alpha + self.k) ** self.beta).astype(x.dtype)


def _as_state(layer: Any, name: str, value: Any) -> Any:
    """What `layer.<torch name> = value` stores under the nnx name: a Variable as given, None as
    nnx data, an array as the value of the Variable already there (its kind kept: a Param stays
    trainable, a BatchStat does not), or as a new BatchStat."""
    if isinstance(value, nnx.Variable):
        return value
    if value is None:
        return nnx.data(None)
    current = getattr(layer, name, None)
    if isinstance(current, nnx.Variable):
        current.value = jnp.asarray(value)
        return current
    return nnx.BatchStat(jnp.asarray(value))
