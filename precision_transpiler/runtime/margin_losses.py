"""The framework-free half of torch's margin and embedding losses (runtime/flax/margin_losses.py,
runtime/keras/margin_losses.py): torch's formulas of HingeEmbeddingLoss, CosineEmbeddingLoss, the
triplet losses, MultiMarginLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss and
GaussianNLLLoss, with its epsilons and variance clamping, written once over `ops`, the target's
array operations (`_ArrayOps` of runtime/<target>/functional.py).
"""

import math
from typing import Any

from precision_transpiler.runtime.losses import _reduce_loss


def _triplet(
    anchor: Any, positive: Any, negative: Any, distance: Any, margin: float, swap: bool, reduction: str, ops: Any
) -> Any:
    """torch's triplet margin loss: max(0, margin + d(a, p) - d(a, n)); `swap` uses
    min(d(a, n), d(p, n))."""
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = ops.minimum(d_neg, distance(positive, negative))
    return _reduce_loss(ops.relu(margin + distance(anchor, positive) - d_neg), reduction, ops)


def _hinge_embedding_loss(input: Any, target: Any, margin: float, reduction: str, ops: Any) -> Any:
    """torch's HingeEmbeddingLoss: x where y = 1, max(0, margin - x) where y = -1 (both terms
    where y is neither, as torch)."""
    zeros = ops.zeros_like(input)
    hinge = ops.where(target != 1, ops.relu(margin - input), zeros)
    return _reduce_loss(ops.cast(hinge + ops.where(target != -1, input, zeros), input.dtype), reduction, ops)


def _cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float, reduction: str, ops: Any) -> Any:
    """torch's CosineEmbeddingLoss: 1 - cos(x1, x2) where y = 1, max(0, cos - margin) where y = -1
    (cosine along the last dim, squared norms + 1e-12 as torch)."""
    dim = len(input1.shape) - 1
    dot = ops.sum(input1 * input2, axis=dim)
    sq = (ops.sum(input1 * input1, axis=dim) + 1e-12) * (ops.sum(input2 * input2, axis=dim) + 1e-12)
    cos = dot / ops.sqrt(sq)
    zeros = ops.zeros_like(cos)
    loss = ops.where(target == 1, 1.0 - cos, zeros) + ops.where(target == -1, ops.relu(cos - margin), zeros)
    return _reduce_loss(ops.cast(loss, input1.dtype), reduction, ops)


def _multi_margin_loss(input: Any, target: Any, p: int, margin: float, weight: Any, reduction: str, ops: Any) -> Any:
    """torch's MultiMarginLoss: per sample, the mean over classes i != y of
    max(0, margin - x[y] + x[i])^p, times weight[y]; an unbatched input's loss has the target's
    shape."""
    unbatched = len(input.shape) == 1
    x = ops.expand_dims(input, 0) if unbatched else input
    y = ops.reshape(ops.cast(target, "int32"), (-1,))
    picked = ops.take_along_axis(x, ops.expand_dims(y, 1), axis=1)
    margins = ops.relu(margin - picked + x) ** p
    if weight is not None:
        margins = margins * ops.expand_dims(ops.take(ops.cast(weight, x.dtype), y), 1)
    others = ops.expand_dims(ops.arange(x.shape[1]), 0) != ops.expand_dims(y, 1)
    loss = ops.sum(ops.where(others, margins, ops.zeros_like(margins)), axis=1) / x.shape[1]
    if unbatched:  # shaped as the target, () or (1,), as torch
        loss = ops.reshape(loss, tuple(ops.asarray(target).shape))
    return _reduce_loss(loss, reduction, ops)


def _multilabel_soft_margin_loss(input: Any, target: Any, weight: Any, reduction: str, ops: Any) -> Any:
    """torch's MultiLabelSoftMarginLoss: per sample, the mean over classes of the binary cross
    entropy of sigmoid(x) against y in {0, 1} (-log sigmoid(+-x) as softplus(-+x))."""
    target = ops.cast(target, input.dtype)
    loss = target * ops.softplus(-input) + (1.0 - target) * ops.softplus(input)
    if weight is not None:
        loss = loss * ops.cast(weight, input.dtype)
    return _reduce_loss(ops.sum(loss, axis=-1) / input.shape[-1], reduction, ops)


def _multilabel_margin_loss(input: Any, target: Any, reduction: str, ops: Any) -> Any:
    """torch's MultiLabelMarginLoss: per sample, the sum over its target classes j (the indices of
    `target` before the first -1) and the other classes i of max(0, 1 - (x[j] - x[i])), over C."""
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
    return _reduce_loss(ops.reshape(loss, ()) if unbatched else loss, reduction, ops)


def _gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool, eps: float, reduction: str, ops: Any) -> Any:
    """torch's GaussianNLLLoss: 0.5 (log var + (x - t)^2 / var), var clamped at eps; a `var` with
    one dim less than the input broadcasts as torch's."""
    var = ops.cast(var, input.dtype)
    if tuple(var.shape) != tuple(input.shape) and tuple(var.shape) == tuple(input.shape[:-1]):
        var = ops.expand_dims(var, -1)
    var = ops.maximum(var, eps)
    loss = 0.5 * (ops.log(var) + ops.square(input - target) / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce_loss(loss, reduction, ops)
