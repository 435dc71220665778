"""torch's activation modules for converted Flax NNX code (`ReLU`, `GELU`, `SiLU`, `Softmax`, ...).

torch builds activations as modules (`nn.ReLU(inplace=True)`) and passes them around
(`act_layer=nn.GELU`); Flax NNX has functions for activations, some with other defaults
(`jax.nn.gelu` is the tanh approximation). These classes keep torch's constructor signatures and
semantics, so converted code keeps its structure. Those whose torch.nn.functional function takes
arguments (`LeakyReLU`, `Softplus`, `Hardtanh`, `PReLU`, ...) compute through functional.py's function of
torch's signature, as torch's layers call theirs: one formula for a layer and a function passed around.
"""

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import _softmax_dim
from precision_transpiler.runtime.flax.functional import (
    celu,
    elu,
    glu,
    hardshrink,
    hardtanh,
    leaky_relu,
    prelu,
    rrelu,
    selu,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
)
from precision_transpiler.runtime.flax.layers import TorchLayer


class ReLU(TorchLayer):
    """torch.nn.ReLU; `inplace` has no meaning for immutable arrays."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.relu(x)


class ReLU6(TorchLayer):
    """torch.nn.ReLU6: min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.relu6(x)


class GELU(TorchLayer):
    """torch.nn.GELU: exact (erf) by default; jax.nn.gelu defaults to the tanh approximation."""

    def __init__(self, approximate: str = "none", *, rngs=None):
        self.approximate = approximate

    def __call__(self, x):
        return jax.nn.gelu(x, approximate=self.approximate == "tanh")


class SiLU(TorchLayer):
    """torch.nn.SiLU: x * sigmoid(x)."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.silu(x)


class Sigmoid(TorchLayer):
    """torch.nn.Sigmoid."""

    def __init__(self, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.sigmoid(x)


class Tanh(TorchLayer):
    """torch.nn.Tanh."""

    def __init__(self, *, rngs=None):
        pass

    def __call__(self, x):
        return jnp.tanh(x)


class Softmax(TorchLayer):
    """torch.nn.Softmax(dim=None); `dim=None` follows torch's legacy implicit choice."""

    def __init__(self, dim: int | None = None, *, rngs=None):
        self.dim = dim

    def __call__(self, x):
        return jax.nn.softmax(x, axis=self.dim if self.dim is not None else _softmax_dim(x.ndim))


class LogSoftmax(TorchLayer):
    """torch.nn.LogSoftmax(dim=None)."""

    def __init__(self, dim: int | None = None, *, rngs=None):
        self.dim = dim

    def __call__(self, x):
        return jax.nn.log_softmax(x, axis=self.dim if self.dim is not None else _softmax_dim(x.ndim))


class Hardswish(TorchLayer):
    """torch.nn.Hardswish: x * relu6(x + 3) / 6."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return x * jax.nn.relu6(x + 3.0) / 6.0


class Hardsigmoid(TorchLayer):
    """torch.nn.Hardsigmoid: relu6(x + 3) / 6 (jax.nn.hard_sigmoid is the same function)."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return jax.nn.relu6(x + 3.0) / 6.0


class LeakyReLU(TorchLayer):
    """torch.nn.LeakyReLU(negative_slope=0.01)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False, *, rngs=None):
        self.negative_slope = negative_slope

    def __call__(self, x):
        return leaky_relu(x, self.negative_slope)


class ELU(TorchLayer):
    """torch.nn.ELU(alpha=1.0)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False, *, rngs=None):
        self.alpha = alpha

    def __call__(self, x):
        return elu(x, self.alpha)


class Mish(TorchLayer):
    """torch.nn.Mish: x * tanh(softplus(x))."""

    def __init__(self, inplace: bool = False, *, rngs=None):
        pass

    def __call__(self, x):
        return x * jnp.tanh(jax.nn.softplus(x))


class Softplus(TorchLayer):
    """torch.nn.Softplus(beta=1, threshold=20): linear above `threshold` (in units of beta*x)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0, *, rngs=None):
        self.beta = beta
        self.threshold = threshold

    def __call__(self, x):
        return softplus(x, self.beta, self.threshold)


class PReLU(TorchLayer):
    """torch.nn.PReLU(num_parameters=1, init=0.25): learnable negative slope per channel (dim 1).

    The slope keeps torch's name and shape, `weight` (num_parameters,), so torch weights load as is.
    """

    def __init__(
        self,
        num_parameters: int = 1,
        init: float = 0.25,
        device: Any = None,
        dtype: Any = None,
        *,
        param_dtype: Any = jnp.float32,
        rngs: Any = None,
    ) -> None:
        self.num_parameters = num_parameters
        self.weight = nnx.Param(jnp.full((num_parameters,), init, param_dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        return prelu(x, self.weight[...])


class SELU(TorchLayer):
    """torch.nn.SELU: scale * (max(0, x) + min(0, alpha * (exp(x) - 1))), torch's constants."""

    def __init__(self, inplace: bool = False, *, rngs: Any = None) -> None:
        pass

    def __call__(self, x: jax.Array) -> jax.Array:
        return selu(x)


