"""torch tensor functions and methods whose semantics `keras.ops` has no one expression for.

The op tables (mappings/ops/tensor_ops.yaml) emit `keras.ops` code wherever it computes exactly
what torch computes; where it does not, they emit these functions: `x.chunk(3)` becomes
`torch_chunk(x, 3)`, because `keras.ops.split(x, 3)` wants equal pieces while torch makes pieces
of ceil(n / 3) and may return fewer than three. Each function takes torch's argument names and
order, and its docstring says which torch behaviour it reproduces. The Keras counterpart of
runtime/flax/tensor.py.

Like every runtime module, the converter copies each top-level definition a converted file uses into
that file, with the top-level helpers it names (and those it takes from other runtime modules
through the imports below): so definitions are self-contained and only use the imports below. The names
carry a `torch_` prefix because they land in the user's module namespace, where `max`, `split` or
`chunk` would shadow builtins and common variable names.

Conventions: converted code holds backend tensors (tf.Tensor on TensorFlow) or KerasTensors, which
have no `.reshape`/`.astype` methods, so everything goes through `keras.ops`. Shapes that decide
how to split or squeeze must be static (known when tracing), as in runtime/keras/functional.py. torch's int64
results (indices, integer `arange`/`full`) stay int64: TensorFlow refuses arithmetic that mixes
int32 and int64, so an int32 index would break the torch code that combines it with int64 tensors.
"""

import math

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.common import (
    _conv_padding_pairs,
    _cross_dim,
    _legacy_sizes,
    _lu_permutation,
    _lu_pivots,
    _tuple,
    _unfold_index,
    _unique_outputs,
    torch_named_result,
)
from precision_transpiler.runtime.keras.conv import _conv_nd, _conv_transpose_nd
from precision_transpiler.runtime.keras.norm import _rms_norm
from precision_transpiler.runtime.keras.pool import _avg_pool_nd, _max_pool_nd


def torch_split(tensor, split_size_or_sections, dim=0):
    """torch.split / Tensor.split: pieces of `split_size` elements along `dim` (the last one
    smaller when it does not divide), or pieces of the listed sizes, which must add up to the
    dim's size. `keras.ops.split` takes a number of equal pieces or split *indices* instead."""
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
    pieces = []
    start = 0
    axis = dim % len(tensor.shape)
    for piece in sizes:
        cut = tuple(slice(start, start + piece) if d == axis else slice(None) for d in range(len(tensor.shape)))
        pieces.append(tensor[cut])
        start += piece
    return tuple(pieces)


