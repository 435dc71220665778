"""torch's activation modules for converted Flax NNX code (`ReLU`, `GELU`, `SiLU`, `Softmax`, ...).

torch builds activations as modules (`nn.ReLU(inplace=True)`) and passes them around
(`act_layer=nn.GELU`); Flax NNX has functions for activations, some with other defaults
(`jax.nn.gelu` is the tanh approximation). These classes keep torch's constructor signatures and
semantics, so converted code keeps its structure.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import _softmax_dim


class ReLU(nnx.Module):
    """torch.nn.ReLU; `inplace` has no meaning for immutable arrays."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.relu(x)


class ReLU6(nnx.Module):
    """torch.nn.ReLU6: min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.relu6(x)


class GELU(nnx.Module):
    """torch.nn.GELU: exact (erf) by default; jax.nn.gelu defaults to the tanh approximation."""

    def __init__(self, approximate: str = "none", *, rngs=None):
        self.approximate = approximate

    def __call__(self, x):
        return jax.nn.gelu(x, approximate=self.approximate == "tanh")


class SiLU(nnx.Module):
    """torch.nn.SiLU: x * sigmoid(x)."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.silu(x)


class Sigmoid(nnx.Module):
    """torch.nn.Sigmoid."""

    def __init__(self, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.sigmoid(x)


class Tanh(nnx.Module):
    """torch.nn.Tanh."""

    def __init__(self, *, rngs=None):
        pass

    def __call__(self, x):
        return jnp.tanh(x)


class Softmax(nnx.Module):
    """torch.nn.Softmax(dim=None); `dim=None` follows torch's legacy implicit choice."""

    def __init__(self, dim: int | None = None, *, rngs=None):
        self.dim = dim

    def __call__(self, x):
        return jax.nn.softmax(x, axis=self.dim if self.dim is not None else _softmax_dim(x.ndim))


class LogSoftmax(nnx.Module):
    """torch.nn.LogSoftmax(dim=None)."""

    def __init__(self, dim: int | None = None, *, rngs=None):
        self.dim = dim

    def __call__(self, x):
        return jax.nn.log_softmax(x, axis=self.dim if self.dim is not None else _softmax_dim(x.ndim))


class Hardswish(nnx.Module):
    """torch.nn.Hardswish: x * relu6(x + 3) / 6."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return x * jax.nn.relu6(x + 3.0) / 6.0


class Hardsigmoid(nnx.Module):
    """torch.nn.Hardsigmoid: relu6(x + 3) / 6 (jax.nn.hard_sigmoid is the same function)."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.relu6(x + 3.0) / 6.0


class LeakyReLU(nnx.Module):
    """torch.nn.LeakyReLU(negative_slope=0.01)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False, *, rngs=None):
        self.negative_slope = negative_slope

    def __call__(self, x):
        return jax.nn.leaky_relu(x, negative_slope=self.negative_slope)


class ELU(nnx.Module):
    """torch.nn.ELU(alpha=1.0)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False, *, rngs=None):
        self.alpha = alpha

    def __call__(self, x):
        return jax.nn.elu(x, alpha=self.alpha)


class Mish(nnx.Module):
    """torch.nn.Mish: x * tanh(softplus(x))."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return x * jnp.tanh(jax.nn.softplus(x))


class Softplus(nnx.Module):
    """torch.nn.Softplus(beta=1, threshold=20): linear above `threshold` (in units of beta*x)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0, *, rngs=None):
        self.beta = beta
        self.threshold = threshold

    def __call__(self, x):
        scaled = x * self.beta
        return jnp.where(scaled > self.threshold, x, jax.nn.softplus(scaled) / self.beta)
