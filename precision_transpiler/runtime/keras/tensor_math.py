"""torch's numerical tensor functions whose semantics `keras.ops` has no one expression for:
reductions and statistics (`var`, `std`, `median`, `mode`, `histc`), norms and distances,
scatter and index accumulation, `unique`/`searchsorted`, complex numbers, linear algebra
(`lu_factor`, `lu_unpack`), and the functional forms of layers the op tables call (`conv3d`,
`conv_transpose`, `rms_norm`, 3-d pooling).

The shape, selection, indexing and creation functions are in tensor.py, whose conventions these
follow: each function takes torch's argument names and order, its docstring says which torch
behaviour it reproduces, and the names carry a `torch_` prefix because they land in the user's
module namespace. The Flax counterpart is runtime/flax/tensor_math.py.
"""

import math

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.common import (
    _conv_padding_pairs,
    _cross_dim,
    _lu_permutation,
    _lu_pivots,
    _torch_window,
    _tuple,
    _unfold_index,
    _unique_outputs,
    torch_named_result,
)
from precision_transpiler.runtime.keras.conv import _conv_nd, _conv_transpose_nd
from precision_transpiler.runtime.keras.norm import _rms_norm
from precision_transpiler.runtime.keras.pool import _avg_pool_nd, _max_pool_nd
from precision_transpiler.runtime.keras.tensor import TorchValuesIndices, torch_argsort


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


def torch_svd(input, some=True):
    """torch.svd: U, S, V with A = U diag(S) V^H (V, where torch.linalg.svd gives V^H), reduced
    unless some=False."""
    u, s, vh = ops.svd(input, full_matrices=not some)
    return torch_named_result((u, s, ops.conj(ops.swapaxes(vh, -2, -1))), "U S V")


def torch_pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    """F.pairwise_distance: the p-norm of `x1 - x2 + eps` along the last dim."""
    return ops.norm(x1 - x2 + eps, ord=p, axis=-1, keepdims=keepdim)


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


def torch_triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve (nflows' LU and QR layers' inverse): (solution, cloned_coefficient),
    the X of A @ X = b (A^T @ X = b with `transpose`), reading A's upper or lower triangle, its
    diagonal taken as ones with `unitriangular`; batch dimensions broadcast."""
    a = ops.triu(A) if upper else ops.tril(A)
    if unitriangular:
        eye = ops.eye(a.shape[-1], dtype=a.dtype)
        a = a * (1 - eye) + eye
    lower = not upper
    if transpose:
        a, lower = ops.swapaxes(a, -1, -2), upper
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(b.shape[:-2])))
    a = ops.broadcast_to(a, (*batch, *a.shape[-2:]))
    x = ops.solve_triangular(a, ops.broadcast_to(b, (*batch, *b.shape[-2:])), lower=lower)
    return torch_named_result((x, ops.broadcast_to(A, (*batch, *A.shape[-2:]))), "solution cloned_coefficient")


def torch_linalg_inv_ex(A):
    """torch.linalg.inv_ex: (inverse, info), info 0 for each matrix. torch reports a singular
    matrix in `info` and fills the inverse with inf/nan; the target's inverse does the same, and
    code that reads `info` as a guard then takes its usual path (`.inverse` is what it uses)."""
    return torch_named_result((ops.inv(A), ops.zeros(tuple(A.shape)[:-2], "int32")), "inverse info")


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


# -- torch.fft ----------------------------------------------------------------------------------


def _fft_along(x, dim, n, norm, kind):
    """One transform of `kind` (fft, ifft, rfft, irfft) along `dim` with tf.signal, which works on
    the last axis: torch's `n` crops or zero-pads the input there (for irfft it is the output
    length), and torch's norm ("backward" unscaled forward and 1/n inverse, "ortho" 1/sqrt(n)
    both ways, "forward" 1/n forward) rescales tf.signal's backward-normalised result."""
    import tensorflow as tf

    x = tf.convert_to_tensor(x)
    rank = len(x.shape)
    dim = dim % rank
    perm = [*[i for i in range(rank) if i != dim], dim]
    if dim != rank - 1:
        x = tf.transpose(x, perm)
    complex_type = tf.complex128 if x.dtype in (tf.float64, tf.complex128) else tf.complex64
    real_type = tf.float64 if complex_type == tf.complex128 else tf.float32
    size = x.shape[-1]
    if kind == "irfft":
        length = n if n is not None else 2 * (size - 1)
        y = tf.signal.irfft(tf.cast(x, complex_type), fft_length=[length])
    elif kind == "rfft":
        length = n if n is not None else size
        y = tf.signal.rfft(tf.cast(x, real_type), fft_length=[length])
    else:
        length = n if n is not None else size
        x = tf.cast(x, complex_type)
        if length < size:
            x = x[..., :length]
        elif length > size:
            x = tf.pad(x, [[0, 0]] * (rank - 1) + [[0, length - size]])
        y = tf.signal.fft(x) if kind == "fft" else tf.signal.ifft(x)
    inverse = kind in ("ifft", "irfft")
    if norm == "ortho":
        scale = math.sqrt(length) if inverse else 1 / math.sqrt(length)
    elif norm == "forward":
        scale = length if inverse else 1 / length
    else:
        scale = 1.0
    if scale != 1.0:
        y = y * tf.cast(scale, y.dtype)
    if dim != rank - 1:
        y = tf.transpose(y, [perm.index(i) for i in range(rank)])
    return y


