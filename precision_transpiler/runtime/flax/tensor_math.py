"""torch's numerical tensor functions whose semantics `jax.numpy` has no one expression for:
reductions and statistics (`median`, `mode`, `histc`, `var_mean`), norms and distances, scatter
and index accumulation, `unique`/`searchsorted`, complex numbers, linear algebra (`lu_factor`,
`lu_unpack`), and the functional forms of layers the op tables call (`conv3d`, `conv_transpose`,
`rms_norm`).

The shape, selection, indexing and creation functions are in tensor.py, whose conventions these
follow: each function takes torch's argument names and order, its docstring says which torch
behaviour it reproduces, and the names carry a `torch_` prefix because they land in the user's
module namespace. The Keras counterpart is runtime/keras/tensor_math.py.
"""

import math

import jax
import jax.numpy as jnp

from precision_transpiler.runtime.common import (
    _channel_shape,
    _cross_dim,
    _torch_window,
    _tuple,
    _unfold_index,
    _unique_outputs,
    torch_named_result,
)
from precision_transpiler.runtime.flax.conv import _conv_dimension_numbers, _functional_conv
from precision_transpiler.runtime.flax.functional import _add_batch
from precision_transpiler.runtime.flax.norm import _rms_norm
from precision_transpiler.runtime.flax.tensor import TorchValuesIndices


def torch_normalize(input, p=2.0, dim=1, eps=1e-12):
    """torch.nn.functional.normalize: input / max(||input||_p over `dim`, eps)."""
    norm = jnp.linalg.vector_norm(input, ord=p, axis=dim, keepdims=True)
    return input / jnp.maximum(norm, eps)


def torch_softplus(input, beta=1.0, threshold=20.0):
    """torch.nn.functional.softplus with torch's `beta` and `threshold`: log(1 + exp(beta * x)) /
    beta, and x itself where beta * x > threshold (`jax.nn.softplus` has neither)."""
    scaled = input * beta
    return jnp.where(scaled > threshold, input, jnp.log1p(jnp.exp(scaled)) / beta)


def torch_cross(input, other, dim=None):
    """torch.cross without `dim`: the cross product along the first dim of size 3 of the broadcast
    shape (`jnp.cross` defaults to the last axis)."""
    shape = jnp.broadcast_shapes(input.shape, other.shape)
    return jnp.cross(input, other, axis=_cross_dim(shape) if dim is None else dim)


def torch_lerp(input, end, weight):
    """torch.lerp / Tensor.lerp: input + weight * (end - input) where |weight| < 0.5, else
    end - (end - input) * (1 - weight), as torch computes it (exact at weight 1)."""
    diff = end - input
    return jnp.where(jnp.abs(weight) < 0.5, input + weight * diff, end - diff * (1 - weight))


def torch_cartesian_prod(*tensors):
    """torch.cartesian_prod: the rows of every combination of the 1-d tensors' elements (the
    first varying slowest), as itertools.product; one tensor is returned as it is."""
    if len(tensors) == 1:
        return tensors[0]
    grids = jnp.meshgrid(*tensors, indexing="ij")
    return jnp.stack([grid.reshape(-1) for grid in grids], axis=1)


def torch_view_as_real(input):
    """torch.view_as_real: a complex tensor as (..., 2) real and imaginary parts (a copy: JAX
    arrays share no memory)."""
    return jnp.stack([jnp.real(input), jnp.imag(input)], axis=-1)


def torch_view_as_complex(input):
    """torch.view_as_complex: a (..., 2) float tensor as complex values (float32 -> complex64)."""
    return jax.lax.complex(input[..., 0], input[..., 1])


def torch_unfold(input, dimension, size, step):
    """torch's Tensor.unfold(dimension, size, step): every window of `size` elements `step` apart along
    `dimension`, which becomes the number of windows, with the window as a new last dim."""
    axis = dimension % max(input.ndim, 1)
    windows = jnp.take(input, jnp.asarray(_unfold_index(input.shape[axis], size, step)), axis=axis)
    return jnp.moveaxis(windows, axis + 1, -1)


