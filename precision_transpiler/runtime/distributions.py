"""The framework-free half of `torch.distributions` (runtime/flax/distributions.py,
runtime/keras/distributions.py): the distributions model code builds in its forward pass (a VAE's
`Normal(mu, std).rsample()`, a policy's `Categorical(logits=...).sample()`, an augmentation's
`Uniform(low, high).rsample(shape)`, `Bernoulli(p)`), written once over `self.ops`, the target's
array operations and draws (`_DistributionOps` of each target's distributions.py).

torch's shapes are kept: `sample(sample_shape)` gives `sample_shape + batch_shape +
event_shape`, parameters given as numbers become float32 tensors, `log_prob`, `entropy`, `cdf`,
`icdf`, `mean`, `mode`, `variance` and `stddev` follow torch's formulas, and `kl_divergence`
covers the pairs of the same family here. `sample` stops gradients, `rsample` does not (only the
reparameterisable families have it). Draws come from the key source the converter passed as
`rngs` (JAX: the module's stream, as for `torch.rand`) or from Keras' global SeedGenerator; the
values differ from torch's, the distributions do not. `validate_args` is accepted and not checked.
"""

import math
from typing import Any

from precision_transpiler.runtime.factories import _size_entry

_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)


def _sample_shape(sample_shape: Any) -> tuple[int, ...]:
    """torch.Size([n]), a tuple, a list or an int (torch takes `sample((n,))`; `sample_n(n)`), each
    entry read as torch reads it (a tensor of one element is its integer: `_size_entry`)."""
    if isinstance(sample_shape, int):
        return (sample_shape,)
    return tuple(int(_size_entry(n)) for n in sample_shape)


class lazy_property:
    """torch.distributions.utils.lazy_property: a property computed on its first read and then
    kept on the instance (pfrl's `DiscreteActionValue.greedy_actions`, torch's distributions'
    `probs`/`logits`); read on the class, the descriptor itself."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = getattr(wrapped, "__doc__", None)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _Distribution:
    """torch.distributions.Distribution: batch and event shapes, and the methods every family
    shares (`sample` through `rsample`, `sample_n`, `stddev`, `perplexity`)."""

    #: the target's array operations and draws (each target's subclass sets it)
    ops: Any = None
    has_rsample = False
    has_enumerate_support = False
    arg_constraints: dict = {}
    support: Any = None

    def __init__(self, batch_shape: Any = (), event_shape: Any = (), validate_args: Any = None, rngs: Any = None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        self._rngs = rngs

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        return self._event_shape

    def _extended_shape(self, sample_shape: Any = ()) -> tuple[int, ...]:
        return _sample_shape(sample_shape) + self._batch_shape + self._event_shape

    def sample(self, sample_shape: Any = ()) -> Any:
        """A sample without gradients (torch: under no_grad)."""
        return self.ops.stop_gradient(self.rsample(sample_shape))

    def rsample(self, sample_shape: Any = ()) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterised sample (rsample)")

    def sample_n(self, n: int) -> Any:
        return self.sample((n,))

    @property
    def stddev(self) -> Any:
        return self.ops.sqrt(self.variance)

    def perplexity(self) -> Any:
        return self.ops.exp(self.entropy())

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        """The same family with its parameters broadcast to `batch_shape` (torch's `expand`)."""
        shape = _sample_shape(batch_shape)
        if not self._params:
            raise NotImplementedError(f"expand of {type(self).__name__} is not converted")
        params = {
            name: self.ops.broadcast_to(getattr(self, name), shape + self._param_tail(name)) for name in self._params
        }
        return type(self)(**params, rngs=self._rngs)

    #: the constructor arguments `expand` broadcasts (a family's own)
    _params: tuple[str, ...] = ()

    def _param_tail(self, name: str) -> tuple[int, ...]:
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_shape={self._batch_shape}, event_shape={self._event_shape})"


def _broadcast_all(ops: Any, *values: Any) -> list[Any]:
    """torch.distributions.utils.broadcast_all: numbers become float32 tensors (or the dtype of a
    tensor among them), and all are broadcast to one shape."""
    tensors = [v for v in values if not isinstance(v, (int, float))]
    dtype = ops.dtype_of(tensors[0]) if tensors else "float32"
    arrays = [ops.asarray(v, dtype) for v in values]
    shape = ops.broadcast_shapes(*[ops.shape(a) for a in arrays])
    return [ops.broadcast_to(a, shape) for a in arrays]


