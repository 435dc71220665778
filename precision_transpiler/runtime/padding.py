"""The framework-free half of torch's padding (runtime/flax/padding.py, the targets' `pad`):
torch's pad argument as (lo, hi) pairs, the padding layers' widths and input check, and
`F.pad` itself (constant, reflect, replicate, circular; negative widths crop), written once over
`ops`, the target's array operations (`_ArrayOps` of runtime/<target>/functional.py): the
non-constant modes gather with indices computed here, so both targets follow torch's rules
(a reflect width must be smaller than the input) rather than their library's.
"""

from typing import Any

import numpy as np


def _pad_amount(value: Any) -> int:
    """One pad amount as torch takes it: an int, or a one-element tensor of any shape
    (Pytorch-UNet's `diffY = torch.tensor([x2.size()[2] - x1.size()[2]])`), which `int()` of a
    JAX or TensorFlow array refuses unless it has no dims."""
    if isinstance(value, int):
        return value
    array = np.asarray(value)
    return int(array.reshape(())) if array.size == 1 else int(value)


def _pad_pairs(pad: Any, ndim: int) -> list[tuple[int, int]]:
    """torch.nn.functional.pad's `pad` (pairs from the last dim backwards) as one (lo, hi) pair
    per dim of an `ndim`-dim input, first dim first."""
    pad = tuple(_pad_amount(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > ndim:
        raise ValueError(f"Padding length must be divisible by 2 and at most twice the rank, got {pad}")
    pairs = [(0, 0)] * ndim
    for i in range(len(pad) // 2):
        pairs[ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return pairs


def _pad_widths(padding: Any, n: int) -> tuple[int, ...]:
    """torch's `_ntuple(2 * n)`: an int pads every side, a sequence gives 2n widths, last dim first."""
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    widths = tuple(int(p) for p in padding)
    if len(widths) != 2 * n:
        raise ValueError(f"padding must be an int or a sequence of {2 * n} ints, got {padding!r}")
    return widths


def _check_pad_input(layer: Any, n: int, ndim: int) -> None:
    """A padding layer of `n` padded dims takes (N, C, *n) or (C, *n) inputs, as torch's."""
    if ndim not in (n + 1, n + 2):
        raise ValueError(f"{type(layer).__name__}: expected {n + 1}D or {n + 2}D input, got {ndim}D")


def _pad_index(size: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """Source indices along one axis for torch's non-constant padding modes (negative lo/hi crop)."""
    index = np.arange(-lo, size + hi)
    if mode == "replicate":
        return np.clip(index, 0, size - 1)
    if mode == "circular":  # torch crops the negative sides first, then wraps around what is left
        if lo > size or hi > size:
            raise ValueError("circular padding may not be larger than the input size")
        start, kept = max(-lo, 0), size - max(-lo, 0) - max(-hi, 0)
        return start + np.mod(np.arange(-max(lo, 0), kept + max(hi, 0)), kept)
    if mode == "reflect":
        if lo >= size or hi >= size:
            raise ValueError(f"reflect padding ({lo}, {hi}) must be smaller than the input size {size}")
        index = np.abs(index)
        return np.where(index >= size, 2 * (size - 1) - index, index)
    raise ValueError(f"Unsupported padding mode {mode!r}")


def _pad_nd(x: Any, pairs: list[tuple[int, int]], mode: str, value: float, ops: Any) -> Any:
    """Pad with (lo, hi) per axis of x: torch's constant (negative widths crop), reflect,
    replicate, circular. The non-constant modes gather with indices computed from the (static)
    axis sizes: TensorFlow's pad has no 'edge'/'wrap' and neither library's crops."""
    if mode == "constant":
        for axis, (lo, hi) in enumerate(pairs):
            if lo < 0 or hi < 0:
                x = ops.take(x, np.arange(max(-lo, 0), x.shape[axis] - max(-hi, 0)), axis=axis)
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
        return ops.pad(x, widths, constant_values=value) if any(lo or hi for lo, hi in widths) else x
    for axis, (lo, hi) in enumerate(pairs):
        if lo or hi:
            x = ops.take(x, _pad_index(x.shape[axis], lo, hi, mode), axis=axis)
    return x


def _pad(input: Any, pad: Any, mode: str, value: Any, ops: Any) -> Any:
    """torch.nn.functional.pad: `pad` lists (lo, hi) pairs from the last dim backwards; a fill
    `value` only in 'constant' mode (0 when None)."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"Unsupported padding mode {mode!r}")
    if mode != "constant" and value:
        raise ValueError(f"Padding mode {mode!r} doesn't take in value argument")
    return _pad_nd(input, _pad_pairs(pad, len(input.shape)), mode, 0 if value is None else value, ops)
