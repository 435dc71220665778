"""torch's EmbeddingBag for Flax NNX: the sum, mean or max of the embeddings of each bag.

Why a shim: nnx.Embed looks rows up one by one; torch's EmbeddingBag reduces bags given as rows of
a 2D input or as a flat input cut by `offsets` (`include_last_offset`), skips `padding_idx`
entries (not counted in a mean), scales by `per_sample_weights` in 'sum' mode and gives 0 for an
empty bag. The table keeps torch's name and shape, `weight` (num_embeddings, embedding_dim).
"""

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.flax.rng import default_rngs


class EmbeddingBag(TorchLayer):
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
        *,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
        if max_norm is not None:
            raise NotImplementedError("EmbeddingBag(max_norm=...) renormalises the table in place; not supported")
        self.num_embeddings, self.embedding_dim, self.mode = num_embeddings, embedding_dim, mode
        self.include_last_offset = include_last_offset
        self.padding_idx = None if padding_idx is None else padding_idx % num_embeddings
        if _weight is not None:
            table = jnp.asarray(_weight, param_dtype)
        else:
            table = jax.random.normal(rngs.params(), (num_embeddings, embedding_dim), param_dtype)
            if self.padding_idx is not None:
                table = table.at[self.padding_idx].set(0.0)
        self.weight = nnx.Param(table)

    def __call__(self, input: jax.Array, offsets: Any = None, per_sample_weights: Any = None) -> jax.Array:
        ids = jnp.asarray(input)
        if ids.ndim == 2:
            if offsets is not None:
                raise ValueError("offsets has to be None when input is 2D")
            n_bags = ids.shape[0]
            bag_of = jnp.repeat(jnp.arange(n_bags), ids.shape[1])
            ids = ids.reshape(-1)
        else:
            offsets = jnp.asarray(offsets)
            n_bags = offsets.shape[0] - 1 if self.include_last_offset else offsets.shape[0]
            bag_of = jnp.searchsorted(offsets, jnp.arange(ids.shape[0]), side="right") - 1
        rows = self.weight[...][ids]
        if per_sample_weights is not None:
            if self.mode != "sum":
                raise NotImplementedError("per_sample_weights are only supported for mode='sum'")
            rows = rows * jnp.reshape(jnp.asarray(per_sample_weights, rows.dtype), (-1, 1))
        keep = jnp.ones(ids.shape, bool) if self.padding_idx is None else ids != self.padding_idx
        count = jax.ops.segment_sum(keep.astype(rows.dtype), bag_of, n_bags)[:, None]
        if self.mode == "max":
            most = jax.ops.segment_max(jnp.where(keep[:, None], rows, -jnp.inf), bag_of, n_bags)
            return jnp.where(count > 0, most, 0.0).astype(rows.dtype)
        total = jax.ops.segment_sum(jnp.where(keep[:, None], rows, 0.0), bag_of, n_bags)
        return total if self.mode == "sum" else total / jnp.maximum(count, 1.0)
