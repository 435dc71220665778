"""Framework-free arithmetic that the Flax and Keras runtimes share: argument normalisation
(`_tuple`), padding pairs, pooling output sizes and divisors, adaptive-pooling bins, channel
shapes, interpolation source indices, torch's legacy reduction arguments and softmax dim, and the
small torch stand-ins that need no framework (`TorchDevice`, `enable_grad`, transformers' no-op
decorators and cache bases, the active `torch.autocast` regions).

Why one module: the two runtimes are twins, and this arithmetic is where torch's semantics live
(torch's ceil-mode pooling rule, its 'same' padding split, its adaptive bin edges); kept once,
a fix reaches both targets. It imports only the standard library and numpy, so the converter can
copy any of it into a Flax or a Keras output (convert/vendor.py follows the
`from precision_transpiler.runtime.common import ...` lines of the framework modules).
"""

from typing import Any

import numpy as np


def _tuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    """torch's `_single`/`_pair`/`_triple`: an int is repeated n times, a sequence must have n entries."""
    if isinstance(value, int | np.integer):
        return (int(value),) * n
    out = tuple(int(v) for v in value)
    if len(out) == 1 and n > 1:
        return out * n
    if len(out) != n:
        raise ValueError(f"{name} must be an int or a sequence of {n} ints, got {value!r}")
    return out


def _size(size: Any) -> tuple[int, ...]:
    """torch's `*size` arguments: `randn(2, 3)` or `randn((2, 3))`."""
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else tuple(size)


def _channel_shape(ndim: int) -> tuple[int, ...]:
    """Broadcast shape of a per-channel vector against an (N, C, *spatial) array."""
    return (1, -1, *([1] * (ndim - 2)))


def _conv_padding_pairs(padding: Any, kernel_size: tuple[int, ...], dilation: tuple[int, ...]) -> list[tuple[int, int]]:
    """Explicit (lo, hi) pairs for torch's padding argument.

    'same' puts the odd pixel on the high side, as torch's `_convolution_mode` does; explicit pairs
    keep the framework's own 'SAME' rule (computed from the strided output size) out of it.
    """
    if padding == "valid":
        return [(0, 0)] * len(kernel_size)
    if padding == "same":
        pairs = []
        for k, d in zip(kernel_size, dilation, strict=True):
            total = d * (k - 1)
            pairs.append((total // 2, total - total // 2))
        return pairs
    return [(p, p) for p in padding]


def _pool_out_size(size: int, eff_kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """torch's pooling output size, including the ceil_mode rule that the last window starts inside."""
    span = size + 2 * pad - eff_kernel
    if span < 0:
        raise ValueError(f"pooling output size is too small (input {size}, padding {pad}, kernel {eff_kernel})")
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + pad:
            out -= 1
    else:
        out = span // stride + 1
    return out


def _avg_pool_divisor(size: int, k: int, s: int, p: int, out: int, count_include_pad: bool) -> np.ndarray:
    """Per-output window sizes along one axis, as torch's avg_pool computes its divisor."""
    counts = []
    for o in range(out):
        start = o * s - p
        end = min(start + k, size + p)
        pool = end - start
        start, end = max(start, 0), min(end, size)
        counts.append(pool if count_include_pad else end - start)
    return np.asarray(counts, np.float64)


def _adaptive_bins(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's adaptive pooling bins: start = floor(i*in/out), end = ceil((i+1)*in/out)."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _softmax_dim(ndim: int) -> int:
    """torch's implicit softmax dim when `dim=None` (legacy): 0 for 0D/1D/3D inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """torch's `_Reduction.legacy_get_string` for the deprecated size_average/reduce arguments."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _scale_f32(in_size: int, out_size: int, scale: float | None, align_corners: bool) -> np.float32:
    """torch's `area_pixel_compute_scale<float>`: the float32 step from output to input coordinates."""
    if align_corners:
        return np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 else np.float32(0.0)
    if scale is not None and scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size) / np.float32(out_size)


def _source_index(scale: np.float32, out_size: int, align_corners: bool, cubic: bool) -> np.ndarray:
    """torch's `area_pixel_compute_source_index` in float32 (clamped at 0 except for cubic)."""
    dst = np.arange(out_size, dtype=np.float32)
    if align_corners:
        return scale * dst
    src = scale * (dst + np.float32(0.5)) - np.float32(0.5)
    return src if cubic else np.maximum(src, np.float32(0.0))


class GenerationMixin:
    """transformers' GenerationMixin: text generation is not converted (the forward pass is)."""


class Cache:
    """Base of transformers' KV caches (for isinstance checks in converted code)."""


def _pool_args(
    n: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Normalise torch's pooling arguments; stride None (or empty) means stride = kernel_size."""
    k = _tuple(kernel_size, n, "kernel_size")
    empty = stride is None or (not isinstance(stride, int) and len(tuple(stride)) == 0)
    s = k if empty else _tuple(stride, n, "stride")
    return k, s, _tuple(padding, n, "padding"), _tuple(dilation, n, "dilation")


def torch_jit_is_scripting() -> bool:
    """torch.jit.is_scripting(): converted code is never being scripted by TorchScript."""
    return False


def torch_jit_is_tracing() -> bool:
    """torch.jit.is_tracing(): converted code is never being traced by torch.jit."""
    return False


class enable_grad:
    """torch.enable_grad() / torch.set_grad_enabled(mode): JAX and Keras have no global gradient
    mode, so nothing to switch, as a decorator or a context manager."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, fn: Any) -> Any:
        return fn

    def __enter__(self) -> "enable_grad":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


# Active regions, innermost last: the compute dtype of an enabled region, None for a disabled one.
# Module-level (like torch's thread-local autocast state) so that `torch_autocast_call` sees the
# region its op runs in, whichever function the region was opened in.
_TORCH_AUTOCAST_STACK = []  # type: ignore[var-annotated]


class TorchDevice(tuple):
    """What torch's `x.device` gives code to look at: `.type` ("cpu", "cuda" for a GPU) and
    `.index` (transformers' rotary embeddings read `x.device.type`). Converted code drops device
    arguments, so nothing is placed with it."""

    type = property(lambda self: self[0])
    index = property(lambda self: self[1])

    def __str__(self):
        return self[0] if self[1] is None else f"{self[0]}:{self[1]}"


def auto_docstring(obj: Any = None, **kwargs: Any) -> Any:
    """transformers' docstring decorator: nothing to do in converted code."""
    if obj is None:
        return lambda inner: inner
    return obj


def is_torchdynamo_compiling() -> bool:
    """Never compiling with torch.compile in converted code."""
    return False


class EncoderDecoderCache(Cache):
    """transformers' EncoderDecoderCache: a self-attention and a cross-attention cache."""

    def __init__(self, self_attention_cache: Any, cross_attention_cache: Any) -> None:
        self.self_attention_cache = self_attention_cache
        self.cross_attention_cache = cross_attention_cache
        self.is_updated: dict[int, bool] = {}

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.self_attention_cache.get_seq_length(layer_idx)


def use_kernel_forward_from_hub(layer_name: str) -> Any:
    """transformers' hub-kernel decorator: the converted layer keeps its own forward."""
    return lambda cls: cls
