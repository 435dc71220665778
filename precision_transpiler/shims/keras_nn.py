"""Keras 3 layers with torch's constructor signatures and torch's exact semantics (channels-first).

Why this module exists: a torch model converted to Keras keeps its torch layouts (NCHW images, NCL
sequences, sequence-first attention) and torch's defaults, but Keras' own layers differ silently in
exactly those places (docs/background.md#framework-defaults-that-differ): Conv2D is channels-last with 'valid'
padding and an HWIO kernel, BatchNormalization has momentum 0.99 (decay of the old statistics),
eps 1e-3 and a biased moving variance, LayerNormalization has eps 1e-3, `ops.gelu` is the tanh
approximation, MultiHeadAttention masks are True = attend, pooling and padding modes differ, and
TensorFlow on CPU has no channels-first convolution or pooling kernels at all. Each class below
takes torch's constructor arguments (same names, order and defaults) and computes what torch
computes (relative error <= 1e-5 in float32, tests/test_keras_shims.py).

Rules this source keeps, because the converter copies the definitions a converted file needs into
that file (precision_transpiler/convert/vendor.py):

- It imports from `SHIM_IMPORTS` (keras, keras.ops, numpy, math, typing), never torch, and takes
  the private helpers it shares with `keras_functional` (convolution, pooling, norms, attention)
  from there, with one `from precision_transpiler.shims.keras_functional import ...`: the
  converter follows that import and copies those helpers along.
- Every top-level definition is copyable alone, together with the top-level helpers it references.

Conventions:

- Inputs and outputs use torch layouts (channels at axis 1); unbatched inputs are accepted where
  torch accepts them. Channels-first data are transposed to channels-last around `ops.conv` /
  `ops.max_pool` / `ops.average_pool` inside `call`. Channel and spatial sizes must be static; the
  batch axis may be dynamic (None).
- Weights keep torch's names AND layouts, so loading a torch `state_dict` is a name-for-name copy
  (`precision_transpiler.weights.torch_to_keras.load_torch_state_dict_keras`): `weight` (out, in)
  for Linear; `weight` (out, in/groups, *k) for convolutions (OIHW), (in, out/groups, *k) for
  transposed ones; `weight`/`bias` for the norms (no gamma/beta); BatchNorm buffers
  `running_mean`/`running_var`/`num_batches_tracked` as non-trainable variables; MultiheadAttention's
  packed `in_proj_weight` (3E, E), `in_proj_bias`, and `out_proj` a `Linear`. Kernels are transposed
  to Keras' layouts inside `call` (a cheap op next to the convolution). All weights are created in
  `__init__` (torch knows every shape from its constructor), so `layer.weights` is complete before
  the first call; layers are marked built.
- dtype: torch's `dtype=` argument and Keras' `dtype=` (the dtype policy) are the same keyword here.
  None means Keras' global policy; a Keras policy or policy name ("float32", "bfloat16",
  "mixed_bfloat16") is passed to `keras.layers.Layer`; a torch or numpy dtype object is mapped to
  its name (torch.bfloat16 -> "bfloat16": variables and computation in bf16, as in torch). `device`
  is accepted and ignored. Other Keras keywords (`name`, `trainable`, ...) pass through `**kwargs`.
  Layers compute in `self.compute_dtype` (inputs and weights cast to it), so mixed policies work;
  normalisation statistics, pooling sums and attention softmax run in at least float32, and the
  BatchNorm running statistics stay in the variable dtype (they are not autocast).
- Train/eval: Keras' `training` call argument replaces torch's `.train()`/`.eval()` (BatchNorm
  batch statistics and running-stat updates, Dropout, attention dropout). As everywhere in Keras,
  `training=None` resolves to the outer call's value and finally to False (inference): torch modules
  start in training mode, Keras layers do not.
- Containers (Sequential, ModuleList, ModuleDict) hold their children under torch's names ("0",
  "1", ... or the given keys); Keras tracks them, so their variables appear in `weights`.
"""

import math
from typing import Any

import keras
from keras import ops

from precision_transpiler.shims.keras_functional import (
    _adaptive_pool_nd,
    _add_batch,
    _avg_pool_nd,
    _batch_norm_apply,
    _batch_norm_stats,
    _channels_first,
    _channels_last,
    _conv_nd,
    _conv_padding_pairs,
    _dropout,
    _gelu,
    _group_norm,
    _layer_norm,
    _linear,
    _max_pool_nd,
    _pad_nd,
    _scaled_dot_product_attention,
    _softmax_dim,
    _stats_dtype,
    _tuple,
)

