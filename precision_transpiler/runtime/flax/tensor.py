"""torch tensor functions and methods whose semantics `jax.numpy` has no one expression for.

The op tables (mappings/ops/tensor_ops.yaml) emit `jax.numpy` code wherever it computes exactly
what torch computes; where it does not, they emit these functions: `x.chunk(3)` becomes
`torch_chunk(x, 3)`, because `jnp.split(x, 3)` wants equal pieces while torch makes pieces of
ceil(n / 3) and may return fewer than three. Each function takes torch's argument names and
order, and its docstring says which torch behaviour it reproduces. The numerical functions
(reductions, scatter, linear algebra, ...) are in tensor_math.py.

Like every runtime module, the converter copies each top-level definition a converted file uses into
that file, with the top-level helpers it names: so definitions are self-contained and only use
the imports below. The names carry a `torch_` prefix because they land in the user's module
namespace, where `max`, `split` or `chunk` would shadow builtins and common variable names.
"""

import math
import typing

import jax
import jax.numpy as jnp
import numpy as np

from precision_transpiler.runtime.common import _legacy_sizes
from precision_transpiler.runtime.factories import _factory_size


def torch_setitem(x, index, value):
    """`x[index] = value` where the converter cannot tell `x` is a tensor (a helper's result,
    torch-geometric's `loop_attr[edge_index[0][inv_mask]] = edge_attr[inv_mask]`) and the index
    is one: a new array equal to x except at the index (JAX arrays are immutable), else the
    container itself, changed in place as written. Called as `x = torch_setitem(x, index, value)`."""
    if isinstance(x, jax.Array):
        return x.at[index].set(jnp.asarray(value, x.dtype))
    x[index] = value
    return x


def torch_to(x, value, *args, **kwargs):
    """torch's `x.to(value)` where the converter cannot tell what `value` is (`rel_pos.to(q)`, a dtype or
    device held in a variable): a tensor casts to its dtype, a dtype casts, a device (a string,
    None, a device object) leaves the array as it is (JAX places arrays itself). Anything but an
    array (a converted module, an object with its own `to`) is passed to its own `to`."""
    if not isinstance(x, jax.Array | np.ndarray | np.generic):
        to = getattr(x, "to", None)
        return x if to is None else to(value, *args, **kwargs)
    if isinstance(value, jax.Array | np.ndarray | np.generic):
        return x.astype(value.dtype)
    if value is None or isinstance(value, str):
        return x  # a device string
    try:
        dtype = jnp.dtype(value)
    except TypeError:
        return x  # a device object
    return x.astype(dtype)


def torch_split(tensor, split_size_or_sections, dim=0):
    """torch.split / Tensor.split: pieces of `split_size` elements along `dim` (the last one
    smaller when it does not divide), or pieces of the listed sizes, which must add up to the
    dim's size. `jnp.split` takes a number of equal pieces or split *indices* instead."""
    size = tensor.shape[dim]
    if isinstance(split_size_or_sections, int | np.integer):
        step = int(split_size_or_sections)
        if step <= 0:
            raise ValueError(f"split expects split_size be positive, but got split_size={step}")
        sizes = [step] * (size // step) + ([size % step] if size % step or size == 0 else [])
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size:
            raise ValueError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size "
                f"at dimension {dim}), but got split_sizes={sizes}"
            )
    indices = []
    total = 0
    for piece in sizes[:-1]:
        total += piece
        indices.append(total)
    return tuple(jnp.split(tensor, indices, axis=dim))


