"""torch.distributions for JAX: the families of runtime/distributions.py over jax.numpy, drawing
from the key source the converter passed as `rngs` (mappings/ops/distributions.yaml: a module's
own stream in its methods, the builder's nnx.Rngs while building, the process-wide keys
elsewhere), as runtime/flax/rng.py's `torch.rand` does.
"""

import types
from typing import Any

import jax
import jax.numpy as jnp

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
from precision_transpiler.runtime.flax.rng import _random_key


def _draw_categorical(rngs: Any, logits: Any, shape: tuple[int, ...]) -> jax.Array:
    """Indices drawn with log-probabilities `logits` (last axis), shaped `shape` (torch's int64)."""
    drawn = jax.random.categorical(_random_key(rngs), logits, axis=-1, shape=shape)
    return drawn.astype(jax.dtypes.canonicalize_dtype(jnp.int64))


_DistributionOps = types.SimpleNamespace(
    **{
        name: getattr(jnp, name)
        for name in ("abs", "argmax", "broadcast_shapes", "broadcast_to", "clip", "diagonal", "exp", "expand_dims")
    },
    **{name: getattr(jnp, name) for name in ("full", "log", "log1p", "logical_and", "matmul", "maximum", "sign")},
    **{name: getattr(jnp, name) for name in ("sqrt", "square", "squeeze", "sum", "swapaxes", "where", "zeros_like")},
    asarray=lambda value, dtype: jnp.asarray(value, dtype),
    cast=lambda value, dtype: jnp.asarray(value, dtype),
    dtype_of=lambda value: jnp.result_type(value),
    shape=jnp.shape,
    take_along_axis=jnp.take_along_axis,
    sigmoid=jax.nn.sigmoid,
    softplus=jax.nn.softplus,
    one_hot=lambda indices, n, dtype: jax.nn.one_hot(indices, n, dtype=dtype),
    logsumexp=jax.scipy.special.logsumexp,
    erf=jax.scipy.special.erf,
    erfinv=jax.scipy.special.erfinv,
    lgamma=jax.scipy.special.gammaln,
    digamma=jax.scipy.special.digamma,
    xlogy=jax.scipy.special.xlogy,
    cholesky=jnp.linalg.cholesky,
    inv=jnp.linalg.inv,
    solve_triangular=lambda tril, b: jax.scipy.linalg.solve_triangular(tril, b, lower=True),
    stop_gradient=jax.lax.stop_gradient,
    normal=lambda rngs, shape, dtype: jax.random.normal(_random_key(rngs), shape, dtype),
    uniform=lambda rngs, shape, dtype: jax.random.uniform(_random_key(rngs), shape, dtype),
    gamma=lambda rngs, alpha, shape: jax.random.gamma(_random_key(rngs), alpha, shape, jnp.result_type(alpha)),
    bernoulli=lambda rngs, probs, shape: jax.random.bernoulli(_random_key(rngs), probs, shape),
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


def kl_divergence(p: Distribution, q: Distribution) -> jax.Array:
    """torch.distributions.kl_divergence (runtime/distributions.py says which pairs)."""
    return _kl_divergence(p, q)
