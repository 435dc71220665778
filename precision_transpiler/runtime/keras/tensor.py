"""torch tensor functions and methods whose semantics `keras.ops` has no one expression for.

The op tables (mappings/ops/tensor_ops.yaml) emit `keras.ops` code wherever it computes exactly
what torch computes; where it does not, they emit these functions: `x.chunk(3)` becomes
`torch_chunk(x, 3)`, because `keras.ops.split(x, 3)` wants equal pieces while torch makes pieces
of ceil(n / 3) and may return fewer than three. Each function takes torch's argument names and
order, and its docstring says which torch behaviour it reproduces. The numerical functions
(reductions, scatter, linear algebra, ...) are in tensor_math.py. The Keras counterpart of
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

from precision_transpiler.runtime.common import _legacy_sizes
from precision_transpiler.runtime.factories import _factory_size


def torch_to(x, value, *args, **kwargs):
    """torch's `x.to(value)` where the converter cannot tell what `value` is (`rel_pos.to(q)`, a dtype or
    device held in a variable): a tensor casts to its dtype, a dtype casts, a device (a string,
    None, a device object) leaves the tensor as it is (TensorFlow places tensors itself). Anything
    but a tensor (a converted module, an object with its own `to`) is passed to its own `to`."""
    if not (ops.is_tensor(x) or isinstance(x, keras.Variable | np.ndarray | np.generic)):
        to = getattr(x, "to", None)
        return x if to is None else to(value, *args, **kwargs)
    if ops.is_tensor(value) or isinstance(value, keras.Variable | np.ndarray | np.generic):
        return ops.cast(x, value.dtype)
    if value is None or isinstance(value, str):
        return x  # a device string
    try:
        dtype = keras.backend.standardize_dtype(value)
    except (TypeError, ValueError):
        return x  # a device object
    return ops.cast(x, dtype)


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


def torch_roll(input, shifts, dims=None):
    """torch.roll / Tensor.roll: one shift given for a tuple of dims applies to each (`x.roll(-1,
    dims=(2,))`); TensorFlow's roll wants as many shifts as axes."""
    if isinstance(dims, list | tuple) and not isinstance(shifts, list | tuple):
        shifts = (shifts,) * len(dims)
    return keras.ops.roll(input, shifts, axis=dims)


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


def torch_tensor(data, dtype=None):
    """torch.tensor / torch.as_tensor without dtype: torch's inference, not TensorFlow's. Python
    integers make int64 (TF: int32, and an int64 `torch.arange` times an int32 constant fails),
    floats the default float dtype, bools bool, complex numbers complex64; a tensor or NumPy array
    keeps its dtype. A dtype known only when it runs (`torch.tensor(0.0, **dd)`) is applied."""
    if dtype is not None:
        return ops.convert_to_tensor(data, dtype=dtype)
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


def torch_legacy_tensor(*args, dtype="float32"):
    """torch's legacy typed constructors (`torch.Tensor`, `torch.FloatTensor`, `torch.LongTensor`,
    ...): given sizes (`torch.Tensor(out_channels)`, pyg's ChebConv bias) an uninitialised tensor,
    here zeros (a module's `reset_parameters` or the torch checkpoint fills it); given data
    (`torch.Tensor(mean)`) a tensor of it in the constructor's dtype."""
    sizes = _legacy_sizes(args)
    return ops.convert_to_tensor(args[0], dtype=dtype) if sizes is None else ops.zeros(sizes, dtype)


