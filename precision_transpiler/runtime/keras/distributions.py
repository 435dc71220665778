"""torch.distributions for Keras 3 (TensorFlow): the families of runtime/distributions.py over
keras.ops, drawing from Keras' global SeedGenerator as runtime/keras/rng.py's `torch.rand` does
(the values differ from torch's, the distributions do not). The Keras twin of
runtime/flax/distributions.py.
"""

import types
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from precision_transpiler.runtime.distributions import (
    _Bernoulli,
    _Beta,
    _Categorical,
    _Distribution,
    _Exponential,
    _Gamma,
    _Independent,
    _kl_divergence,
    _Laplace,
    _LogNormal,
    _MultivariateNormal,
    _Normal,
    _OneHotCategorical,
    _Uniform,
)
from precision_transpiler.runtime.keras.functional import _xlogy


def _draw_categorical(rngs: Any, logits: Any, shape: tuple[int, ...]) -> Any:
    """Indices drawn with log-probabilities `logits` (last axis), shaped `shape` (torch's int64):
    keras.random.categorical draws `num_samples` per row of a 2-D input."""
    n = logits.shape[-1]
    count = int(np.prod(shape[: len(shape) - (len(logits.shape) - 1)], dtype=np.int64))
    rows = ops.reshape(ops.broadcast_to(logits, (*shape[len(shape) - (len(logits.shape) - 1) :], n)), (-1, n))
    drawn = keras.random.categorical(rows, count, dtype="int64")  # (rows, count)
    return ops.reshape(ops.transpose(drawn), shape)


def _bernoulli(rngs: Any, probs: Any, shape: tuple[int, ...]) -> Any:
    return keras.random.uniform(shape, dtype=probs.dtype) < probs


_DistributionOps = types.SimpleNamespace(
    **{
        name: getattr(ops, name)
        for name in ("abs", "argmax", "broadcast_to", "clip", "diagonal", "exp", "expand_dims", "full", "log")
    },
    **{name: getattr(ops, name) for name in ("log1p", "logical_and", "matmul", "maximum", "sign", "sqrt", "square")},
    **{name: getattr(ops, name) for name in ("squeeze", "sum", "swapaxes", "where", "zeros_like", "take_along_axis")},
    **{name: getattr(ops, name) for name in ("sigmoid", "softplus", "logsumexp", "erf", "erfinv", "stop_gradient")},
    asarray=lambda value, dtype: ops.convert_to_tensor(value, dtype),
    cast=ops.cast,
    dtype_of=lambda value: keras.backend.standardize_dtype(value.dtype),
    shape=lambda value: tuple(ops.shape(value)),
    broadcast_shapes=lambda *shapes: tuple(np.broadcast_shapes(*shapes)),
    one_hot=lambda indices, n, dtype: ops.one_hot(indices, n, dtype=dtype),
    lgamma=tf.math.lgamma,
    digamma=tf.math.digamma,
    xlogy=_xlogy,
    cholesky=ops.linalg.cholesky,
    inv=ops.linalg.inv,
    solve_triangular=lambda tril, b: ops.linalg.solve_triangular(tril, b, lower=True),
    normal=lambda rngs, shape, dtype: keras.random.normal(shape, dtype=dtype),
    uniform=lambda rngs, shape, dtype: keras.random.uniform(shape, dtype=dtype),
    gamma=lambda rngs, alpha, shape: keras.random.gamma(shape, alpha, dtype=alpha.dtype),
    bernoulli=_bernoulli,
    categorical=_draw_categorical,
)


class Distribution(_Distribution):
    """torch.distributions.Distribution (a base class, an annotation, an isinstance check)."""

    ops = _DistributionOps


class Normal(_Normal, Distribution):
    """torch.distributions.Normal."""


class LogNormal(_LogNormal, Distribution):
    """torch.distributions.LogNormal."""


class Uniform(_Uniform, Distribution):
    """torch.distributions.Uniform."""


class Laplace(_Laplace, Distribution):
    """torch.distributions.Laplace."""


class Exponential(_Exponential, Distribution):
    """torch.distributions.Exponential."""


class Gamma(_Gamma, Distribution):
    """torch.distributions.Gamma."""


class Beta(_Beta, Distribution):
    """torch.distributions.Beta."""


class Bernoulli(_Bernoulli, Distribution):
    """torch.distributions.Bernoulli."""


class Categorical(_Categorical, Distribution):
    """torch.distributions.Categorical."""


class OneHotCategorical(_OneHotCategorical, Distribution):
    """torch.distributions.OneHotCategorical."""


class Independent(_Independent, Distribution):
    """torch.distributions.Independent."""


class MultivariateNormal(_MultivariateNormal, Distribution):
    """torch.distributions.MultivariateNormal."""


def kl_divergence(p: Distribution, q: Distribution) -> Any:
    """torch.distributions.kl_divergence (runtime/distributions.py says which pairs)."""
    return _kl_divergence(p, q)
