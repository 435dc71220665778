"""torch's distance and bilinear layers for Keras 3: CosineSimilarity, PairwiseDistance, Bilinear.

Why shims: torch's epsilon placement differs from Keras' (PairwiseDistance adds eps to the
difference, CosineSimilarity clamps the product of squared norms), and Bilinear keeps its
(out, in1, in2) `weight` under torch's name; Keras has no bilinear layer.
"""

import math
from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import _pairwise_distance
from precision_transpiler.runtime.keras.functional import _ArrayOps, _keras_dtype, _uniform


class CosineSimilarity(keras.layers.Layer):
    """torch.nn.CosineSimilarity(dim=1, eps=1e-8): x1 . x2 / sqrt(max(|x1|^2 |x2|^2, eps^2)) along `dim`."""

    def __init__(self, dim: int = 1, eps: float = 1e-8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.eps = eps
        self.built = True

    def call(self, x1: Any, x2: Any) -> Any:
        dot = ops.sum(x1 * x2, axis=self.dim)
        sq = ops.sum(x1 * x1, axis=self.dim) * ops.sum(x2 * x2, axis=self.dim)
        return dot / ops.sqrt(ops.maximum(sq, self.eps * self.eps))


class PairwiseDistance(keras.layers.Layer):
    """torch.nn.PairwiseDistance(p=2, eps=1e-6, keepdim=False): the p-norm of x1 - x2 + eps over the last dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim
        self.built = True

    def call(self, x1: Any, x2: Any) -> Any:
        return _pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim, _ArrayOps)


class Bilinear(keras.layers.Layer):
    """torch.nn.Bilinear(in1_features, in2_features, out_features, bias): y = x1^T A x2 + b, with torch's
    `weight` (out, in1, in2) and `bias` (out,)."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=_keras_dtype(dtype), **kwargs)
        init = _uniform(1.0 / math.sqrt(in1_features))
        shape = (out_features, in1_features, in2_features)
        self.weight = self.add_weight(shape=shape, initializer=init, name="weight")
        self.bias = self.add_weight(shape=(out_features,), initializer=init, name="bias") if bias else None
        self.built = True

    def call(self, input1: Any, input2: Any) -> Any:
        dt = self.compute_dtype
        y = ops.einsum("...i,oij,...j->...o", ops.cast(input1, dt), ops.cast(self.weight, dt), ops.cast(input2, dt))
        return y if self.bias is None else y + ops.cast(self.bias, dt)
