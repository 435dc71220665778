"""Precision helpers as they appear in PyTorch training code (written for torch).

`make demo` converts this file to JAX and TensorFlow and checks that the converted functions
return the same values and dtypes.
"""

import torch
from torch import bfloat16 as bf16


def half_range(dtype=torch.half):
    """Largest finite value and smallest step of a floating dtype."""
    info = torch.finfo(dtype)
    return info.max, info.eps


def to_compute_dtype(x, low_precision: bool):
    # Keep integers as they are; floats go to bf16 when asked.
    if not x.is_floating_point():
        return x
    return x.to(bf16) if low_precision else x.float()


def stable_scale(x, device="cpu"):
    """Scale in fp32 and return in the input's dtype (a classic fp32 island)."""
    y = x.to(device, torch.float32) * 0.5
    if x.dtype is torch.float16:
        y = y * (1.0 / 256)  # keep fp16 results far from its 65504 limit
    return y.type_as(x)


def bytes_per_element(x):
    return x.element_size()


def index_tensor(values):
    return torch.as_tensor(values, dtype=torch.long)