def torch_chunk(input, chunks, dim=0):
    """torch.chunk / Tensor.chunk: pieces of ceil(size / chunks) along `dim`, the last one
    smaller; fewer than `chunks` pieces when that size already covers the dim (10 elements in 4
    chunks are 3, 3, 3, 1; in 6 chunks, five pieces of 2). `keras.ops.array_split` balances sizes."""
    if chunks <= 0:
        raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = input.shape[dim]
    if size == 0:
        return tuple(input for _ in range(chunks))  # torch returns `chunks` empty pieces
    return torch_split(input, -(-size // chunks), dim)


def torch_squeeze(input, dim=None):
    """torch.squeeze / Tensor.squeeze: removes the given dim(s) only where their size is 1 and
    leaves the others alone (`keras.ops.squeeze(x, axis)` raises for a dim whose size is not 1);
    without `dim`, removes every size-1 dim."""
    if dim is None:
        return ops.squeeze(input)
    ndim = len(input.shape)
    if ndim == 0:
        return input
    dims = tuple(dim) if isinstance(dim, tuple | list) else (dim,)
    axes = tuple(sorted({d % ndim for d in dims if input.shape[d] == 1}))
    return ops.squeeze(input, axis=axes) if axes else input


def _is_tensor_shape(value):
    """A TensorFlow `TensorShape` (what `x.shape` of a tf.Tensor is, and what adding two gives)."""
    return type(value).__name__ == "TensorShape"


def torch_expand(input, *sizes):
    """Tensor.expand(*sizes): broadcast to `sizes`, where -1 keeps the existing size of that dim
    and extra leading dims may be added (`keras.ops.broadcast_to` has no -1). Takes the sizes as
    separate arguments or as one sequence, like torch."""
    if len(sizes) == 1 and (isinstance(sizes[0], tuple | list) or _is_tensor_shape(sizes[0])):
        sizes = tuple(sizes[0])  # `x.shape[:1] + y.shape[1:]` is a TensorShape on TensorFlow
    ndim = len(input.shape)
    lead = len(sizes) - ndim
    if lead < 0:
        raise ValueError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
            f"number of dimensions in the tensor ({ndim})"
        )
    current = ops.shape(input)
    shape = []
    for i, size in enumerate(sizes):
        if isinstance(size, int | np.integer) and size == -1:
            if i < lead:
                raise ValueError(f"expand: -1 is not allowed in a leading, non-existing dimension ({i})")
            shape.append(current[i - lead])
        else:
            shape.append(size)
    return ops.broadcast_to(input, tuple(shape))


def torch_flatten(input, start_dim=0, end_dim=-1):
    """torch.flatten / Tensor.flatten: merges dims start_dim..end_dim (inclusive) into one; a
    0-d tensor becomes 1-d. `keras.ops.ravel` only flattens everything."""
    ndim = len(input.shape)
    if ndim == 0:
        return ops.reshape(input, (1,))
    start = start_dim % ndim
    end = end_dim % ndim
    if start > end:
        raise ValueError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = ops.shape(input)
    merged = 1
    for size in shape[start : end + 1]:
        merged = merged * size
    return ops.reshape(input, (*shape[:start], merged, *shape[end + 1 :]))


def torch_numel(input):
    """Tensor.numel() / torch.numel: the number of elements as a Python int (`keras.ops.size`
    returns a tensor); a scalar tensor for dims only known at run time."""
    count = 1
    for size in ops.shape(input):
        count = count * size
    return count


class TorchValuesIndices(tuple):
    """What torch.max(x, dim) and torch.min(x, dim) return: a (values, indices) pair that also
    has `.values` and `.indices`."""

    __slots__ = ()

    def __new__(cls, values, indices):
        return super().__new__(cls, (values, indices))

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def torch_max(input, dim=None, keepdim=False):
    """torch.max / Tensor.max: with an int `dim`, the maximum along it *and* its int64 index, as
    (values, indices) with `.values`/`.indices` (first index among equal values, like torch); with
    a tensor in place of `dim`, the elementwise maximum (torch.max(a, b)); without, the maximum of
    all elements."""
    if dim is None:
        return ops.max(input)
    if not isinstance(dim, int | np.integer):
        return ops.maximum(input, dim)
    return TorchValuesIndices(
        ops.max(input, axis=dim, keepdims=keepdim), ops.cast(ops.argmax(input, axis=dim, keepdims=keepdim), "int64")
    )


def torch_sort(input, dim=-1, descending=False, stable=False):
    """torch.sort / Tensor.sort: the values sorted along `dim` and their int64 indices, as
    (values, indices) with `.values`/`.indices` (descending: the order of the negated values)."""
    indices = torch_argsort(input, dim=dim, descending=descending)
    return TorchValuesIndices(ops.take_along_axis(input, indices, axis=dim), indices)


def torch_argsort(input, dim=-1, descending=False, stable=False):
    """torch.argsort / Tensor.argsort: the int64 indices that sort `input` along `dim`."""
    return ops.cast(ops.argsort(ops.negative(input) if descending else input, axis=dim), "int64")


def torch_topk(input, k, dim=-1, largest=True, sorted=True):
    """torch.topk / Tensor.topk: the k largest (`largest=False`: smallest) values along `dim` and
    their int64 indices, in order, as (values, indices) with `.values`/`.indices`
    (keras.ops.top_k works on the last axis and for the largest only)."""
    x = ops.moveaxis(input, dim, -1)
    values, indices = ops.top_k(x if largest else ops.negative(x), k)
    values = values if largest else ops.negative(values)
    return TorchValuesIndices(ops.moveaxis(values, -1, dim), ops.cast(ops.moveaxis(indices, -1, dim), "int64"))


def torch_min(input, dim=None, keepdim=False):
    """torch.min / Tensor.min: with an int `dim`, the minimum along it *and* its int64 index, as
    (values, indices) with `.values`/`.indices`; with a tensor in place of `dim`, the elementwise
    minimum (torch.min(a, b)); without, the minimum of all elements."""
    if dim is None:
        return ops.min(input)
    if not isinstance(dim, int | np.integer):
        return ops.minimum(input, dim)
    return TorchValuesIndices(
        ops.min(input, axis=dim, keepdims=keepdim), ops.cast(ops.argmin(input, axis=dim, keepdims=keepdim), "int64")
    )


def torch_gather(input, dim, index):
    """torch.gather / Tensor.gather: out[i][j] = input[index[i][j]][j] (for dim 0), where `index`
    may be smaller than `input` in the other dims; `keras.ops.take_along_axis` needs them to
    broadcast, so `input` is cut to `index`'s extent first."""
    ndim = len(input.shape)
    axis = dim % ndim
    cut = tuple(slice(None) if d == axis else slice(0, index.shape[d]) for d in range(ndim))
    return ops.take_along_axis(input[cut], index, axis=axis)


def torch_narrow(input, dim, start, length):
    """torch.narrow / Tensor.narrow: `length` elements of `dim` from `start`, where a negative
    `start` counts from the end and a tensor `start` is allowed; like torch, a range past the end
    of the dim is an error (Python slicing would cut it short)."""
    ndim = len(input.shape)
    axis = dim % ndim
    if isinstance(start, int | np.integer):
        size = input.shape[axis]
        start = int(start) + (size if start < 0 else 0)
        if size is not None and not 0 <= start <= size - length:
            raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
        cut = tuple(slice(start, start + length) if d == axis else slice(None) for d in range(ndim))
        return input[cut]
    starts = [0] * ndim
    starts[axis] = start
    sizes = list(ops.shape(input))
    sizes[axis] = length
    return ops.slice(input, starts, sizes)


def torch_masked_fill(input, mask, value):
    """Tensor.masked_fill(mask, value): `value` where `mask` is True, keeping `input`'s dtype
    (torch casts the value to it: an int tensor filled with 1.5 holds 1; `keras.ops.where` would
    promote the result to float instead)."""
    return ops.where(mask, ops.cast(value, input.dtype), input)


def _torch_index_numpy(index):
    """A torch index with its tensors read as NumPy arrays (eager values; an index that is only
    known when the graph runs cannot be turned into positions here)."""
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    for part in parts:
        if hasattr(part, "shape") and hasattr(part, "dtype") and not isinstance(part, np.ndarray):
            try:
                part = np.asarray(part)
            except Exception as error:  # a symbolic tensor (tf.function, KerasTensor)
                raise TypeError(
                    "assignment into a tensor at an index computed in the graph: only indices known "
                    "when the assignment runs (eager, or Python values) are supported"
                ) from error
        out.append(part)
    return tuple(out) if isinstance(index, tuple) else out[0]


def _torch_index_update(x, index, value, combine):
    """`x[index] = combine(x[index], value)` as a new tensor: the positions `index` selects are
    found by indexing a grid of flat positions with NumPy (torch's basic and advanced indexing
    are NumPy's), then scattered into. A boolean mask of x's shape is a `where`, or, given one
    value per selected position (`out[mask] = inputs[mask]`), a scatter into them in order."""
    if hasattr(index, "dtype") and keras.backend.standardize_dtype(index.dtype) == "bool":
        if tuple(index.shape) == tuple(x.shape):
            value = ops.convert_to_tensor(value)
            if len(value.shape) and tuple(value.shape) != (1,):  # torch: broadcast to (selected,)
                flat = ops.reshape(x, (-1,))
                chosen = ops.where(ops.reshape(index, (-1,)))[0]
                new = ops.broadcast_to(ops.cast(value, x.dtype), ops.shape(chosen))
                if combine is not None:
                    new = ops.cast(combine(ops.take(flat, chosen), new), x.dtype)
                return ops.reshape(ops.scatter_update(flat, ops.expand_dims(chosen, -1), new), ops.shape(x))
            old = x
            new = ops.broadcast_to(ops.cast(value, x.dtype), ops.shape(x))
            if combine is not None:
                new = ops.cast(combine(old, new), x.dtype)
            return ops.where(index, new, x)
    shape = tuple(x.shape)
    if any(d is None for d in shape):
        raise TypeError(f"assignment into a tensor of unknown shape {shape}: its shape must be static")
    positions = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)[_torch_index_numpy(index)]
    flat = ops.reshape(x, (-1,))
    where = positions.reshape(-1, 1)
    new = ops.broadcast_to(ops.cast(value, x.dtype), positions.shape)
    if combine is not None:
        new = ops.cast(combine(ops.reshape(ops.take(flat, positions.reshape(-1)), positions.shape), new), x.dtype)
    return ops.reshape(ops.scatter_update(flat, where, ops.reshape(new, (-1,))), shape)


