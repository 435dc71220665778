"""torch's margin and embedding losses for Flax NNX: HingeEmbeddingLoss, CosineEmbeddingLoss,
TripletMarginLoss, TripletMarginWithDistanceLoss, MultiMarginLoss, MultiLabelMarginLoss,
MultiLabelSoftMarginLoss and GaussianNLLLoss, with torch's reductions.

Why shims: optax has some of these under other conventions (targets in {0, 1} rather than +-1,
no margins per torch's formulas, other epsilons); these follow torch's definitions, including its
epsilons (cosine 1e-12, pairwise distance 1e-6) and variance clamping.
"""

from typing import Any

import jax
import jax.numpy as jnp

from precision_transpiler.runtime.flax.distance import _pairwise_distance
from precision_transpiler.runtime.flax.functional import _ArrayOps, _value
from precision_transpiler.runtime.flax.losses import _Loss
from precision_transpiler.runtime.losses import _reduce_loss
from precision_transpiler.runtime.margin_losses import _triplet


class _MarginLoss(_Loss):
    """Losses built as torch's `(margin, size_average, reduce, reduction)`."""

    _default_margin = 1.0

    def __init__(
        self, margin: float | None = None, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
    ):
        super().__init__(None, size_average, reduce, reduction)
        self.margin = self._default_margin if margin is None else margin


class HingeEmbeddingLoss(_MarginLoss):
    """torch.nn.HingeEmbeddingLoss(margin=1.0): x where y = 1, max(0, margin - x) where y = -1."""

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        hinge = jnp.where(target != 1, jax.nn.relu(self.margin - input), 0.0)
        loss = hinge + jnp.where(target != -1, input, 0.0)
        return _reduce_loss(loss.astype(input.dtype), self.reduction, _ArrayOps)


class CosineEmbeddingLoss(_MarginLoss):
    """torch.nn.CosineEmbeddingLoss(margin=0.0): 1 - cos(x1, x2) where y = 1, max(0, cos - margin)
    where y = -1 (cosine along the last dim, squared norms + 1e-12 as torch)."""

    _default_margin = 0.0

    def __call__(self, input1: jax.Array, input2: jax.Array, target: jax.Array) -> jax.Array:
        dim = input1.ndim - 1
        dot = jnp.sum(input1 * input2, axis=dim)
        sq = (jnp.sum(input1 * input1, axis=dim) + 1e-12) * (jnp.sum(input2 * input2, axis=dim) + 1e-12)
        cos = dot / jnp.sqrt(sq)
        loss = jnp.where(target == 1, 1.0 - cos, 0.0) + jnp.where(target == -1, jax.nn.relu(cos - self.margin), 0.0)
        return _reduce_loss(loss.astype(input1.dtype), self.reduction, _ArrayOps)