def torch_scatter(input, dim, index, src, reduce=None):
    """torch.scatter / scatter_add / Tensor.scatter(_add): a copy of `input` with
    out[index[i][j]][j] = src[i][j] (for dim 0) for every position of `index`, which may be smaller
    than `input` and `src`; `src` may be a number. reduce="add" sums repeated positions (scatter_add),
    "multiply" multiplies."""
    axis = dim % input.ndim
    where = list(jnp.indices(index.shape, sparse=True))
    where[axis] = index
    if jnp.ndim(src):
        src = src[tuple(slice(0, n) for n in index.shape)]
    values = jnp.broadcast_to(jnp.asarray(src).astype(input.dtype), index.shape)
    at = input.at[tuple(where)]
    if reduce is None:
        return at.set(values)
    if reduce == "add":
        return at.add(values)
    if reduce == "multiply":
        return at.multiply(values)
    raise ValueError(f"reduce argument must be either add or multiply, got {reduce!r}")


def torch_scatter_reduce(input, dim, index, src, reduce, include_self=True):
    """torch.scatter_reduce / Tensor.scatter_reduce(_): `src`'s values reduced into `input` at
    `index` along `dim` ("sum", "prod", "mean", "amax", "amin"); with include_self=False the
    values `input` holds at the scattered positions take no part (positions nothing is scattered
    to keep them). Integer means are the floor division of the sum by the count, as in torch."""
    axis = dim % input.ndim
    where = list(jnp.indices(index.shape, sparse=True))
    where[axis] = index
    where = tuple(where)
    values = jnp.broadcast_to(src[tuple(slice(0, n) for n in index.shape)].astype(input.dtype), index.shape)
    floating = jnp.issubdtype(input.dtype, jnp.floating)
    if reduce in ("sum", "mean"):
        start = input if include_self else input.at[where].set(0)
        total = start.at[where].add(values)
        if reduce == "sum":
            return total
        count = jnp.ones_like(input) if include_self else jnp.ones_like(input).at[where].set(0)
        count = count.at[where].add(1)
        safe = jnp.maximum(count, 1)
        return total / safe if floating else total // safe
    if reduce == "prod":
        return (input if include_self else input.at[where].set(1)).at[where].multiply(values)
    if reduce in ("amax", "amin"):
        info = jnp.finfo(input.dtype) if floating else jnp.iinfo(input.dtype)
        if reduce == "amax":
            start = input if include_self else input.at[where].set(-jnp.inf if floating else info.min)
            return start.at[where].max(values)
        start = input if include_self else input.at[where].set(jnp.inf if floating else info.max)
        return start.at[where].min(values)
    raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")


def torch_unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """torch.unique / Tensor.unique: the sorted distinct values (or slices along `dim`), with the
    inverse indices (input's shape; one per slice with `dim`) and counts when asked. The result's
    size depends on the values: eager only, not under jax.jit."""
    values, inverse, counts = jnp.unique(input, return_inverse=True, return_counts=True, axis=dim)
    inverse = inverse.reshape(input.shape if dim is None else (-1,))
    return _unique_outputs(values, inverse, counts, return_inverse, return_counts)


def torch_searchsorted(sorted_sequence, values, out_int32=False, right=False, side=None, sorter=None):
    """torch.searchsorted / torch.bucketize: for each value, how many elements of the innermost
    dim of `sorted_sequence` come before it (right=True or side="right": also the equal ones).
    An N-d `sorted_sequence` is searched row by row, matching `values`' leading dims."""
    if sorter is not None:
        sorted_sequence = jnp.take_along_axis(sorted_sequence, sorter, axis=-1)
    side = side or ("right" if right else "left")
    values = jnp.asarray(values)
    if sorted_sequence.ndim == 1:
        found = jnp.searchsorted(sorted_sequence, values, side=side)
    else:
        rows = sorted_sequence.reshape(-1, sorted_sequence.shape[-1])
        search = jax.vmap(lambda row, v: jnp.searchsorted(row, v, side=side))
        found = search(rows, values.reshape(rows.shape[0], -1)).reshape(values.shape)
    return found.astype(jnp.int32 if out_int32 else jnp.int64)