def _torch_is_array(part):
    return (hasattr(part, "shape") and hasattr(part, "dtype")) or isinstance(part, list | np.ndarray)


def _torch_index_read(x, index):
    """`x[index]` with torch's (NumPy's) advanced indexing: one integer array on one axis among
    full slices is a gather (which also runs in graphs, negative indices counted from the end);
    other array indices select flat positions found with NumPy (eager values, static shape);
    indices without arrays are TensorFlow's own."""
    parts = index if isinstance(index, tuple) else (index,)
    arrays = [i for i, part in enumerate(parts) if _torch_is_array(part)]
    if not arrays or not (hasattr(x, "shape") and hasattr(x, "dtype")):
        return x[index]  # basic indexing, or a base that is no tensor (a list read at a 0-d tensor)
    full = slice(None)
    if len(arrays) == 1 and all(isinstance(p, slice) and p == full for i, p in enumerate(parts) if i != arrays[0]):
        axis, indices = arrays[0], parts[arrays[0]]
        indices = ops.convert_to_tensor(indices)
        if keras.backend.standardize_dtype(indices.dtype) != "bool":
            size = ops.shape(x)[axis]
            indices = ops.where(indices < 0, indices + ops.cast(size, indices.dtype), indices)
            return ops.take(x, indices, axis=axis)
    shape = tuple(x.shape)
    if any(d is None for d in shape):
        raise TypeError(f"a tensor of unknown shape {shape} read at a tensor index: its shape must be static")
    positions = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)[_torch_index_numpy(index)]
    return ops.reshape(ops.take(ops.reshape(x, (-1,)), positions.reshape(-1)), positions.shape)


class _TorchAtIndex:
    """`torch_at(x)[index]`: the updates of `x` at `index` (see torch_at)."""

    def __init__(self, x, index):
        self.x = x
        self.index = index

    def get(self):
        return _torch_index_read(self.x, self.index)

    def set(self, value):
        return _torch_index_update(self.x, self.index, value, None)

    def add(self, value):
        return _torch_index_update(self.x, self.index, value, ops.add)

    def subtract(self, value):
        return _torch_index_update(self.x, self.index, value, ops.subtract)

    def multiply(self, value):
        return _torch_index_update(self.x, self.index, value, ops.multiply)

    def divide(self, value):
        return _torch_index_update(self.x, self.index, value, ops.true_divide)

    def power(self, value):
        return _torch_index_update(self.x, self.index, value, ops.power)


class torch_at:
    """torch's indexing of tensors by tensors (`torch_at(x)[idx].get()`: TensorFlow tensors take
    only ints, slices, None and `...`), and assignment into a tensor, for immutable TensorFlow
    tensors, written as JAX does it:
    `x[:, 0] = v` becomes `x = torch_at(x)[:, 0].set(v)` and `x[i] += v` becomes
    `x = torch_at(x)[i].add(v)`: a new tensor equal to x except at the index. The value is cast
    to x's dtype and broadcast to the indexed shape, as torch does. Basic and advanced indices
    (slices, ints, None, `...`, integer and boolean arrays) follow torch, which follows NumPy;
    tensor indices must hold values when the assignment runs (eager), and x's shape must be
    static. With repeated positions in an integer index the last value wins, as in torch."""

    def __init__(self, x):
        self.x = x

    def __getitem__(self, index):
        return _TorchAtIndex(self.x, index)


def torch_setitem(x, index, value):
    """`x[index] = value` where the converter cannot tell `x` is a tensor (a helper's result,
    torch-geometric's `loop_attr[edge_index[0][inv_mask]] = edge_attr[inv_mask]`) and the index
    is one: `torch_at(x)[index].set(value)` for a tensor (TensorFlow tensors are immutable), else
    the container itself, changed in place as written. Called as `x = torch_setitem(x, index, value)`."""
    if ops.is_tensor(x):
        return torch_at(x)[index].set(value)
    x[index] = value
    return x


def torch_nonzero_tuple(condition):
    """torch.where(condition) with one argument (torch.nonzero(condition, as_tuple=True)): a tuple
    of int64 index tensors, one per dim (`keras.ops.nonzero` gives a list of int32 ones)."""
    return tuple(ops.cast(indices, "int64") for indices in ops.nonzero(condition))


def torch_argwhere(input):
    """torch.argwhere / torch.nonzero: the int64 indices of the nonzero elements, one row per
    element in row-major order ([N, ndim]; `keras.ops.nonzero` gives one int32 tensor per dim)."""
    return ops.stack(torch_nonzero_tuple(input), axis=1)


def torch_equal(input, other):
    """torch.equal / Tensor.equal: a Python bool, True when both tensors have the same shape and
    the same values (False for different shapes, where `keras.ops.equal` would broadcast)."""
    if tuple(ops.shape(input)) != tuple(ops.shape(other)):
        return False
    return bool(ops.all(ops.equal(input, other)))