class _LocScale(_Distribution):
    """A family of a location and a scale (Normal, Laplace): both broadcast, the mean and mode
    at the location."""

    has_rsample = True
    _params = ("loc", "scale")

    def __init__(self, loc: Any, scale: Any, validate_args: Any = None, rngs: Any = None):
        self.loc, self.scale = _broadcast_all(self.ops, loc, scale)
        super().__init__(self.ops.shape(self.loc), (), validate_args, rngs)

    @property
    def mean(self) -> Any:
        return self.loc

    @property
    def mode(self) -> Any:
        return self.loc


class _Normal(_LocScale):
    """torch.distributions.Normal(loc, scale)."""

    @property
    def stddev(self) -> Any:
        return self.scale

    @property
    def variance(self) -> Any:
        return self.ops.square(self.scale)

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        return self.loc + self.scale * self.ops.normal(self._rngs, shape, self.ops.dtype_of(self.loc))

    def log_prob(self, value: Any) -> Any:
        ops = self.ops
        return -ops.square(value - self.loc) / (2 * ops.square(self.scale)) - ops.log(self.scale) - _HALF_LOG_TWO_PI

    def cdf(self, value: Any) -> Any:
        return 0.5 * (1 + self.ops.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value: Any) -> Any:
        return self.loc + self.scale * self.ops.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Any:
        return 0.5 + _HALF_LOG_TWO_PI + self.ops.log(self.scale)


class _LogNormal(_Normal):
    """torch.distributions.LogNormal(loc, scale): exp of a Normal."""

    @property
    def mean(self) -> Any:
        return self.ops.exp(self.loc + self.ops.square(self.scale) / 2)

    @property
    def mode(self) -> Any:
        return self.ops.exp(self.loc - self.ops.square(self.scale))

    @property
    def stddev(self) -> Any:
        return self.ops.sqrt(self.variance)

    @property
    def variance(self) -> Any:
        scale2 = self.ops.square(self.scale)
        return (self.ops.exp(scale2) - 1) * self.ops.exp(2 * self.loc + scale2)

    def rsample(self, sample_shape: Any = ()) -> Any:
        return self.ops.exp(super().rsample(sample_shape))

    def log_prob(self, value: Any) -> Any:
        log_value = self.ops.log(value)
        return super().log_prob(log_value) - log_value

    def cdf(self, value: Any) -> Any:
        return super().cdf(self.ops.log(value))

    def icdf(self, value: Any) -> Any:
        return self.ops.exp(super().icdf(value))

    def entropy(self) -> Any:
        return super().entropy() + self.loc


class _Uniform(_Distribution):
    """torch.distributions.Uniform(low, high): values in [low, high)."""

    has_rsample = True
    _params = ("low", "high")

    def __init__(self, low: Any, high: Any, validate_args: Any = None, rngs: Any = None):
        self.low, self.high = _broadcast_all(self.ops, low, high)
        super().__init__(self.ops.shape(self.low), (), validate_args, rngs)

    @property
    def mean(self) -> Any:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Any:
        return self.mean * float("nan")

    @property
    def stddev(self) -> Any:
        return (self.high - self.low) / math.sqrt(12)

    @property
    def variance(self) -> Any:
        return self.ops.square(self.high - self.low) / 12

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        rand = self.ops.uniform(self._rngs, shape, self.ops.dtype_of(self.low))
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value: Any) -> Any:
        ops = self.ops
        inside = ops.logical_and(value >= self.low, value < self.high)
        return ops.where(inside, -ops.log(self.high - self.low), -math.inf)

    def cdf(self, value: Any) -> Any:
        return self.ops.clip((value - self.low) / (self.high - self.low), 0.0, 1.0)

    def icdf(self, value: Any) -> Any:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Any:
        return self.ops.log(self.high - self.low)


