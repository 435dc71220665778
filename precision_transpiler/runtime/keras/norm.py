"""torch's normalisation layers for Keras 3: BatchNorm (torch's momentum, eps and unbiased running
variance, buffers under torch's names), GroupNorm and LayerNorm, functional and as layers.
"""

import math
from typing import Any

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.common import _channel_shape
from precision_transpiler.runtime.keras.functional import _keras_dtype, _stats_dtype
from precision_transpiler.runtime.keras.module_api import ReplacesVariables


def _batch_norm_stats(x: Any) -> tuple[Any, Any, Any]:
    """Per-channel batch mean and biased variance (two-pass, float32 or wider) and the count per channel."""
    axes = (0, *range(2, len(x.shape)))
    xs = ops.cast(x, _stats_dtype(x.dtype))
    mean = ops.mean(xs, axis=axes)
    var = ops.mean(ops.square(xs - ops.reshape(mean, _channel_shape(len(x.shape)))), axis=axes)
    count = ops.cast(ops.size(xs) // x.shape[1], xs.dtype)
    return mean, var, count


def _batch_norm_apply(x: Any, mean: Any, var: Any, weight: Any, bias: Any, eps: float) -> Any:
    """(x - mean) / sqrt(var + eps) * weight + bias in float32 or wider, cast back to x's dtype.

    `mean`/`var` are per channel (C,) or already broadcastable to x (instance norm's (N, C, 1, ...)).
    """
    sdt = _stats_dtype(x.dtype)
    shape = _channel_shape(len(x.shape))
    if len(mean.shape) == 1:
        mean, var = ops.reshape(mean, shape), ops.reshape(var, shape)
    y = (ops.cast(x, sdt) - ops.cast(mean, sdt)) * ops.rsqrt(ops.cast(var, sdt) + eps)
    if weight is not None:
        y = y * ops.reshape(ops.cast(weight, sdt), shape)
    if bias is not None:
        y = y + ops.reshape(ops.cast(bias, sdt), shape)
    return ops.cast(y, x.dtype)


def _layer_norm(x: Any, n_dims: int, weight: Any, bias: Any, eps: float) -> Any:
    """Normalise over the last n_dims axes (biased variance, eps inside the square root), float32 inside."""
    sdt = _stats_dtype(x.dtype)
    axes = tuple(range(len(x.shape) - n_dims, len(x.shape)))
    xs = ops.cast(x, sdt)
    mean = ops.mean(xs, axis=axes, keepdims=True)
    var = ops.mean(ops.square(xs - mean), axis=axes, keepdims=True)
    y = (xs - mean) * ops.rsqrt(var + eps)
    if weight is not None:
        y = y * ops.cast(weight, sdt)
    if bias is not None:
        y = y + ops.cast(bias, sdt)
    return ops.cast(y, x.dtype)


def _group_norm(x: Any, num_groups: int, weight: Any, bias: Any, eps: float) -> Any:
    """Normalise (N, C, *) over each block of C/num_groups channels and all positions (torch's groups)."""
    c = x.shape[1]
    if c % num_groups:
        raise ValueError(f"Expected number of channels in input to be divisible by num_groups, got {x.shape}")
    sdt = _stats_dtype(x.dtype)
    xg = ops.reshape(ops.cast(x, sdt), (-1, num_groups, (c // num_groups) * math.prod(x.shape[2:])))
    mean = ops.mean(xg, axis=-1, keepdims=True)
    var = ops.mean(ops.square(xg - mean), axis=-1, keepdims=True)
    y = ops.reshape((xg - mean) * ops.rsqrt(var + eps), (-1, *x.shape[1:]))
    shape = _channel_shape(len(x.shape))
    if weight is not None:
        y = y * ops.reshape(ops.cast(weight, sdt), shape)
    if bias is not None:
        y = y + ops.reshape(ops.cast(bias, sdt), shape)
    return ops.cast(y, x.dtype)


def layer_norm(input: Any, normalized_shape: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    """torch.nn.functional.layer_norm: joint statistics over the trailing `normalized_shape` dims, eps 1e-5.

    (keras.ops.layer_normalization normalises one axis and Keras' LayerNormalization defaults to eps 1e-3.)
    """
    n = 1 if isinstance(normalized_shape, int) else len(tuple(normalized_shape))
    return _layer_norm(input, n, weight, bias, eps)


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    """torch.nn.functional.group_norm on (N, C, *) inputs (contiguous channel groups on axis 1)."""
    return _group_norm(input, num_groups, weight, bias, eps)


def batch_norm(
    input: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """torch.nn.functional.batch_norm (feature axis 1, torch momentum = weight of the new batch).

    Inference normalises with the running statistics. Training normalises with the biased batch
    statistics and, when `running_mean`/`running_var` are Keras Variables, updates them in place with
    torch's rule (running = (1 - momentum) * running + momentum * batch, unbiased batch variance).
    """
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm with training=False needs running_mean and running_var")
        return _batch_norm_apply(input, running_mean, running_var, weight, bias, eps)
    mean, var, count = _batch_norm_stats(input)
    for stat, batch in ((running_mean, mean), (running_var, var * count / (count - 1))):
        if isinstance(stat, keras.Variable):
            old = ops.cast(stat, batch.dtype)
            stat.assign(ops.cast((1.0 - momentum) * old + momentum * batch, stat.dtype))
    return _batch_norm_apply(input, mean, var, weight, bias, eps)


def _running_update(stat: Any, value: Any, factor: Any) -> None:
    """torch's running-statistic update, in place: (1 - momentum) * running + momentum * batch."""
    old = ops.cast(stat, value.dtype)
    stat.assign(ops.cast((1.0 - factor) * old + factor * value, stat.dtype))


class _BatchNorm(ReplacesVariables, keras.layers.Layer):
    """Shared body of BatchNorm1d/2d with torch's statistics (Keras BatchNormalization differs).

    `momentum` is the weight of the new batch (Keras: 0.99, the decay of the old statistics); the
    running variance is updated with the unbiased batch variance while normalisation uses the biased
    one (Keras: biased moving variance); eps 1e-5 (Keras 1e-3); `momentum=None` is a cumulative
    average over `num_batches_tracked`; `track_running_stats=False` always uses batch statistics.
    Batch statistics and running-stat updates happen when `call(..., training=True)`.
    """

    _input_ndims: tuple[int, ...] = (4,)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        c = (num_features,)
        if affine:
            self.weight = self.add_weight(shape=c, initializer="ones", autocast=False, name="weight")
            self.bias = self.add_weight(shape=c, initializer="zeros", autocast=False, name="bias") if bias else None
        else:
            self.weight = None
            self.bias = None
        if track_running_stats:
            stat = {"trainable": False, "autocast": False}
            self.running_mean = self.add_weight(shape=c, initializer="zeros", name="running_mean", **stat)
            self.running_var = self.add_weight(shape=c, initializer="ones", name="running_var", **stat)
            self.num_batches_tracked = self.add_weight(
                shape=(), initializer="zeros", dtype="int64", name="num_batches_tracked", **stat
            )
        else:
            self.running_mean = None
            self.running_var = None
            self.num_batches_tracked = None
        self.built = True

    def call(self, input: Any, training: bool | None = None) -> Any:
        x = ops.cast(input, self.compute_dtype)
        if len(x.shape) not in self._input_ndims:
            raise ValueError(f"{type(self).__name__}: expected {self._input_ndims} dims input (got {len(x.shape)}D)")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels, got shape {x.shape}")
        if not training and self.track_running_stats:
            return _batch_norm_apply(x, self.running_mean, self.running_var, self.weight, self.bias, self.eps)
        if None not in x.shape and math.prod(x.shape) // x.shape[1] <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {x.shape}")
        mean, var, count = _batch_norm_stats(x)
        if training and self.track_running_stats:
            self.num_batches_tracked.assign_add(ops.ones((), "int64"))
            factor = self.momentum
            if factor is None:  # cumulative moving average
                factor = 1.0 / ops.cast(self.num_batches_tracked, mean.dtype)
            _running_update(self.running_mean, mean, factor)
            _running_update(self.running_var, var * count / (count - 1), factor)
        return _batch_norm_apply(x, mean, var, self.weight, self.bias, self.eps)


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d on (N, C) or (N, C, L): torch momentum, eps 1e-5, unbiased running_var."""

    _input_ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d on NCHW (channels on axis 1): torch momentum, eps 1e-5, unbiased running_var."""

    _input_ndims = (4,)


class BatchNorm3d(_BatchNorm):
    """torch.nn.BatchNorm3d on NCDHW (channels on axis 1): torch momentum, eps 1e-5, unbiased running_var."""

    _input_ndims = (5,)


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
        **kwargs: Any,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias, **kwargs)


class _InstanceNorm(_BatchNorm):
    """Shared body of InstanceNorm1d/2d/3d: statistics per sample and channel over the spatial dims.

    torch's defaults differ from BatchNorm's (affine=False, track_running_stats=False); with running
    statistics, `training=True` updates them with the batch average of the per-instance statistics
    (unbiased variance) and inference normalises with them, as torch. Unbatched (C, *) inputs work.
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
        **kwargs: Any,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias, **kwargs)

    def call(self, input: Any, training: bool | None = None) -> Any:
        x = ops.cast(input, self.compute_dtype)
        batched = self._input_ndims[-1]
        if len(x.shape) not in (batched - 1, batched):
            raise ValueError(f"{type(self).__name__}: expected {batched - 1}D or {batched}D input, got {len(x.shape)}D")
        unbatched = len(x.shape) == batched - 1
        xb = ops.expand_dims(x, 0) if unbatched else x
        if self.affine and xb.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels, got shape {x.shape}")
        if not training and self.track_running_stats:
            mean, var = self.running_mean, self.running_var
        else:
            xs = ops.cast(xb, _stats_dtype(xb.dtype))
            axes = tuple(range(2, len(xb.shape)))
            mean = ops.mean(xs, axis=axes, keepdims=True)
            var = ops.mean(ops.square(xs - mean), axis=axes, keepdims=True)
            if training and self.track_running_stats:
                count = math.prod(xb.shape[2:])
                _running_update(self.running_mean, ops.reshape(ops.mean(mean, axis=0), (-1,)), self.momentum)
                unbiased = ops.mean(var, axis=0) * (count / max(count - 1, 1))
                _running_update(self.running_var, ops.reshape(unbiased, (-1,)), self.momentum)
        y = _batch_norm_apply(xb, mean, var, self.weight, self.bias, self.eps)
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


class LocalResponseNorm(keras.layers.Layer):
    """torch.nn.LocalResponseNorm(size, alpha, beta, k) on (N, C, *): x / (k + alpha * mean of x^2 over
    `size` neighbouring channels)^beta, the window zero-padded by size // 2 before, (size - 1) // 2 after.
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k
        self.built = True

    def call(self, input: Any) -> Any:
        ndim = len(input.shape)
        if ndim < 3:
            raise ValueError(f"LocalResponseNorm: expected 3D or higher input, got {ndim}D")
        x = ops.cast(input, _stats_dtype(input.dtype))
        pads = [(0, 0)] * ndim
        pads[1] = (self.size // 2, (self.size - 1) // 2)
        sq = ops.pad(ops.square(x), pads)
        c = input.shape[1]
        window = sum(sq[:, i : i + c] for i in range(self.size)) / self.size
        return ops.cast(x / ops.power(window * self.alpha + self.k, self.beta), input.dtype)


class LayerNorm(keras.layers.Layer):
    """torch.nn.LayerNorm: eps 1e-5 (Keras LayerNormalization: 1e-3), joint statistics over all
    trailing `normalized_shape` dims, `weight`/`bias` of that shape, `bias=False` supported."""

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        affine = elementwise_affine
        self.weight = (
            self.add_weight(shape=shape, initializer="ones", autocast=False, name="weight") if affine else None
        )
        has_bias = affine and bias
        self.bias = self.add_weight(shape=shape, initializer="zeros", autocast=False, name="bias") if has_bias else None
        self.built = True

    def call(self, input: Any) -> Any:
        x = ops.cast(input, self.compute_dtype)
        n = len(self.normalized_shape)
        if tuple(x.shape[len(x.shape) - n :]) != self.normalized_shape:
            raise ValueError(f"LayerNorm{self.normalized_shape}: input shape {x.shape} does not end with it")
        return _layer_norm(x, n, self.weight, self.bias, self.eps)


def _rms_norm(x: Any, n_dims: int, weight: Any, eps: float | None) -> Any:
    """x / sqrt(mean(x**2) + eps) over the last n_dims axes, times `weight`, float32 inside; eps
    None is the input dtype's machine epsilon (torch's default)."""
    sdt = _stats_dtype(x.dtype)
    eps = float(np.finfo(keras.backend.standardize_dtype(x.dtype)).eps) if eps is None else eps
    axes = tuple(range(len(x.shape) - n_dims, len(x.shape)))
    xs = ops.cast(x, sdt)
    y = xs * ops.rsqrt(ops.mean(ops.square(xs), axis=axes, keepdims=True) + eps)
    if weight is not None:
        y = y * ops.cast(weight, sdt)
    return ops.cast(y, x.dtype)


class RMSNorm(keras.layers.Layer):
    """torch.nn.RMSNorm: root-mean-square normalisation over the trailing `normalized_shape` dims,
    eps None meaning the input dtype's machine epsilon; `weight` of shape `normalized_shape`
    (Keras' RMSNormalization: one axis, eps 1e-6)."""

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = (
            self.add_weight(shape=shape, initializer="ones", autocast=False, name="weight")
            if elementwise_affine
            else None
        )
        self.built = True

    def call(self, input: Any) -> Any:
        x = ops.cast(input, self.compute_dtype)
        n = len(self.normalized_shape)
        if tuple(x.shape[len(x.shape) - n :]) != self.normalized_shape:
            raise ValueError(f"RMSNorm{self.normalized_shape}: input shape {x.shape} does not end with it")
        return _rms_norm(x, n, self.weight, self.eps)


class GroupNorm(keras.layers.Layer):
    """torch.nn.GroupNorm on (N, C, *): groups are contiguous channel blocks of axis 1, eps 1e-5,
    `weight`/`bias` of shape (C,) (Keras GroupNormalization is channels-last with eps 1e-3)."""

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        c = (num_channels,)
        self.weight = self.add_weight(shape=c, initializer="ones", autocast=False, name="weight") if affine else None
        make_bias = affine and bias
        self.bias = self.add_weight(shape=c, initializer="zeros", autocast=False, name="bias") if make_bias else None
        self.built = True

    def call(self, input: Any) -> Any:
        return _group_norm(ops.cast(input, self.compute_dtype), self.num_groups, self.weight, self.bias, self.eps)
