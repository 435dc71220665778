"""The framework-free half of torch's margin and embedding losses (runtime/flax/margin_losses.py,
runtime/keras/margin_losses.py): torch's formulas of HingeEmbeddingLoss, CosineEmbeddingLoss, the
triplet losses, MultiMarginLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss and
GaussianNLLLoss, with its epsilons and variance clamping, written once over `ops`, the target's
array operations (`_ArrayOps` of runtime/<target>/functional.py).
"""

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