class _Laplace(_LocScale):
    """torch.distributions.Laplace(loc, scale)."""

    @property
    def variance(self) -> Any:
        return 2 * self.ops.square(self.scale)

    def rsample(self, sample_shape: Any = ()) -> Any:
        ops = self.ops
        u = ops.uniform(self._rngs, self._extended_shape(sample_shape), ops.dtype_of(self.loc)) * 2 - 1
        u = ops.clip(u, -1 + 1e-7, 1.0)
        return self.loc - self.scale * ops.sign(u) * ops.log1p(-ops.abs(u))

    def log_prob(self, value: Any) -> Any:
        ops = self.ops
        return -ops.log(2 * self.scale) - ops.abs(value - self.loc) / self.scale

    def cdf(self, value: Any) -> Any:
        ops = self.ops
        z = value - self.loc
        return 0.5 - 0.5 * ops.sign(z) * (ops.exp(-ops.abs(z) / self.scale) - 1)

    def entropy(self) -> Any:
        return 1 + self.ops.log(2 * self.scale)


class _Exponential(_Distribution):
    """torch.distributions.Exponential(rate)."""

    has_rsample = True
    _params = ("rate",)

    def __init__(self, rate: Any, validate_args: Any = None, rngs: Any = None):
        (self.rate,) = _broadcast_all(self.ops, rate)
        super().__init__(self.ops.shape(self.rate), (), validate_args, rngs)

    @property
    def mean(self) -> Any:
        return 1 / self.rate

    @property
    def mode(self) -> Any:
        return self.ops.zeros_like(self.rate)

    @property
    def variance(self) -> Any:
        return 1 / self.ops.square(self.rate)

    def rsample(self, sample_shape: Any = ()) -> Any:
        ops = self.ops
        u = ops.uniform(self._rngs, self._extended_shape(sample_shape), ops.dtype_of(self.rate))
        return -ops.log1p(-u) / self.rate

    def log_prob(self, value: Any) -> Any:
        return self.ops.log(self.rate) - self.rate * value

    def cdf(self, value: Any) -> Any:
        return 1 - self.ops.exp(-self.rate * value)

    def icdf(self, value: Any) -> Any:
        return -self.ops.log1p(-value) / self.rate

    def entropy(self) -> Any:
        return 1.0 - self.ops.log(self.rate)


class _Gamma(_Distribution):
    """torch.distributions.Gamma(concentration, rate)."""

    has_rsample = True
    _params = ("concentration", "rate")

    def __init__(self, concentration: Any, rate: Any, validate_args: Any = None, rngs: Any = None):
        self.concentration, self.rate = _broadcast_all(self.ops, concentration, rate)
        super().__init__(self.ops.shape(self.rate), (), validate_args, rngs)

    @property
    def mean(self) -> Any:
        return self.concentration / self.rate

    @property
    def mode(self) -> Any:
        return self.ops.maximum(self.concentration - 1, 0.0) / self.rate

    @property
    def variance(self) -> Any:
        return self.concentration / self.ops.square(self.rate)

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        alpha = self.ops.broadcast_to(self.concentration, shape)
        return self.ops.gamma(self._rngs, alpha, shape) / self.rate

    def log_prob(self, value: Any) -> Any:
        ops = self.ops
        a = self.concentration
        return ops.xlogy(a, self.rate) + ops.xlogy(a - 1, value) - self.rate * value - ops.lgamma(a)

    def entropy(self) -> Any:
        ops = self.ops
        a = self.concentration
        return a - ops.log(self.rate) + ops.lgamma(a) + (1.0 - a) * ops.digamma(a)