def torch_conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv3d: NCDHW input, (out, in/groups, kD, kH, kW) weight, torch's
    symmetric or 'same' padding."""
    return _functional_conv(input, weight, bias, stride, padding, dilation, groups)


def torch_conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """torch.nn.functional.conv_transpose1d/2d/3d (N, C, *spatial) with torch's (in, out/groups,
    *kernel) weight, as a convolution of the input dilated by `stride` with the spatially flipped,
    per-group transposed kernel, padded d*(k-1)-p (and output_padding on the high side): torch's
    output size (in-1)*s - 2p + d*(k-1) + output_padding + 1."""
    n = weight.ndim - 2
    x, unbatched = _add_batch(input, n)
    stride, padding = _tuple(stride, n, "stride"), _tuple(padding, n, "padding")
    output_padding, dilation = _tuple(output_padding, n, "output_padding"), _tuple(dilation, n, "dilation")
    cin, cout_g, ks = weight.shape[0], weight.shape[1], weight.shape[2:]
    kernel = jnp.flip(weight, axis=tuple(range(2, n + 2))).reshape(groups, cin // groups, cout_g, *ks)
    kernel = jnp.transpose(kernel, (*range(3, n + 3), 1, 0, 2)).reshape(*ks, cin // groups, groups * cout_g)
    pairs = [
        (d * (k - 1) - p, d * (k - 1) - p + o) for k, p, o, d in zip(ks, padding, output_padding, dilation, strict=True)
    ]
    y = jax.lax.conv_general_dilated(
        x,
        kernel.astype(x.dtype),
        window_strides=(1,) * n,
        padding=pairs,
        lhs_dilation=stride,
        rhs_dilation=dilation,
        dimension_numbers=_conv_dimension_numbers(n),
        feature_group_count=groups,
    )
    if bias is not None:
        y = y + bias.reshape(_channel_shape(y.ndim))
    return y[0] if unbatched else y


def torch_masked_select(input, mask):
    """torch.masked_select / Tensor.masked_select: the elements where `mask` (broadcast with
    `input`) is True, as a 1-d tensor. Its length depends on the mask: eager only, not under jax.jit."""
    input, mask = jnp.broadcast_arrays(input, mask)
    return input[mask]


def torch_svd(input, some=True):
    """torch.svd: U, S, V with A = U diag(S) V^H (V, where torch.linalg.svd gives V^H), reduced
    unless some=False."""
    u, s, vh = jnp.linalg.svd(input, full_matrices=not some)
    return torch_named_result((u, s, jnp.conj(jnp.swapaxes(vh, -2, -1))), "U S V")


def torch_pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    """F.pairwise_distance: the p-norm of `x1 - x2 + eps` along the last dim."""
    return jnp.linalg.norm(x1 - x2 + eps, ord=p, axis=-1, keepdims=keepdim)


def torch_cdist(x1, x2, p=2.0):
    """torch.cdist: the p-norm distance between every row of x1 (..., P, M) and every row of x2
    (..., R, M), as (..., P, R), computed from the differences (torch's own form for up to 25 rows)."""
    return jnp.linalg.vector_norm(x1[..., :, None, :] - x2[..., None, :, :], ord=p, axis=-1)


def torch_histc(input, bins=100, min=0, max=0):
    """torch.histc: `bins` equal-width bins over [min, max] (the data's own range when both are
    0; widened by 1 either side when that is a single value), values outside ignored, the last
    bin closed; counts in the input's dtype."""
    low, high = float(min), float(max)
    if low == high:
        low, high = jnp.min(input), jnp.max(input)
        low, high = jnp.where(low == high, low - 1, low), jnp.where(low == high, high + 1, high)
    counts, _ = jnp.histogram(input.reshape(-1), bins=bins, range=(low, high))
    return counts.astype(input.dtype)


def torch_index_add(input, dim, index, source, alpha=1):
    """Tensor.index_add / torch.index_add: `alpha * source` added into `input` at `index` along
    `dim`, repeated indices accumulating, as torch's."""
    moved = jnp.moveaxis(input, dim, 0)
    values = jnp.moveaxis(jnp.asarray(source), dim, 0) * alpha
    return jnp.moveaxis(moved.at[index].add(values.astype(input.dtype)), 0, dim)


def torch_fill_diagonal(input, fill_value, wrap=False):
    """Tensor.fill_diagonal_'s value: the main diagonal (all dims equal beyond 2-D) set to
    `fill_value`; for a tall matrix `wrap=True` starts again after each N + 1 rows, as NumPy's
    fill_diagonal (which torch follows)."""
    shape = input.shape
    if len(shape) == 2:
        step, end = shape[1] + 1, input.size if wrap else shape[1] * shape[1]
    else:
        step, end = 1 + sum(math.prod(shape[:k]) for k in range(1, len(shape))), input.size
    positions = jnp.arange(input.size).reshape(shape)
    chosen = (positions % step == 0) & (positions < end)
    return jnp.where(chosen, jnp.asarray(fill_value, input.dtype), input)


def torch_median(input, dim=None, keepdim=False):
    """torch.median / Tensor.median: the lower of the two middle values for an even count (not
    their mean, as jnp.median); along `dim`, (values, indices) with `.values`/`.indices`."""
    if dim is None:
        flat = jnp.sort(input.reshape(-1))
        return flat[(flat.size - 1) // 2]
    middle = (input.shape[dim] - 1) // 2
    indices = jnp.take(jnp.argsort(input, axis=dim, stable=True), jnp.asarray([middle]), axis=dim)
    values = jnp.take_along_axis(input, indices, axis=dim)
    if not keepdim:
        values, indices = jnp.squeeze(values, dim), jnp.squeeze(indices, dim)
    return TorchValuesIndices(values, indices)


def torch_mode(input, dim=-1, keepdim=False):
    """torch.mode / Tensor.mode: along `dim`, the most frequent value (the smallest of those
    equally frequent) and the index of its last occurrence, as torch's CPU kernel gives them,
    with `.values`/`.indices`. Counts compare every pair of the dim: O(n^2) in its size."""
    x = jnp.moveaxis(input, dim, -1)
    counts = (x[..., :, None] == x[..., None, :]).sum(-1)
    best = counts == counts.max(-1, keepdims=True)
    values = jnp.where(best, x, x.max(-1, keepdims=True)).min(-1)
    positions = jnp.arange(x.shape[-1])
    indices = jnp.where(x == values[..., None], positions, -1).max(-1)
    if keepdim:
        values, indices = jnp.expand_dims(values, dim), jnp.expand_dims(indices, dim)
    return TorchValuesIndices(values, indices)


def torch_var_mean(input, dim=None, correction=1, keepdim=False, std=False):
    """torch.var_mean / torch.std_mean (std=True): (the variance or standard deviation with
    torch's `correction`, 1 by default, the mean) over `dim`."""
    axis = tuple(dim) if isinstance(dim, list) else dim
    spread = (jnp.std if std else jnp.var)(input, axis=axis, ddof=correction, keepdims=keepdim)
    return spread, jnp.mean(input, axis=axis, keepdims=keepdim)


def torch_polar(abs, angle):
    """torch.polar: the complex numbers abs * (cos(angle) + i sin(angle))."""
    return jax.lax.complex(abs * jnp.cos(angle), abs * jnp.sin(angle))


def torch_diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """torch.diag_embed: the last dim of `input` as the `offset` diagonal of new (dim1, dim2)
    planes of size last + |offset|, zeros elsewhere."""
    size = input.shape[-1]
    rows = jnp.arange(size) + max(-offset, 0)
    out = jnp.zeros((*input.shape[:-1], size + abs(offset), size + abs(offset)), input.dtype)
    return jnp.moveaxis(out.at[..., rows, rows + offset].set(input), (-2, -1), (dim1, dim2))


def torch_rms_norm(input, normalized_shape, weight=None, eps=None):
    """torch.nn.functional.rms_norm: x / sqrt(mean(x**2) + eps) over the trailing normalized_shape
    dims, times weight; eps None is the input dtype's machine epsilon, as torch."""
    n = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    return _rms_norm(input, n, weight, eps, None)


def torch_lu_factor(A, pivot=True):
    """torch.linalg.lu_factor / Tensor.lu(): (LU, pivots), L's unit diagonal left out of LU, with
    torch's 1-based int32 pivots (LAPACK's; jax.lax.linalg.lu's are 0-based)."""
    lu, pivots, _ = jax.lax.linalg.lu(A)
    return torch_named_result((lu, (pivots + 1).astype(jnp.int32)), "LU pivots")


def torch_triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve (nflows' LU and QR layers' inverse): (solution, cloned_coefficient),
    the X of A @ X = b (A^T @ X = b with `transpose`), reading A's upper or lower triangle, its
    diagonal taken as ones with `unitriangular`; batch dimensions broadcast."""
    batch = jnp.broadcast_shapes(A.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(A, (*batch, *A.shape[-2:]))
    x = jax.lax.linalg.triangular_solve(
        a, jnp.broadcast_to(b, (*batch, *b.shape[-2:])), left_side=True, lower=not upper,
        transpose_a=transpose, unit_diagonal=unitriangular,
    )  # fmt: skip
    return torch_named_result((x, a), "solution cloned_coefficient")


def torch_linalg_inv_ex(A):
    """torch.linalg.inv_ex: (inverse, info), info 0 for each matrix. torch reports a singular
    matrix in `info` and fills the inverse with inf/nan; the target's inverse does the same, and
    code that reads `info` as a guard then takes its usual path (`.inverse` is what it uses)."""
    return torch_named_result((jnp.linalg.inv(A), jnp.zeros(A.shape[:-2], jnp.int32)), "inverse info")


def torch_lu_unpack(LU, pivots, unpack_data=True, unpack_pivots=True):
    """torch.lu_unpack: (P, L, U) with A = P @ L @ U, from lu_factor's LU and 1-based pivots."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    lower = jnp.tril(LU[..., :, :k], -1) + jnp.eye(m, k, dtype=LU.dtype)
    upper = jnp.triu(LU[..., :k, :])
    perm = jax.lax.linalg.lu_pivots_to_permutation(pivots.astype(jnp.int32) - 1, m)
    P = jnp.swapaxes(jax.nn.one_hot(perm, m, dtype=LU.dtype), -1, -2)
    return torch_named_result((P, lower, upper), "P L U")


def torch_logit(input, eps=None):
    """torch.logit / torch.special.logit: log(p / (1 - p)), with `p` clamped to [eps, 1 - eps]
    first when `eps` is given (torch's guard against infinities at 0 and 1)."""
    if eps is not None:
        input = jnp.clip(input, eps, 1.0 - eps)
    return jax.scipy.special.logit(input)


def torch_linalg_solve(A, B, left=True):
    """torch.linalg.solve(A, B, left=False): the X of X @ A = B, which is the transpose of the
    solution of A^T @ X^T = B^T (peft's Cayley transform, `solve(I - Q, I + Q, left=False)`)."""
    if left:
        return jnp.linalg.solve(A, B)
    return jnp.swapaxes(jnp.linalg.solve(jnp.swapaxes(A, -1, -2), jnp.swapaxes(B, -1, -2)), -1, -2)


def torch_window(kind, window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None):
    """torch.hann_window / hamming_window / blackman_window / bartlett_window (`kind`), periodic
    by default as torch's are, in `dtype` (float32 unless given)."""
    return jnp.asarray(_torch_window(kind, window_length, periodic, alpha, beta), dtype=dtype or jnp.float32)