class CELU(TorchLayer):
    """torch.nn.CELU(alpha=1.0): max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False, *, rngs: Any = None) -> None:
        self.alpha = alpha

    def __call__(self, x: jax.Array) -> jax.Array:
        return celu(x, self.alpha)


class GLU(TorchLayer):
    """torch.nn.GLU(dim=-1): first half * sigmoid(second half) along `dim`."""

    def __init__(self, dim: int = -1, *, rngs: Any = None) -> None:
        self.dim = dim

    def __call__(self, x: jax.Array) -> jax.Array:
        return glu(x, self.dim)


class Hardtanh(TorchLayer):
    """torch.nn.Hardtanh(min_val=-1, max_val=1): clip (jax.nn.hard_tanh has the bounds fixed at +-1)."""

    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
        *,
        rngs: Any = None,
    ) -> None:
        self.min_val = min_val if min_value is None else min_value
        self.max_val = max_val if max_value is None else max_value

    def __call__(self, x: jax.Array) -> jax.Array:
        return hardtanh(x, self.min_val, self.max_val)


class Threshold(TorchLayer):
    """torch.nn.Threshold(threshold, value): x where x > threshold, else `value`."""

    def __init__(self, threshold: float, value: float, inplace: bool = False, *, rngs: Any = None) -> None:
        self.threshold = threshold
        self.value = value

    def __call__(self, x: jax.Array) -> jax.Array:
        return threshold(x, self.threshold, self.value)


class _Shrink(TorchLayer):
    """Shared constructor of Softshrink/Hardshrink: torch's `lambd` (0.5)."""

    def __init__(self, lambd: float = 0.5, *, rngs: Any = None) -> None:
        self.lambd = lambd


class Softshrink(_Shrink):
    """torch.nn.Softshrink(lambd=0.5): x - lambd above lambd, x + lambd below -lambd, else 0."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return softshrink(x, self.lambd)


class Hardshrink(_Shrink):
    """torch.nn.Hardshrink(lambd=0.5): x where |x| > lambd, else 0."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return hardshrink(x, self.lambd)


class _Stateless(TorchLayer):
    """Activations that torch builds with `(*args, **kwargs)` and ignores them (Tanhshrink, Softsign, ...)."""

    def __init__(self, *args: Any, rngs: Any = None, **kwargs: Any) -> None:
        pass


class Tanhshrink(_Stateless):
    """torch.nn.Tanhshrink: x - tanh(x)."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return tanhshrink(x)


class Softsign(_Stateless):
    """torch.nn.Softsign: x / (1 + |x|)."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return softsign(x)


class LogSigmoid(_Stateless):
    """torch.nn.LogSigmoid: log(sigmoid(x)), computed stably."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return jax.nn.log_sigmoid(x)


class Softmax2d(_Stateless):
    """torch.nn.Softmax2d: softmax over the channels of (N, C, H, W) or (C, H, W) (dim -3)."""

    def __call__(self, x: jax.Array) -> jax.Array:
        if x.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected CHW or NCHW input, got {x.ndim}D")
        return jax.nn.softmax(x, axis=-3)


class Softmin(TorchLayer):
    """torch.nn.Softmin(dim=None): softmax(-x) over `dim` (torch's legacy implicit dim when None)."""

    def __init__(self, dim: int | None = None, *, rngs: Any = None) -> None:
        self.dim = dim

    def __call__(self, x: jax.Array) -> jax.Array:
        return softmin(x, self.dim)


class RReLU(TorchLayer):
    """torch.nn.RReLU(lower=1/8, upper=1/3) at inference: leaky ReLU with the mean slope (lower + upper) / 2.

    torch's training mode draws a random slope per element; converted models run the inference form.
    """

    def __init__(
        self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False, *, rngs: Any = None
    ) -> None:
        self.lower = lower
        self.upper = upper

    def __call__(self, x: jax.Array) -> jax.Array:
        return rrelu(x, self.lower, self.upper)