def _fft_dims(x, s, dim, norm, kind, default_dims):
    """A transform over several dims: torch's `s` (sizes) and `dim` (default: the last len(s)
    dims, else `default_dims`), rfft/irfft on the last of them and fft/ifft on the others."""
    rank = len(x.shape)
    if dim is None:
        dim = list(range(rank - len(s), rank)) if s is not None else (default_dims or list(range(rank)))
    dims = [dim] if isinstance(dim, int) else list(dim)
    sizes = list(s) if s is not None else [None] * len(dims)
    pairs = list(zip(dims, sizes, strict=True))
    if kind == "rfft":
        x = _fft_along(x, pairs[-1][0], pairs[-1][1], norm, "rfft")
        return _fft_dims(x, None, [d for d, _ in pairs[:-1]] or [], norm, "fft", None) if len(pairs) > 1 else x
    if kind == "irfft":
        for d, size in pairs[:-1]:
            x = _fft_along(x, d, size, norm, "ifft")
        return _fft_along(x, pairs[-1][0], pairs[-1][1], norm, "irfft")
    for d, size in pairs:
        x = _fft_along(x, d, size, norm, kind)
    return x


def torch_fft_fft(input, n=None, dim=-1, norm=None):
    """torch.fft.fft: complex64 (complex128 from float64) results, real inputs made complex."""
    return _fft_along(input, dim, n, norm, "fft")


def torch_fft_ifft(input, n=None, dim=-1, norm=None):
    """torch.fft.ifft."""
    return _fft_along(input, dim, n, norm, "ifft")


def torch_fft_rfft(input, n=None, dim=-1, norm=None):
    """torch.fft.rfft: the n // 2 + 1 non-negative frequencies of a real signal."""
    return _fft_along(input, dim, n, norm, "rfft")


def torch_fft_irfft(input, n=None, dim=-1, norm=None):
    """torch.fft.irfft: a real signal of length n (default 2 * (size - 1))."""
    return _fft_along(input, dim, n, norm, "irfft")


def torch_fft_fft2(input, s=None, dim=(-2, -1), norm=None):
    """torch.fft.fft2."""
    return _fft_dims(input, s, dim, norm, "fft", None)


def torch_fft_ifft2(input, s=None, dim=(-2, -1), norm=None):
    """torch.fft.ifft2."""
    return _fft_dims(input, s, dim, norm, "ifft", None)


def torch_fft_rfft2(input, s=None, dim=(-2, -1), norm=None):
    """torch.fft.rfft2."""
    return _fft_dims(input, s, dim, norm, "rfft", None)


def torch_fft_irfft2(input, s=None, dim=(-2, -1), norm=None):
    """torch.fft.irfft2."""
    return _fft_dims(input, s, dim, norm, "irfft", None)


def torch_fft_fftn(input, s=None, dim=None, norm=None):
    """torch.fft.fftn: over `dim`, the last len(s) dims, or all."""
    return _fft_dims(input, s, dim, norm, "fft", None)


def torch_fft_ifftn(input, s=None, dim=None, norm=None):
    """torch.fft.ifftn."""
    return _fft_dims(input, s, dim, norm, "ifft", None)


def torch_fft_rfftn(input, s=None, dim=None, norm=None):
    """torch.fft.rfftn."""
    return _fft_dims(input, s, dim, norm, "rfft", None)


def torch_fft_irfftn(input, s=None, dim=None, norm=None):
    """torch.fft.irfftn."""
    return _fft_dims(input, s, dim, norm, "irfft", None)


def torch_fft_fftshift(input, dim=None):
    """torch.fft.fftshift: rolls each dim (all without `dim`) by half its size."""
    dims = range(len(input.shape)) if dim is None else ([dim] if isinstance(dim, int) else dim)
    dims = list(dims)
    return ops.roll(input, [input.shape[d] // 2 for d in dims], axis=dims)


def torch_fft_ifftshift(input, dim=None):
    """torch.fft.ifftshift: fftshift undone (rolls by minus half, rounded down)."""
    dims = range(len(input.shape)) if dim is None else ([dim] if isinstance(dim, int) else dim)
    dims = list(dims)
    return ops.roll(input, [-(input.shape[d] // 2) for d in dims], axis=dims)


def torch_logit(input, eps=None):
    """torch.logit / torch.special.logit: log(p / (1 - p)), with `p` clamped to [eps, 1 - eps]
    first when `eps` is given (torch's guard against infinities at 0 and 1)."""
    if eps is not None:
        input = ops.clip(input, eps, 1.0 - eps)
    return ops.log(input) - ops.log1p(-input)


def torch_ndtr(input):
    """torch.special.ndtr: the standard normal's distribution function, 0.5 * erfc(-x / sqrt(2))
    (erfc keeps the far left tail, which 0.5 * (1 + erf) rounds to 0)."""
    return 0.5 * ops.erfc(-input * (1.0 / math.sqrt(2.0)))


def torch_polygamma(n, input):
    """torch.polygamma(n, x): TensorFlow's takes the order as a tensor of x's dtype."""
    import tensorflow as tf

    input = ops.convert_to_tensor(input)
    return tf.math.polygamma(ops.cast(n, input.dtype), input)


def torch_linalg_solve(A, B, left=True):
    """torch.linalg.solve(A, B, left=False): the X of X @ A = B, which is the transpose of the
    solution of A^T @ X^T = B^T (peft's Cayley transform, `solve(I - Q, I + Q, left=False)`)."""
    if left:
        return ops.solve(A, B)
    return ops.swapaxes(ops.solve(ops.swapaxes(A, -1, -2), ops.swapaxes(B, -1, -2)), -1, -2)


def torch_window(kind, window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None):
    """torch.hann_window / hamming_window / blackman_window / bartlett_window (`kind`), periodic
    by default as torch's are, in `dtype` (float32 unless given)."""
    return ops.convert_to_tensor(_torch_window(kind, window_length, periodic, alpha, beta), dtype=dtype or "float32")
