"""The framework-free half of torch's losses (runtime/flax/losses.py, runtime/keras/losses.py):
torch's reductions (the legacy `size_average`/`reduce` arguments included) and the loss formulas,
`cross_entropy` with its class weights, `ignore_index` and label smoothing among them, written
once over `ops`, the target's array operations (`_ArrayOps` of runtime/<target>/functional.py).
The targets keep the signatures, the loss layers and their weights as framework state.
"""

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