class _Beta(_Distribution):
    """torch.distributions.Beta(concentration1, concentration0)."""

    has_rsample = True
    _params = ("concentration1", "concentration0")

    def __init__(self, concentration1: Any, concentration0: Any, validate_args: Any = None, rngs: Any = None):
        self.concentration1, self.concentration0 = _broadcast_all(self.ops, concentration1, concentration0)
        super().__init__(self.ops.shape(self.concentration1), (), validate_args, rngs)

    @property
    def mean(self) -> Any:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Any:
        # torch's Dirichlet mode: concentrations below 1 clamped to a mode at 0; both below 1: 1
        ops = self.ops
        a, b = ops.maximum(self.concentration1 - 1, 0.0), ops.maximum(self.concentration0 - 1, 0.0)
        both_below = ops.logical_and(self.concentration1 < 1, self.concentration0 < 1)
        return ops.where(both_below, 1.0, a / (a + b))

    @property
    def variance(self) -> Any:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (self.ops.square(total) * (total + 1))

    def rsample(self, sample_shape: Any = ()) -> Any:
        ops = self.ops
        shape = self._extended_shape(sample_shape)
        x = ops.gamma(self._rngs, ops.broadcast_to(self.concentration1, shape), shape)
        y = ops.gamma(self._rngs, ops.broadcast_to(self.concentration0, shape), shape)
        return x / (x + y)

    def log_prob(self, value: Any) -> Any:
        ops = self.ops
        a, b = self.concentration1, self.concentration0
        norm = ops.lgamma(a) + ops.lgamma(b) - ops.lgamma(a + b)
        return ops.xlogy(a - 1, value) + ops.xlogy(b - 1, 1 - value) - norm

    def entropy(self) -> Any:
        ops = self.ops
        a, b = self.concentration1, self.concentration0
        norm = ops.lgamma(a) + ops.lgamma(b) - ops.lgamma(a + b)
        return norm - (a - 1) * ops.digamma(a) - (b - 1) * ops.digamma(b) + (a + b - 2) * ops.digamma(a + b)


def _probs_and_logits(ops: Any, probs: Any, logits: Any, binary: bool) -> tuple[Any, Any]:
    """torch's `probs`/`logits` pair, exactly one given: the other derived (binary: sigmoid and
    log-odds; categorical: normalised over the last axis)."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    if binary:
        if probs is not None:
            probs = ops.asarray(probs, _distribution_float_dtype(ops, probs))
            clipped = ops.clip(probs, 1.1920928955078125e-07, 1 - 1.1920928955078125e-07)
            return probs, ops.log(clipped) - ops.log1p(-clipped)
        logits = ops.asarray(logits, _distribution_float_dtype(ops, logits))
        return ops.sigmoid(logits), logits
    if probs is not None:
        probs = ops.asarray(probs, _distribution_float_dtype(ops, probs))
        probs = probs / ops.sum(probs, axis=-1, keepdims=True)
        return probs, ops.log(ops.clip(probs, 1.1920928955078125e-07, 1.0))
    logits = ops.asarray(logits, _distribution_float_dtype(ops, logits))
    logits = logits - ops.logsumexp(logits, axis=-1, keepdims=True)
    return ops.exp(logits), logits


def _distribution_float_dtype(ops: Any, value: Any) -> Any:
    return "float32" if isinstance(value, (int, float)) else ops.dtype_of(value)


class _Bernoulli(_Distribution):
    """torch.distributions.Bernoulli(probs=None, logits=None): samples 0.0 or 1.0."""

    has_enumerate_support = True
    _params = ("probs",)

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: Any = None, rngs: Any = None):
        self.probs, self.logits = _probs_and_logits(self.ops, probs, logits, binary=True)
        super().__init__(self.ops.shape(self.probs), (), validate_args, rngs)

    @property
    def mean(self) -> Any:
        return self.probs

    @property
    def mode(self) -> Any:
        return self.ops.cast(self.probs >= 0.5, self.ops.dtype_of(self.probs))

    @property
    def variance(self) -> Any:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        drawn = self.ops.bernoulli(self._rngs, self.ops.broadcast_to(self.probs, shape), shape)
        return self.ops.cast(drawn, self.ops.dtype_of(self.probs))

    def log_prob(self, value: Any) -> Any:
        ops = self.ops
        return value * self.logits - ops.softplus(self.logits)

    def entropy(self) -> Any:
        ops = self.ops
        return ops.softplus(self.logits) - self.probs * self.logits


class _Categorical(_Distribution):
    """torch.distributions.Categorical(probs=None, logits=None): int64 indices over the last axis."""

    has_enumerate_support = True
    _params = ("probs",)

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: Any = None, rngs: Any = None):
        self.probs, self.logits = _probs_and_logits(self.ops, probs, logits, binary=False)
        self._num_events = self.ops.shape(self.probs)[-1]
        super().__init__(self.ops.shape(self.probs)[:-1], (), validate_args, rngs)

    def _param_tail(self, name: str) -> tuple[int, ...]:
        return (self._num_events,)

    @property
    def param_shape(self) -> tuple[int, ...]:
        return self.ops.shape(self.probs)

    @property
    def mean(self) -> Any:
        return self.ops.full(self._batch_shape, math.nan, self.ops.dtype_of(self.probs))

    @property
    def mode(self) -> Any:
        return self.ops.argmax(self.probs, axis=-1)

    @property
    def variance(self) -> Any:
        return self.mean

    def sample(self, sample_shape: Any = ()) -> Any:
        return self.ops.categorical(self._rngs, self.logits, self._extended_shape(sample_shape))

    def log_prob(self, value: Any) -> Any:
        ops = self.ops
        value = ops.cast(value, "int32")
        shape = ops.broadcast_shapes(ops.shape(value), self._batch_shape)
        logits = ops.broadcast_to(self.logits, (*shape, self._num_events))
        value = ops.broadcast_to(value, shape)
        return ops.squeeze(ops.take_along_axis(logits, ops.expand_dims(value, -1), axis=-1), -1)

    def entropy(self) -> Any:
        ops = self.ops
        logits = ops.maximum(self.logits, -3.4028234663852886e38)  # torch: finfo.min, not -inf
        return -ops.sum(logits * self.probs, axis=-1)


class _OneHotCategorical(_Categorical):
    """torch.distributions.OneHotCategorical: Categorical's draws as one-hot vectors."""

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: Any = None, rngs: Any = None):
        super().__init__(probs, logits, validate_args, rngs)
        self._event_shape = (self._num_events,)

    @property
    def mean(self) -> Any:
        return self.probs

    @property
    def mode(self) -> Any:
        return self.ops.one_hot(super().mode, self._num_events, self.ops.dtype_of(self.probs))

    @property
    def variance(self) -> Any:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Any:
        shape = _sample_shape(sample_shape) + self._batch_shape
        indices = self.ops.categorical(self._rngs, self.logits, shape)
        return self.ops.one_hot(indices, self._num_events, self.ops.dtype_of(self.probs))

    def log_prob(self, value: Any) -> Any:
        return super().log_prob(self.ops.argmax(value, axis=-1))


