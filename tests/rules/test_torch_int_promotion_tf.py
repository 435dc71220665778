"""Integer tensors combined with floats, converted to Keras (rules/torch_int_promotion_tf.py), give
torch's dtypes and values: int64 * float -> float32, int64 / int -> float32, int64 * int -> int64."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from precision_transpiler import transpile
from tests.helpers import on_both_targets
from tests.runtime.test_tensor_ops_execute_tf import plain_tf

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_tf]

SOURCE = """
import torch


def widths(depth: int, w_a: float, w_0: int):
    cont = torch.arange(depth) * w_a + w_0
    half = torch.arange(depth) / 2
    idx = torch.arange(depth)
    scaled = 0.5 * idx
    return cont, half, idx * 3, scaled
"""


def test_int_tensors_meeting_floats_promote_as_in_torch() -> None:
    result = transpile(SOURCE, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "keras.ops.multiply(torch_arange(depth), w_a)" in result.code
    assert "keras.ops.true_divide(torch_arange(depth), 2)" in result.code
    assert "idx * 3" in result.code  # int times int: nothing to promote
    reference: dict[str, Any] = {}
    exec(compile(SOURCE, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    expected = reference["widths"](5, 27.89, 8)
    got = plain_tf(converted["widths"](5, 27.89, 8))
    for g, e in zip(got, expected, strict=True):
        e = e.numpy() if isinstance(e, torch.Tensor) else e
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-6)


MODULE = """
import math

import torch
from torch import nn


class Radial(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.d_cpu = torch.prod(torch.tensor(shape))
        self.register_buffer("d", self.d_cpu)

    def forward(self, z, denom=None):
        log_det = (self.d - 1) * torch.log(1 + z)
        mean = z.sum() / denom
        scaled = z / math.sqrt(4)
        return log_det, mean, scaled
"""


def test_untyped_buffers_and_divisions_by_counts_promote_as_in_torch() -> None:
    """A buffer built from Python values of unknown type may be an integer tensor, and so may a
    count a tensor is divided by: both meet floats as in torch, while division by a Python number
    keeps its operator."""
    result = transpile(MODULE, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "keras.ops.multiply((self.d - 1), keras.ops.log(1 + z))" in result.code
    assert "keras.ops.true_divide(keras.ops.sum(z), denom)" in result.code
    assert "z / math.sqrt(4)" in result.code
    reference: dict[str, Any] = {}
    exec(compile(MODULE, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    z = np.linspace(0.1, 1.0, 6, dtype=np.float32).reshape(2, 3)
    count = torch.tensor(4)
    expected = reference["Radial"]((2, 3))(torch.from_numpy(z), count)
    got = plain_tf(converted["Radial"]((2, 3))(z, count.numpy()))
    for g, e in zip(got, expected, strict=True):
        e = e.detach().numpy()
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-6)


GRID = """
import torch


def posemb_sincos_2d(h, w, dim, temperature: int = 10000, dtype=torch.float32):
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = torch.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature**omega)
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    pe = torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)
    return pe.type(dtype), torch.arange(h) * 2, torch.arange(h) * h
"""


def test_integer_grids_read_where_they_are_bound() -> None:
    """vit-pytorch's sincos embedding: `y` is an integer grid from `torch.meshgrid` until the line
    that rebinds it to floats (`y = y.flatten()[:, None] * omega[None, :]`): the read on that line
    is the grid, flattened and indexed, meeting a float tensor. An integer tensor times a value
    that may hold floats (an unannotated parameter) promotes; times an integer literal it stays."""
    result = transpile(GRID, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "keras.ops.multiply(keras.ops.ravel(y)[:, None], omega[None, :])" in result.code
    assert "torch_arange(h) * 2" in result.code and "keras.ops.multiply(torch_arange(h), h)" in result.code
    reference: dict[str, Any] = {}
    exec(compile(GRID, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    for args in ((2, 3, 8), (4, 4, 16)):
        expected = reference["posemb_sincos_2d"](*args)
        got = plain_tf(converted["posemb_sincos_2d"](*args))
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == e.numpy().dtype
            np.testing.assert_allclose(g, e.numpy(), rtol=1e-6, atol=1e-7)


MASKS = """
import torch
from torch import BoolTensor


def masks(adjacency: BoolTensor, features: int):
    adjacency, inverse = torch.unique(adjacency, dim=0, return_inverse=True)
    precedence = adjacency.double() @ adjacency.double().t() == adjacency.sum(dim=-1)
    mask = adjacency
    reachable = mask.sum(dim=-1).nonzero().squeeze(dim=-1)
    indices = reachable[torch.arange(features) % len(reachable)]
    mask = precedence[:, indices]
    return precedence, mask, adjacency[inverse]