def _torch_scalar_dtype(value):
    """The dtype torch infers from a Python number (or a tensor used as one): bool, int64, the
    default float dtype (torch.set_default_dtype converts to keras.config.set_floatx), complex64."""
    if hasattr(value, "dtype"):
        name = keras.backend.standardize_dtype(value.dtype)
        if name == "bool":
            return "bool"
        if "int" in name:
            return "int64"
        return "complex64" if "complex" in name else keras.config.floatx()
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, int | np.integer):
        return "int64"
    if isinstance(value, complex | np.complexfloating):
        return "complex64"
    return keras.config.floatx()


def torch_promote_types(type1, type2):
    """torch.promote_types: `keras.backend.result_type` follows torch's lattice on real and bool
    dtypes (int32 with float16 is float16, where NumPy says float64) but has no complex128. With a
    complex dtype, torch promotes the real parts (complex64's is float32) and makes the result
    complex: complex128 when that is float64."""
    a, b = keras.backend.standardize_dtype(type1), keras.backend.standardize_dtype(type2)
    if "complex" not in a and "complex" not in b:
        return keras.backend.result_type(a, b)
    real = {"complex64": "float32", "complex128": "float64"}
    promoted = keras.backend.result_type(real.get(a, a), real.get(b, b))
    return "complex128" if promoted == "float64" else "complex64"


def torch_arange(start, end=None, step=1, dtype=None):
    """torch.arange: [start, end) by `step` (`torch.arange(end)` counts from 0). Without `dtype`,
    int64 when start, end and step are all integers, else the default float dtype
    (`keras.ops.arange` makes int32 from integers)."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        kinds = {_torch_scalar_dtype(v) for v in (start, end, step)}
        dtype = "int64" if kinds <= {"int64", "bool"} else keras.config.floatx()
    return ops.arange(start, end, step, dtype=dtype)


def torch_full(size, fill_value, dtype=None):
    """torch.full without dtype: the dtype comes from the fill value as torch infers it (bool,
    int64 for an integer, the default float dtype for a float); `keras.ops.full` makes floatx
    whatever the value."""
    if dtype is None:
        dtype = _torch_scalar_dtype(fill_value)
    return ops.full(size, fill_value, dtype=dtype)


def torch_new_tensor(data, dtype):
    """Tensor.new_tensor(data) / torch.tensor(data, dtype=...): `data` converted to `dtype` the
    way torch does: Python floats are read as float64 and then rounded (or truncated towards zero
    for an integer dtype), never first squeezed through float32."""
    if isinstance(data, list | tuple | int | float | bool | np.ndarray | np.generic):
        data = np.asarray(data)
    return ops.cast(ops.convert_to_tensor(data), dtype)


def torch_tensor(data):
    """torch.tensor / torch.as_tensor without dtype: torch's inference, not TensorFlow's. Python
    integers make int64 (TF: int32, and an int64 `torch.arange` times an int32 constant fails),
    floats the default float dtype, bools bool, complex numbers complex64; a tensor or NumPy array
    keeps its dtype."""
    if hasattr(data, "dtype"):
        return ops.convert_to_tensor(data)
    try:
        values = np.asarray(data)
    except (TypeError, ValueError, NotImplementedError):  # symbolic tensors inside a list
        return ops.convert_to_tensor(data)
    kind = values.dtype.kind
    if kind == "O":
        return ops.convert_to_tensor(data)
    dtype = {"b": "bool", "i": "int64", "u": "int64", "c": "complex64"}.get(kind, keras.config.floatx())
    return ops.convert_to_tensor(values, dtype=dtype)


def torch_diff(input, n=1, dim=-1, prepend=None, append=None):
    """torch.diff / Tensor.diff with `prepend`/`append`, which are concatenated along `dim` before
    the n-th forward difference is taken (`keras.ops.diff` has neither)."""
    parts = [p for p in (prepend, input, append) if p is not None]
    x = ops.concatenate(parts, axis=dim) if len(parts) > 1 else input
    return ops.diff(x, n, axis=dim)


def torch_round(input, decimals=0):
    """torch.round / Tensor.round with `decimals`: half to even of input * 10**decimals, divided
    back, and for negative `decimals` of input / 10**-decimals, multiplied back, as torch does
    (`keras.ops.round` multiplies by the inexact 10**decimals instead)."""
    if decimals == 0:
        return ops.round(input)
    if decimals > 0:
        factor = 10.0**decimals
        return ops.round(input * factor) / factor
    factor = 10.0 ** (-decimals)
    return ops.round(input / factor) * factor


def _torch_axes(input, dim):
    """The dims a torch reduction over `dim` (None: all; an int; a sequence) covers, as
    non-negative ints."""
    ndim = len(input.shape)
    if dim is None:
        return tuple(range(ndim))
    dims = tuple(dim) if isinstance(dim, tuple | list) else (dim,)
    return tuple(d % ndim for d in dims) if ndim else ()


def torch_var(input, dim=None, correction=1, keepdim=False):
    """torch.var / Tensor.var: sum of squared deviations / (N - correction), unbiased
    (correction=1) by default (`keras.ops.var` is the population variance, correction 0); inf or
    nan where N <= correction, as torch."""
    axes = _torch_axes(input, dim)
    axis = None if dim is None else axes
    mean = ops.mean(input, axis=axis, keepdims=True)
    total = ops.sum(ops.square(input - mean), axis=axis, keepdims=keepdim)
    count = 1
    shape = ops.shape(input)
    for d in axes:
        count = count * shape[d]
    return total / ops.maximum(ops.cast(count - correction, total.dtype), 0)


def torch_std(input, dim=None, correction=1, keepdim=False):
    """torch.std / Tensor.std: the square root of torch_var, unbiased (correction=1) by default
    (`keras.ops.std` is the population deviation)."""
    return ops.sqrt(torch_var(input, dim, correction=correction, keepdim=keepdim))


def torch_vector_norm(x, ord=2, dim=None, keepdim=False):
    """torch.linalg.vector_norm (and torch.norm / Tensor.norm with a number or 'fro'): the vector
    p-norm of the elements over `dim` (all of them when None), whatever the number of dims;
    `keras.ops.norm` computes a *matrix* norm for two axes or a 2-d input without axis."""
    if ord == "fro":
        ord = 2
    axis = None if dim is None else (tuple(dim) if isinstance(dim, tuple | list) else dim)
    a = ops.abs(x)
    if ord == math.inf:
        return ops.max(a, axis=axis, keepdims=keepdim)
    if ord == -math.inf:
        return ops.min(a, axis=axis, keepdims=keepdim)
    if ord == 0:
        return ops.sum(ops.cast(ops.not_equal(x, 0), a.dtype), axis=axis, keepdims=keepdim)
    if ord == 1:
        return ops.sum(a, axis=axis, keepdims=keepdim)
    if ord == 2:
        return ops.sqrt(ops.sum(ops.square(a), axis=axis, keepdims=keepdim))
    return ops.power(ops.sum(ops.power(a, ord), axis=axis, keepdims=keepdim), 1.0 / ord)


def torch_normalize(input, p=2.0, dim=1, eps=1e-12):
    """torch.nn.functional.normalize: input / max(||input||_p over `dim`, eps)."""
    norm = torch_vector_norm(input, p, dim, keepdim=True)
    return input / ops.maximum(norm, eps)


def torch_softplus(input, beta=1.0, threshold=20.0):
    """torch.nn.functional.softplus with torch's `beta` and `threshold`: log(1 + exp(beta * x)) /
    beta, and x itself where beta * x > threshold (`keras.ops.softplus` has neither)."""
    scaled = input * beta
    return ops.where(scaled > threshold, input, ops.log1p(ops.exp(scaled)) / beta)


def torch_bitwise(op, x, y=None):
    """torch.bitwise_and/or/xor/not: on bool tensors they are the logical operations, which
    TensorFlow's bitwise kernels refuse (integers only)."""
    x = ops.convert_to_tensor(x)
    if keras.backend.standardize_dtype(x.dtype) == "bool":
        logical = {"and": ops.logical_and, "or": ops.logical_or, "xor": ops.logical_xor}
        return ops.logical_not(x) if op == "not" else logical[op](x, y)
    bitwise = {"and": ops.bitwise_and, "or": ops.bitwise_or, "xor": ops.bitwise_xor}
    return ops.bitwise_invert(x) if op == "not" else bitwise[op](x, y)


