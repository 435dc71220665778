"""einops' torch layers for converted Keras code (`Rearrange`, `Reduce`).

einops' functions (`rearrange`, `repeat`, `reduce`, `pack`, `unpack`, `einsum`) take TensorFlow
tensors through einops' own TensorFlow backend, so converted code keeps calling them. Its layers
are per framework: `einops.layers.torch.Rearrange` is a torch module (importing it imports torch).
These Keras layers take the same constructor arguments and call the einops function, as einops'
torch layers do.
"""

from typing import Any

import einops
import keras


class Rearrange(keras.layers.Layer):
    """einops.layers.torch.Rearrange(pattern, **axes_lengths): `einops.rearrange` as a layer."""

    def __init__(self, pattern: str, **axes_lengths: Any) -> None:
        super().__init__()
        self.pattern = pattern
        self.axes_lengths = dict(axes_lengths)
        self.built = True

    def call(self, input: Any) -> Any:
        return einops.rearrange(input, self.pattern, **self.axes_lengths)


class Reduce(keras.layers.Layer):
    """einops.layers.torch.Reduce(pattern, reduction, **axes_lengths): `einops.reduce` as a layer."""

    def __init__(self, pattern: str, reduction: str, **axes_lengths: Any) -> None:
        super().__init__()
        self.pattern = pattern
        self.reduction = reduction
        self.axes_lengths = dict(axes_lengths)
        self.built = True

    def call(self, input: Any) -> Any:
        return einops.reduce(input, self.pattern, self.reduction, **self.axes_lengths)