def torch_getattr(obj, name, *default):
    """`getattr(x, name)` where `x` may be a tensor and the name is one the code computes
    (`fn = getattr(t, mode); fn(dim=-1, keepdim=True)`, x-transformers' masked reductions): on a
    tensor, torch's method of that name, with torch's arguments (`dim`, `keepdim`, torch's
    unbiased `std`/`var`, `max`/`min` with their indices); the attributes a tensor shares with a
    torch tensor (`shape`, `dtype`, `ndim`) as they are; any other name is refused, since
    TensorFlow tensors have no such methods. Anything but a tensor is the builtin getattr."""
    if not (ops.is_tensor(obj) or isinstance(obj, keras.Variable | np.ndarray)):
        return getattr(obj, name, *default)
    reductions = {
        "mean": ops.mean,
        "sum": ops.sum,
        "prod": ops.prod,
        "amax": ops.max,
        "amin": ops.min,
        "all": ops.all,
        "any": ops.any,
        "logsumexp": ops.logsumexp,
    }
    if name in reductions:
        reduce = reductions[name]

        def method(dim=None, keepdim=False, *, dtype=None):
            axis = tuple(dim) if isinstance(dim, list | tuple) else dim
            out = reduce(obj, axis=axis, keepdims=keepdim)
            return out if dtype is None else ops.cast(out, dtype)

        return method
    if name in ("argmax", "argmin"):
        index = ops.argmax if name == "argmax" else ops.argmin

        def position(dim=None, keepdim=False):
            flat = obj if dim is not None else ops.reshape(obj, (-1,))
            out = ops.cast(index(flat, axis=-1 if dim is None else dim, keepdims=keepdim), "int64")
            return ops.reshape(out, [1] * len(obj.shape)) if dim is None and keepdim else out

        return position
    if name in ("std", "var"):

        def deviation(dim=None, unbiased=True, keepdim=False, *, correction=None):
            axis = tuple(dim) if isinstance(dim, list | tuple) else dim
            ddof = correction if correction is not None else int(bool(unbiased))
            x = ops.convert_to_tensor(obj)
            centre = ops.mean(x, axis=axis, keepdims=True)
            count = math.prod(x.shape) // math.prod(centre.shape)
            out = ops.sum(ops.square(x - centre), axis=axis, keepdims=keepdim) / max(count - ddof, 1)
            return ops.sqrt(out) if name == "std" else out

        return deviation
    if name in ("max", "min"):
        pick = torch_max if name == "max" else torch_min
        return lambda dim=None, keepdim=False: pick(obj, dim, keepdim)
    if name in ("shape", "dtype", "ndim"):
        return getattr(obj, name) if name != "ndim" else len(obj.shape)
    raise NotImplementedError(
        f"getattr(tensor, {name!r}): the converted code looks this torch method up by a name it computes, "
        "and the runtime converts only torch's reductions (mean, sum, prod, amax, amin, all, any, std, var, "
        "max, min, argmax, argmin, logsumexp) and shape attributes that way"
    )


def _bitwise(x, y, logical, bitwise):
    """torch's `&`, `|`, `^`: logical on booleans, bitwise on integers of the promoted dtype
    (TensorFlow's operators refuse int32 with int64, and a Keras variable's are logical only)."""
    x, y = ops.convert_to_tensor(x), ops.convert_to_tensor(y)
    if x.dtype == "bool" and y.dtype == "bool":
        return logical(x, y)
    dtype = keras.backend.result_type(x.dtype, y.dtype)
    return bitwise(ops.cast(x, dtype), ops.cast(y, dtype))


def torch_and(x, y):
    """`x & y` as torch computes it (runtime/keras/tensor.py `_bitwise`)."""
    return _bitwise(x, y, ops.logical_and, ops.bitwise_and)


def torch_or(x, y):
    """`x | y` as torch computes it."""
    return _bitwise(x, y, ops.logical_or, ops.bitwise_or)


def torch_xor(x, y):
    """`x ^ y` as torch computes it."""
    return _bitwise(x, y, ops.logical_xor, ops.bitwise_xor)


def torch_ones(*size, dtype=None, out=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """torch.ones passed around as a value (`partial(torch.ones, device=device)`): its signature."""
    return ops.ones(_factory_size(size), dtype=dtype)


def torch_zeros(*size, dtype=None, out=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """torch.zeros (and torch.empty, zeros here) passed around as a value: its signature."""
    return ops.zeros(_factory_size(size), dtype=dtype)


def torch_arange_function(start, end=None, step=1, *, dtype=None, out=None, layout=None, device=None,
                          requires_grad=False):  # fmt: skip
    """torch.arange passed around as a value (`partial(torch.arange, device=device)`): its
    signature, `arange(end)` counting from 0, int64 from integers as torch makes."""
    return torch_arange(start, end, step, dtype)


def torch_write_split(x, chunk, index, size, dim):
    """`x` with the `index`th chunk of `x.split(size, dim)` replaced by `chunk`: torch changes a
    chunk in place through the view `split` gives (blockwise attention accumulating into row
    blocks of its output); converted, the loop writes each changed chunk back
    (rules/torch_split_write_back_model.py)."""
    dim = dim % len(x.shape)
    start = [0] * len(x.shape)
    start[dim] = index * size
    return keras.ops.slice_update(x, start, keras.ops.cast(chunk, x.dtype))