"""


def test_comparisons_of_cast_tensors_and_tensors_indexed_by_tensors() -> None:
    """zuko's MaskedMLP: a float64 product compared with an integer sum (TensorFlow's `==` refuses
    the mix; keras.ops.equal promotes), and tensors indexed by tensors where the tensor is known
    only through an alias (`mask = adjacency`), a `torch.BoolTensor` annotation, a comparison or
    tuple unpacking of a torch call."""
    result = transpile(MASKS, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "keras.ops.equal(" in result.code
    reference: dict[str, Any] = {}
    exec(compile(MASKS, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    adjacency = torch.tril(torch.ones(4, 4, dtype=torch.bool), -1)
    expected = reference["masks"](adjacency, 6)
    got = plain_tf(converted["masks"](adjacency.numpy(), 6))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e.numpy())


ONE_HOT = """
import torch
import torch.nn.functional as F


def safe_one_hot(indexes, max_length):
    max_index = indexes.max() + 1
    return F.one_hot(indexes, max(max_index + 1, max_length))[..., :max_length]


def combine(gates, index):
    return gates[..., None] * F.one_hot(index, 3) * safe_one_hot(index, 3)


def untouched(index):
    return safe_one_hot(index, 3) * 2


def reindexed(gates, index):
    one_hot_gate_indices = F.one_hot(index, 3)
    N = None
    one_hot_gate_indices = one_hot_gate_indices[..., N]
    return gates[..., None, None] * one_hot_gate_indices
"""


def test_one_hot_and_functions_returning_it_are_integers() -> None:
    result = transpile(ONE_HOT, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "safe_one_hot(index, 3) * 2" in result.code  # int times int: nothing to promote
    reference: dict[str, Any] = {}
    exec(compile(ONE_HOT, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    gates = np.linspace(0.1, 0.9, 6, dtype=np.float32).reshape(2, 3)
    index = np.array([[0, 2, 1], [1, 1, 0]])
    # `reindexed`: st-moe-pytorch indexes its one-hot indices again before using them
    for name, args in (("combine", (gates, index)), ("untouched", (index,)), ("reindexed", (gates, index))):
        expected = reference[name](*(torch.tensor(a) for a in args)).numpy()
        got = plain_tf(converted[name](*args))
        assert got.dtype == expected.dtype, (name, got.dtype, expected.dtype)
        np.testing.assert_allclose(got, expected, rtol=1e-6)


POWERS = """
import torch
from einops import rearrange


def normalize_grid(arange, dim=1):
    n = arange.shape[-1]
    return 2.0 * arange / max(n - 1, 1) - 1.0


def grid(n):
    seq = torch.arange(n)
    return normalize_grid(seq, dim=0)


def decays(alphas, n):
    powers = torch.arange(n - 1, -1, -1)
    return alphas ** rearrange(powers, "l -> l 1")


def roots(n):
    return torch.arange(n) ** 0.5, torch.arange(n) ** 2


def floats_only(x: float):
    return 2.0 * x, x ** 2.0