# The import block copied definitions need, keras_functional's helpers included.
SHIM_IMPORTS = "import math\nfrom typing import Any\n\nimport keras\nimport numpy as np\nfrom keras import ops\n"

# ----------------------------------------------------------------------------------------------------
# layer helpers


def _keras_dtype(dtype: Any) -> Any:
    """torch's `dtype=` as Keras' dtype policy: None (global policy) and Keras policies/names pass as is,
    torch or numpy dtype objects become their name ("bfloat16": bf16 variables and compute, as torch)."""
    if dtype is None or isinstance(dtype, str | keras.DTypePolicy):
        return dtype
    return keras.backend.standardize_dtype(dtype)


def _uniform(bound: float) -> Any:
    """U(-bound, bound): torch's default init of linear/conv weights and biases (kaiming_uniform, a=sqrt(5))."""
    return keras.initializers.RandomUniform(-bound, bound)


def _cast(x: Any, dtype: Any) -> Any:
    """ops.cast that keeps None (optional weights)."""
    return None if x is None else ops.cast(x, dtype)


def _running_update(stat: Any, value: Any, factor: Any) -> None:
    """torch's running-statistic update, in place: (1 - momentum) * running + momentum * batch."""
    old = ops.cast(stat, value.dtype)
    stat.assign(ops.cast((1.0 - factor) * old + factor * value, stat.dtype))


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
    x = _pad_nd(x, [(0, 0), *pairs, (0, 0)], "constant")
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


# ----------------------------------------------------------------------------------------------------
# linear, embedding, convolutions