def torch_cross(input, other, dim=None):
    """torch.cross without `dim`: the cross product along the first dim of size 3 of the broadcast
    shape (`keras.ops.cross` defaults to the last axis)."""
    shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    return ops.cross(input, other, axis=_cross_dim(shape) if dim is None else dim)


def torch_lerp(input, end, weight):
    """torch.lerp / Tensor.lerp: input + weight * (end - input) where |weight| < 0.5, else
    end - (end - input) * (1 - weight), as torch computes it (exact at weight 1)."""
    diff = ops.subtract(end, input)
    low = ops.add(input, ops.multiply(weight, diff))
    high = ops.subtract(end, ops.multiply(diff, ops.subtract(1, weight)))
    return ops.where(ops.less(ops.abs(weight), 0.5), low, high)


def torch_frac(input):
    """torch.frac / Tensor.frac: input - trunc(input), with input's sign."""
    return ops.subtract(input, ops.trunc(input))


def torch_tril_indices(row, col, offset=0, upper=False):
    """torch.tril_indices / torch.triu_indices (upper=True): the int64 (2, N) row and column
    indices of a row x col matrix's lower (upper) triangle from diagonal `offset`, row by row."""
    pick = np.triu_indices if upper else np.tril_indices
    return ops.convert_to_tensor(np.stack(pick(row, offset, col)).astype(np.int64))


def torch_block_diag(*tensors):
    """torch.block_diag: the tensors as the diagonal blocks of one matrix (a 0-d tensor is a 1 x 1
    block, a 1-d one a row), zeros elsewhere, in the promoted dtype."""
    blocks = _torch_rows(tensors)
    dtype = keras.backend.result_type(*[b.dtype for b in blocks])
    width = sum(b.shape[1] for b in blocks)
    rows, start = [], 0
    for b in blocks:
        pad = [(0, 0), (start, width - start - b.shape[1])]
        rows.append(ops.pad(ops.cast(b, dtype), pad))
        start += b.shape[1]
    return ops.concatenate(rows, axis=0)


def _torch_rows(tensors):
    """0- and 1-d tensors as one-row matrices (torch.block_diag's blocks, torch.vstack's rows)."""
    return [ops.reshape(t, (1, -1)) if len(t.shape) < 2 else t for t in map(ops.convert_to_tensor, tensors)]


def torch_vstack(tensors):
    """torch.vstack / torch.row_stack: the tensors joined along dim 0, a 1-d one as a row
    (keras.ops.vstack joins 1-d tensors end to end on TensorFlow)."""
    return ops.concatenate(_torch_rows(tensors), axis=0)


def torch_cartesian_prod(*tensors):
    """torch.cartesian_prod: the rows of every combination of the 1-d tensors' elements (the
    first varying slowest), as itertools.product; one tensor is returned as it is."""
    if len(tensors) == 1:
        return tensors[0]
    grids = ops.meshgrid(*tensors, indexing="ij")
    return ops.stack([ops.reshape(grid, (-1,)) for grid in grids], axis=1)


def torch_view_as_real(input):
    """torch.view_as_real: a complex tensor as (..., 2) real and imaginary parts (a copy)."""
    return ops.stack([ops.real(input), ops.imag(input)], axis=-1)


def torch_view_as_complex(input):
    """torch.view_as_complex: a (..., 2) float tensor as complex values (float32 -> complex64;
    keras.ops has no complex constructor, so real + i * imaginary)."""
    return torch_complex(input[..., 0], input[..., 1])


