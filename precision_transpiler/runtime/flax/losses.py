"""torch's losses for Flax NNX: `cross_entropy` (class indices or probabilities, `ignore_index`,
label smoothing, weights), `nll_loss`, `mse_loss`, `l1_loss`, `binary_cross_entropy_with_logits`
and their module classes, with torch's reductions (legacy `size_average`/`reduce` included).
"""

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.flax.functional import _ArrayOps, _value
from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.losses import (
    _binary_cross_entropy,
    _binary_cross_entropy_with_logits,
    _cross_entropy,
    _huber_loss,
    _kl_div,
    _l1_loss,
    _legacy_reduction,
    _margin_ranking_loss,
    _mse_loss,
    _nll_loss,
    _poisson_nll_loss,
    _smooth_l1_loss,
    _soft_margin_loss,
)


def cross_entropy(
    input: jax.Array,
    target: jax.Array,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> jax.Array:
    """torch.nn.functional.cross_entropy: logits (N, C, *) or (C,), classes on axis 1.

    Class-index targets honour `ignore_index` (excluded from the mean's denominator), `weight`
    (the mean divides by the summed weights of the targets) and `label_smoothing` with torch's
    formula; probability targets (float, same shape as input) are supported too. optax's losses
    take classes on the last axis and have no ignore_index.
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _cross_entropy(input, target, weight, reduction, ignore_index, label_smoothing, _ArrayOps)


def mse_loss(
    input: jax.Array, target: jax.Array, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> jax.Array:
    """torch.nn.functional.mse_loss (broadcasting input and target, as torch does with a warning)."""
    return _mse_loss(input, target, _legacy_reduction(size_average, reduce, reduction), _ArrayOps)


def l1_loss(
    input: jax.Array, target: jax.Array, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> jax.Array:
    """torch.nn.functional.l1_loss."""
    return _l1_loss(input, target, _legacy_reduction(size_average, reduce, reduction), _ArrayOps)


def binary_cross_entropy_with_logits(
    input: jax.Array,
    target: jax.Array,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> jax.Array:
    """torch.nn.functional.binary_cross_entropy_with_logits, in torch's stable form:
    (1 - t) * x + (1 + (pw - 1) * t) * softplus(-x), times `weight`."""
    return _binary_cross_entropy_with_logits(
        input, target, weight, _legacy_reduction(size_average, reduce, reduction), pos_weight, _ArrayOps
    )


def nll_loss(
    input: jax.Array,
    target: jax.Array,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> jax.Array:
    """torch.nn.functional.nll_loss on log-probabilities (N, C, *) or (C,): `ignore_index`
    targets are excluded, a weighted mean divides by the targets' summed weights."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _nll_loss(input, target, weight, reduction, ignore_index, _ArrayOps)


class _Loss(TorchLayer):
    """torch's loss modules: the constructor keeps the options, the call applies the function.
    A class-weight tensor is a torch buffer (`weight`), so it is module state here too."""

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        self.reduction = _legacy_reduction(size_average, reduce, reduction)
        self.weight = nnx.data(None) if weight is None else nnx.Variable(jnp.asarray(weight))


class CrossEntropyLoss(_Loss):
    """torch.nn.CrossEntropyLoss(weight, size_average, ignore_index, reduce, reduction, label_smoothing)."""

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return cross_entropy(
            input,
            target,
            _value(self.weight),
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(_Loss):
    """torch.nn.NLLLoss(weight, size_average, ignore_index, reduce, reduction)."""

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
    ):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return nll_loss(input, target, _value(self.weight), ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    """torch.nn.MSELoss(size_average, reduce, reduction)."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__(None, size_average, reduce, reduction)

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """torch.nn.L1Loss(size_average, reduce, reduction)."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__(None, size_average, reduce, reduction)

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """torch.nn.BCEWithLogitsLoss(weight, size_average, reduce, reduction, pos_weight)."""

    def __init__(
        self,
        weight: Any = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        pos_weight: Any = None,
    ):
        super().__init__(weight, size_average, reduce, reduction)
        self.pos_weight = nnx.data(None) if pos_weight is None else nnx.Variable(jnp.asarray(pos_weight))

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return binary_cross_entropy_with_logits(
            input, target, _value(self.weight), reduction=self.reduction, pos_weight=_value(self.pos_weight)
        )


def binary_cross_entropy(
    input: jax.Array,
    target: jax.Array,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> jax.Array:
    """torch.nn.functional.binary_cross_entropy on probabilities: each log clamped at -100, as torch."""
    return _binary_cross_entropy(input, target, weight, _legacy_reduction(size_average, reduce, reduction), _ArrayOps)


def smooth_l1_loss(
    input: jax.Array,
    target: jax.Array,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> jax.Array:
    """torch.nn.functional.smooth_l1_loss: 0.5 d^2 / beta below `beta`, |d| - 0.5 beta above (L1 at beta 0)."""
    return _smooth_l1_loss(input, target, _legacy_reduction(size_average, reduce, reduction), beta, _ArrayOps)


def huber_loss(input: jax.Array, target: jax.Array, reduction: str = "mean", delta: float = 1.0) -> jax.Array:
    """torch.nn.functional.huber_loss: 0.5 d^2 up to `delta`, delta (|d| - 0.5 delta) above."""
    return _huber_loss(input, target, reduction, delta, _ArrayOps)


def kl_div(
    input: jax.Array,
    target: jax.Array,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> jax.Array:
    """torch.nn.functional.kl_div(input=log q, target=p): p (log p - log q), 0 where p = 0; 'batchmean'
    divides the sum by the batch size."""
    return _kl_div(input, target, _legacy_reduction(size_average, reduce, reduction), log_target, _ArrayOps)


def soft_margin_loss(
    input: jax.Array, target: jax.Array, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> jax.Array:
    """torch.nn.functional.soft_margin_loss: log(1 + exp(-y x))."""
    return _soft_margin_loss(input, target, _legacy_reduction(size_average, reduce, reduction), _ArrayOps)


def margin_ranking_loss(
    input1: jax.Array,
    input2: jax.Array,
    target: jax.Array,
    margin: float = 0.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> jax.Array:
    """torch.nn.functional.margin_ranking_loss: max(0, -y (x1 - x2) + margin)."""
    return _margin_ranking_loss(
        input1, input2, target, margin, _legacy_reduction(size_average, reduce, reduction), _ArrayOps
    )


def poisson_nll_loss(
    input: jax.Array,
    target: jax.Array,
    log_input: bool = True,
    full: bool = False,
    size_average: Any = None,
    eps: float = 1e-8,
    reduce: Any = None,
    reduction: str = "mean",
) -> jax.Array:
    """torch.nn.functional.poisson_nll_loss: exp(x) - t x (log input) or x - t log(x + eps); `full` adds
    Stirling's term t log t - t + 0.5 log(2 pi t) where t > 1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _poisson_nll_loss(input, target, log_input, full, eps, reduction, _ArrayOps)


class BCELoss(_Loss):
    """torch.nn.BCELoss(weight, size_average, reduce, reduction) on probabilities."""

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return binary_cross_entropy(input, target, _value(self.weight), reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """torch.nn.SmoothL1Loss(size_average, reduce, reduction, beta=1.0)."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean", beta: float = 1.0):
        super().__init__(None, size_average, reduce, reduction)
        self.beta = beta

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """torch.nn.HuberLoss(reduction='mean', delta=1.0)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(None, None, None, reduction)
        self.delta = delta

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return huber_loss(input, target, self.reduction, self.delta)


class KLDivLoss(_Loss):
    """torch.nn.KLDivLoss(size_average, reduce, reduction='mean', log_target=False); input is log q."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean", log_target: bool = False):
        super().__init__(None, size_average, reduce, reduction)
        self.log_target = log_target

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SoftMarginLoss(_Loss):
    """torch.nn.SoftMarginLoss(size_average, reduce, reduction): targets are +-1."""

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__(None, size_average, reduce, reduction)

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return soft_margin_loss(input, target, reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """torch.nn.MarginRankingLoss(margin=0, size_average, reduce, reduction): called (input1, input2, target)."""

    def __init__(self, margin: float = 0.0, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__(None, size_average, reduce, reduction)
        self.margin = margin

    def __call__(self, input1: jax.Array, input2: jax.Array, target: jax.Array) -> jax.Array:
        return margin_ranking_loss(input1, input2, target, self.margin, reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """torch.nn.PoissonNLLLoss(log_input=True, full=False, size_average, eps=1e-8, reduce, reduction)."""

    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        size_average: Any = None,
        eps: float = 1e-8,
        reduce: Any = None,
        reduction: str = "mean",
    ):
        super().__init__(None, size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def __call__(self, input: jax.Array, target: jax.Array) -> jax.Array:
        return poisson_nll_loss(input, target, self.log_input, self.full, eps=self.eps, reduction=self.reduction)