class _Independent(_Distribution):
    """torch.distributions.Independent(base, reinterpreted_batch_ndims): the base's rightmost batch
    axes read as event axes (log_prob and entropy summed over them)."""

    def __init__(
        self, base_distribution: Any, reinterpreted_batch_ndims: int, validate_args: Any = None, rngs: Any = None
    ):
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n = int(reinterpreted_batch_ndims)
        shape = base_distribution.batch_shape + base_distribution.event_shape
        event_dim = n + len(base_distribution.event_shape)
        super().__init__(shape[: len(shape) - event_dim], shape[len(shape) - event_dim :], validate_args, rngs)
        self.has_rsample = base_distribution.has_rsample

    def _sum_rightmost(self, value: Any) -> Any:
        n = self.reinterpreted_batch_ndims
        return self.ops.sum(value, axis=tuple(range(-n, 0))) if n else value

    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape: Any = ()) -> Any:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Any:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Any) -> Any:
        return self._sum_rightmost(self.base_dist.log_prob(value))

    def entropy(self) -> Any:
        return self._sum_rightmost(self.base_dist.entropy())


class _MultivariateNormal(_Distribution):
    """torch.distributions.MultivariateNormal(loc, covariance_matrix=, precision_matrix=,
    scale_tril=): one of the three gives the lower Cholesky factor everything uses."""

    has_rsample = True

    def __init__(
        self,
        loc: Any,
        covariance_matrix: Any = None,
        precision_matrix: Any = None,
        scale_tril: Any = None,
        validate_args: Any = None,
        rngs: Any = None,
    ):
        ops = self.ops
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            tril = ops.asarray(scale_tril, _distribution_float_dtype(ops, scale_tril))
        elif covariance_matrix is not None:
            tril = ops.cholesky(ops.asarray(covariance_matrix, _distribution_float_dtype(ops, covariance_matrix)))
        else:
            tril = ops.cholesky(
                ops.inv(ops.asarray(precision_matrix, _distribution_float_dtype(ops, precision_matrix)))
            )
        loc = ops.asarray(loc, ops.dtype_of(tril))
        batch = ops.broadcast_shapes(ops.shape(tril)[:-2], ops.shape(loc)[:-1])
        n = ops.shape(loc)[-1]
        self.loc = ops.broadcast_to(loc, (*batch, n))
        self._unbroadcasted_scale_tril = tril
        self.scale_tril = ops.broadcast_to(tril, (*batch, n, n))
        super().__init__(batch, (n,), validate_args, rngs)

    @property
    def covariance_matrix(self) -> Any:
        return self.ops.matmul(self.scale_tril, self.ops.swapaxes(self.scale_tril, -1, -2))

    @property
    def precision_matrix(self) -> Any:
        return self.ops.inv(self.covariance_matrix)

    @property
    def mean(self) -> Any:
        return self.loc

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def variance(self) -> Any:
        return self.ops.sum(self.ops.square(self.scale_tril), axis=-1)

    def rsample(self, sample_shape: Any = ()) -> Any:
        ops = self.ops
        eps = ops.normal(self._rngs, self._extended_shape(sample_shape), ops.dtype_of(self.loc))
        return self.loc + ops.squeeze(ops.matmul(self.scale_tril, ops.expand_dims(eps, -1)), -1)

    def _half_log_det(self) -> Any:
        ops = self.ops
        return ops.sum(ops.log(ops.diagonal(self._unbroadcasted_scale_tril, axis1=-2, axis2=-1)), axis=-1)

    def log_prob(self, value: Any) -> Any:
        ops = self.ops
        diff = value - self.loc
        shape = ops.broadcast_shapes(ops.shape(diff), ops.shape(self.loc))
        tril = ops.broadcast_to(self._unbroadcasted_scale_tril, shape[:-1] + ops.shape(self.scale_tril)[-2:])
        solved = ops.solve_triangular(tril, ops.expand_dims(ops.broadcast_to(diff, shape), -1))
        maha = ops.sum(ops.square(ops.squeeze(solved, -1)), axis=-1)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + maha) - self._half_log_det()

    def entropy(self) -> Any:
        n = self._event_shape[0]
        entropy = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return self.ops.broadcast_to(entropy, self._batch_shape)