"""


def test_integers_handed_to_a_function_and_raised_to_powers_promote_as_in_torch() -> None:
    """A function's parameter that a call of the file passes an integer tensor
    (deformable-attention's `normalize_grid(seq_range)`), and `**` with an integer tensor on
    either side (mega-pytorch's `decay ** rearrange(powers, ...)`)."""
    result = transpile(POWERS, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "keras.ops.multiply(2.0, arange)" in result.code, result.code
    assert "keras.ops.power(alphas, rearrange(powers" in result.code
    assert "return 2.0 * x, x ** 2.0" in result.code  # Python floats: the operators stay
    reference: dict[str, Any] = {}
    exec(compile(POWERS, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    alphas = np.array([0.5, 0.25], dtype=np.float32)
    cases = (("grid", (5,), (5,)), ("decays", (torch.tensor(alphas), 3), (alphas, 3)), ("roots", (4,), (4,)))
    for name, torch_args, tf_args in cases:
        expected = reference[name](*torch_args)
        got = converted[name](*tf_args)
        for want, have in zip(
            expected if isinstance(expected, tuple) else (expected,),
            got if isinstance(got, tuple) else (got,),
            strict=True,
        ):
            have = plain_tf(have)
            assert have.dtype == want.numpy().dtype, (name, have.dtype, want.dtype)
            np.testing.assert_allclose(have, want.numpy(), rtol=1e-6)


NUMPY_SCALARS = """
import numpy as np
import torch


def scores(q, k, max_timescale=10000):
    s = q @ k.transpose(-2, -1) / np.sqrt(k.size(-1))
    t = q * np.pi - np.log(2.0)
    # whisper's sinusoids: a NumPy float64 scalar times an integer tensor is float32 in torch
    increment = np.log(max_timescale) / (k.shape[-1] // 2 - 1)
    inv_timescales = torch.exp(-increment * torch.arange(k.shape[-1] // 2))
    return s - (1.0 - q.float()), t, inv_timescales
"""


def test_numpy_scalars_divide_as_python_numbers() -> None:
    """`x / np.sqrt(d)` (pytorch-pretrained-vit's attention scale): torch takes a NumPy scalar as a
    Python number and stays float32, and so does TensorFlow's operator, where
    keras.ops.true_divide would make the result float64. Where keras.ops is needed (an integer
    tensor times a NumPy float, whisper's sinusoids), the scalar is handed over as a float."""
    result = transpile(NUMPY_SCALARS, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "/ np.sqrt(keras.ops.shape(k)[-1])" in result.code
    assert "keras.ops.multiply(float(-increment), " in result.code
    reference: dict[str, Any] = {}
    exec(compile(NUMPY_SCALARS, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    q = np.linspace(0.1, 1.0, 16, dtype=np.float32).reshape(4, 4)
    k = np.linspace(0.2, 2.0, 16, dtype=np.float32).reshape(4, 4)
    expected = reference["scores"](torch.from_numpy(q), torch.from_numpy(k))
    import tensorflow as tf

    got = plain_tf(converted["scores"](tf.constant(q), tf.constant(k)))
    for g, e in zip(got, expected, strict=True):
        e = e.detach().numpy()
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-6)


BIT_MASKS = """
import torch
from torch import nn


class BitCodes(nn.Module):
    def __init__(self, bits=3):
        super().__init__()
        self.register_buffer("mask", 2 ** torch.arange(bits - 1, -1, -1))
        self.register_buffer("keep", torch.tensor([True, False, True]))
        codes = torch.arange(2**bits)
        self.register_buffer("codebook", ((codes[..., None].int() & self.mask) != 0).float() * 2 - 1)
        self.proj = nn.Linear(bits, bits)

    def forward(self, x):
        flags = (x > 0) | self.keep
        parity = (x > 0).long() ^ self.mask
        return self.proj(x) @ self.codebook.t(), flags, parity
"""


def test_bitwise_operators_with_a_buffer_are_torchs() -> None:
    """`int_tensor & self.mask` (vector-quantize-pytorch's LFQ): a Keras variable's `&` is logical
    and TensorFlow's refuses int32 with int64; torch's is bitwise on the promoted integers, and
    logical on booleans."""
    result = transpile(BIT_MASKS, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "torch_and(" in result.code and "torch_or(" in result.code and "torch_xor(" in result.code
    reference: dict[str, Any] = {}
    exec(compile(BIT_MASKS, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    original, model = reference["BitCodes"](), converted["BitCodes"]()
    model.load_state_dict({k: v.numpy() for k, v in original.state_dict().items()})
    x = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
    with torch.no_grad():
        expected = original(torch.from_numpy(x))
    got = plain_tf(model(x))
    for g, e in zip(got, expected, strict=True):
        e = e.detach().numpy()
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)  # float32 matmul order


PADDED_MASK = """
import torch
import torch.nn.functional as F
from torch import nn


class Det(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3, padding=1)

    def forward(self, x):
        heatmap = self.conv(x).sigmoid()
        mask = heatmap >= 0.5
        mask2 = F.pad(mask, (1, 1, 1, 1))
        hits = 0
        for i in range(x.shape[0]):
            m = mask2[i, 0]
            if m[2, 2] == 1:
                hits += 1
        return heatmap * hits, mask2.flatten(1) == 0
"""


def test_a_mask_padded_indexed_and_reshaped_is_still_a_mask(tmp_path) -> None:
    """superpointnet's `F.pad(mask, ...)`, then `mask2[i, 0]`, compared with 1: padding, indexing
    and reshaping keep a boolean tensor boolean, where TensorFlow cannot make 1 a bool."""
    from tests.helpers import convert_and_verify

    verdict = convert_and_verify(tmp_path, PADDED_MASK, "tf", "Det()", ["float32[2,1,6,6]"])
    assert verdict.passed, verdict.failures
    assert "keras.ops.equal(m[2, 2], 1)" in (tmp_path / "model_tf.py").read_text()


SHAPE_JOINED = """
import torch


def rope(xq):
    pairs = xq.float().reshape(xq.shape[:-1] + (-1, 2))
    return pairs.sum(-1), (1,) + xq.shape


def flat_codes(z):
    z_shape = z.shape
    flat = z.reshape(-1, z_shape[-1])
    return flat.reshape(z_shape[:-1] + (-1,))


def not_a_shape(z, extra):
    sizes = (2,)
    if extra:
        sizes = z.shape
    return sizes + (1,)
"""


def test_a_shape_joined_with_a_tuple_is_a_tuple() -> None:
    """llama2.c's `xq.shape[:-1] + (-1, 2)`: torch's shape is a tuple; TensorFlow's `TensorShape`
    refuses -1 when joined, so the shape side is made a tuple."""
    result = transpile(SHAPE_JOINED, to="tf")
    assert "tuple(xq.shape[:-1]) + (-1, 2)" in result.code, result.code
    reference: dict[str, Any] = {}
    exec(compile(SHAPE_JOINED, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    x = np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(2, 3, 4)
    import tensorflow as tf

    got_sum, got_shape = converted["rope"](tf.constant(x))
    want_sum, want_shape = reference["rope"](torch.from_numpy(x))
    np.testing.assert_allclose(np.asarray(got_sum), want_sum.numpy(), rtol=1e-6)
    assert tuple(got_shape) == tuple(want_shape) == (1, 2, 3, 4)
    # a name bound only to a shape (vector-quantize's `z_shape = z.shape`) is joined as a tuple too
    assert "tuple(z_shape[:-1]) + (-1,)" in result.code and "tuple(sizes)" not in result.code, result.code
    np.testing.assert_array_equal(np.asarray(converted["flat_codes"](tf.constant(x))), x)


COMPLEX = """
import torch
import torch.nn as nn


class DSS(nn.Module):
    def __init__(self, dim=4, n=6):
        super().__init__()
        self.Lambda_real = nn.Parameter(torch.randn(n))
        self.Lambda_imag = nn.Parameter(torch.randn(n))
        self.C_real = nn.Parameter(torch.randn(dim, n))
        self.C_imag = nn.Parameter(torch.randn(dim, n))

    def forward(self, x):
        Lambda = -self.Lambda_real.exp() + 1j * self.Lambda_imag
        C = self.C_real + 1j * self.C_imag
        S = (Lambda[:, None] * torch.arange(x.shape[-1])).exp()
        K = torch.einsum("hn,nl->hl", C, S).real
        return x * K.sum(0) + (2 * Lambda).real.sum() + (1j * 2).real
"""


def test_complex_literals_meeting_float_tensors_promote_as_in_torch(tmp_path) -> None:
    """gated-state-spaces' `-a.exp() + 1j * b`: complex64 in torch; TensorFlow's operators refuse
    to mix complex and float, keras.ops promote. Python numbers with a complex keep the operator."""
    from tests.helpers import convert_and_verify

    result = transpile(COMPLEX, to="tf")
    assert "keras.ops.add(-keras.ops.exp(self.Lambda_real), keras.ops.multiply(1j, self.Lambda_imag))" in result.code
    assert "keras.ops.real((2 * Lambda))" in result.code and "(1j * 2).real" in result.code, result.code
    verdict = convert_and_verify(tmp_path, COMPLEX, "tf", "DSS()", ["float32[3,4]"])
    assert verdict.passed, verdict.failures


INTEGER_WIDTHS = """
import torch
from torch import nn


class Levels(nn.Module):
    def __init__(self, levels=(4, 6)):
        super().__init__()
        _levels = torch.tensor(levels, dtype=torch.int32)
        self.register_buffer("_levels", _levels, persistent=False)
        indices = torch.arange(int(_levels.prod())).unsqueeze(-1)
        codes = (indices // 3) % self._levels
        self.register_buffer("codebook", self._centered(codes), persistent=False)
        self.proj = nn.Linear(2, 2)

    def _centered(self, zhat):
        half_width = self._levels // 2
        return (zhat - half_width) / half_width / 2

    def forward(self, x):
        idx = torch.arange(x.shape[0])
        half = idx // 2
        rest = half % 3 + 1
        return self.proj(x) @ self.codebook.t() + half[:, None] * 0.5, rest[:, None] * x
"""


@on_both_targets
def test_integer_tensors_of_two_widths_promote_as_in_torch(tmp_path: Path, target: str) -> None:
    """vector-quantize-pytorch's LatentQuantize: an int32 buffer (registered from a local name
    bound to `torch.tensor(..., dtype=int32)`) floor-divided by 2 is int32, and meets int64 codes
    (`torch.arange` floor-divided and taken modulo): torch promotes to int64, TensorFlow's `-`
    refuses. Integers carry through `//` and `%` and through names bound to such arithmetic, so
    `half * 0.5` promotes to float32 too."""
    from tests.helpers import convert_and_verify

    if target == "tf":
        code = transpile(INTEGER_WIDTHS, to="tf").code
        assert "keras.ops.subtract(zhat, half_width)" in code, code
        assert "keras.ops.multiply(half[:, None], 0.5)" in code and "keras.ops.multiply(rest[:, None], x)" in code
    verdict = convert_and_verify(tmp_path, INTEGER_WIDTHS, target, "Levels()", ["float32[3,2]"])
    assert verdict.passed, verdict.failures
