"""torch's margin and embedding losses for Keras 3: HingeEmbeddingLoss, CosineEmbeddingLoss,
TripletMarginLoss, TripletMarginWithDistanceLoss, MultiMarginLoss, MultiLabelMarginLoss,
MultiLabelSoftMarginLoss and GaussianNLLLoss, with torch's reductions.

Why shims: Keras' hinge and cosine losses use other conventions (targets in {0, 1}, no margins per
torch's formulas, other epsilons, sum over the last axis); these follow torch's definitions,
including its epsilons (cosine 1e-12, pairwise distance 1e-6) and variance clamping.
"""

import math
from typing import Any

from keras import ops

from precision_transpiler.runtime.keras.distance import _pairwise_distance
from precision_transpiler.runtime.keras.functional import _ArrayOps
from precision_transpiler.runtime.keras.losses import _Loss
from precision_transpiler.runtime.losses import _reduce_loss
from precision_transpiler.runtime.margin_losses import _triplet


class _MarginLoss(_Loss):
    """Losses built as torch's `(margin, size_average, reduce, reduction)`."""

    _default_margin = 1.0

    def __init__(
        self,
        margin: float | None = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(None, size_average, reduce, reduction, **kwargs)
        self.margin = self._default_margin if margin is None else margin


class HingeEmbeddingLoss(_MarginLoss):
    """torch.nn.HingeEmbeddingLoss(margin=1.0): x where y = 1, max(0, margin - x) where y = -1."""

    def call(self, input: Any, target: Any) -> Any:
        zeros = ops.zeros_like(input)
        hinge = ops.where(target != 1, ops.relu(self.margin - input), zeros)
        return _reduce_loss(hinge + ops.where(target != -1, input, zeros), self.reduction, _ArrayOps)


class CosineEmbeddingLoss(_MarginLoss):
    """torch.nn.CosineEmbeddingLoss(margin=0.0): 1 - cos(x1, x2) where y = 1, max(0, cos - margin)
    where y = -1 (cosine along the last dim, squared norms + 1e-12 as torch)."""

    _default_margin = 0.0

    def call(self, input1: Any, input2: Any, target: Any) -> Any:
        dim = len(input1.shape) - 1
        dot = ops.sum(input1 * input2, axis=dim)
        sq = (ops.sum(input1 * input1, axis=dim) + 1e-12) * (ops.sum(input2 * input2, axis=dim) + 1e-12)
        cos = dot / ops.sqrt(sq)
        zeros = ops.zeros_like(cos)
        loss = ops.where(target == 1, 1.0 - cos, zeros) + ops.where(target == -1, ops.relu(cos - self.margin), zeros)
        return _reduce_loss(loss, self.reduction, _ArrayOps)


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
        **kwargs: Any,
    ) -> None:
        super().__init__(None, size_average, reduce, reduction, **kwargs)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def call(self, anchor: Any, positive: Any, negative: Any) -> Any:
        def distance(a: Any, b: Any) -> Any:
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
        **kwargs: Any,
    ) -> None:
        super().__init__(None, None, None, reduction, **kwargs)
        self.distance_function = distance_function
        self.margin, self.swap = margin, swap

    def call(self, anchor: Any, positive: Any, negative: Any) -> Any:
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
        **kwargs: Any,
    ) -> None:
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        super().__init__(weight, size_average, reduce, reduction, **kwargs)
        self.p, self.margin = p, margin

    def call(self, input: Any, target: Any) -> Any:
        unbatched = len(input.shape) == 1
        x = ops.expand_dims(input, 0) if unbatched else input
        y = ops.reshape(ops.cast(target, "int32"), (-1,))
        picked = ops.take_along_axis(x, ops.expand_dims(y, 1), axis=1)
        margins = ops.relu(self.margin - picked + x) ** self.p
        if self.weight is not None:
            margins = margins * ops.expand_dims(ops.take(ops.cast(self.weight, x.dtype), y), 1)
        others = ops.expand_dims(ops.arange(x.shape[1]), 0) != ops.expand_dims(y, 1)
        loss = ops.sum(ops.where(others, margins, ops.zeros_like(margins)), axis=1) / x.shape[1]
        return _reduce_loss(ops.reshape(loss, ()) if unbatched else loss, self.reduction, _ArrayOps)


class MultiLabelSoftMarginLoss(_Loss):
    """torch.nn.MultiLabelSoftMarginLoss(weight): per sample, the mean over classes of the binary
    cross-entropy of sigmoid(x) against y in {0, 1}."""

    def call(self, input: Any, target: Any) -> Any:
        target = ops.cast(target, input.dtype)
        loss = target * ops.softplus(-input) + (1.0 - target) * ops.softplus(input)  # -log sigmoid(+-x)
        if self.weight is not None:
            loss = loss * ops.cast(self.weight, input.dtype)
        return _reduce_loss(ops.sum(loss, axis=-1) / input.shape[-1], self.reduction, _ArrayOps)


class MultiLabelMarginLoss(_Loss):
    """torch.nn.MultiLabelMarginLoss: per sample, the sum over its target classes j (the indices of
    `target` before the first -1) and the other classes i of max(0, 1 - (x[j] - x[i])), over C."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean", **kwargs: Any) -> None:
        super().__init__(None, size_average, reduce, reduction, **kwargs)

    def call(self, input: Any, target: Any) -> Any:
        unbatched = len(input.shape) == 1
        x = ops.expand_dims(input, 0) if unbatched else input
        classes = x.shape[1]
        y = ops.reshape(ops.cast(target, "int32"), (-1, classes))
        valid = ops.cumprod(ops.cast(y >= 0, "int32"), axis=1) > 0
        safe = ops.where(valid, y, ops.zeros_like(y))
        hits = ops.one_hot(safe, classes) * ops.expand_dims(ops.cast(valid, "float32"), 2)
        is_target = ops.max(hits, axis=1) > 0
        picked = ops.take_along_axis(x, safe, axis=1)
        hinge = ops.relu(1.0 - (ops.expand_dims(picked, 2) - ops.expand_dims(x, 1)))
        pairs = ops.logical_and(ops.expand_dims(valid, 2), ops.logical_not(ops.expand_dims(is_target, 1)))
        loss = ops.sum(ops.where(pairs, hinge, ops.zeros_like(hinge)), axis=(1, 2)) / classes
        return _reduce_loss(ops.reshape(loss, ()) if unbatched else loss, self.reduction, _ArrayOps)


class GaussianNLLLoss(_Loss):
    """torch.nn.GaussianNLLLoss(*, full=False, eps=1e-6): 0.5 (log var + (x - t)^2 / var), var clamped
    at eps; a `var` with one dim less than the input (or a last dim of 1) broadcasts as torch."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean", **kwargs: Any) -> None:
        super().__init__(None, None, None, reduction, **kwargs)
        self.full, self.eps = full, eps

    def call(self, input: Any, target: Any, var: Any) -> Any:
        var = ops.cast(var, input.dtype)
        if tuple(var.shape) != tuple(input.shape) and tuple(var.shape) == tuple(input.shape[:-1]):
            var = ops.expand_dims(var, -1)
        var = ops.maximum(var, self.eps)
        loss = 0.5 * (ops.log(var) + ops.square(input - target) / var)
        if self.full:
            loss = loss + 0.5 * math.log(2 * math.pi)
        return _reduce_loss(loss, self.reduction, _ArrayOps)