def torch_chunk(input, chunks, dim=0):
    """torch.chunk / Tensor.chunk: pieces of ceil(size / chunks) along `dim`, the last one
    smaller; fewer than `chunks` pieces when that size already covers the dim (10 elements in 4
    chunks are 3, 3, 3, 1; in 6 chunks, five pieces of 2). `jnp.array_split` balances sizes."""
    if chunks <= 0:
        raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = input.shape[dim]
    if size == 0:
        return tuple(input for _ in range(chunks))  # torch returns `chunks` empty pieces
    return torch_split(input, -(-size // chunks), dim)


def torch_squeeze(input, dim=None):
    """torch.squeeze / Tensor.squeeze: removes the given dim(s) only where their size is 1 and
    leaves the others alone (`jnp.squeeze(x, axis)` raises for a dim whose size is not 1);
    without `dim`, removes every size-1 dim."""
    if dim is None:
        return jnp.squeeze(input)
    if input.ndim == 0:
        return input
    dims = tuple(dim) if isinstance(dim, tuple | list) else (dim,)
    axes = tuple(sorted({d % input.ndim for d in dims if input.shape[d] == 1}))
    return jnp.squeeze(input, axis=axes) if axes else input


def torch_expand(input, *sizes):
    """Tensor.expand(*sizes): broadcast to `sizes`, where -1 keeps the existing size of that dim
    and extra leading dims may be added (`jnp.broadcast_to` has no -1). Takes the sizes as
    separate arguments or as one sequence, like torch."""
    if len(sizes) == 1 and isinstance(sizes[0], tuple | list):
        sizes = tuple(sizes[0])
    lead = len(sizes) - input.ndim
    if lead < 0:
        raise ValueError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
            f"number of dimensions in the tensor ({input.ndim})"
        )
    shape = []
    for i, size in enumerate(sizes):
        if size == -1:
            if i < lead:
                raise ValueError(f"expand: -1 is not allowed in a leading, non-existing dimension ({i})")
            shape.append(input.shape[i - lead])
        else:
            shape.append(size)
    return jnp.broadcast_to(input, tuple(shape))


def torch_flatten(input, start_dim=0, end_dim=-1):
    """torch.flatten / Tensor.flatten: merges dims start_dim..end_dim (inclusive) into one; a
    0-d tensor becomes 1-d. `jnp.ravel` only flattens everything."""
    if input.ndim == 0:
        return input.reshape(1)
    start = start_dim % input.ndim
    end = end_dim % input.ndim
    if start > end:
        raise ValueError("flatten() has invalid args: start_dim cannot come after end_dim")
    merged = math.prod(input.shape[start : end + 1])
    return input.reshape((*input.shape[:start], merged, *input.shape[end + 1 :]))


class TorchValuesIndices(typing.NamedTuple):
    """What torch.max(x, dim) and torch.min(x, dim) return: a (values, indices) pair that also
    has `.values` and `.indices`."""

    values: typing.Any
    indices: typing.Any


def torch_max(input, dim=None, keepdim=False):
    """torch.max / Tensor.max: with an int `dim`, the maximum along it *and* its index, as
    (values, indices) with `.values`/`.indices` (first index among equal values, like torch); with
    a tensor in place of `dim`, the elementwise maximum (torch.max(a, b)); without, the maximum of
    all elements."""
    if dim is None:
        return jnp.max(input)
    if not isinstance(dim, int | np.integer):
        return jnp.maximum(input, dim)
    return TorchValuesIndices(jnp.max(input, axis=dim, keepdims=keepdim), jnp.argmax(input, axis=dim, keepdims=keepdim))


def torch_sort(input, dim=-1, descending=False, stable=False):
    """torch.sort / Tensor.sort: the values sorted along `dim` and the indices that sort them, as
    (values, indices) with `.values`/`.indices`; equal values keep their order (a stable sort,
    which torch's `stable=True` asks for and its default does not promise)."""
    indices = jnp.argsort(input, axis=dim, stable=True, descending=descending)
    return TorchValuesIndices(jnp.take_along_axis(input, indices, axis=dim), indices)


def torch_argsort(input, dim=-1, descending=False, stable=False):
    """torch.argsort / Tensor.argsort: the indices that sort `input` along `dim` (stable)."""
    return jnp.argsort(input, axis=dim, stable=True, descending=descending)


def torch_topk(input, k, dim=-1, largest=True, sorted=True):
    """torch.topk / Tensor.topk: the k largest (`largest=False`: smallest) values along `dim` and
    their indices, in order, as (values, indices) with `.values`/`.indices` (jax.lax.top_k works on
    the last axis and for the largest only)."""
    x = jnp.moveaxis(input, dim, -1)
    values, indices = jax.lax.top_k(x if largest else -x, k)
    values = values if largest else -values
    return TorchValuesIndices(jnp.moveaxis(values, -1, dim), jnp.moveaxis(indices, -1, dim))


def torch_min(input, dim=None, keepdim=False):
    """torch.min / Tensor.min: with an int `dim`, the minimum along it *and* its index, as
    (values, indices) with `.values`/`.indices`; with a tensor in place of `dim`, the elementwise
    minimum (torch.min(a, b)); without, the minimum of all elements."""
    if dim is None:
        return jnp.min(input)
    if not isinstance(dim, int | np.integer):
        return jnp.minimum(input, dim)
    return TorchValuesIndices(jnp.min(input, axis=dim, keepdims=keepdim), jnp.argmin(input, axis=dim, keepdims=keepdim))


def torch_gather(input, dim, index):
    """torch.gather / Tensor.gather: out[i][j] = input[index[i][j]][j] (for dim 0), where `index`
    may be smaller than `input` in the other dims; `jnp.take_along_axis` needs them to broadcast,
    so `input` is cut to `index`'s extent first."""
    axis = dim % input.ndim
    cut = tuple(slice(None) if d == axis else slice(0, index.shape[d]) for d in range(input.ndim))
    return jnp.take_along_axis(input[cut], index, axis=axis)


def torch_narrow(input, dim, start, length):
    """torch.narrow / Tensor.narrow: `length` elements of `dim` from `start`, where a negative
    `start` counts from the end (`lax.slice_in_dim` would read start + length < 0 as an empty
    slice) and a tensor `start` is allowed."""
    if isinstance(start, int | np.integer):
        if start < 0:
            start += input.shape[dim]
        return jax.lax.slice_in_dim(input, int(start), int(start) + length, axis=dim)
    return jax.lax.dynamic_slice_in_dim(input, start, length, axis=dim)


def torch_masked_fill(input, mask, value):
    """Tensor.masked_fill(mask, value): `value` where `mask` is True, keeping `input`'s dtype
    (torch casts the value to it: an int tensor filled with 1.5 holds 1; `jnp.where` would
    promote the result to float instead)."""
    return jnp.where(mask, jnp.asarray(value).astype(input.dtype), input)


def torch_legacy_tensor(*args, dtype=jnp.float32):
    """torch's legacy typed constructors (`torch.Tensor`, `torch.FloatTensor`, `torch.LongTensor`,
    ...): given sizes (`torch.Tensor(out_channels)`, pyg's ChebConv bias) an uninitialised tensor,
    here zeros (a module's `reset_parameters` or the torch checkpoint fills it); given data
    (`torch.Tensor(mean)`) a tensor of it in the constructor's dtype."""
    sizes = _legacy_sizes(args)
    return jnp.asarray(args[0], dtype=dtype) if sizes is None else jnp.zeros(sizes, dtype)


def torch_getattr(obj, name, *default):
    """`getattr(x, name)` where `x` may be a tensor and the name is one the code computes
    (`fn = getattr(t, mode); fn(dim=-1, keepdim=True)`, x-transformers' masked reductions): on an
    array, torch's method of that name, with torch's arguments (`dim`, `keepdim`, torch's
    unbiased `std`/`var`, `max`/`min` with their indices); the attributes an array shares with a
    torch tensor (`shape`, `dtype`, `ndim`, `T`) as they are; any other name is refused, since
    jax.numpy's method of that name takes other arguments (`size` is not a method, `view`
    reinterprets bits). Anything but an array is the builtin getattr."""
    if not isinstance(obj, jax.Array | np.ndarray):
        return getattr(obj, name, *default)
    reductions = {
        "mean": jnp.mean,
        "sum": jnp.sum,
        "prod": jnp.prod,
        "amax": jnp.max,
        "amin": jnp.min,
        "all": jnp.all,
        "any": jnp.any,
        "nansum": jnp.nansum,
        "nanmean": jnp.nanmean,
        "logsumexp": jax.scipy.special.logsumexp,
        "argmax": jnp.argmax,
        "argmin": jnp.argmin,
    }
    if name in reductions:
        reduce = reductions[name]

        def method(dim=None, keepdim=False, *, dtype=None):
            axis = tuple(dim) if isinstance(dim, list | tuple) else dim
            out = reduce(obj, axis=axis, keepdims=keepdim)
            return out if dtype is None else out.astype(dtype)

        return method
    if name in ("std", "var"):
        spread = jnp.std if name == "std" else jnp.var

        def deviation(dim=None, unbiased=True, keepdim=False, *, correction=None):
            axis = tuple(dim) if isinstance(dim, list | tuple) else dim
            ddof = correction if correction is not None else int(bool(unbiased))
            return spread(obj, axis=axis, ddof=ddof, keepdims=keepdim)

        return deviation
    if name in ("max", "min"):
        pick = torch_max if name == "max" else torch_min
        return lambda dim=None, keepdim=False: pick(obj, dim, keepdim)
    if name in ("shape", "dtype", "ndim", "T"):
        return getattr(obj, name)
    raise NotImplementedError(
        f"getattr(tensor, {name!r}): the converted code looks this torch method up by a name it computes, "
        "and the runtime converts only torch's reductions (mean, sum, prod, amax, amin, all, any, std, var, "
        "max, min, argmax, argmin, logsumexp) and shape attributes that way"
    )


def torch_ones(*size, dtype=None, out=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """torch.ones passed around as a value (`partial(torch.ones, device=device)`): its signature."""
    return jnp.ones(_factory_size(size), dtype=dtype)


def torch_zeros(*size, dtype=None, out=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """torch.zeros (and torch.empty, zeros here) passed around as a value: its signature."""
    return jnp.zeros(_factory_size(size), dtype=dtype)


def torch_arange_function(start, end=None, step=1, *, dtype=None, out=None, layout=None, device=None,
                          requires_grad=False):  # fmt: skip
    """torch.arange passed around as a value (`partial(torch.arange, device=device)`): its
    signature, `arange(end)` counting from 0."""
    if end is None:
        start, end = 0, start
    return jnp.arange(start, end, step, dtype=dtype)


def torch_write_split(x, chunk, index, size, dim):
    """`x` with the `index`th chunk of `x.split(size, dim)` replaced by `chunk`: torch changes a
    chunk in place through the view `split` gives (blockwise attention accumulating into row
    blocks of its output); converted, the loop writes each changed chunk back
    (rules/torch_split_write_back_model.py)."""
    dim = dim % x.ndim
    start = index * size
    where = (slice(None),) * dim + (slice(start, start + chunk.shape[dim]),)
    return x.at[where].set(jnp.asarray(chunk, x.dtype))
