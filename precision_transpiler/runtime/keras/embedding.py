"""torch's EmbeddingBag for Keras 3: the sum, mean or max of the embeddings of each bag.

Why a shim: Keras' Embedding looks rows up one by one; torch's EmbeddingBag reduces bags given as
rows of a 2D input or as a flat input cut by `offsets` (`include_last_offset`), skips `padding_idx`
entries (not counted in a mean), scales by `per_sample_weights` in 'sum' mode and gives 0 for an
empty bag. The table keeps torch's name and shape, `weight` (num_embeddings, embedding_dim).
"""

from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.keras.functional import _keras_dtype


class EmbeddingBag(keras.layers.Layer):
    """torch.nn.EmbeddingBag(num_embeddings, embedding_dim, mode='mean', include_last_offset, padding_idx)."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Any = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
        if max_norm is not None:
            raise NotImplementedError("EmbeddingBag(max_norm=...) renormalises the table in place; not supported")
        self.num_embeddings, self.embedding_dim, self.mode = num_embeddings, embedding_dim, mode
        self.include_last_offset = include_last_offset
        self.padding_idx = None if padding_idx is None else padding_idx % num_embeddings
        shape = (num_embeddings, embedding_dim)
        init = keras.initializers.RandomNormal(stddev=1.0)
        self.weight = self.add_weight(shape=shape, initializer=init, autocast=False, name="weight")
        if _weight is not None:
            self.weight.assign(ops.cast(_weight, self.weight.dtype))
        elif self.padding_idx is not None:
            self.weight.assign(
                ops.where(ops.expand_dims(ops.arange(num_embeddings) == self.padding_idx, 1), 0.0, self.weight)
            )
        self.built = True

    def call(self, input: Any, offsets: Any = None, per_sample_weights: Any = None) -> Any:
        ids = ops.cast(input, "int32")
        if len(ids.shape) == 2:
            if offsets is not None:
                raise ValueError("offsets has to be None when input is 2D")
            n_bags = ids.shape[0]
            bag_of = ops.repeat(ops.arange(n_bags), ids.shape[1])
            ids = ops.reshape(ids, (-1,))
        else:
            offsets = ops.cast(offsets, "int32")
            n_bags = offsets.shape[0] - 1 if self.include_last_offset else offsets.shape[0]
            bag_of = ops.searchsorted(offsets, ops.arange(ids.shape[0], dtype="int32"), side="right") - 1
        rows = ops.take(ops.cast(self.weight, self.compute_dtype), ids, axis=0)
        if per_sample_weights is not None:
            if self.mode != "sum":
                raise NotImplementedError("per_sample_weights are only supported for mode='sum'")
            rows = rows * ops.reshape(ops.cast(per_sample_weights, rows.dtype), (-1, 1))
        keep = ops.ones(ids.shape, "bool") if self.padding_idx is None else ids != self.padding_idx
        count = ops.expand_dims(ops.segment_sum(ops.cast(keep, rows.dtype), bag_of, n_bags), 1)
        keep = ops.expand_dims(keep, 1)
        if self.mode == "max":
            most = ops.segment_max(ops.where(keep, rows, float("-inf")), bag_of, n_bags)
            return ops.where(count > 0, most, ops.zeros_like(most))
        total = ops.segment_sum(ops.where(keep, rows, ops.zeros_like(rows)), bag_of, n_bags)
        return total if self.mode == "sum" else total / ops.maximum(count, 1.0)