def torch_complex(real, imag):
    """torch.complex: real + i * imag as complex64 (complex128 from float64); keras.ops has no
    complex constructor."""
    dtype = "complex128" if keras.backend.standardize_dtype(real.dtype) == "float64" else "complex64"
    unit = ops.convert_to_tensor(np.asarray(1j, dtype=dtype))
    return ops.add(ops.cast(real, dtype), ops.multiply(ops.cast(imag, dtype), unit))


def torch_unfold(input, dimension, size, step):
    """torch's Tensor.unfold(dimension, size, step): every window of `size` elements `step` apart along
    `dimension`, which becomes the number of windows, with the window as a new last dim."""
    axis = dimension % max(len(input.shape), 1)
    windows = ops.take(input, _unfold_index(input.shape[axis], size, step), axis=axis)
    return ops.moveaxis(windows, axis + 1, -1)


def torch_scatter(input, dim, index, src, reduce=None):
    """torch.scatter / scatter_add / Tensor.scatter(_add): a copy of `input` with
    out[index[i][j]][j] = src[i][j] (for dim 0) for every position of `index`, which may be smaller
    than `input` and `src`; `src` may be a number. reduce="add" sums repeated positions
    (scatter_add); "multiply" has no keras.ops scatter."""
    ndim = len(input.shape)
    axis = dim % ndim
    shape = tuple(index.shape)
    grids = [np.arange(n).reshape([-1 if d == i else 1 for d in range(ndim)]) for i, n in enumerate(shape)]
    grids[axis] = index
    grids = [ops.broadcast_to(ops.cast(g, "int64"), shape) for g in grids]
    where = ops.reshape(ops.stack(grids, axis=-1), (-1, ndim))
    if len(getattr(src, "shape", ())):
        src = src[tuple(slice(0, n) for n in shape)]
    values = ops.reshape(ops.broadcast_to(ops.cast(src, input.dtype), shape), (-1,))
    if reduce is None:
        return ops.scatter_update(input, where, values)
    if reduce == "add":
        return ops.add(input, ops.scatter(where, values, ops.shape(input)))
    raise NotImplementedError(f"scatter with reduce={reduce!r}: only None and 'add' are supported for Keras")


def torch_scatter_reduce(input, dim, index, src, reduce, include_self=True):
    """torch.scatter_reduce / Tensor.scatter_reduce(_): `src`'s values reduced into `input` at
    `index` along `dim` ("sum", "mean", "amax", "amin"; "prod" has no keras.ops segment
    reduction); with include_self=False the values `input` holds at the scattered positions take
    no part (positions nothing is scattered to keep them). Integer means are the floor division of
    the sum by the count, as in torch. Through keras.ops' segment reductions over flat positions."""
    shape = tuple(index.shape)
    ndim = len(input.shape)
    axis = dim % ndim
    grids = [np.arange(n).reshape([-1 if d == i else 1 for d in range(ndim)]) for i, n in enumerate(shape)]
    grids[axis] = index
    grids = [ops.broadcast_to(ops.cast(g, "int32"), shape) for g in grids]
    strides = np.cumprod([1, *[int(n) for n in input.shape[:0:-1]]])[::-1].astype(np.int32)
    linear = ops.reshape(ops.sum(ops.stack(grids, axis=-1) * strides, axis=-1), (-1,))
    size = int(np.prod(input.shape))
    values = ops.reshape(ops.cast(src[tuple(slice(0, n) for n in shape)], input.dtype), (-1,))
    flat = ops.reshape(input, (-1,))
    count = ops.segment_sum(ops.ones_like(values), linear, num_segments=size)
    hit = count > 0
    if reduce in ("sum", "mean"):
        total = ops.segment_sum(values, linear, num_segments=size)
        if include_self:
            total, count = total + flat, count + 1
        if reduce == "mean":
            safe = ops.maximum(count, 1)
            floating = "float" in str(input.dtype)
            total = ops.true_divide(total, safe) if floating else ops.floor_divide(total, safe)
        out = ops.where(hit, ops.cast(total, input.dtype), flat)
    elif reduce in ("amax", "amin"):
        sign = 1 if reduce == "amax" else -1
        best = sign * ops.segment_max(sign * values, linear, num_segments=size)
        if include_self:
            best = ops.maximum(best, flat) if reduce == "amax" else ops.minimum(best, flat)
        out = ops.where(hit, best, flat)
    else:
        raise NotImplementedError(f"scatter_reduce with reduce={reduce!r}: sum, mean, amax and amin for Keras")
    return ops.reshape(out, ops.shape(input))


def torch_unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """torch.unique / Tensor.unique: the sorted distinct values (or slices along `dim`), with the
    int64 inverse indices (input's shape; one per slice with `dim`) and counts when asked.
    Computed by NumPy on the tensor's values: eager only, not inside tf.function."""
    array = ops.convert_to_numpy(input)
    values, inverse, counts = np.unique(array, return_inverse=True, return_counts=True, axis=dim)
    inverse = inverse.reshape(array.shape if dim is None else (-1,))
    tensors = [ops.convert_to_tensor(a) for a in (values, inverse.astype(np.int64), counts.astype(np.int64))]
    return _unique_outputs(*tensors, return_inverse, return_counts)


