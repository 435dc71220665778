"""Framework-free arithmetic that the Flax and Keras runtimes share across subjects: argument
normalisation (`_tuple`), channel shapes, interpolation source indices, torch's softmax dim, the
index arithmetic of im2col, `Tensor.unfold`, `grid_sample` and `affine_grid`, and the small torch
stand-ins that need no framework (`TorchDevice` and `torch.device(...)`, `enable_grad` and
`torch.is_grad_enabled()`, transformers' no-op decorators and cache bases, the active
`torch.autocast` regions, torch.linalg's named results). The framework-free half of one
subject lives beside it under the twins' file name (`pool.py`, `padding.py`, `losses.py`,
`margin_losses.py`, `device.py`).

Why one module: the two runtimes are twins, and this arithmetic is where torch's semantics live
(its 'same' padding split, its interpolation indices); kept once, a fix reaches both targets. It
imports only the standard library and numpy, so the converter can copy any of it into a Flax or
a Keras output (convert/vendor.py follows the `from precision_transpiler.runtime.common import
...` lines of the framework modules).
"""

import collections.abc
import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from precision_transpiler.runtime.factories import torch_size


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


def _legacy_sizes(args: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The sizes torch's legacy constructors (`torch.Tensor(n)`, `torch.FloatTensor(2, 3)`) allocate,
    or None when they were given data instead (`torch.Tensor(mean)`, a list, tuple or array): the
    same call means either, so the converted code tells them apart as torch does, by the values."""
    if not args:
        return (0,)
    if len(args) == 1 and not (isinstance(args[0], int | np.integer) or (np.ndim(args[0]) == 0 and _integral(args[0]))):
        return None
    return tuple(int(a) for a in args)


def _integral(value: Any) -> bool:
    """Whether a 0-d value holds an integer (a Python or NumPy int, or a 0-d integer array)."""
    dtype = getattr(value, "dtype", None)
    return isinstance(value, int | np.integer) or (
        dtype is not None and np.issubdtype(np.dtype(str(dtype)), np.integer)
    )


def _size(size: Any) -> tuple[int, ...]:
    """torch's `*size` arguments: `randn(2, 3)` or `randn((2, 3))`, each entry read as torch does."""
    one = len(size) == 1 and (isinstance(size[0], tuple | list) or type(size[0]).__name__ == "TensorShape")
    return torch_size(size[0] if one else size)  # TensorFlow's `x.shape` is a TensorShape


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


def _softmax_dim(ndim: int) -> int:
    """torch's implicit softmax dim when `dim=None` (legacy): 0 for 0D/1D/3D inputs, else 1."""
    return 0 if ndim in (0, 1, 3) else 1


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


def torch_jit_is_scripting() -> bool:
    """torch.jit.is_scripting(): converted code is never being scripted by TorchScript."""
    return False


class TorchFunctionCtx:
    """torch's `ctx` of an autograd.Function, what `forward` (or `setup_context`) saves for
    `backward`: the part both targets share (runtime/flax/autograd.py and
    runtime/keras/autograd.py derive their FunctionCtx from it)."""

    def __init__(self) -> None:
        self.saved_tensors: tuple[Any, ...] = ()
        self.needs_input_grad: tuple[bool, ...] = ()
        self._pt_marked_ids: tuple[int, ...] = ()
        self._pt_non_differentiable: tuple[int, ...] = ()
        self._pt_materialize = True

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tuple(tensors)

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """Remembered by identity (the outputs are the very objects `forward` returns): the
        gradient reaching `backward` for such an output is zero (None without materialized
        gradients), as torch gives them none."""
        self._pt_marked_ids = self._pt_marked_ids + tuple(id(o) for o in outputs)

    def mark_dirty(self, *tensors: Any) -> None:
        """Accepted: converted code does not change arrays in place."""

    def set_materialize_grads(self, value: bool) -> None:
        """With False, torch hands `backward` None for an output with no gradient: here for the
        outputs marked non-differentiable (the others always get an array)."""
        self._pt_materialize = bool(value)

    def _pt_note_outputs(self, output: Any) -> None:
        """Turn the outputs marked non-differentiable into their positions in `output`, data that
        survives the trip to `backward` (an object's identity would not under jax tracing)."""
        outputs = output if isinstance(output, tuple | list) else (output,)
        marked = set(self._pt_marked_ids)
        self._pt_non_differentiable = tuple(i for i, o in enumerate(outputs) if id(o) in marked)
        self._pt_marked_ids = ()

    def _pt_upstream(self, grads: tuple[Any, ...], zeros: Callable[[int, Any], Any]) -> tuple[Any, ...]:
        """The gradients `backward` receives: those of the outputs marked non-differentiable
        become `zeros(position, grad)` (None where materializing is off), as in torch, where no
        gradient flows into such an output."""
        return tuple(
            (zeros(i, g) if self._pt_materialize else None) if i in self._pt_non_differentiable else g
            for i, g in enumerate(grads)
        )


class TorchFunctionBase:
    """What both targets' `Function` share: torch's two ways to write the forward. The old one is
    `forward(ctx, *args)`; torch >= 2.0 also takes `forward(*args)` without ctx plus
    `setup_context(ctx, inputs, output)`, and picks by whether the class overrides
    `setup_context`."""

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        """Not overridden: `forward` takes ctx itself (torch's check is the same)."""
        raise NotImplementedError("setup_context is not overridden: forward takes ctx")

    @classmethod
    def _pt_forward(cls, ctx: TorchFunctionCtx, args: list[Any]) -> Any:
        """Run the subclass's forward in whichever form it has, so that `ctx` holds what
        `backward` needs either way."""
        setup = getattr(cls.setup_context, "__func__", cls.setup_context)
        if setup is TorchFunctionBase.__dict__["setup_context"].__func__:
            output = cls.forward(ctx, *args)  # type: ignore[attr-defined]
        else:
            output = cls.forward(*args)  # type: ignore[attr-defined]
            cls.setup_context(ctx, tuple(args), output)
        ctx._pt_note_outputs(output)
        return output


def once_differentiable(fn: Any) -> Any:
    """torch's `@once_differentiable` on an autograd.Function's backward (no double backward
    through it): the function as it is; the targets' autograd.py run the backward as a gradient
    rule."""
    return fn


def torch_jit_is_tracing() -> bool:
    """torch.jit.is_tracing(): converted code is never being traced by torch.jit."""
    return False


# `torch.__version__` in converted code: the torch release whose API the mapping tables convert
# (library code picks its code path by it: torch_geometric's `WITH_PT20`, timm's version checks),
# so the path written for that torch is the one the converted code takes.
torch_version = "2.13.0"

# torch's memory layouts. Converted arrays are dense: `x.layout` is `torch_strided`, which no
# sparse layout equals, so code testing for sparse tensors takes its dense path.
torch_strided = "strided"
torch_sparse_coo = "sparse_coo"
torch_sparse_csr = "sparse_csr"
torch_sparse_csc = "sparse_csc"
torch_sparse_bsr = "sparse_bsr"
torch_sparse_bsc = "sparse_bsc"


def torch_generated_code(*args: Any, **kwargs: Any) -> Any:
    """Stands where the original ran code it generated at run time (`exec(source)`,
    `spec.loader.exec_module(module)` of a rendered template): that code was never converted and
    would run torch operations on the target's arrays, so it is refused with an error that says
    why. Libraries that generate code for speed fall back to their plain (converted) path on it."""
    raise NotImplementedError(
        "ptranspile: this code runs source generated at run time, which was not converted to this framework"
    )


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


class torch_kernel_choice(enable_grad):
    """torch's kernel selection regions (`torch.backends.cuda.sdp_kernel(enable_flash=...)`,
    `torch.nn.attention.sdpa_kernel(SDPBackend.MATH)`, `torch.backends.cudnn.flags(...)`): the
    target framework picks its own kernels, so the region runs its body as it is (the kernels
    torch offers compute the same attention)."""


class TorchDataset:
    """torch.utils.data.Dataset (and IterableDataset) as a base class: a dataset class of the
    model's file (`__getitem__`, `__len__`, `__iter__`) is plain Python, so it stays one. torch's
    loaders, samplers and collation (`DataLoader`) are data loading outside the model: reported."""

    def __class_getitem__(cls, item: Any) -> type:
        return cls  # `Dataset[int]` in a base list or an annotation

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no __getitem__")

    def __add__(self, other: Any) -> Any:
        raise NotImplementedError("torch's ConcatDataset is data loading outside the model")


class TorchSymInt:
    """torch.SymInt (and SymFloat, SymBool): the symbolic sizes torch.compile traces with, in
    `isinstance(n, (int, torch.SymInt))` checks and annotations. Converted code runs on concrete
    sizes, so nothing is an instance of it, as nothing is in eager torch."""


class TorchDualTensor(tuple):
    """torch.autograd.forward_ad.unpack_dual(x)'s (primal, tangent) pair."""

    primal = property(lambda self: self[0])
    tangent = property(lambda self: self[1])


def torch_unpack_dual(tensor: Any, *, level: Any = None) -> TorchDualTensor:
    """torch.autograd.forward_ad.unpack_dual: a converted array carries no forward-mode tangent
    (JAX's jax.jvp and TensorFlow's ForwardAccumulator take derivatives outside the model), so
    the pair is the array and None, what torch gives outside a dual level."""
    return TorchDualTensor((tensor, None))


class TorchSDPBackend:
    """torch.nn.attention.SDPBackend's members, for `sdpa_kernel(...)` arguments (which the
    target ignores: it picks its own kernels)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


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

    def __enter__(self):
        """`with torch.device("meta"):` sets torch's default device; converted code places nothing."""
        return self

    def __exit__(self, *exc):
        return False


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


def torch_is_grad_enabled() -> bool:
    """torch.is_grad_enabled(): JAX and Keras have no global gradient mode to switch off (any
    function can be differentiated, `torch.no_grad()` regions convert to nothing), so True."""
    return True


def torch_device(type: Any, index: Any = None) -> TorchDevice:
    """torch.device("cuda:0"), torch.device("cuda", 0), torch.device(0) (a CUDA index) or
    torch.device(other_device): a TorchDevice with torch's `.type` and `.index`."""
    if isinstance(type, tuple):  # a TorchDevice already
        return TorchDevice(type)
    if isinstance(type, int):
        return TorchDevice(("cuda", type))
    kind, _, number = str(type).partition(":")
    if number:
        if index is not None:
            raise ValueError(f"type (string) must not include an index because index was passed explicitly: {type}")
        index = int(number)
    return TorchDevice((kind, None if index is None else int(index)))


def _cross_dim(shape: Any) -> int:
    """The dim torch.cross takes without `dim`: the first of size 3 (deprecated in torch)."""
    for d, size in enumerate(shape):
        if size == 3:
            return d
    raise ValueError(f"no dimension of size 3 in input of shape {tuple(shape)}")


def _unfold_index(size: int, window: int, step: int) -> np.ndarray:
    """Tensor.unfold's positions: row w holds the `window` positions of window w, one every `step`."""
    if window > size or step <= 0:
        raise ValueError(f"maximum size for tensor at dimension is {size} but size is {window} (step {step})")
    count = (size - window) // step + 1
    return np.arange(count)[:, None] * step + np.arange(window)[None, :]


def _unique_outputs(values: Any, inverse: Any, counts: Any, return_inverse: bool, return_counts: bool) -> Any:
    """torch.unique's result: the values alone, or a tuple with the inverse and/or counts asked for."""
    extra = ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return (values, *extra) if extra else values


def _grid_source(coord: Any, size: int, align_corners: bool) -> Any:
    """grid_sample's pixel coordinate from a normalised one in [-1, 1] (corner pixels' centres, or
    their outer edges without align_corners), in the order torch's CPU kernel rounds it."""
    if align_corners:
        return (coord + 1) * ((size - 1) / 2)
    return (coord + 1) * (size / 2) - 0.5


def _affine_base(size: Any, align_corners: bool) -> np.ndarray:
    """affine_grid's base grid for size (N, C, *spatial): (prod(spatial), n + 1) float32
    homogeneous coordinates, x (the last dim) first, then 1, as torch's `linspace_from_neg_one`
    makes them (a size-1 dim sits at 0)."""
    axes = []
    for steps in size[2:]:
        line = np.linspace(-1, 1, steps, dtype=np.float32) if steps > 1 else np.zeros(1, np.float32)
        axes.append(line if align_corners or steps <= 1 else line * np.float32(steps - 1) / np.float32(steps))
    grids = np.meshgrid(*axes, indexing="ij")
    base = np.stack([*reversed(grids), np.ones_like(grids[0])], axis=-1)
    return base.reshape(-1, len(axes) + 1)


def torch_xpu_is_available() -> bool:
    """torch.xpu.is_available(): converted code never runs on torch's Intel XPU backend."""
    return False


def torch_onnx_is_in_onnx_export() -> bool:
    """torch.onnx.is_in_onnx_export(): converted code is never being exported by torch.onnx."""
    return False


def _im2col_positions(
    channels: int, spatial: Any, kernel_size: Any, dilation: Any, padding: Any, stride: Any
) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """F.unfold / F.fold's index: (C * prod(kernel), L) flat positions into the zero-padded
    (C, *padded spatial) image, one row per channel and kernel tap (channel slowest, taps
    row-major) and one column per window (row-major), as torch's im2col orders them; with the
    padded shape and the per-dim padding."""
    n = len(spatial)
    k, d = _tuple(kernel_size, n, "kernel_size"), _tuple(dilation, n, "dilation")
    p, s = _tuple(padding, n, "padding"), _tuple(stride, n, "stride")
    padded = tuple(int(size) + 2 * pp for size, pp in zip(spatial, p, strict=True))
    outs = [(size - dd * (kk - 1) - 1) // ss + 1 for size, kk, dd, ss in zip(padded, k, d, s, strict=True)]
    taps = np.stack(np.meshgrid(*[np.arange(kk) * dd for kk, dd in zip(k, d, strict=True)], indexing="ij"), -1)
    starts = np.stack(np.meshgrid(*[np.arange(o) * ss for o, ss in zip(outs, s, strict=True)], indexing="ij"), -1)
    coords = taps.reshape(-1, 1, n) + starts.reshape(1, -1, n)
    flat = np.ravel_multi_index(tuple(np.moveaxis(coords, -1, 0)), padded)
    rows = np.arange(channels)[:, None, None] * int(np.prod(padded)) + flat[None]
    return rows.reshape(-1, flat.shape[1]), padded, p


_TORCH_RESULT_TYPES = {}  # type: ignore[var-annotated]  # fields -> namedtuple class


def torch_named_result(values: Any, fields: str) -> Any:
    """torch.linalg's named results (`torch.linalg.svd(A).S`, `.eigenvalues`, `.Q`, `.logabsdet`)
    for target functions that return plain tuples: a namedtuple of `values` with torch's field names."""
    if fields not in _TORCH_RESULT_TYPES:
        _TORCH_RESULT_TYPES[fields] = collections.namedtuple("TorchResult", fields)
    return _TORCH_RESULT_TYPES[fields](*values)


def torch_is_autocast_enabled(device_type: Any = None) -> bool:
    """torch.is_autocast_enabled(): whether the innermost converted torch.autocast region is an
    enabled one. The converted regions hold no device type (converted code runs where its
    framework puts it), so `device_type` does not narrow it down."""
    return bool(_TORCH_AUTOCAST_STACK) and _TORCH_AUTOCAST_STACK[-1] is not None


#: SELU's negative saturation, -scale * alpha: what alpha dropout sets dropped values to
_ALPHA_PRIME = -1.7580993408473766


#: rows of the stacked gate matrices per hidden unit
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _patch_geometry(
    spatial: tuple[int, int], kernel_size: Any, dilation: Any, padding: Any, stride: Any
) -> tuple[tuple[int, ...], ...]:
    """(kernel, dilation, padding, stride, blocks per dim) of torch's im2col over a (H, W) input."""
    names = ("kernel_size", "dilation", "padding", "stride")
    k, d, p, s = (_tuple(v, 2, name) for v, name in zip((kernel_size, dilation, padding, stride), names, strict=True))
    sizes = zip(spatial, k, d, p, s, strict=True)
    blocks = tuple((size + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for size, kk, dd, pp, ss in sizes)
    return k, d, p, s, blocks


def torch_kwargs(mapping: Any, keep: dict[str, str], drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """Keyword arguments a torch call took through a mapping (`torch.zeros(n, **dd)` with
    `dd = {"device": device, "dtype": dtype}`), for the converted call: keys the target takes are
    renamed to its spelling (`keep`), those the conversion drops (`drop`: device) and None or False
    values (torch's defaults: no dtype, no pinned memory) are left out, and any other key with a
    value is refused, as the target could not honour it."""
    out: dict[str, Any] = {}
    for key, value in dict(mapping).items():
        if key in keep:
            if value is not None:
                out[keep[key]] = value
        elif key not in drop and value is not None and value is not False:
            raise TypeError(f"argument {key}={value!r} (passed through a mapping) has no equivalent here")
    return out


#: id(module) -> (a weak reference to it, [(hook, with_module)]): torch's
#: `_register_load_state_dict_pre_hook`, kept outside the module so that Keras and nnx do not
#: track the hooks (bound methods of the module) as state; by id, as nnx containers are unhashable
_LOAD_STATE_DICT_PRE_HOOKS = {}  # type: ignore[var-annotated]


def register_load_state_dict_pre_hook(module: Any, hook: Any, with_module: bool = False) -> None:
    """torch's `module._register_load_state_dict_pre_hook(hook, with_module)` (and the public
    `register_load_state_dict_pre_hook(hook)`, with_module=True): `hook(state_dict, prefix, ...)`
    runs before `load_state_dict` reads the state dict, and may fill it in (kornia's MKD)."""
    import weakref  # here: converted files that register no hook import nothing for it

    ref, hooks = _LOAD_STATE_DICT_PRE_HOOKS.get(id(module), (None, []))
    if ref is None or ref() is not module:
        ref, hooks = weakref.ref(module), []
        _LOAD_STATE_DICT_PRE_HOOKS[id(module)] = (ref, hooks)
    hooks.append((hook, with_module))


def run_load_state_dict_pre_hooks(named: Any, state_dict: Any, strict: bool) -> Any:
    """Run the pre-hooks of every (name, module) of `named` on a copy of `state_dict`, with
    torch's arguments (prefix "name."); returns the copy."""
    state_dict = dict(state_dict)
    for name, module in named:
        ref, hooks = _LOAD_STATE_DICT_PRE_HOOKS.get(id(module), (None, []))
        if ref is None or ref() is not module:
            continue
        for hook, with_module in hooks:
            args = (state_dict, f"{name}." if name else "", {}, strict, [], [], [])
            hook(module, *args) if with_module else hook(*args)
    return state_dict


class TorchHookHandle:
    """torch's `RemovableHandle` of a forward hook: `handle.remove()` takes the hook off."""

    def __init__(self, module: Any, key: int) -> None:
        self.module, self.key = module, key

    def remove(self) -> None:
        for attribute in ("_torch_forward_pre_hooks", "_torch_forward_hooks"):
            hooks = self.module.__dict__.get(attribute, ())
            object.__setattr__(self.module, attribute, tuple(h for h in hooks if h[0] != self.key))


#: layer class -> its subclass whose calls run the forward hooks (one per class, as torch's
#: parametrize makes one class per parametrized class)
_HOOKED_CLASSES: dict[type, type] = {}
_HOOK_KEYS = itertools.count()


def _hooked_call(self: Any, *args: Any, **kwargs: Any) -> Any:
    """A hooked module's call, as torch's `Module._call_impl`: the pre-hooks may replace the
    positional arguments (a tuple, or one value), the forward hooks the output (None keeps it)."""
    for _, hook, with_kwargs in self.__dict__.get("_torch_forward_pre_hooks", ()):
        result = hook(self, args, kwargs) if with_kwargs else hook(self, args)
        if result is not None:
            if with_kwargs:
                args, kwargs = result
            else:
                args = result if isinstance(result, tuple) else (result,)
    output = super(_HOOKED_CLASSES[_hooked_base(type(self))], self).__call__(*args, **kwargs)
    for _, hook, with_kwargs in self.__dict__.get("_torch_forward_hooks", ()):
        result = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
        if result is not None:
            output = result
    return output


def _hooked_base(cls: type) -> type:
    """The class a hooked class was made from (the class itself when it is not one)."""
    return getattr(cls, "_torch_hooked_base", cls)


def _add_forward_hook(module: Any, attribute: str, hook: Any, prepend: bool, with_kwargs: bool) -> TorchHookHandle:
    """Hold `hook` on the module (outside the frameworks' tracking: a hook is often a bound
    method of the parent) and give the module its hooked class (same name)."""
    cls = type(module)
    if not hasattr(cls, "_torch_hooked_base"):
        if cls not in _HOOKED_CLASSES:
            namespace = {"__call__": _hooked_call, "_torch_hooked_base": cls, "__module__": cls.__module__}
            _HOOKED_CLASSES[cls] = type(cls.__name__, (cls,), {**namespace, "__qualname__": cls.__qualname__})
        object.__setattr__(module, "__class__", _HOOKED_CLASSES[cls])
    key = next(_HOOK_KEYS)
    entry = ((key, hook, with_kwargs),)
    hooks = module.__dict__.get(attribute, ())
    object.__setattr__(module, attribute, entry + hooks if prepend else hooks + entry)
    return TorchHookHandle(module, key)


def register_forward_pre_hook(module: Any, hook: Any, *, prepend: bool = False, with_kwargs: bool = False) -> Any:
    """torch's `module.register_forward_pre_hook(hook)`: `hook(module, args)` runs before each call
    of the module and may return new arguments. Works on any layer of the target (a Flax
    `nnx.Linear`, a runtime layer, a converted module); returns a handle with `remove()`."""
    return _add_forward_hook(module, "_torch_forward_pre_hooks", hook, prepend, with_kwargs)


def register_forward_hook(
    module: Any, hook: Any, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False
) -> Any:
    """torch's `module.register_forward_hook(hook)`: `hook(module, args, output)` runs after each
    call of the module and may return a new output (feature extraction, output rescaling)."""
    return _add_forward_hook(module, "_torch_forward_hooks", hook, prepend, with_kwargs)


def _torch_visible(module: Any, name: str) -> bool:
    """Whether a module's attribute is one of torch's names (module walks, state dicts): not
    private, or a private name the class says torch uses (spectral norm's `_u`, `_v`:
    `_torch_variable_names`)."""
    return not name.startswith("_") or name in getattr(type(module), "_torch_variable_names", ())


def _spectral_dim(module: Any, dim: Any) -> int:
    """torch's default axis of a spectral norm: 1 for transposed convolutions, else 0."""
    if dim is not None:
        return int(dim)
    return 1 if "ConvTranspose" in type(module).__name__ else 0


def _lu_permutation(pivots: Any) -> Any:
    """The row permutation torch's 1-based LU pivots (LAPACK's: row i swapped with row
    pivots[i] - 1, in order) encode, as a NumPy array over the last axis: `A[perm] = L @ U`."""
    pivots = np.asarray(pivots).astype(np.int64) - 1
    m = pivots.shape[-1]
    flat = pivots.reshape(-1, m)
    perms = np.tile(np.arange(m), (flat.shape[0], 1))
    for row, piv in zip(perms, flat, strict=True):
        for i, j in enumerate(piv):
            row[i], row[j] = row[j], row[i]
    return perms.reshape(pivots.shape)


def _lu_pivots(permutation: Any) -> Any:
    """torch's 1-based int32 LU pivots (LAPACK's swaps, in order) of a row permutation
    (`A[perm] = L @ U`, TensorFlow's `tf.linalg.lu`), over the last axis; NumPy."""
    permutation = np.asarray(permutation).astype(np.int64)
    m = permutation.shape[-1]
    flat = permutation.reshape(-1, m)
    out = np.zeros_like(flat)
    for target, piv in zip(flat, out, strict=True):
        current = list(range(m))
        for i in range(m):
            j = current.index(int(target[i]), i)
            piv[i] = j
            current[i], current[j] = current[j], current[i]
    return (out + 1).astype(np.int32).reshape(permutation.shape)


def torch_ntuple(n: int, name: str = "parse") -> Any:
    """torch's `torch.nn.modules.utils._ntuple(n)`: a parser that keeps an iterable as a tuple
    and repeats anything else n times (`_pair(3)` is `(3, 3)`), as layer code imports it."""

    def parse(x: Any) -> Any:
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return (x,) * n

    parse.__name__ = name
    return parse


torch_single = torch_ntuple(1, "_single")
torch_pair = torch_ntuple(2, "_pair")
torch_triple = torch_ntuple(3, "_triple")
torch_quadruple = torch_ntuple(4, "_quadruple")


def torch_reverse_repeat_tuple(t: Any, n: int) -> tuple:
    """torch's `_reverse_repeat_tuple(t, n)`: each entry of t, last first, n times (conv padding)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def reset_parameters(module):
    """torch's `m.reset_parameters()` on a module that may be a layer of the runtime or of the
    target library (torch-geometric's MLP resets every norm it holds): a converted module's own
    method runs (its initialisation statements are dropped: the weights come from the torch
    checkpoint); a layer without one keeps its weights as they are."""
    own = getattr(module, "reset_parameters", None)
    if callable(own):
        own()


def _pairwise_distance(x1: Any, x2: Any, p: float, eps: float, keepdim: bool, ops: Any) -> Any:
    """torch.nn.functional.pairwise_distance: the p-norm of x1 - x2 + eps over the last dim."""
    diff = ops.abs(x1 - x2 + eps)
    if p == math.inf:
        return ops.max(diff, axis=-1, keepdims=keepdim)
    if p == 0:
        return ops.cast(ops.sum(ops.cast(diff != 0, "int32"), axis=-1, keepdims=keepdim), x1.dtype)
    return ops.sum(diff**p, axis=-1, keepdims=keepdim) ** (1.0 / p)


#: The array operations the framework-free bodies compute with (`ops`: runtime/pool.py,
#: losses.py, ...) that jax.numpy and keras.ops both have under these names and with these
#: arguments: each target's `_ArrayOps` (runtime/<target>/functional.py) takes them from its
#: library by name, with `_NN_OPS` (jax.nn's, keras.ops') and a few of its own (`asarray`,
#: `cast`, `is_floating`, `numel`, `stats_dtype`, `xlogy`).
_NUMPY_OPS = (
    *("abs", "arange", "cumprod", "exp", "expand_dims", "log", "log1p", "logical_and", "logical_not", "max"),
    *("maximum", "mean", "minimum", "ones_like", "pad", "power", "reshape", "sign", "sqrt", "square", "squeeze"),
    *("sum", "take", "take_along_axis", "where", "zeros_like"),
)
_NN_OPS = ("log_softmax", "one_hot", "relu", "softplus")


def torch_forward(module: Any, *args: Any, **kwargs: Any) -> Any:
    """`m.forward(x)` on any module: the object's own `forward` where it has one (a converted
    module, the user's own class), else its call (a Flax or Keras layer, the runtime's containers,
    which have no `forward`)."""
    forward = getattr(module, "forward", None)
    return forward(*args, **kwargs) if callable(forward) else module(*args, **kwargs)


def torch_init_skipped(tensor: Any, *args: Any, **kwargs: Any) -> Any:
    """A torch.nn.init initialiser handed around as a value (`init_fn=nn.init.kaiming_normal_`,
    `partial(nn.init.normal_, std=0.02)`): as the converter drops initialiser statements, calling
    it leaves the tensor as it is and returns it; the converted model's weights come from the
    torch checkpoint (precision_transpiler.weights)."""
    return tensor


def torch_calculate_fan_in_and_fan_out(tensor: Any) -> tuple[int, int]:
    """torch.nn.init._calculate_fan_in_and_fan_out, from the shape torch gives the tensor
    ((out, in, *kernel)): initialisers compute a scale from it (LeCun, variance scaling).
    Converted, initial values are the torch weights loaded later; this keeps the code running."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def torch_calculate_correct_fan(tensor: Any, mode: str) -> int:
    """torch.nn.init._calculate_correct_fan: the fan `mode` ("fan_in" / "fan_out") names."""
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = torch_calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


class TorchInit:
    """torch's `reset_parameters()` on the runtime's layers (`nn.Linear.reset_parameters(self)` in
    a subclass, loralib's LoRA layers): a layer drew its initial values from torch's
    distributions when it was built, so they stay; trained values come from the torch weights
    (`ptranspile weights`)."""

    def reset_parameters(self) -> None:
        return None


# torch.Size as a value (an annotation, `isinstance(s, torch.Size)`): a shape is a tuple of ints
# (`torch.Size(sizes)` calls are tuple(sizes): mappings/ops/tensor_ops.yaml)
TorchSize = tuple

# torch.nn.common_types' annotation aliases (`kernel_size: _size_3_t`), as plain types: torch
# code imports them for annotations only, which must not keep torch imported
torch_size_t = int | tuple[int, ...]
torch_size_opt_t = int | None | tuple[int | None, ...]
torch_ratio_t = float | tuple[float, ...]


def _torch_window(kind: str, window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46):
    """torch's window functions (`hann_window`, `hamming_window`, `blackman_window`,
    `bartlett_window`) as float64 NumPy: symmetric over `window_length` points, or periodic (the
    first `window_length` points of a window one longer: torch's default, for spectral work)."""
    if window_length <= 1:
        return np.ones((max(window_length, 0),))
    m = window_length + 1 if periodic else window_length
    n = np.arange(m, dtype=np.float64)
    x = 2 * math.pi * n / (m - 1)
    if kind == "hann":
        window = 0.5 - 0.5 * np.cos(x)
    elif kind == "hamming":
        window = alpha - beta * np.cos(x)
    elif kind == "blackman":
        window = 0.42 - 0.5 * np.cos(x) + 0.08 * np.cos(2 * x)
    else:  # bartlett
        window = 1 - np.abs(2 * n / (m - 1) - 1)
    return window[:window_length]


def torch_mha_shape_check(
    query: Any, key: Any, value: Any, key_padding_mask: Any, attn_mask: Any, num_heads: int
) -> bool:
    """torch.nn.functional._mha_shape_check's answer: whether the query is batched (3-D), 2-D
    for an unbatched one; any other rank is refused as torch refuses it."""
    if len(query.shape) not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D but is {len(query.shape)}-D")
    return len(query.shape) == 3