def _kl_divergence(p: Any, q: Any) -> Any:
    """torch.distributions.kl_divergence for two distributions of the same family (Normal,
    Uniform, Bernoulli, Categorical, Laplace, Exponential, Independent of those)."""
    ops = p.ops
    if isinstance(p, _Independent) and isinstance(q, _Independent):
        if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
            raise NotImplementedError("kl_divergence of Independent distributions with different event dims")
        return p._sum_rightmost(_kl_divergence(p.base_dist, q.base_dist))
    family = _family(p)
    if family is not _family(q):
        raise NotImplementedError(f"No KL(p || q) is implemented for {type(p).__name__} and {type(q).__name__}")
    if family in (_Normal, _LogNormal):  # LogNormals: their base Normals' (the same exp transform)
        var_ratio = ops.square(p.scale / q.scale)
        t1 = ops.square((p.loc - q.loc) / q.scale)
        return 0.5 * (var_ratio + t1 - 1 - ops.log(var_ratio))
    if family is _Uniform:
        inside = ops.logical_and(q.low <= p.low, p.high <= q.high)
        return ops.where(inside, ops.log((q.high - q.low) / (p.high - p.low)), math.inf)
    if family is _Bernoulli:
        t1 = p.probs * (ops.softplus(-q.logits) - ops.softplus(-p.logits))
        t2 = (1 - p.probs) * (ops.softplus(q.logits) - ops.softplus(p.logits))
        return t1 + t2
    if family is _Categorical:
        t = p.probs * (p.logits - q.logits)
        return ops.sum(ops.where(p.probs == 0, 0.0, t), axis=-1)
    if family is _Exponential:
        ratio = q.rate / p.rate
        return ratio - 1 - ops.log(ratio)
    if family is _Laplace:
        ratio = p.scale / q.scale
        diff = ops.abs(p.loc - q.loc)
        return -ops.log(ratio) + diff / q.scale + ratio * ops.exp(-diff / p.scale) - 1
    raise NotImplementedError(f"No KL(p || q) is implemented for {type(p).__name__} and {type(q).__name__}")


def _family(distribution: Any) -> Any:
    """The framework-free family a target's distribution belongs to (the first base here)."""
    for base in type(distribution).__mro__:
        if base in _FAMILIES:
            return base
    return None


_FAMILIES = (_LogNormal, _Normal, _Uniform, _Bernoulli, _Categorical, _Exponential, _Laplace, _Gamma, _Beta)
