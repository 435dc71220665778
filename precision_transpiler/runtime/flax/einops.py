"""einops' torch layers for converted Flax NNX code (`Rearrange`, `Reduce`).

einops' functions (`rearrange`, `repeat`, `reduce`, `pack`, `unpack`, `einsum`) take JAX arrays
through einops' own JAX backend, so converted code keeps calling them. Its layers are per
framework: `einops.layers.torch.Rearrange` is a torch module (importing it imports torch), and
einops has no Flax NNX layers. These classes take the same constructor arguments and call the
einops function, as einops' torch layers do.
"""

import einops

from precision_transpiler.runtime.flax.layers import TorchLayer


class Rearrange(TorchLayer):
    """einops.layers.torch.Rearrange(pattern, **axes_lengths): `einops.rearrange` as a layer."""

    def __init__(self, pattern: str, *, rngs=None, **axes_lengths):
        self.pattern = pattern
        self.axes_lengths = dict(axes_lengths)

    def __call__(self, x):
        return einops.rearrange(x, self.pattern, **self.axes_lengths)


class Reduce(TorchLayer):
    """einops.layers.torch.Reduce(pattern, reduction, **axes_lengths): `einops.reduce` as a layer."""

    def __init__(self, pattern: str, reduction: str, *, rngs=None, **axes_lengths):
        self.pattern = pattern
        self.reduction = reduction
        self.axes_lengths = dict(axes_lengths)

    def __call__(self, x):
        return einops.reduce(x, self.pattern, self.reduction, **self.axes_lengths)
