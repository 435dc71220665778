"""torch's activation modules for converted Keras 3 code (`ReLU`, `GELU`, `SiLU`, `Softmax`, ...).

torch builds activations as modules (`nn.ReLU(inplace=True)`) and passes them around
(`act_layer=nn.GELU`); Keras' activation layers and ops differ in defaults (`ops.gelu` is the tanh
approximation, LeakyReLU's slope is 0.3, Softmax's axis the last). These layers keep torch's
constructor signatures and semantics. Those whose torch.nn.functional function takes arguments
(`LeakyReLU`, `Softplus`, `Hardtanh`, `PReLU`, ...) compute through functional.py's function of torch's
signature, as torch's layers call theirs: one formula for a layer and a function passed around.
"""

from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import _softmax_dim
from precision_transpiler.runtime.keras.functional import (
    _gelu,
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


class ReLU(keras.layers.Layer):
    """torch.nn.ReLU; `inplace` has no meaning for immutable tensors."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.relu(input)


class ReLU6(keras.layers.Layer):
    """torch.nn.ReLU6: min(max(x, 0), 6)."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.relu6(input)


class GELU(keras.layers.Layer):
    """torch.nn.GELU(approximate='none'): exact erf form by default (`keras.ops.gelu` defaults to tanh)."""

    def __init__(self, approximate: str = "none", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate
        self.built = True

    def call(self, input: Any) -> Any:
        return _gelu(input, self.approximate)


class SiLU(keras.layers.Layer):
    """torch.nn.SiLU: x * sigmoid(x)."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.silu(input)


class Sigmoid(keras.layers.Layer):
    """torch.nn.Sigmoid."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.sigmoid(input)


class Tanh(keras.layers.Layer):
    """torch.nn.Tanh."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.tanh(input)


class Softmax(keras.layers.Layer):
    """torch.nn.Softmax(dim): over `dim` (torch's legacy implicit dim when None; Keras: last axis)."""

    def __init__(self, dim: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.softmax(input, axis=_softmax_dim(len(input.shape)) if self.dim is None else self.dim)


class LogSoftmax(keras.layers.Layer):
    """torch.nn.LogSoftmax(dim): over `dim` (torch's legacy implicit dim when None)."""

    def __init__(self, dim: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.log_softmax(input, axis=_softmax_dim(len(input.shape)) if self.dim is None else self.dim)


class Hardswish(keras.layers.Layer):
    """torch.nn.Hardswish: x * relu6(x + 3) / 6."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return input * ops.relu6(input + 3.0) / 6.0


class Hardsigmoid(keras.layers.Layer):
    """torch.nn.Hardsigmoid: relu6(x + 3) / 6 (Keras 2's hard_sigmoid was 0.2 x + 0.5)."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.relu6(input + 3.0) / 6.0


class LeakyReLU(keras.layers.Layer):
    """torch.nn.LeakyReLU(negative_slope=0.01) (Keras LeakyReLU defaults to 0.3)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.negative_slope = negative_slope
        self.built = True

    def call(self, input: Any) -> Any:
        return leaky_relu(input, self.negative_slope)


class ELU(keras.layers.Layer):
    """torch.nn.ELU(alpha=1.0)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alpha = alpha
        self.built = True

    def call(self, input: Any) -> Any:
        return elu(input, self.alpha)


class Mish(keras.layers.Layer):
    """torch.nn.Mish: x * tanh(softplus(x))."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return input * ops.tanh(ops.softplus(input))


class Softplus(keras.layers.Layer):
    """torch.nn.Softplus(beta=1, threshold=20): log(1 + exp(beta x)) / beta, linear where beta x > threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta = beta
        self.threshold = threshold
        self.built = True

    def call(self, input: Any) -> Any:
        return softplus(input, self.beta, self.threshold)


class PReLU(keras.layers.Layer):
    """torch.nn.PReLU(num_parameters=1, init=0.25): learnable negative slope per channel (dim 1).

    Keras' PReLU is channels-last with one slope per element by default; this keeps torch's
    `weight` (num_parameters,) on channel dim 1.
    """

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.num_parameters = num_parameters
        initializer = keras.initializers.Constant(init)
        self.weight = self.add_weight(shape=(num_parameters,), initializer=initializer, autocast=False, name="weight")
        self.built = True

    def call(self, input: Any) -> Any:
        return prelu(input, self.weight)


class SELU(keras.layers.Layer):
    """torch.nn.SELU: scale * (max(0, x) + min(0, alpha * (exp(x) - 1))), torch's constants."""

    def __init__(self, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.built = True

    def call(self, input: Any) -> Any:
        return selu(input)


class CELU(keras.layers.Layer):
    """torch.nn.CELU(alpha=1.0): max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alpha = alpha
        self.built = True

    def call(self, input: Any) -> Any:
        return celu(input, self.alpha)


class GLU(keras.layers.Layer):
    """torch.nn.GLU(dim=-1): first half * sigmoid(second half) along `dim`."""

    def __init__(self, dim: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.built = True

    def call(self, input: Any) -> Any:
        return glu(input, self.dim)


class Hardtanh(keras.layers.Layer):
    """torch.nn.Hardtanh(min_val=-1, max_val=1): clip to [min_val, max_val]."""

    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_val = min_val if min_value is None else min_value
        self.max_val = max_val if max_value is None else max_value
        self.built = True

    def call(self, input: Any) -> Any:
        return hardtanh(input, self.min_val, self.max_val)


class Threshold(keras.layers.Layer):
    """torch.nn.Threshold(threshold, value): x where x > threshold, else `value`."""

    def __init__(self, threshold: float, value: float, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.threshold = threshold
        self.value = value
        self.built = True

    def call(self, input: Any) -> Any:
        return threshold(input, self.threshold, self.value)


class _Shrink(keras.layers.Layer):
    """Shared constructor of Softshrink/Hardshrink: torch's `lambd` (0.5)."""

    def __init__(self, lambd: float = 0.5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lambd = lambd
        self.built = True


class Softshrink(_Shrink):
    """torch.nn.Softshrink(lambd=0.5): x - lambd above lambd, x + lambd below -lambd, else 0."""

    def call(self, input: Any) -> Any:
        return softshrink(input, self.lambd)


class Hardshrink(_Shrink):
    """torch.nn.Hardshrink(lambd=0.5): x where |x| > lambd, else 0."""

    def call(self, input: Any) -> Any:
        return hardshrink(input, self.lambd)


class _Stateless(keras.layers.Layer):
    """Activations that torch builds with `(*args, **kwargs)` and ignores them (Tanhshrink, Softsign, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.built = True


class Tanhshrink(_Stateless):
    """torch.nn.Tanhshrink: x - tanh(x)."""

    def call(self, input: Any) -> Any:
        return tanhshrink(input)


class Softsign(_Stateless):
    """torch.nn.Softsign: x / (1 + |x|)."""

    def call(self, input: Any) -> Any:
        return softsign(input)


class LogSigmoid(_Stateless):
    """torch.nn.LogSigmoid: log(sigmoid(x)) = -softplus(-x), stable for large |x|."""

    def call(self, input: Any) -> Any:
        return -ops.softplus(-input)


class Softmax2d(_Stateless):
    """torch.nn.Softmax2d: softmax over the channels of (N, C, H, W) or (C, H, W) (dim -3)."""

    def call(self, input: Any) -> Any:
        if len(input.shape) not in (3, 4):
            raise ValueError(f"Softmax2d: expected CHW or NCHW input, got {len(input.shape)}D")
        return ops.softmax(input, axis=-3)


class Softmin(keras.layers.Layer):
    """torch.nn.Softmin(dim=None): softmax(-x) over `dim` (torch's legacy implicit dim when None)."""

    def __init__(self, dim: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.built = True

    def call(self, input: Any) -> Any:
        return softmin(input, self.dim)


class RReLU(keras.layers.Layer):
    """torch.nn.RReLU(lower=1/8, upper=1/3) at inference: leaky ReLU with the mean slope (lower + upper) / 2.

    torch's training mode draws a random slope per element; converted models run the inference form.
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lower = lower
        self.upper = upper
        self.built = True

    def call(self, input: Any) -> Any:
        return rrelu(input, self.lower, self.upper)