class Linear(keras.layers.Layer):
    """torch.nn.Linear: `weight` (out, in) as torch (Keras Dense: `kernel` (in, out)), y = x W^T + b."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = self.add_weight(shape=(out_features, in_features), initializer=_uniform(bound), name="weight")
        self.bias = self.add_weight(shape=(out_features,), initializer=_uniform(bound), name="bias") if bias else None
        self.built = True

    def call(self, input: Any) -> Any:
        dt = self.compute_dtype
        return _linear(ops.cast(input, dt), ops.cast(self.weight, dt), _cast(self.bias, dt))


class Embedding(keras.layers.Layer):
    """torch.nn.Embedding: `weight` (num, dim) ~ N(0, 1) with the `padding_idx` row zeroed.

    As in torch, the `padding_idx` row receives no gradient. `max_norm` (in-place renormalisation) is
    not supported. `_weight` gives the initial table, `_freeze=True` makes it non-trainable.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Any = None,
        _freeze: bool = False,
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        if max_norm is not None:
            raise NotImplementedError("Embedding(max_norm=...) renormalises weights in place; not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError("padding_idx must be within num_embeddings")
            padding_idx = padding_idx % num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.weight = self.add_weight(
            shape=(num_embeddings, embedding_dim),
            initializer=keras.initializers.RandomNormal(0.0, 1.0),
            trainable=not _freeze,
            name="weight",
        )
        if _weight is not None:
            self.weight.assign(ops.cast(_weight, self.weight.dtype))
        elif padding_idx is not None:
            rows = ops.expand_dims(ops.arange(num_embeddings), 1)
            self.weight.assign(ops.where(rows == padding_idx, ops.zeros((), self.weight.dtype), self.weight))
        self.built = True

    def call(self, input: Any) -> Any:
        out = ops.take(ops.cast(self.weight, self.compute_dtype), input, axis=0)
        if self.padding_idx is not None:
            out = ops.where(ops.expand_dims(input == self.padding_idx, -1), ops.stop_gradient(out), out)
        return out


class _ConvNd(keras.layers.Layer):
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


class _ConvTransposeNd(keras.layers.Layer):
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


# ----------------------------------------------------------------------------------------------------
# normalisation


class _BatchNorm(keras.layers.Layer):
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
            self.bias = self.add_weight(shape=c, initializer="zeros", autocast=False, name="bias")
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
        self.bias = self.add_weight(shape=c, initializer="zeros", autocast=False, name="bias") if affine else None
        self.built = True

    def call(self, input: Any) -> Any:
        return _group_norm(ops.cast(input, self.compute_dtype), self.num_groups, self.weight, self.bias, self.eps)


class Dropout(keras.layers.Layer):
    """torch.nn.Dropout(p): zero with probability p, scale by 1/(1-p), only when `training=True`."""

    def __init__(self, p: float = 0.5, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if p < 0.0 or p > 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.seed_generator = keras.random.SeedGenerator()
        self.built = True

    def call(self, input: Any, training: bool | None = None) -> Any:
        return _dropout(input, self.p, self.seed_generator) if training and self.p > 0.0 else input


# ----------------------------------------------------------------------------------------------------
# pooling


class _MaxPoolNd(keras.layers.Layer):
    """Shared body of MaxPool1d/2d (torch argument order; no weights)."""

    _n_spatial = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if return_indices:
            raise NotImplementedError("return_indices=True is not supported by the Keras shims")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.ceil_mode = ceil_mode
        self.built = True

    def call(self, input: Any) -> Any:
        n = self._n_spatial
        return _max_pool_nd(input, n, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class MaxPool1d(_MaxPoolNd):
    """torch.nn.MaxPool1d on (N, C, L): stride = kernel by default, -inf padding, dilation, ceil_mode."""

    _n_spatial = 1


class MaxPool2d(_MaxPoolNd):
    """torch.nn.MaxPool2d on NCHW: stride = kernel by default, -inf padding, dilation, ceil_mode."""

    _n_spatial = 2


class _AvgPoolNd(keras.layers.Layer):
    """Shared body of AvgPool1d/2d (torch argument order; no weights)."""

    _n_spatial = 2

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override
        self.built = True

    def call(self, input: Any) -> Any:
        return _avg_pool_nd(
            input,
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

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad, None, **kwargs)


class AvgPool2d(_AvgPoolNd):
    """torch.nn.AvgPool2d on NCHW with torch's divisor (count_include_pad, ceil_mode, divisor_override)."""

    _n_spatial = 2


class _AdaptivePoolNd(keras.layers.Layer):
    """Shared body of the adaptive pools: torch's bins start=floor(i*in/out), end=ceil((i+1)*in/out)."""

    _n_spatial = 2
    _op = "avg"

    def __init__(self, output_size: Any, return_indices: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if return_indices:
            raise NotImplementedError("return_indices=True is not supported by the Keras shims")
        self.output_size = output_size
        self.built = True

    def call(self, input: Any) -> Any:
        return _adaptive_pool_nd(input, self._n_spatial, self.output_size, self._op)


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool1d on (N, C, L): torch's overlapping bins for any output size."""

    _n_spatial = 1
    _op = "avg"


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """torch.nn.AdaptiveAvgPool2d on NCHW (int, pair, None entries keep the input size; any output size)."""

    _n_spatial = 2
    _op = "avg"


class AdaptiveMaxPool1d(_AdaptivePoolNd):
    """torch.nn.AdaptiveMaxPool1d on (N, C, L)."""

    _n_spatial = 1
    _op = "max"


class AdaptiveMaxPool2d(_AdaptivePoolNd):
    """torch.nn.AdaptiveMaxPool2d on NCHW (torch's bins for any output size)."""

    _n_spatial = 2
    _op = "max"


# ----------------------------------------------------------------------------------------------------
# attention


def _attention_mask_bias(mask: Any, dtype: Any) -> Any:
    """torch MultiheadAttention's `_canonical_mask`: bool True = blocked becomes -inf; float masks are added."""
    if mask is None:
        return None
    mask = ops.convert_to_tensor(mask)
    if keras.backend.standardize_dtype(mask.dtype) == "bool":
        return ops.where(mask, ops.convert_to_tensor(float("-inf"), dtype), ops.zeros((), dtype))
    if "float" not in keras.backend.standardize_dtype(mask.dtype):
        raise TypeError("only bool and floating types of masks are supported")
    return ops.cast(mask, dtype)


def _pad_last(x: Any, count: int) -> Any:
    """Append `count` zeros along the last axis (torch's `pad(mask, (0, 1))` in attention)."""
    return ops.pad(x, [(0, 0)] * (len(x.shape) - 1) + [(0, count)])


def _xavier_uniform(shape: tuple[int, int]) -> Any:
    """torch.nn.init.xavier_uniform_ for a 2D (out, in) weight."""
    return _uniform(math.sqrt(6.0 / (shape[0] + shape[1])))


class MultiheadAttention(keras.layers.Layer):
    """torch.nn.MultiheadAttention: same arguments, layouts, masks, outputs and weight names.

    What keras.layers.MultiHeadAttention does differently: batch-first only, mask True = attend,
    per-head (E, heads, head_dim) kernels, separate key_dim. Here:

    - inputs are (L, N, E) unless `batch_first=True`, or unbatched (L, E);
    - `key_padding_mask` (N, S) and `attn_mask` (L, S) or (N*num_heads, L, S): bool True = blocked,
      float masks are added; `is_causal` is torch's hint (needs `attn_mask`);
    - returns `(output, weights)`; weights averaged over heads unless `average_attn_weights=False`,
      None when `need_weights=False`; fully masked rows give NaN weights (need_weights) or 0 output,
      as in torch;
    - weights keep torch's names and layouts: `in_proj_weight` (3E, E), `in_proj_bias` (3E,) or
      `q_proj_weight`/`k_proj_weight`/`v_proj_weight` when kdim/vdim differ from E; `bias_k`/`bias_v`
      (1, 1, E); `out_proj` a torch-layout `Linear`;
    - attention-weight dropout when `training=True`.
    Non-tensor arguments may be passed positionally, as in torch.
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
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got {embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self._allow_non_tensor_positional_args = True
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
        if self.qkv_same_embed_dim:
            self.in_proj_weight = self.add_weight(
                shape=(3 * e, e), initializer=_xavier_uniform((3 * e, e)), name="in_proj_weight"
            )
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.in_proj_weight = None
            for name, dim in (("q_proj_weight", e), ("k_proj_weight", self.kdim), ("v_proj_weight", self.vdim)):
                setattr(self, name, self.add_weight(shape=(e, dim), initializer=_xavier_uniform((e, dim)), name=name))
        self.in_proj_bias = self.add_weight(shape=(3 * e,), initializer="zeros", name="in_proj_bias") if bias else None
        self.out_proj = Linear(e, e, bias=bias, dtype=self.dtype_policy, name="out_proj")
        if bias:
            self.out_proj.bias.assign(ops.zeros((e,)))
        if add_bias_kv:
            normal = keras.initializers.RandomNormal(0.0, math.sqrt(1.0 / e))  # xavier_normal_ of (1, 1, E)
            self.bias_k = self.add_weight(shape=(1, 1, e), initializer=normal, name="bias_k")
            self.bias_v = self.add_weight(shape=(1, 1, e), initializer=normal, name="bias_v")
        else:
            self.bias_k = self.bias_v = None
        self.seed_generator = keras.random.SeedGenerator() if dropout > 0.0 else None
        self.built = True

    def _projections(self, dtype: Any) -> tuple[Any, Any, Any, Any, Any, Any]:
        """(wq, wk, wv, bq, bk, bv) in torch's (out, in) layout, cast to `dtype`."""
        e = self.embed_dim
        if self.qkv_same_embed_dim:
            w = ops.cast(self.in_proj_weight, dtype)
            wq, wk, wv = w[:e], w[e : 2 * e], w[2 * e :]
        else:
            wq, wk, wv = (ops.cast(w, dtype) for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight))
        if self.in_proj_bias is None:
            return wq, wk, wv, None, None, None
        b = ops.cast(self.in_proj_bias, dtype)
        return wq, wk, wv, b[:e], b[e : 2 * e], b[2 * e :]

    def call(
        self,
        query: Any,
        key: Any,
        value: Any,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        training: bool | None = None,
    ) -> tuple[Any, Any]:
        cdt = self.compute_dtype
        query, key, value = (ops.cast(t, cdt) for t in (query, key, value))
        batched = len(query.shape) == 3
        if not batched:
            query, key, value = (ops.expand_dims(t, 0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = ops.expand_dims(ops.convert_to_tensor(key_padding_mask), 0)
        elif not self.batch_first:
            query, key, value = (ops.swapaxes(t, 0, 1) for t in (query, key, value))
        e, heads, head_dim = self.embed_dim, self.num_heads, self.head_dim
        n, seq_q = ops.shape(query)[0], ops.shape(query)[1]

        kpm = _attention_mask_bias(key_padding_mask, cdt)
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal is a hint and needs attn_mask (as in torch)")
        if is_causal and kpm is None and not need_weights:
            mask = None
        else:
            mask = _attention_mask_bias(attn_mask, cdt)
            is_causal = False
        if mask is not None:
            if len(mask.shape) == 2:
                mask = mask[None, None]
            elif len(mask.shape) == 3:
                mask = ops.reshape(mask, (n, heads, seq_q, mask.shape[-1]))
            else:
                raise ValueError(f"attn_mask's dimension {len(mask.shape)} is not supported")

        wq, wk, wv, bq, bk, bv = self._projections(cdt)
        q, k, v = _linear(query, wq, bq), _linear(key, wk, bk), _linear(value, wv, bv)
        if self.bias_k is not None and self.bias_v is not None:
            k = ops.concatenate([k, ops.broadcast_to(ops.cast(self.bias_k, cdt), (n, 1, e))], axis=1)
            v = ops.concatenate([v, ops.broadcast_to(ops.cast(self.bias_v, cdt), (n, 1, e))], axis=1)
            mask = None if mask is None else _pad_last(mask, 1)
            kpm = None if kpm is None else _pad_last(kpm, 1)
        q = ops.transpose(ops.reshape(q, (n, seq_q, heads, head_dim)), (0, 2, 1, 3))
        k = ops.transpose(ops.reshape(k, (n, -1, heads, head_dim)), (0, 2, 1, 3))
        v = ops.transpose(ops.reshape(v, (n, -1, heads, head_dim)), (0, 2, 1, 3))
        if self.add_zero_attn:
            k = ops.pad(k, [(0, 0), (0, 0), (0, 1), (0, 0)])
            v = ops.pad(v, [(0, 0), (0, 0), (0, 1), (0, 0)])
            mask = None if mask is None else _pad_last(mask, 1)
            kpm = None if kpm is None else _pad_last(kpm, 1)
        if kpm is not None:
            kpm = kpm[:, None, None, :]
            mask = kpm if mask is None else mask + kpm
        dropout_p = self.dropout if training else 0.0

        if need_weights:
            scores = ops.matmul(q * math.sqrt(1.0 / head_dim), ops.swapaxes(k, -2, -1))
            if mask is not None:
                scores = scores + mask
            weights = ops.cast(ops.softmax(ops.cast(scores, _stats_dtype(cdt)), axis=-1), cdt)
            if dropout_p > 0.0:
                weights = _dropout(weights, dropout_p, self.seed_generator)
            out = ops.matmul(weights, v)
            returned = ops.mean(weights, axis=1) if average_attn_weights else weights
        else:
            out = _scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, None, False, self.seed_generator)
            returned = None
        out = self.out_proj(ops.reshape(ops.transpose(out, (0, 2, 1, 3)), (n, seq_q, e)))
        if not batched:
            return out[0], None if returned is None else returned[0]
        if not self.batch_first:
            out = ops.swapaxes(out, 0, 1)
        return out, returned


# ----------------------------------------------------------------------------------------------------
# containers


class Sequential(keras.layers.Layer):
    """torch.nn.Sequential: children under the names "0", "1", ... (or an OrderedDict's keys).

    Keras' own `keras.Sequential` is a Model (input layers, `.layers`, no torch names). Here children
    live in a dict Keras tracks (their variables appear in `weights`); `seq[i]`, slicing (a new
    Sequential), iteration, len, append/extend/insert/pop, `add_module(name, module)` and deletion
    (which renumbers, as torch does) are supported. Children may be layers or plain callables.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._allow_non_tensor_positional_args = True
        self._torch_modules: dict[str, Any] = {}
        items = args[0].items() if len(args) == 1 and isinstance(args[0], dict) else enumerate(args)
        for name, module in items:
            self.add_module(str(name), module)
        self.built = True

    def add_module(self, name: str, module: Any) -> None:
        """torch's `add_module`: register the child called `name`, or replace it in place."""
        if name in self._torch_modules:  # rebuild: keeps the order, untracks the old child
            items = [(key, module if key == name else child) for key, child in self._torch_modules.items()]
            self._torch_modules.clear()
            self._torch_modules.update(dict(items))
        else:
            self._torch_modules[name] = module

    def _reset(self, modules: list[Any]) -> None:
        self._torch_modules.clear()
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def __setattr__(self, name: str, value: Any) -> None:
        """A layer assigned as an attribute of a Sequential (subclass: torchvision's DenseNet
        `_Transition` sets `self.norm = nn.BatchNorm2d(...)`) is a child, run in assignment
        order, as torch registers it."""
        if isinstance(value, keras.layers.Layer) and not name.startswith("_") and "_torch_modules" in self.__dict__:
            self.__dict__.pop(name, None)
            self.add_module(name, value)
            return
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        """torch reads named children as attributes (`self.heads.head` of an OrderedDict Sequential)."""
        modules = self.__dict__.get("_torch_modules")
        if modules is not None and name in modules:
            return modules[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __len__(self) -> int:
        return len(self._torch_modules)

    def __iter__(self) -> Any:
        return iter(list(self._torch_modules.values()))

    def __getitem__(self, index: int | slice) -> Any:
        names = list(self._torch_modules)
        if isinstance(index, slice):
            return Sequential(dict(zip(names[index], list(self)[index], strict=True)))
        return self._torch_modules[names[index]]

    def __setitem__(self, index: int, module: Any) -> None:
        self.add_module(list(self._torch_modules)[index], module)

    def __delitem__(self, index: int | slice) -> None:
        doomed = list(self._torch_modules)[index]
        doomed = set(doomed) if isinstance(index, slice) else {doomed}
        self._reset([m for name, m in self._torch_modules.items() if name not in doomed])

    def append(self, module: Any) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

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

    def call(self, input: Any, training: bool | None = None) -> Any:
        for module in self:
            input = module(input)
        return input


class ModuleList(keras.layers.Layer):
    """torch.nn.ModuleList: an indexable list of layers Keras tracks (torch names "0", "1", ...).

    Indexing, slicing (a ModuleList), iteration, len, append/extend/insert/pop, `+` and deletion.
    Like torch, it has no forward of its own.
    """

    def __init__(self, modules: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._torch_modules: list[Any] = []
        self.extend(modules or [])
        self.built = True

    def __len__(self) -> int:
        return len(self._torch_modules)

    def __iter__(self) -> Any:
        return iter(list(self._torch_modules))

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return ModuleList(self._torch_modules[index])
        return self._torch_modules[index]

    def __setitem__(self, index: int, module: Any) -> None:
        self._torch_modules.pop(index)  # untracks the old child
        self._torch_modules.insert(index % (len(self) + 1), module)

    def __delitem__(self, index: int | slice) -> None:
        for i in sorted(range(len(self))[index] if isinstance(index, slice) else [index % len(self)], reverse=True):
            self._torch_modules.pop(i)

    def append(self, module: Any) -> "ModuleList":
        self._torch_modules.append(module)
        return self

    def extend(self, modules: Any) -> "ModuleList":
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Any) -> None:
        self._torch_modules.insert(index, module)

    def pop(self, index: int = -1) -> Any:
        return self._torch_modules.pop(index)

    def __add__(self, other: Any) -> "ModuleList":
        return ModuleList([*self, *other])

    def call(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList is not callable (torch: it has no forward); iterate over it")


class ModuleDict(keras.layers.Layer):
    """torch.nn.ModuleDict: layers by string key, tracked by Keras, insertion-ordered.

    `md[key]`, `key in md`, len, iteration over keys, keys/values/items, update, pop, clear. Keys
    live in a dict (not as attributes), so keys such as 'name' or 'weights' do not clash with
    Keras' layer attributes. Like torch, it has no forward of its own.
    """

    def __init__(self, modules: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._torch_modules: dict[str, Any] = {}
        self.update(modules or {})
        self.built = True

    def __getitem__(self, key: str) -> Any:
        return self._torch_modules[key]

    def __setitem__(self, key: str, module: Any) -> None:
        if key in self._torch_modules:  # rebuild: keeps the order, untracks the old child
            items = [(name, module if name == key else child) for name, child in self._torch_modules.items()]
            self._torch_modules.clear()
            self._torch_modules.update(dict(items))
        else:
            self._torch_modules[key] = module

    def add_module(self, name: str, module: Any) -> None:
        """torch's `add_module` on a ModuleDict (and classes deriving from it, DenseNet's
        `_DenseBlock`): the child is an entry, so `items()` and torch's key paths see it."""
        self[name] = module

    register_module = add_module

    def __delitem__(self, key: str) -> None:
        self._torch_modules.pop(key)

    def __contains__(self, key: object) -> bool:
        return key in self._torch_modules

    def __len__(self) -> int:
        return len(self._torch_modules)

    def __iter__(self) -> Any:
        return iter(list(self._torch_modules))

    def keys(self) -> Any:
        return list(self._torch_modules.keys())

    def values(self) -> Any:
        return list(self._torch_modules.values())

    def items(self) -> Any:
        return list(self._torch_modules.items())

    def update(self, modules: Any) -> None:
        for key, module in modules.items() if hasattr(modules, "items") else modules:
            self[str(key)] = module

    def pop(self, key: str) -> Any:
        return self._torch_modules.pop(key)

    def clear(self) -> None:
        self._torch_modules.clear()

    def call(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict is not callable (torch: it has no forward); index it")


# ----------------------------------------------------------------------------------------------------
# parameter-free layers


class Identity(keras.layers.Layer):
    """torch.nn.Identity: returns its input; accepts and ignores any constructor arguments, as torch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.built = True

    def call(self, input: Any) -> Any:
        return input


class Flatten(keras.layers.Layer):
    """torch.nn.Flatten(start_dim=1, end_dim=-1): flattens a range of dims (Keras Flatten: all but batch,
    and channels-last order)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_dim = start_dim
        self.end_dim = end_dim
        self.built = True

    def call(self, input: Any) -> Any:
        ndim = len(input.shape)
        start, end = self.start_dim % ndim, self.end_dim % ndim
        shape = list(ops.shape(input))
        merged = math.prod(shape[start : end + 1]) if None not in input.shape[start : end + 1] else -1
        return ops.reshape(input, (*shape[:start], merged, *shape[end + 1 :]))


class ReLU(keras.layers.Layer):
    """torch.nn.ReLU; `inplace` has no meaning for immutable tensors."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.relu(input)


class ReLU6(keras.layers.Layer):
    """torch.nn.ReLU6: min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.relu6(input)


class GELU(keras.layers.Layer):
    """torch.nn.GELU(approximate='none'): exact erf form by default (`keras.ops.gelu` defaults to tanh)."""

    def __init__(self, approximate: str = "none", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate
        self.built = True

    def call(self, input: Any) -> Any:
        return _gelu(input, self.approximate)


class SiLU(keras.layers.Layer):
    """torch.nn.SiLU: x * sigmoid(x)."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.silu(input)


class Sigmoid(keras.layers.Layer):
    """torch.nn.Sigmoid."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.sigmoid(input)


class Tanh(keras.layers.Layer):
    """torch.nn.Tanh."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.tanh(input)


class Softmax(keras.layers.Layer):
    """torch.nn.Softmax(dim): over `dim` (torch's legacy implicit dim when None; Keras: last axis)."""

    def __init__(self, dim: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.softmax(input, axis=_softmax_dim(len(input.shape)) if self.dim is None else self.dim)


class LogSoftmax(keras.layers.Layer):
    """torch.nn.LogSoftmax(dim): over `dim` (torch's legacy implicit dim when None)."""

    def __init__(self, dim: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.log_softmax(input, axis=_softmax_dim(len(input.shape)) if self.dim is None else self.dim)


class Hardswish(keras.layers.Layer):
    """torch.nn.Hardswish: x * relu6(x + 3) / 6."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return input * ops.relu6(input + 3.0) / 6.0


class Hardsigmoid(keras.layers.Layer):
    """torch.nn.Hardsigmoid: relu6(x + 3) / 6 (Keras 2's hard_sigmoid was 0.2 x + 0.5)."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.relu6(input + 3.0) / 6.0


class LeakyReLU(keras.layers.Layer):
    """torch.nn.LeakyReLU(negative_slope=0.01) (Keras LeakyReLU defaults to 0.3)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.negative_slope = negative_slope
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.leaky_relu(input, negative_slope=self.negative_slope)


class ELU(keras.layers.Layer):
    """torch.nn.ELU(alpha=1.0)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alpha = alpha
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.elu(input, alpha=self.alpha)


class Mish(keras.layers.Layer):
    """torch.nn.Mish: x * tanh(softplus(x))."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return input * ops.tanh(ops.softplus(input))


class Softplus(keras.layers.Layer):
    """torch.nn.Softplus(beta=1, threshold=20): log(1 + exp(beta x)) / beta, linear where beta x > threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta = beta
        self.threshold = threshold
        self.built = True

    def call(self, input: Any) -> Any:
        scaled = input * self.beta
        return ops.where(scaled > self.threshold, input, ops.softplus(scaled) / self.beta)