class TripletMarginLoss(_Loss):
    """torch.nn.TripletMarginLoss(margin=1.0, p=2.0, eps=1e-6, swap=False): pairwise p-norm distances."""

    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ):
        super().__init__(None, size_average, reduce, reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def __call__(self, anchor: jax.Array, positive: jax.Array, negative: jax.Array) -> jax.Array:
        def distance(a: jax.Array, b: jax.Array) -> jax.Array:
            return _pairwise_distance(a, b, self.p, self.eps, False)

        return _triplet(anchor, positive, negative, distance, self.margin, self.swap, self.reduction, _ArrayOps)


class TripletMarginWithDistanceLoss(_Loss):
    """torch.nn.TripletMarginWithDistanceLoss(*, distance_function=None, margin=1.0, swap=False):
    the default distance is the pairwise 2-norm (eps 1e-6)."""

    def __init__(
        self,
        *,
        distance_function: Any = None,
        margin: float = 1.0,
        swap: bool = False,
        reduction: str = "mean",
    ):
        super().__init__(None, None, None, reduction)
        self.distance_function = distance_function
        self.margin, self.swap = margin, swap

    def __call__(self, anchor: jax.Array, positive: jax.Array, negative: jax.Array) -> jax.Array:
        distance = self.distance_function or (lambda a, b: _pairwise_distance(a, b, 2.0, 1e-6, False))
        return _triplet(anchor, positive, negative, distance, self.margin, self.swap, self.reduction, _ArrayOps)


class MultiMarginLoss(_Loss):
    """torch.nn.MultiMarginLoss(p=1, margin=1.0, weight): per sample, the mean over classes i != y of
    max(0, margin - x[y] + x[i])^p, times weight[y]."""

    def __init__(
        self,
        p: int = 1,
        margin: float = 1.0,
        weight: Any = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ):
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        super().__init__(weight, size_average, reduce, reduction)
        self.p, self.margin = p, margin

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        x = input[None] if input.ndim == 1 else input
        y = jnp.reshape(jnp.asarray(target), (-1,))
        picked = jnp.take_along_axis(x, y[:, None], axis=1)
        margins = jax.nn.relu(self.margin - picked + x) ** self.p
        weight = _value(self.weight)
        if weight is not None:
            margins = margins * jnp.asarray(weight, x.dtype)[y][:, None]
        others = jnp.arange(x.shape[1])[None, :] != y[:, None]
        loss = jnp.sum(jnp.where(others, margins, 0.0), axis=1) / x.shape[1]
        return _reduce_loss(loss.reshape(()) if input.ndim == 1 else loss, self.reduction, _ArrayOps)


class MultiLabelSoftMarginLoss(_Loss):
    """torch.nn.MultiLabelSoftMarginLoss(weight): per sample, the mean over classes of the binary
    cross-entropy of sigmoid(x) against y in {0, 1}."""

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        target = jnp.asarray(target, input.dtype)
        loss = -(target * jax.nn.log_sigmoid(input) + (1.0 - target) * jax.nn.log_sigmoid(-input))
        weight = _value(self.weight)
        if weight is not None:
            loss = loss * jnp.asarray(weight, input.dtype)
        return _reduce_loss(loss.sum(axis=input.ndim - 1) / input.shape[-1], self.reduction, _ArrayOps)


class MultiLabelMarginLoss(_Loss):
    """torch.nn.MultiLabelMarginLoss: per sample, the sum over its target classes j (the indices of
    `target` before the first -1) and the other classes i of max(0, 1 - (x[j] - x[i])), over C."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__(None, size_average, reduce, reduction)

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        x = input[None] if input.ndim == 1 else input
        y = jnp.reshape(jnp.asarray(target), x.shape)
        valid = jnp.cumprod(y >= 0, axis=1).astype(bool)
        safe = jnp.where(valid, y, 0)
        is_target = jnp.any(jax.nn.one_hot(safe, x.shape[1], dtype=bool) & valid[:, :, None], axis=1)
        picked = jnp.take_along_axis(x, safe, axis=1)
        hinge = jax.nn.relu(1.0 - (picked[:, :, None] - x[:, None, :]))
        pairs = valid[:, :, None] & ~is_target[:, None, :]
        loss = jnp.sum(jnp.where(pairs, hinge, 0.0), axis=(1, 2)) / x.shape[1]
        return _reduce_loss(loss.reshape(()) if input.ndim == 1 else loss, self.reduction, _ArrayOps)


class GaussianNLLLoss(_Loss):
    """torch.nn.GaussianNLLLoss(*, full=False, eps=1e-6): 0.5 (log var + (x - t)^2 / var), var clamped
    at eps; a `var` with one dim less than the input (or a last dim of 1) broadcasts as torch."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(None, None, None, reduction)
        self.full, self.eps = full, eps

    def __call__(self, input: jax.Array, target: jax.Array, var: Any) -> jax.Array:
        var = jnp.asarray(var, input.dtype)
        if var.shape != input.shape and var.shape == input.shape[:-1]:
            var = var[..., None]
        var = jnp.maximum(var, self.eps)
        loss = 0.5 * (jnp.log(var) + jnp.square(input - target) / var)
        if self.full:
            loss = loss + 0.5 * jnp.log(2 * jnp.pi)
        return _reduce_loss(loss, self.reduction, _ArrayOps)
