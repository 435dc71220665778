"""torch's activation modules for converted Keras 3 code (`ReLU`, `GELU`, `SiLU`, `Softmax`, ...).

torch builds activations as modules (`nn.ReLU(inplace=True)`) and passes them around
(`act_layer=nn.GELU`); Keras' activation layers and ops differ in defaults (`ops.gelu` is the tanh
approximation, LeakyReLU's slope is 0.3, Softmax's axis the last). These layers keep torch's
constructor signatures and semantics.
"""

from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import _softmax_dim
from precision_transpiler.runtime.keras.functional import _gelu


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
        return ops.leaky_relu(input, negative_slope=self.negative_slope)


class ELU(keras.layers.Layer):
    """torch.nn.ELU(alpha=1.0)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alpha = alpha
        self.built = True

    def call(self, input: Any) -> Any:
        return ops.elu(input, alpha=self.alpha)


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
        scaled = input * self.beta
        return ops.where(scaled > self.threshold, input, ops.softplus(scaled) / self.beta)
