"""torch's small layers in Keras 3 with torch's signatures and semantics: `Linear`, `Embedding`,
`Dropout`, `Identity`, `Flatten`.

Weights keep torch's names and layouts (`weight` (out, in) for Linear, (num, dim) for Embedding),
so a torch `state_dict` loads name for name; the kernel is transposed inside `call`. The
activation layers are in activations.py, the containers in containers.py, torch's Module
behaviour (`TorchModule`) in modules.py. The Flax counterpart is runtime/flax/layers.py.
"""

import math
from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import TorchInit
from precision_transpiler.runtime.keras.functional import _cast, _dropout, _keras_dtype, _linear, _uniform
from precision_transpiler.runtime.keras.module_api import ReplacesVariables


class Linear(TorchInit, ReplacesVariables, keras.layers.Layer):
    """torch.nn.Linear: `weight` (out, in) as torch (Keras Dense: `kernel` (in, out)), y = x W^T + b.
    Assigning another layer's parameter (`lm_head.weight = wte.weight`: both hold torch's
    layout) shares that variable, as torch shares the Parameter."""

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


class Embedding(TorchInit, ReplacesVariables, keras.layers.Layer):
    """torch.nn.Embedding: `weight` (num, dim) ~ N(0, 1) with the `padding_idx` row zeroed.

    As in torch, the `padding_idx` row receives no gradient. `max_norm` (in-place renormalisation) is
    not supported. `_weight` gives the initial table, `_freeze=True` makes it non-trainable.
    Assigning another layer's parameter (`wte.weight = lm_head.weight`) shares that variable.
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
        # the rest of torch's signature, which subclasses hand to F.embedding (fair-esm)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
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


class Identity(keras.layers.Layer):
    """torch.nn.Identity: returns its input; accepts and ignores any constructor arguments, as torch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.built = True

    def call(self, input: Any) -> Any:
        return input


class FloatFunctional(keras.layers.Layer):
    """torch.nn.quantized.FloatFunctional: the float arithmetic a model marks for quantization
    (`self.skip_add.add(x, y)`, pytorchvideo's blocks), plain arithmetic here (a converted model
    runs in floating point; quantizing is the target's business)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def add(self, x: Any, y: Any) -> Any:
        return ops.add(x, y)

    def add_scalar(self, x: Any, y: Any) -> Any:
        return ops.add(x, y)

    def mul(self, x: Any, y: Any) -> Any:
        return ops.multiply(x, y)

    def mul_scalar(self, x: Any, y: Any) -> Any:
        return ops.multiply(x, y)

    def add_relu(self, x: Any, y: Any) -> Any:
        return ops.relu(ops.add(x, y))

    def matmul(self, x: Any, y: Any) -> Any:
        return ops.matmul(x, y)

    def cat(self, x: Any, dim: int = 0) -> Any:
        return ops.concatenate(x, axis=dim)


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
