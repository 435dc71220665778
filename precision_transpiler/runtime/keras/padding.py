"""torch's padding layers for Keras 3: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and
CircularPad in 1d/2d/3d.

Why shims: the layers take torch's padding order (last dim first: left, right, top, bottom, front,
back), apply to the trailing 1-3 dims of a channels-first input, and accept an int for every side;
`keras.ops.pad` takes one pair per axis, first axis first. They compute through the runtime's
`pad` (torch.nn.functional.pad), so negative widths crop as in torch.
"""

from typing import Any

import keras

from precision_transpiler.runtime.keras.functional import pad
from precision_transpiler.runtime.padding import _check_pad_input, _pad_widths


class _PadNd(keras.layers.Layer):
    """Shared body of the padding layers: `_n` padded trailing dims, torch mode `_mode`."""

    _n = 2
    _mode = "constant"

    def __init__(self, padding: Any, value: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.padding = _pad_widths(padding, self._n)
        self.value = value
        self.built = True

    def call(self, input: Any) -> Any:
        _check_pad_input(self, self._n, len(input.shape))
        value = self.value if self._mode == "constant" else None
        return pad(input, self.padding, self._mode, value)


class _ModePadNd(_PadNd):
    """Padding layers without a fill value (reflect, replicate, circular, zeros): torch's `(padding)`."""

    def __init__(self, padding: Any, **kwargs: Any) -> None:
        super().__init__(padding, 0.0, **kwargs)


class ConstantPad1d(_PadNd):
    """torch.nn.ConstantPad1d(padding, value) on (N, C, L) or (C, L)."""

    _n = 1


class ConstantPad2d(_PadNd):
    """torch.nn.ConstantPad2d(padding, value) on NCHW or CHW: (left, right, top, bottom)."""

    _n = 2


class ConstantPad3d(_PadNd):
    """torch.nn.ConstantPad3d(padding, value) on NCDHW or CDHW."""

    _n = 3


class ZeroPad1d(_ModePadNd):
    """torch.nn.ZeroPad1d(padding): constant 0."""

    _n = 1


class ZeroPad2d(_ModePadNd):
    """torch.nn.ZeroPad2d(padding): constant 0, (left, right, top, bottom)."""

    _n = 2


class ZeroPad3d(_ModePadNd):
    """torch.nn.ZeroPad3d(padding): constant 0."""

    _n = 3


class ReflectionPad1d(_ModePadNd):
    """torch.nn.ReflectionPad1d: mirror without repeating the edge (numpy's 'reflect')."""

    _n = 1
    _mode = "reflect"


class ReflectionPad2d(_ModePadNd):
    """torch.nn.ReflectionPad2d: mirror without repeating the edge."""

    _n = 2
    _mode = "reflect"


class ReflectionPad3d(_ModePadNd):
    """torch.nn.ReflectionPad3d: mirror without repeating the edge."""

    _n = 3
    _mode = "reflect"


class ReplicationPad1d(_ModePadNd):
    """torch.nn.ReplicationPad1d: repeat the edge value (numpy's 'edge')."""

    _n = 1
    _mode = "replicate"


class ReplicationPad2d(_ModePadNd):
    """torch.nn.ReplicationPad2d: repeat the edge value."""

    _n = 2
    _mode = "replicate"


class ReplicationPad3d(_ModePadNd):
    """torch.nn.ReplicationPad3d: repeat the edge value."""

    _n = 3
    _mode = "replicate"


class CircularPad1d(_ModePadNd):
    """torch.nn.CircularPad1d: wrap around (numpy's 'wrap')."""

    _n = 1
    _mode = "circular"


class CircularPad2d(_ModePadNd):
    """torch.nn.CircularPad2d: wrap around."""

    _n = 2
    _mode = "circular"


class CircularPad3d(_ModePadNd):
    """torch.nn.CircularPad3d: wrap around."""

    _n = 3
    _mode = "circular"