def torch_searchsorted(sorted_sequence, values, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted / torch.bucketize: for each value, how many elements of the innermost
    dim of `sorted_sequence` come before it (right=True or side="right": also the equal ones),
    counted by comparison. An N-d `sorted_sequence` is searched row by row, matching `values`'
    leading dims."""
    if sorter is not None:
        sorted_sequence = ops.take_along_axis(sorted_sequence, sorter, axis=-1)
    values = ops.convert_to_tensor(values)
    before = ops.less_equal if (side or ("right" if right else "left")) == "right" else ops.less
    if len(sorted_sequence.shape) == 1:
        hits = before(sorted_sequence, ops.expand_dims(values, -1))
    else:
        hits = before(ops.expand_dims(sorted_sequence, -2), ops.expand_dims(values, -1))
    return ops.sum(ops.cast(hits, "int32" if out_int32 else "int64"), axis=-1)


def torch_conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d on NCDHW with a torch (out, in/groups, kD, kH, kW) weight and
    torch's symmetric or 'same' padding."""
    k, d = _tuple(weight.shape[2:], 3, "kernel_size"), _tuple(dilation, 3, "dilation")
    pairs = _conv_padding_pairs(padding if isinstance(padding, str) else _tuple(padding, 3, "padding"), k, d)
    return _conv_nd(input, weight, bias, _tuple(stride, 3, "stride"), pairs, d, groups, "zeros")


def torch_conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """torch.nn.functional.conv_transpose1d/2d/3d (N, C, *spatial) with torch's (in, out/groups,
    *kernel) weight: torch's output size (in-1)*s - 2p + d*(k-1) + output_padding + 1."""
    n = len(weight.shape) - 2
    args = [
        _tuple(v, n, name) for v, name in ((stride, "stride"), (padding, "padding"), (output_padding, "output_padding"))
    ]
    return _conv_transpose_nd(input, weight, bias, *args, groups, _tuple(dilation, n, "dilation"))


def torch_masked_select(input, mask):
    """torch.masked_select / Tensor.masked_select: the elements where `mask` (broadcast with
    `input`) is True, as a 1-d tensor. Positions are read from the mask's values: eager only."""
    shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    where = np.flatnonzero(np.broadcast_to(ops.convert_to_numpy(mask), shape))
    return ops.take(ops.reshape(ops.broadcast_to(input, shape), (-1,)), where)


def torch_cdist(x1, x2, p=2.0):
    """torch.cdist: the p-norm distance between every row of x1 (..., P, M) and every row of x2
    (..., R, M), as (..., P, R), computed from the differences (torch's own form for up to 25 rows)."""
    diff = ops.subtract(ops.expand_dims(x1, -2), ops.expand_dims(x2, -3))
    return torch_vector_norm(diff, p, dim=-1)


def torch_broadcast_tensors(*tensors):
    """torch.broadcast_tensors: the tensors broadcast to their common shape, as a tuple."""
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(ops.broadcast_to(t, shape) for t in tensors)


def torch_atleast_1d(input):
    """torch.atleast_1d: a 0-d tensor as a 1-element 1-d one, others unchanged."""
    return ops.reshape(input, (1,)) if len(input.shape) == 0 else input


def torch_histc(input, bins=100, min=0, max=0):
    """torch.histc: `bins` equal-width bins over [min, max] (the data's own range when both are
    0; widened by 1 either side when that is a single value), values outside ignored, the last
    bin closed; counts in the input's dtype."""
    flat = ops.reshape(input, (-1,))
    low, high = float(min), float(max)
    if low == high:
        low, high = ops.min(flat), ops.max(flat)
        same = ops.equal(low, high)
        low, high = ops.where(same, low - 1, low), ops.where(same, high + 1, high)
    inside = ops.logical_and(ops.greater_equal(flat, low), ops.less_equal(flat, high))
    position = ops.floor((flat - low) / (high - low) * bins)
    position = ops.cast(ops.clip(position, 0, bins - 1), "int32")
    counts = ops.bincount(position, weights=ops.cast(inside, input.dtype), minlength=bins)
    return ops.cast(counts[:bins], input.dtype)


def torch_index_add(input, dim, index, source, alpha=1):
    """Tensor.index_add / torch.index_add: `alpha * source` added into `input` at `index` along
    `dim`, repeated indices accumulating, as torch's."""
    moved = ops.moveaxis(input, dim, 0)
    values = ops.cast(ops.moveaxis(source, dim, 0) * alpha, input.dtype)
    added = ops.scatter(ops.expand_dims(ops.cast(index, "int32"), -1), values, ops.shape(moved))
    return ops.moveaxis(moved + added, 0, dim)


def torch_fill_diagonal(input, fill_value, wrap=False):
    """Tensor.fill_diagonal_'s value: the main diagonal (all dims equal beyond 2-D) set to
    `fill_value`; for a tall matrix `wrap=True` starts again after each N + 1 rows, as NumPy's
    fill_diagonal (which torch follows)."""
    shape = tuple(input.shape)
    if len(shape) == 2:
        step, end = shape[1] + 1, None if wrap else shape[1] * shape[1]
    else:
        step, end = 1 + int(np.cumprod(shape[:-1]).sum()), None
    size = int(np.prod(shape))
    positions = np.arange(size)
    chosen = (positions % step == 0) & (positions < (size if end is None else end))
    mask = ops.reshape(ops.convert_to_tensor(chosen), shape)
    return ops.where(mask, ops.cast(fill_value, input.dtype), input)


def torch_median(input, dim=None, keepdim=False):
    """torch.median / Tensor.median: the lower of the two middle values for an even count (not
    their mean, as keras.ops.median); along `dim`, (values, int64 indices) with `.values`/`.indices`."""
    if dim is None:
        flat = ops.sort(ops.reshape(input, (-1,)))
        return flat[(flat.shape[0] - 1) // 2]
    middle = (input.shape[dim] - 1) // 2
    indices = ops.take(torch_argsort(input, dim=dim), [middle], axis=dim)
    values = ops.take_along_axis(input, indices, axis=dim)
    if not keepdim:
        values, indices = ops.squeeze(values, dim), ops.squeeze(indices, dim)
    return TorchValuesIndices(values, indices)


def torch_mode(input, dim=-1, keepdim=False):
    """torch.mode / Tensor.mode: along `dim`, the most frequent value (the smallest of those
    equally frequent) and the int64 index of its last occurrence, as torch's CPU kernel gives
    them, with `.values`/`.indices`. Counts compare every pair of the dim: O(n^2) in its size."""
    x = ops.moveaxis(input, dim, -1)
    counts = ops.sum(ops.cast(ops.equal(ops.expand_dims(x, -1), ops.expand_dims(x, -2)), "int32"), axis=-1)
    best = ops.equal(counts, ops.max(counts, axis=-1, keepdims=True))
    values = ops.min(ops.where(best, x, ops.max(x, axis=-1, keepdims=True)), axis=-1)
    positions = ops.arange(x.shape[-1], dtype="int64")
    indices = ops.max(ops.where(ops.equal(x, ops.expand_dims(values, -1)), positions, -1), axis=-1)
    if keepdim:
        values, indices = ops.expand_dims(values, dim), ops.expand_dims(indices, dim)
    return TorchValuesIndices(values, indices)


def torch_var_mean(input, dim=None, correction=1, keepdim=False, std=False):
    """torch.var_mean / torch.std_mean (std=True): (the variance or standard deviation with
    torch's `correction`, 1 by default, the mean) over `dim`."""
    spread = (torch_std if std else torch_var)(input, dim, correction=correction, keepdim=keepdim)
    return spread, ops.mean(input, axis=_torch_axes(input, dim), keepdims=keepdim)


def torch_polar(abs, angle):
    """torch.polar: the complex numbers abs * (cos(angle) + i sin(angle))."""
    return torch_complex(ops.multiply(abs, ops.cos(angle)), ops.multiply(abs, ops.sin(angle)))


def torch_diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """torch.diag_embed: the last dim of `input` as the `offset` diagonal of new (dim1, dim2)
    planes of size last + |offset|, zeros elsewhere (a product with a 0/1 placement tensor)."""
    size = input.shape[-1]
    place = np.zeros((size, size + abs(offset), size + abs(offset)), keras.backend.standardize_dtype(input.dtype))
    rows = np.arange(size) + max(-offset, 0)
    place[np.arange(size), rows, rows + offset] = 1
    return ops.moveaxis(ops.tensordot(input, place, axes=1), (-2, -1), (dim1, dim2))


def torch_rms_norm(input, normalized_shape, weight=None, eps=None):
    """torch.nn.functional.rms_norm: x / sqrt(mean(x**2) + eps) over the trailing normalized_shape
    dims, times weight; eps None is the input dtype's machine epsilon, as torch."""
    n = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    return _rms_norm(input, n, weight, eps)


def torch_max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """torch.nn.functional.max_pool3d on NCDHW: -inf padding, dilation, ceil_mode, stride = kernel."""
    if return_indices:
        raise NotImplementedError("return_indices=True is not supported by the Keras shims")
    return _max_pool_nd(input, 3, kernel_size, stride, padding, dilation, ceil_mode)


def torch_avg_pool3d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    """torch.nn.functional.avg_pool3d on NCDHW: ceil_mode, count_include_pad, divisor_override."""
    return _avg_pool_nd(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def torch_trapezoid(y, x=None, dx=None, dim=-1):
    """torch.trapezoid / torch.trapz along `dim` with torch's sums: sample points `x` (1-d, or
    y's shape) or a constant spacing `dx` (1); keras.ops.trapezoid takes no 1-d x for an inner dim."""
    axis = dim % len(y.shape)
    ends = [
        tuple(slice(a, b) if d == axis else slice(None) for d in range(len(y.shape))) for a, b in ((1, None), (0, -1))
    ]
    if x is None:
        edges = ops.add(ops.take(y, 0, axis=axis), ops.take(y, -1, axis=axis))
        return ops.multiply(ops.subtract(ops.sum(y, axis=axis), ops.multiply(edges, 0.5)), 1.0 if dx is None else dx)
    spacing = ops.diff(x) if len(x.shape) == 1 else ops.diff(x, axis=axis)
    if len(x.shape) == 1:
        spacing = ops.reshape(spacing, [-1 if d == axis else 1 for d in range(len(y.shape))])
    return ops.sum(ops.multiply(spacing, ops.add(y[ends[0]], y[ends[1]])), axis=axis) / 2.0


def torch_lu_factor(A, pivot=True):
    """torch.linalg.lu_factor / Tensor.lu(): (LU, pivots) with torch's 1-based int32 pivots, found
    from tf.linalg.lu's row permutation with NumPy (eager values: module construction, as the
    invertible 1x1 convolutions of normalizing flows use it)."""
    shape = tuple(A.shape)
    if len(shape) > 2:  # one matrix at a time (TensorFlow inverts 1-d permutations only)
        flat = ops.reshape(A, (-1, *shape[-2:]))
        parts = [torch_lu_factor(flat[i]) for i in range(flat.shape[0])]
        lu = ops.reshape(ops.stack([part[0] for part in parts]), shape)
        pivots = ops.reshape(ops.stack([part[1] for part in parts]), (*shape[:-2], parts[0][1].shape[-1]))
        return torch_named_result((lu, pivots), "LU pivots")
    lu, inverse = ops.lu_factor(A)  # TensorFlow's: the inverse of the row permutation
    permutation = np.argsort(ops.convert_to_numpy(inverse), axis=-1)
    return torch_named_result((lu, ops.convert_to_tensor(_lu_pivots(permutation))), "LU pivots")


def torch_lu_unpack(LU, pivots, unpack_data=True, unpack_pivots=True):
    """torch.lu_unpack: (P, L, U) with A = P @ L @ U, from lu_factor's LU and 1-based pivots
    (the permutation is found with NumPy: eager values)."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    lower = ops.tril(LU[..., :, :k], -1) + ops.eye(m, k, dtype=LU.dtype)
    upper = ops.triu(LU[..., :k, :])
    perm = _lu_permutation(ops.convert_to_numpy(pivots))
    P = ops.swapaxes(ops.one_hot(ops.convert_to_tensor(perm), m, dtype=LU.dtype), -1, -2)
    return torch_named_result((P, lower, upper), "P L U")


def torch_legacy_tensor(*args, dtype="float32"):
    """torch's legacy typed constructors (`torch.Tensor`, `torch.FloatTensor`, `torch.LongTensor`,
    ...): given sizes (`torch.Tensor(out_channels)`, pyg's ChebConv bias) an uninitialised tensor,
    here zeros (a module's `reset_parameters` or the torch checkpoint fills it); given data
    (`torch.Tensor(mean)`) a tensor of it in the constructor's dtype."""
    sizes = _legacy_sizes(args)
    return ops.convert_to_tensor(args[0], dtype=dtype) if sizes is None else ops.zeros(sizes, dtype)
