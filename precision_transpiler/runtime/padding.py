"""The framework-free half of torch's padding (runtime/flax/padding.py, the targets' `pad`):
torch's pad argument as (lo, hi) pairs, the padding layers' widths and input check, and
`F.pad` itself (constant, reflect, replicate, circular; negative widths crop), written once over
`ops`, the target's array operations (`_ArrayOps` of runtime/<target>/functional.py): the
non-constant modes gather with indices computed here, so both targets follow torch's rules
(a reflect width must be smaller than the input) rather than their library's.
"""

from typing import Any


def _pad_pairs(pad: Any, ndim: int) -> list[tuple[int, int]]:
    """torch.nn.functional.pad's `pad` (pairs from the last dim backwards) as one (lo, hi) pair
    per dim of an `ndim`-dim input, first dim first."""
    pad = tuple(int(p) for p in pad)
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
