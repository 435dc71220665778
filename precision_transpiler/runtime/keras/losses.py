"""torch's losses for Keras 3: `cross_entropy` (class indices or probabilities, `ignore_index`,
label smoothing, weights), `nll_loss`, `mse_loss`, `l1_loss` and
`binary_cross_entropy_with_logits`, with torch's reductions (legacy `size_average`/`reduce`
included).
"""

import keras
from keras import ops

from precision_transpiler.runtime.common import _legacy_reduction
from precision_transpiler.runtime.keras.functional import _stats_dtype
from precision_transpiler.runtime.keras.tensor import torch_numel


def _torch_reduce(loss, reduction):
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _torch_pick(values, target, ignore_index, class_dim):
    """values[target] along the class axis, 0 where target == ignore_index, with the mask."""
    valid = ops.not_equal(target, ignore_index)
    safe = ops.where(valid, target, ops.zeros_like(target))
    picked = ops.take_along_axis(values, ops.expand_dims(safe, class_dim), axis=class_dim)
    return ops.squeeze(picked, axis=class_dim), valid, safe


def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    """torch.nn.functional.cross_entropy: logits (N, C, *) or (C,), classes on axis 1.

    Class-index targets honour `ignore_index` (excluded from the mean's denominator), `weight`
    (the mean divides by the summed weights of the targets) and `label_smoothing` with torch's
    formula; probability targets (float, same shape as input) are supported too. Keras' losses
    take classes on the last axis and have no ignore_index. Computed in at least float32.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    ndim = len(input.shape)
    class_dim = 0 if ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = ops.log_softmax(ops.cast(input, _stats_dtype(input.dtype)), axis=class_dim)
    wshape = [1] * ndim
    wshape[class_dim] = n_classes
    w = None if weight is None else ops.reshape(ops.cast(weight, logp.dtype), wshape)

    if "float" in keras.backend.standardize_dtype(ops.convert_to_tensor(target).dtype):
        target = ops.cast(target, logp.dtype)
        if label_smoothing > 0.0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        terms = logp * target if w is None else logp * target * w
        loss = -ops.sum(terms, axis=class_dim)
        if reduction == "mean":
            count = torch_numel(loss) if ndim > 1 else 1
            return ops.cast(ops.sum(loss) / count, input.dtype)
        if reduction == "sum":
            return ops.cast(ops.sum(loss), input.dtype)
        return ops.cast(loss, input.dtype)

    picked, valid, safe = _torch_pick(logp, target, ignore_index, class_dim)
    if weight is None:
        tw = ops.cast(valid, logp.dtype)
    else:
        tw = ops.where(valid, ops.take(ops.cast(weight, logp.dtype), safe), 0.0)
    nll = -picked * tw
    smooth = None
    if label_smoothing > 0.0:
        smooth = -(ops.sum(logp, axis=class_dim) if w is None else ops.sum(logp * w, axis=class_dim))
        smooth = ops.where(valid, smooth, 0.0)
    if reduction == "mean":
        denom = ops.sum(tw)
        loss = ops.sum(nll) / denom
        if smooth is not None:
            loss = (1.0 - label_smoothing) * loss + ops.sum(smooth) / denom * (label_smoothing / n_classes)
    elif reduction == "sum":
        loss = ops.sum(nll)
        if smooth is not None:
            loss = (1.0 - label_smoothing) * loss + ops.sum(smooth) * (label_smoothing / n_classes)
    elif reduction == "none":
        loss = nll
        if smooth is not None:
            loss = (1.0 - label_smoothing) * loss + smooth * (label_smoothing / n_classes)
    else:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return ops.cast(loss, input.dtype)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """torch.nn.functional.nll_loss on log-probabilities (N, C, *) or (C,): `ignore_index`
    targets are excluded, a weighted mean divides by the targets' summed weights."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    class_dim = 0 if len(input.shape) == 1 else 1
    picked, valid, safe = _torch_pick(input, target, ignore_index, class_dim)
    if weight is None:
        tw = ops.cast(valid, input.dtype)
    else:
        tw = ops.where(valid, ops.take(ops.cast(weight, input.dtype), safe), ops.zeros((), input.dtype))
    loss = -picked * tw
    if reduction == "mean":
        return ops.sum(loss) / ops.sum(tw)
    return _torch_reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """torch.nn.functional.mse_loss (broadcasting input and target, as torch does with a warning)."""
    return _torch_reduce(ops.square(input - target), _legacy_reduction(size_average, reduce, reduction))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """torch.nn.functional.l1_loss."""
    return _torch_reduce(ops.abs(input - target), _legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None
):
    """torch.nn.functional.binary_cross_entropy_with_logits, in torch's stable form:
    (1 - t) * x + (1 + (pw - 1) * t) * softplus(-x), times `weight`."""
    target = ops.cast(target, input.dtype)
    log_weight = 1.0 if pos_weight is None else 1.0 + (ops.cast(pos_weight, input.dtype) - 1.0) * target
    loss = (1.0 - target) * input + log_weight * ops.softplus(-input)
    if weight is not None:
        loss = loss * ops.cast(weight, input.dtype)
    return _torch_reduce(loss, _legacy_reduction(size_average, reduce, reduction))
