"""torch's distance and bilinear layers for Flax NNX: CosineSimilarity, PairwiseDistance, Bilinear.

Why shims: torch's epsilon placement differs from the obvious formulas (PairwiseDistance adds eps
to the difference, CosineSimilarity clamps the product of squared norms), and Bilinear keeps its
(out, in1, in2) `weight` under torch's name; Flax has none of them as modules.
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import _pairwise_distance
from precision_transpiler.runtime.flax.functional import _ArrayOps, _uniform
from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.flax.rng import default_rngs


class CosineSimilarity(TorchLayer):
    """torch.nn.CosineSimilarity(dim=1, eps=1e-8): x1 . x2 / sqrt(max(|x1|^2 |x2|^2, eps^2)) along `dim`."""

    def __init__(self, dim: int = 1, eps: float = 1e-8, *, rngs: Any = None) -> None:
        self.dim = dim
        self.eps = eps

    def __call__(self, x1: jax.Array, x2: jax.Array) -> jax.Array:
        dot = jnp.sum(x1 * x2, axis=self.dim)
        sq = jnp.sum(x1 * x1, axis=self.dim) * jnp.sum(x2 * x2, axis=self.dim)
        return dot / jnp.sqrt(jnp.maximum(sq, self.eps * self.eps))


class PairwiseDistance(TorchLayer):
    """torch.nn.PairwiseDistance(p=2, eps=1e-6, keepdim=False): the p-norm of x1 - x2 + eps over the last dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False, *, rngs: Any = None) -> None:
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def __call__(self, x1: jax.Array, x2: jax.Array) -> jax.Array:
        return _pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim, _ArrayOps)


class Bilinear(TorchLayer):
    """torch.nn.Bilinear(in1_features, in2_features, out_features, bias): y = x1^T A x2 + b, with torch's
    `weight` (out, in1, in2) and `bias` (out,) under torch's names."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs | None = None,
    ) -> None:
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        bound = 1.0 / math.sqrt(in1_features)
        shape = (out_features, in1_features, in2_features)
        self.weight = nnx.Param(_uniform(rngs.params(), shape, param_dtype, bound))
        self.bias = nnx.Param(_uniform(rngs.params(), (out_features,), param_dtype, bound)) if bias else nnx.data(None)

    def __call__(self, input1: jax.Array, input2: jax.Array) -> jax.Array:
        y = jnp.einsum("...i,oij,...j->...o", input1, self.weight[...].astype(input1.dtype), input2)
        return y if self.bias is None else y + self.bias[...].astype(y.dtype)
