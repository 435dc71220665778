"""`--input SPEC`: the shape, dtype and value range of one model input.

    float32[1,3,224,224]      standard-normal floats
    int64[1,16]<100           integers drawn uniformly from [0, 100)
    bool[1,16]                random booleans
    float32[2,8]~0.5          normal floats with standard deviation 0.5

The same seeded NumPy arrays are fed to both models, whatever their frameworks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from precision_transpiler.errors import UsageError

_SPEC = re.compile(
    r"^\s*(?P<dtype>[a-z0-9]+)\s*\[(?P<shape>[^\]]*)\]\s*(?:<\s*(?P<high>\d+)|~\s*(?P<scale>[0-9.eE+-]+))?\s*$"
)
_FLOATS = ("float32", "float64", "float16")  # bfloat16 inputs: pass float32, the policy casts
_INTS = ("int64", "int32", "int16", "int8", "uint8")


@dataclass(frozen=True)
class InputSpec:
    dtype: str
    shape: tuple[int, ...]
    high: int | None = None  # integers in [0, high)
    scale: float = 1.0  # standard deviation of floats

    def __str__(self) -> str:
        text = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if self.high is not None:
            text += f"<{self.high}"
        elif self.scale != 1.0:
            text += f"~{self.scale:g}"
        return text

    def make(self, rng: np.random.Generator) -> np.ndarray:
        """A NumPy array for this spec (NumPy has no bfloat16: low-precision models take float32
        inputs and cast them where the policy says)."""
        if self.dtype in _FLOATS:
            return (rng.standard_normal(self.shape) * self.scale).astype(self.dtype)
        if self.dtype == "bool":
            return rng.integers(0, 2, self.shape).astype(bool)
        high = self.high if self.high is not None else 2
        return rng.integers(0, high, self.shape).astype(self.dtype)


def parse_input_spec(text: str) -> InputSpec:
    """Parse `dtype[shape]`, `dtype[shape]<N` or `dtype[shape]~S`; UsageError on anything else."""
    match = _SPEC.match(text)
    if match is None:
        raise UsageError(f"--input {text!r}: expected dtype[shape], e.g. float32[1,3,224,224] or int64[1,16]<100")
    dtype = match["dtype"]
    if dtype not in (*_FLOATS, *_INTS, "bool"):
        raise UsageError(
            f"--input {text!r}: unknown dtype {dtype!r} (use one of {', '.join((*_FLOATS, *_INTS, 'bool'))})"
        )
    try:
        shape = tuple(int(part) for part in match["shape"].split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--input {text!r}: the shape must be integers separated by commas") from None
    if any(dim <= 0 for dim in shape):
        raise UsageError(f"--input {text!r}: every dimension must be positive")
    high = int(match["high"]) if match["high"] else None
    if high is not None and dtype not in _INTS:
        raise UsageError(f"--input {text!r}: '<N' applies to integer inputs only")
    if high is not None and high < 1:
        raise UsageError(f"--input {text!r}: '<N' needs N >= 1")
    scale = float(match["scale"]) if match["scale"] else 1.0
    return InputSpec(dtype, shape, high, scale)


DEFAULT_MAX_INPUT_MB = 1024


def input_megabytes(spec: InputSpec) -> float:
    """The array's size in MB (10**6 bytes) in its own dtype."""
    return math.prod(spec.shape) * np.dtype(spec.dtype).itemsize / 1e6


def check_input_budget(specs: list[InputSpec], max_mb: float) -> None:
    """UsageError, before anything is allocated, when an input (or all of them together) is
    larger than `max_mb` (`--max-input-mb`, `[tool.ptranspile] max-input-mb`)."""
    hint = "raise --max-input-mb (or max-input-mb in [tool.ptranspile]) if the machine has the memory"
    for spec in specs:
        size = input_megabytes(spec)
        if size > max_mb:
            raise UsageError(f"--input {spec}: {size:,.0f} MB, over the input budget of {max_mb:g} MB ({hint})")
    total = sum(input_megabytes(spec) for spec in specs)
    if total > max_mb:
        raise UsageError(f"--input: {total:,.0f} MB together, over the input budget of {max_mb:g} MB ({hint})")


def make_inputs(specs: list[InputSpec], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [spec.make(rng) for spec in specs]
