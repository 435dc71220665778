"""The framework-free half of torch's losses (runtime/flax/losses.py, runtime/keras/losses.py):
torch's reductions (the legacy `size_average`/`reduce` arguments included) and the loss formulas,
`cross_entropy` with its class weights, `ignore_index` and label smoothing among them, written
once over `ops`, the target's array operations (`_ArrayOps` of runtime/<target>/functional.py).
The targets keep the signatures, the loss layers and their weights as framework state.
"""

import math
from typing import Any


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """torch's `_Reduction.legacy_get_string` for the deprecated size_average/reduce arguments."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce_loss(loss: Any, reduction: str, ops: Any) -> Any:
    """torch's loss reduction: 'mean', 'sum' or 'none'."""
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _mse_loss(input: Any, target: Any, reduction: str, ops: Any) -> Any:
    return _reduce_loss(ops.square(input - target), reduction, ops)


def _l1_loss(input: Any, target: Any, reduction: str, ops: Any) -> Any:
    return _reduce_loss(ops.abs(input - target), reduction, ops)


def _smooth_l1_loss(input: Any, target: Any, reduction: str, beta: float, ops: Any) -> Any:
    d = ops.abs(input - target)
    loss = d if beta == 0 else ops.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce_loss(loss, reduction, ops)


def _huber_loss(input: Any, target: Any, reduction: str, delta: float, ops: Any) -> Any:
    d = ops.abs(input - target)
    return _reduce_loss(ops.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction, ops)


def _soft_margin_loss(input: Any, target: Any, reduction: str, ops: Any) -> Any:
    return _reduce_loss(ops.softplus(-target * input), reduction, ops)


def _margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float, reduction: str, ops: Any) -> Any:
    return _reduce_loss(ops.relu(-target * (input1 - input2) + margin), reduction, ops)


def _binary_cross_entropy(input: Any, target: Any, weight: Any, reduction: str, ops: Any) -> Any:
    """Each log clamped at -100, as torch."""
    target = ops.cast(target, input.dtype)
    log_p = ops.maximum(ops.log(input), -100.0)
    log_q = ops.maximum(ops.log1p(-input), -100.0)
    loss = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        loss = loss * ops.cast(weight, input.dtype)
    return _reduce_loss(loss, reduction, ops)


def _binary_cross_entropy_with_logits(
    input: Any, target: Any, weight: Any, reduction: str, pos_weight: Any, ops: Any
) -> Any:
    """torch's stable form: (1 - t) * x + (1 + (pw - 1) * t) * softplus(-x), times `weight`."""
    target = ops.cast(target, input.dtype)
    log_weight = 1.0 if pos_weight is None else 1.0 + (ops.cast(pos_weight, input.dtype) - 1.0) * target
    loss = (1.0 - target) * input + log_weight * ops.softplus(-input)
    if weight is not None:
        loss = loss * ops.cast(weight, input.dtype)
    return _reduce_loss(loss, reduction, ops)


def _class_dim(ndim: int) -> int:
    """The class dim of torch's classification losses: 1 on (N, C, *), 0 on an unbatched (C,)."""
    return 0 if ndim == 1 else 1


def _pick(values: Any, target: Any, ignore_index: int, class_dim: int, ops: Any) -> tuple[Any, Any, Any]:
    """values[target] along the class dim, with the mask of targets other than `ignore_index` and
    the targets with those set to class 0 (safe to index with)."""
    target = ops.asarray(target)
    valid = target != ignore_index
    safe = ops.where(valid, target, ops.zeros_like(target))
    picked = ops.take_along_axis(values, ops.expand_dims(safe, class_dim), axis=class_dim)
    return ops.squeeze(picked, class_dim), valid, safe


def _smoothed(loss: Any, smooth: Any, label_smoothing: float, n_classes: int) -> Any:
    """torch's label smoothing: (1 - eps) * nll + eps / C * (the summed -log p of every class)."""
    return loss if smooth is None else (1.0 - label_smoothing) * loss + smooth * (label_smoothing / n_classes)


