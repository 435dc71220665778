"""torch's margin and embedding losses for Flax NNX: HingeEmbeddingLoss, CosineEmbeddingLoss,
TripletMarginLoss, TripletMarginWithDistanceLoss, MultiMarginLoss, MultiLabelMarginLoss,
MultiLabelSoftMarginLoss and GaussianNLLLoss, with torch's reductions.

Why shims: optax has some of these under other conventions (targets in {0, 1} rather than +-1,
no margins per torch's formulas, other epsilons); these follow torch's definitions, including its
epsilons (cosine 1e-12, pairwise distance 1e-6) and variance clamping.
"""

from typing import Any

import jax

from precision_transpiler.runtime.common import _pairwise_distance
from precision_transpiler.runtime.flax.functional import _ArrayOps, _value
from precision_transpiler.runtime.flax.losses import _Loss
from precision_transpiler.runtime.margin_losses import (
    _cosine_embedding_loss,
    _gaussian_nll_loss,
    _hinge_embedding_loss,
    _multi_margin_loss,
    _multilabel_margin_loss,
    _multilabel_soft_margin_loss,
    _triplet,
)


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
        return _hinge_embedding_loss(input, target, self.margin, self.reduction, _ArrayOps)


class CosineEmbeddingLoss(_MarginLoss):
    """torch.nn.CosineEmbeddingLoss(margin=0.0): 1 - cos(x1, x2) where y = 1, max(0, cos - margin)
    where y = -1 (cosine along the last dim, squared norms + 1e-12 as torch)."""

    _default_margin = 0.0

    def __call__(self, input1: jax.Array, input2: jax.Array, target: jax.Array) -> jax.Array:
        return _cosine_embedding_loss(input1, input2, target, self.margin, self.reduction, _ArrayOps)


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
            return _pairwise_distance(a, b, self.p, self.eps, False, _ArrayOps)

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
        distance = self.distance_function or (lambda a, b: _pairwise_distance(a, b, 2.0, 1e-6, False, _ArrayOps))
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
        return _multi_margin_loss(input, target, self.p, self.margin, _value(self.weight), self.reduction, _ArrayOps)


class MultiLabelSoftMarginLoss(_Loss):
    """torch.nn.MultiLabelSoftMarginLoss(weight): per sample, the mean over classes of the binary
    cross-entropy of sigmoid(x) against y in {0, 1}."""

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return _multilabel_soft_margin_loss(input, target, _value(self.weight), self.reduction, _ArrayOps)


class MultiLabelMarginLoss(_Loss):
    """torch.nn.MultiLabelMarginLoss: per sample, the sum over its target classes j (the indices of
    `target` before the first -1) and the other classes i of max(0, 1 - (x[j] - x[i])), over C."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__(None, size_average, reduce, reduction)

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return _multilabel_margin_loss(input, target, self.reduction, _ArrayOps)


class GaussianNLLLoss(_Loss):
    """torch.nn.GaussianNLLLoss(*, full=False, eps=1e-6): 0.5 (log var + (x - t)^2 / var), var clamped
    at eps; a `var` with one dim less than the input (or a last dim of 1) broadcasts as torch."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(None, None, None, reduction)
        self.full, self.eps = full, eps

    def __call__(self, input: jax.Array, target: jax.Array, var: Any) -> jax.Array:
        return _gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction, _ArrayOps)