def _cross_entropy(
    input: Any, target: Any, weight: Any, reduction: str, ignore_index: int, label_smoothing: float, ops: Any
) -> Any:
    """torch's cross entropy over logits (N, C, *) or (C,), in at least float32 (the targets'
    `cross_entropy` says what it honours)."""
    ndim = len(input.shape)
    class_dim = _class_dim(ndim)
    n_classes = input.shape[class_dim]
    logp = ops.log_softmax(ops.cast(input, ops.stats_dtype(input.dtype)), axis=class_dim)
    wshape = [1] * ndim
    wshape[class_dim] = n_classes
    w = None if weight is None else ops.reshape(ops.cast(weight, logp.dtype), wshape)
    if ops.is_floating(target):
        target = ops.cast(target, logp.dtype)
        if label_smoothing > 0.0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        loss = -ops.sum(logp * target if w is None else logp * target * w, axis=class_dim)
        if reduction == "mean":
            return ops.cast(ops.sum(loss) / (ops.numel(loss) if ndim > 1 else 1), input.dtype)
        return ops.cast(_reduce_loss(loss, reduction, ops), input.dtype)
    picked, valid, safe = _pick(logp, target, ignore_index, class_dim, ops)
    if weight is None:
        tw = ops.cast(valid, logp.dtype)
    else:
        tw = ops.where(valid, ops.take(ops.cast(weight, logp.dtype), safe), ops.zeros_like(picked))
    nll = -picked * tw
    smooth = None
    if label_smoothing > 0.0:
        smooth = -ops.sum(logp if w is None else logp * w, axis=class_dim)
        smooth = ops.where(valid, smooth, ops.zeros_like(smooth))
    if reduction == "mean":
        denom = ops.sum(tw)
        loss = _smoothed(
            ops.sum(nll) / denom, None if smooth is None else ops.sum(smooth) / denom, label_smoothing, n_classes
        )
    elif reduction == "sum":
        loss = _smoothed(ops.sum(nll), None if smooth is None else ops.sum(smooth), label_smoothing, n_classes)
    elif reduction == "none":
        loss = _smoothed(nll, smooth, label_smoothing, n_classes)
    else:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return ops.cast(loss, input.dtype)


def _nll_loss(input: Any, target: Any, weight: Any, reduction: str, ignore_index: int, ops: Any) -> Any:
    """torch's nll_loss on log-probabilities (N, C, *) or (C,)."""
    picked, valid, safe = _pick(input, target, ignore_index, _class_dim(len(input.shape)), ops)
    if weight is None:
        tw = ops.cast(valid, input.dtype)
    else:
        tw = ops.where(valid, ops.take(ops.cast(weight, input.dtype), safe), ops.zeros_like(picked))
    loss = -picked * tw
    if reduction == "mean":
        return ops.sum(loss) / ops.sum(tw)
    return _reduce_loss(loss, reduction, ops)


def _kl_div(input: Any, target: Any, reduction: str, log_target: bool, ops: Any) -> Any:
    """torch's kl_div(input=log q, target=p), p log p being torch's xlogy (0 at p = 0)."""
    target = ops.cast(target, input.dtype)
    loss = ops.exp(target) * (target - input) if log_target else ops.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return ops.sum(loss) / (input.shape[0] if len(input.shape) else 1)
    return _reduce_loss(loss, reduction, ops)


def _poisson_nll_loss(
    input: Any, target: Any, log_input: bool, full: bool, eps: float, reduction: str, ops: Any
) -> Any:
    """torch's poisson_nll_loss, Stirling's term where t > 1 when `full`."""
    loss = ops.exp(input) - target * input if log_input else input - target * ops.log(input + eps)
    if full:
        safe = ops.where(target > 1, target, ops.ones_like(target))
        stirling = safe * ops.log(safe) - safe + 0.5 * ops.log(2 * math.pi * safe)
        loss = loss + ops.where(target > 1, stirling, ops.zeros_like(stirling))
    return _reduce_loss(loss, reduction, ops)
