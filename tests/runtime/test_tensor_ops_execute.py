"""torch tensor functions and methods converted to JAX compute what torch computes.

Each case is a small torch function. It runs in real torch (the reference), is converted with
`transpile(src, to="jax")`, and the converted module (with the shims the converter copies into
it) runs in real JAX on the same random inputs. float32 results must agree to a relative error of
1e-6, measured as max|jax - torch| / max|torch| over each array (elementwise ratios are
meaningless where a result crosses zero); integer and bool results must be equal (torch's int64
may be JAX's int32: JAX runs with its default 32-bit types, as converted models do).

The tricky semantics are cases of their own: chunk sizes that do not divide, split by sizes,
expand with -1, squeeze of a dim whose size is not 1, unbiased std, max(dim) as (values, indices),
exact vs tanh GELU, softmax's dim. Negative cases check that str/dict methods with tensor method
names are left alone and that what cannot be converted is reported with file:line:col.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import textwrap
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from precision_transpiler import load_mappings, transpile
from precision_transpiler.rules import op_patterns_any
from tests.compare import assert_max_relative, run_both
from tests.runtime import runtime_module_of

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax]

RTOL = 1e-6
HEADER = "import torch\nimport torch.nn.functional as F\n\n\n"

# ----------------------------------------------------------------------------------------------
# Inputs: made from one NumPy generator, then given to each framework as its own arrays
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arr:
    """A random input array: float32 normal, int64 in [low, high), or bool."""

    shape: tuple[int, ...]
    kind: str = "float32"
    low: int = 0
    high: int = 5

    def make(self, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "float32":
            return rng.standard_normal(self.shape).astype(np.float32)
        if self.kind == "positive":
            return rng.uniform(0.1, 4.0, self.shape).astype(np.float32)
        if self.kind == "int64":
            return rng.integers(self.low, self.high, self.shape).astype(np.int64)
        if self.kind == "bool":
            return rng.random(self.shape) > 0.5
        raise AssertionError(self.kind)


def F32(*shape: int) -> Arr:
    return Arr(shape)


def POS(*shape: int) -> Arr:
    return Arr(shape, "positive")


def I64(*shape: int, low: int = 0, high: int = 5) -> Arr:
    return Arr(shape, "int64", low, high)


def BOOL(*shape: int) -> Arr:
    return Arr(shape, "bool")


# ----------------------------------------------------------------------------------------------
# Comparing results of the two frameworks
# ----------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A framework-neutral view: arrays as NumPy, tuples (also torch.Size and the (values,
    indices) named tuples) as tuples, Python scalars and lists as they are."""
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    if isinstance(value, jax.Array):
        return np.asarray(value)
    if isinstance(value, tuple | list):
        return type(value)(_plain(v) for v in value) if isinstance(value, list) else tuple(_plain(v) for v in value)
    return value


def assert_same(got: Any, ref: Any, path: str = "result") -> None:
    got, ref = _plain(got), _plain(ref)
    if isinstance(ref, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(ref), f"{path}: {got!r} vs {ref!r}"
        assert isinstance(got, list) == isinstance(ref, list), f"{path}: {type(got)} vs {type(ref)}"
        for i, (g, r) in enumerate(zip(got, ref, strict=True)):
            assert_same(g, r, f"{path}[{i}]")
        return
    if isinstance(ref, np.ndarray):
        assert isinstance(got, np.ndarray), f"{path}: expected an array, got {got!r}"
        assert got.shape == ref.shape, f"{path}: shape {got.shape} vs {ref.shape}"
        assert got.dtype.kind == ref.dtype.kind, f"{path}: dtype {got.dtype} vs {ref.dtype}"
        if ref.dtype.kind == "f":
            assert got.dtype == ref.dtype, f"{path}: dtype {got.dtype} vs {ref.dtype}"
            assert_max_relative(got, ref, path, RTOL)
        else:
            np.testing.assert_array_equal(got, ref, err_msg=path)
        return
    if isinstance(ref, float):
        assert isinstance(got, float), f"{path}: {got!r} vs {ref!r}"
        assert_max_relative(np.asarray(got), np.asarray(ref), path, RTOL)
        return
    assert type(got) is type(ref) and got == ref, f"{path}: {got!r} vs {ref!r}"


# ----------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    params: str
    body: str
    inputs: tuple[Any, ...]
    #: substrings the converted code must contain (the expression it should become)
    expect: tuple[str, ...] = ()
    #: substrings that must each appear in some warning or note
    said: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        body = textwrap.indent(textwrap.dedent(self.body).strip("\n"), "    ")
        return f"{HEADER}def f({self.params}):\n{body}\n"


def C(id: str, params: str, body: str, *inputs: Any, **kw: Any) -> Case:
    return Case(id, params, body, inputs, **kw)


CASES = [
    # -- torch.fft: complex results compared as (real, imaginary) pairs
    C(
        "fft-family",
        "x, y",
        """
        c = torch.fft.fft(x)
        r = torch.fft.rfft(x, dim=1, norm="ortho")
        back = torch.fft.irfft(r, n=x.shape[1], dim=1, norm="ortho")
        two = torch.fft.fft2(y, norm="forward")
        inv = torch.fft.ifftn(two, dim=(-2, -1), norm="forward")
        rn = torch.fft.rfftn(y, s=(4, 6))
        irn = torch.fft.irfftn(rn, s=(4, 6))
        r2 = torch.fft.irfft2(torch.fft.rfft2(y))
        n = torch.fft.ifft2(torch.fft.fftn(y, dim=(0, 2)))
        shifted = torch.fft.ifftshift(torch.fft.fftshift(y, dim=(1, 2)), dim=(1, 2))
        return (torch.view_as_real(c), torch.view_as_real(r), back, torch.view_as_real(inv), irn, r2,
                torch.view_as_real(n), shifted, torch.view_as_real(torch.fft.ifft(c, n=8)))
        """,
        F32(3, 6),
        F32(2, 4, 6),
        expect=('jnp.fft.rfft(x, axis=1, norm="ortho")',),
    ),
    # -- x.to(value) where the code does not say whether value is a dtype, a device or a tensor:
    # the runtime decides (a tensor's dtype casts, a device leaves x as it is)
    C(
        "to-undecided-value",
        "x, i",
        """
        device = x.device
        return x.to(i), i.to(x), i.to(device), (x * 2).to(i[0]), x.to(x.dtype)
        """,
        F32(3, 4),
        I64(3, 4),
        expect=("torch_to(x, i)",),
    ),
    # -- Tensor.add / Tensor.sub: converted on a receiver known to be a tensor only (a set's
    # `.add`, a regex's `.sub` are not tensor calls)
    C(
        "add-sub-methods-on-known-tensors",
        "x, y",
        """
        h = torch.tanh(x)
        return h.add(y), h.add(y, alpha=2), h.sub(y), h.subtract(y, alpha=0.5), h.add(1), h.sub(0.5)
        """,
        F32(3, 4),
        F32(3, 4),
        expect=("jnp.add(h, y)", "jnp.subtract(h, 0.5 * y)"),
    ),
    C(
        "mode-smallest-of-ties-last-index",
        "i, x",
        """
        h = torch.round(x * 2)
        return torch.mode(i), torch.mode(i, 0, keepdim=True), h.mode(1), h.mode(dim=0).indices, torch.mode(h[0])
        """,
        I64(4, 7, high=3),
        F32(4, 6),
        expect=("torch_mode(i)", "torch_mode(h, 1)"),
    ),
    # -- shapes and layout
    C(
        "view-varargs-tuple-name-minus-one",
        "x, s",
        "return x.view(2, -1), x.view((4, 6)), x.view(s), x.view(-1), x.view(size=(3, 8))",
        F32(2, 3, 4),
        (6, 4),
        expect=("x.reshape((2, -1))", "x.reshape((4, 6))", "x.reshape(s)", "x.reshape(-1)", "x.reshape((3, 8))"),
    ),
    C(
        "reshape-method-and-function",
        "x",
        "return x.reshape(4, 6), x.reshape((2, 12)), torch.reshape(x, (-1, 2)), x.view_as(x.t()), x.reshape_as(x)",
        F32(6, 4),
        expect=("x.reshape((4, 6))", "x.reshape((-1, 2))", "x.reshape(x.T.shape)"),
    ),
    C(
        "view-of-expression",
        "x, y",
        "return (x + y).view(-1, 2)",
        F32(2, 4),
        F32(2, 4),
        expect=("(x + y).reshape((-1, 2))",),
    ),
    C(
        "transpose-two-dims-is-swapaxes",
        "x",
        "return x.transpose(0, 2), torch.transpose(x, -1, -2), x.transpose(1, 1), x.swapaxes(0, 1)",
        F32(2, 3, 4),
        expect=("jnp.swapaxes(x, 0, 2)",),
    ),
    C(
        "permute-varargs-and-tuple",
        "x",
        "return x.permute(2, 0, 1), x.permute((1, 2, 0)), torch.permute(x, (0, 2, 1)), x.permute(*[2, 1, 0])",
        F32(2, 3, 4),
        expect=("jnp.transpose(x, (2, 0, 1))", "jnp.transpose(x, (1, 2, 0))", "jnp.transpose(x, (*[2, 1, 0],))"),
    ),
    C("t-and-T", "x, v", "return x.t(), x.T, torch.t(x), v.t()", F32(3, 5), F32(4), expect=("x.T",)),
    C(
        "repeat-interleave-movedim-square-cumprod",
        "x",
        "return (x.repeat_interleave(2, dim=1), torch.repeat_interleave(x, 3), x.repeat_interleave(2, -1), "
        "x.repeat_interleave(3, dim=0, output_size=x.shape[0] * 3), "
        "torch.repeat_interleave(x, 2, dim=1, output_size=x.shape[1] * 2), x.movedim(0, -1), "
        "torch.moveaxis(x, (0, 1), (1, 0)), x.square(), torch.square(x), "
        "torch.cumprod(x, dim=0), x.cumprod(-1), x.clamp_min(0.1), torch.clamp_max(x, 0.5))",
        F32(3, 4),
        expect=("jnp.repeat(x, 2, axis=1)", "jnp.moveaxis(x, 0, -1)", "jnp.cumprod(x, axis=0)"),
    ),
    C(
        "logcumsumexp-wide-spread",
        "x",
        "return torch.logcumsumexp(x * 40, dim=-1), (x * 40).logcumsumexp(0), torch.logcumsumexp(x, 1)",
        F32(3, 4),
        expect=("jax.lax.associative_scan(jnp.logaddexp, x * 40, axis=-1)",),
    ),
    C(
        "topk-inverse-is-tensor",
        "x, m",
        "v, i = x.topk(2)\ns = torch.topk(x, k=3, dim=0, largest=False)\n"
        "return (v, i, s.values, s.indices, x.topk(1, -1).indices, torch.inverse(m @ m.T + 4 * torch.eye(3)), "
        "m.inverse(), torch.linalg.inv(m), torch.is_tensor(x), torch.is_tensor(3))",
        F32(4, 5),
        F32(3, 3),
        expect=("torch_topk(x, 2)",),
    ),
    C(
        "sort-argsort",
        "x",
        "s = torch.sort(x, dim=1, descending=True)\nv, i = x.sort()\n"
        "return s.values, s.indices, v, i, x.sort(0).values, torch.argsort(x, dim=0), x.argsort(descending=True)",
        F32(4, 5),
        expect=("torch_sort(x, dim=1, descending=True)",),
    ),
    C(
        "eye",
        "n",
        'return torch.eye(n) + 1, torch.eye(n, 4, dtype=torch.float16, device="cpu"), torch.eye(3, dtype=torch.int64)',
        3,
        expect=("jnp.eye(n)",),
    ),
    C(
        "contiguous-clone-detach",
        "x",
        "return x.transpose(0, 1).contiguous(), x.clone(), x.detach(), torch.clone(x), x.data",
        F32(3, 4),
        expect=("return jnp.swapaxes(x, 0, 1), x, jax.lax.stop_gradient(x), x, jax.lax.stop_gradient(x)\n",),
    ),
    C(
        # kornia takes its no-gradient path on `input.requires_grad` (a plain input: False)
        "requires-grad",
        "x",
        "return x * 2 if x.requires_grad else x + 1, x.is_contiguous(), F.threshold(x, 0.1, -1.0)",
        F32(3, 4),
        expect=("isinstance(x, nnx.Param)",),
    ),
    C(
        # one process, pre-0.4 wrappers, autocast's availability: torch's answers outside any group
        "single-process",
        "x",
        """
        world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        rank = torch.distributed.get_rank(group=None) if torch.distributed.is_initialized() else 0
        cast = 2.0 if torch.amp.is_autocast_available("cpu") and torch.distributed.is_available() else 3.0
        return torch.autograd.Variable(x, requires_grad=False) * world + rank + cast
        """,
        F32(3, 4),
        expect=("1 if False else 1", "0 if False else 0", "2.0 if True and True else 3.0"),
    ),
    C(
        # the Annotated Transformer's positional encoding: `x + self.pe[:, :n].requires_grad_(False)`;
        # converted arrays carry no autograd flag, so `requires_grad_` on a tensor is the tensor
        "requires-grad-set",
        "x: torch.Tensor",
        """
        y = x.detach().requires_grad_()
        return (x[:, :2].requires_grad_(False) + 1, y * 2, torch.ones(2).requires_grad_(requires_grad=True) + 0,
                x.requires_grad_(False))
        """,
        F32(3, 4),
        expect=("y = jax.lax.stop_gradient(x)\n", "return (x[:, :2] + 1, y * 2, jnp.ones(2) + 0,"),
    ),
    C(
        # kornia's MoonViT (`freqs_cis.real`), its augmentations' eager checks (`x.is_pinned()`,
        # `forward_ad.unpack_dual(x).tangent is None`, `x._version` unless `x.is_inference()`)
        "real-imag-attributes-pinned-shared-dual",
        "x",
        """
        f = torch.polar(torch.ones_like(x), x)
        n = 3.0
        dual = torch.autograd.forward_ad.unpack_dual(x)
        return (f.real, f.imag, n.real, x.is_pinned(), x.is_shared(), dual.primal + 1, dual.tangent is None,
                x.is_inference(), x._version)
        """,
        F32(3, 4),
    ),
    C(
        # torch-geometric picks its scatter kernel on `src.is_cuda`; dense arrays have no sparse layout
        "device-and-layout-flags",
        "x",
        "return x + 1 if x.is_cuda else x * 2, x.is_cpu, x.layout == torch.strided, x.layout == torch.sparse_coo, "
        "x.is_sparse",
        F32(3, 4),
    ),
    C(
        # e3nn scripts and compiles its spherical harmonics by calling torch.jit.script / torch.compile
        "jit-trace-and-compile-calls",
        "x",
        """
        def double(t):
            return t * 2

        traced = torch.jit.trace(torch.nn.functional.relu, x)
        compiled = torch.compile(double, disable=True)
        return traced(x), compiled(x + 1)
        """,
        F32(3, 4),
        expect=("compiled = double\n",),
    ),
    C(
        # monai's sincos position embedding: `omega = 1.0 / (temperature**omega)` with torch.pi
        "math-constants",
        "x",
        "return x * torch.pi + torch.e, x.masked_fill(x > 0.5, -torch.inf), torch.nan != torch.nan",
        F32(3, 4),
    ),
    C(
        "size-shape-dim-numel",
        "x",
        "return x.size(), x.size(1), x.size(-1), x.size(dim=0), x.shape, x.shape[2], x.dim(), x.ndim, x.numel()",
        F32(2, 3, 4),
        expect=("x.shape[1]", "x.ndim", "x.size"),
    ),
    C(
        "flatten-defaults-differ-by-nothing-but-start",
        "x",
        "return torch.flatten(x), x.flatten(), x.flatten(1), torch.flatten(x, 1, 2), x.flatten(0, 1), x.flatten(-2)",
        F32(2, 3, 4, 5),
        expect=("jnp.ravel(x)", "torch_flatten(x, 1)", "torch_flatten(x, 1, 2)", "torch_flatten(x, -2)"),
    ),
    C("flatten-0d", "x", "return x.sum().flatten(), torch.flatten(x.sum(), 0)", F32(3)),
    C(
        "squeeze-non-one-dim-is-a-no-op",
        "x",
        "return x.squeeze(), x.squeeze(1), x.squeeze(0), x.squeeze(-1), torch.squeeze(x, 3), x.squeeze((1, 3))",
        F32(2, 1, 3, 1),
        expect=("jnp.squeeze(x)", "torch_squeeze(x, 0)"),
    ),
    C(
        "unsqueeze",
        "x",
        "return x.unsqueeze(0), x.unsqueeze(-1), torch.unsqueeze(x, 1), x[:, None].unsqueeze(dim=2)",
        F32(2, 3),
        expect=("jnp.expand_dims(x, 0)",),
    ),
    C(
        "expand-minus-one-and-new-leading-dims",
        "x, y",
        "return x.expand(-1, 4), x.expand(2, 3, 4), x.expand((5, 3, -1)), x.expand_as(y)",
        F32(3, 1),
        F32(3, 6),
        expect=("torch_expand(x, -1, 4)", "jnp.broadcast_to(x, y.shape)"),
    ),
    C(
        "repeat-is-tile",
        "x",
        "return x.repeat(2, 3), x.repeat(2, 1, 1), x.repeat((1, 2)), torch.tile(x, (2,)), x.tile(2, 1)",
        F32(2, 3),
        expect=("jnp.tile(x, (2, 3))",),
    ),
    C(
        "chunk-not-divisible-and-fewer-chunks",
        "x",
        "return x.chunk(4), x.chunk(6), x.chunk(3, dim=1), torch.chunk(x, 2, 1), x.chunk(5, -1), x.chunk(10)",
        F32(10, 7),
        expect=("torch_chunk(x, 4)",),
    ),
    C(
        "split-by-size-and-by-size-list",
        "x",
        "return x.split(3), x.split([2, 8]), x.split([1, 6], dim=1), torch.split(x, 4, 1), torch.split(x, [5, 5])",
        F32(10, 7),
        expect=("torch_split(x, 3)", "torch_split(x, [1, 6], 1)"),
    ),
    C(
        "unbind-unflatten",
        "x",
        "a, b = x.unbind(0)\nreturn a, b, torch.unbind(x, 1), x.unbind(dim=-1)",
        F32(2, 3, 4),
        expect=("tuple(x)", "tuple(jnp.moveaxis(x, 1, 0))"),
    ),
    C(
        "cat-concat-stack",
        "a, b",
        "return torch.cat([a, b]), torch.cat((a, b), dim=1), torch.concat([a, b], -1), torch.stack([a, b]), "
        "torch.stack((a, b), dim=2), torch.concatenate([a, b], axis=1)",
        F32(2, 3),
        F32(2, 3),
        expect=("jnp.concatenate([a, b])", "jnp.concatenate((a, b), axis=1)", "jnp.stack((a, b), axis=2)"),
    ),
    C(
        "tril-triu",
        "x",
        "return torch.tril(x), x.tril(1), torch.triu(x, -1), x.triu(diagonal=2), torch.triu(x)",
        F32(2, 4, 5),
        expect=("jnp.tril(x)", "jnp.tril(x, k=1)"),
    ),
    C(
        "flip-roll",
        "x",
        "return x.flip(0), x.flip(0, 1), x.flip([1]), torch.flip(x, (0, 2)), x.roll(1), x.roll(2, 1), "
        "torch.roll(x, (1, -1), (0, 2)), x.roll(-1, dims=(2,))",
        F32(2, 3, 4),
        expect=("jnp.flip(x, axis=(0, 1))", "jnp.roll(x, 1)"),
    ),
    C(
        "meshgrid-indexes-ij-like-torch",
        "a, b",
        'return torch.meshgrid(a, b), torch.meshgrid([a, b], indexing="ij"), torch.meshgrid(a, b, indexing="xy")',
        F32(3),
        F32(4),
        expect=('tuple(jnp.meshgrid(a, b, indexing="ij"))', 'tuple(jnp.meshgrid(a, b, indexing="xy"))'),
    ),
    # -- indexing
    C(
        "gather-index-smaller-than-input",
        "x, idx, full, rows",
        "return x.gather(1, idx), torch.gather(x, 1, full), x.gather(0, rows)",
        F32(3, 5),
        I64(3, 2, high=5),
        I64(3, 5, high=5),
        I64(2, 4, high=3),
        expect=("torch_gather(x, 1, idx)",),
    ),
    C(
        "index-select-narrow",
        "x, idx",
        "return x.index_select(1, idx), torch.index_select(x, 0, idx[:2]), x.narrow(1, 1, 3), "
        "torch.narrow(x, 0, -2, 2), x.narrow(-1, -3, 2)",
        F32(3, 5),
        I64(4, high=3),
        expect=("jnp.take(x, idx, axis=1)",),
    ),
    C(
        "masked-fill-keeps-dtype",
        "x, mask, n",
        'return x.masked_fill(mask, float("-inf")), x.masked_fill(mask, 0), n.masked_fill(mask, 1.5), '
        "torch.masked_fill(x, ~mask, -1e9), x.masked_fill(mask, x.sum())",
        F32(3, 4),
        BOOL(3, 4),
        I64(3, 4),
        expect=('torch_masked_fill(x, mask, float("-inf"))',),
    ),
    C(
        "where",
        "c, x, y",
        "return torch.where(c, x, y), torch.where(c, x, 0.0), x.where(c, y), torch.where(c)",
        BOOL(3, 4),
        F32(3, 4),
        F32(3, 4),
        expect=("jnp.where(c, x, y)", "jnp.nonzero(c)"),
    ),
    # -- creation
    C(
        "arange-int-and-float",
        "n",
        "return torch.arange(5), torch.arange(1, 7), torch.arange(0, 10, 3), torch.arange(n), "
        "torch.arange(2, 8, dtype=torch.float32), torch.arange(0.0, 2.0, 0.5), torch.arange(start=1, end=4)",
        4,
        expect=("jnp.arange(5)", "jnp.arange(0, 10, 3)", "jnp.arange(2, 8, dtype=jnp.float32)"),
        said=("torch.arange of integers without dtype= makes int64",),
    ),
    C(
        "zeros-ones-full-empty",
        "s",
        "return torch.zeros(2, 3), torch.ones((4,)), torch.zeros(s), torch.ones(2, 3, dtype=torch.int32), "
        "torch.full((2, 2), 1.5), torch.full((3,), 7), torch.full([2], True), torch.zeros(size=(1, 2)), "
        'torch.empty(3, 2).shape, torch.zeros(2, device="cpu", requires_grad=False)',
        (2, 5),
        expect=("jnp.zeros((2, 3))", "jnp.ones((4,))", "jnp.full((2, 2), 1.5)", "jnp.empty((3, 2)).shape"),
        said=("argument 'device' of zeros has no equivalent in jax and was dropped",),
    ),
    C(
        "like-constructors",
        "x, n",
        "return torch.zeros_like(x), torch.ones_like(n), torch.full_like(x, 2.5), torch.full_like(n, 3), "
        "torch.zeros_like(x, dtype=torch.int32), torch.empty_like(x).shape",
        F32(2, 3),
        I64(4),
        expect=("jnp.zeros_like(x)", "jnp.full_like(x, 2.5)"),
    ),
    C(
        "new-constructors-take-the-tensor-dtype",
        "x, n",
        "return x.new_zeros(2, 3), x.new_ones((4,)), n.new_zeros(3), x.new_full((2, 2), 7), n.new_full([3], 2), "
        "x.new_tensor([1, 2, 3]), n.new_tensor([1.5, 2.5]), x.new_zeros(2, dtype=torch.int32), "
        "x.new_empty(3, 1).shape",
        F32(2, 3),
        I64(4),
        expect=("jnp.zeros((2, 3), dtype=x.dtype)", "jnp.zeros(2, dtype=jnp.int32)"),
    ),
    # -- arithmetic
    C(
        "matmul-bmm-mm-einsum-outer",
        "a, b, v, w",
        "return torch.matmul(a, b), a.matmul(b), torch.bmm(a, b), a.bmm(b), torch.mm(a[0], b[0]), a[1].mm(b[1]), "
        'torch.einsum("bij,bjk->bik", a, b), torch.einsum("bij,bjk->bik", [a, b]), torch.einsum("i,j->ij", v, w), '
        "torch.outer(v, w), v.outer(w)",
        F32(2, 3, 4),
        F32(2, 4, 5),
        F32(3),
        F32(6),
        expect=('jnp.einsum("bij,bjk->bik", a, b)', "jnp.matmul(a, b)", "jnp.outer(v, w)"),
    ),
    C(
        "elementwise-math",
        "x, p",
        "return torch.exp(x), x.exp(), torch.log(p), p.log(), torch.sqrt(p), p.sqrt(), torch.rsqrt(p), p.rsqrt(), "
        "torch.abs(x), x.abs(), torch.sin(x), x.cos(), torch.cos(x), torch.erf(x), x.erf(), p.log1p(), "
        "torch.pow(x, 2), x.pow(3), p.pow(0.5), torch.pow(2.0, x), torch.log2(p), p.log2(), torch.sign(x), "
        "x.sign(), torch.floor(x * 3), (x * 3).floor(), torch.ceil(x * 3), x.ceil()",
        F32(3, 4),
        POS(3, 4),
        expect=("jax.lax.rsqrt(p)", "jax.lax.erf(x)", "jnp.power(x, 2)"),
    ),
    C(
        "clamp-clip-maximum-minimum",
        "x, y",
        "return torch.clamp(x, -0.5, 0.5), x.clamp(min=0), x.clamp(max=0.1), torch.clip(x, 0, 1), x.clip(-1), "
        "torch.maximum(x, y), x.minimum(y), torch.max(x, other=y), x.min(other=y)",
        F32(3, 4),
        F32(3, 4),
        expect=("jnp.clip(x, min=-0.5, max=0.5)", "jnp.clip(x, min=0)", "jnp.maximum(x, y)"),
    ),
    C(
        "comparisons",
        "x, y",
        "return x.eq(y), torch.eq(x, x), x.ne(y), x.gt(0), torch.lt(x, y), x.ge(y), x.le(0.5), torch.equal(x, x), "
        "x.equal(y)",
        I64(3, 4),
        I64(3, 4),
        expect=("jnp.equal(x, y)", "jnp.array_equal(x, x)"),
    ),
    # -- reductions
    C(
        "sum-mean-dims-keepdim",
        "x",
        "return x.sum(), x.sum(1), x.sum((0, 2)), x.sum([0, 1], keepdim=True), torch.sum(x, -1, True), "
        "x.mean(), x.mean(dim=1), torch.mean(x, (1, 2)), x.mean(0, True), x.sum(dtype=torch.float32)",
        F32(2, 3, 4),
        expect=("jnp.sum(x, axis=(0, 2))", "jnp.mean(x, axis=0, keepdims=True)"),
    ),
    C(
        "std-var-unbiased-by-default",
        "x",
        "return x.std(), x.std(0), x.std(1, unbiased=False), x.std(dim=1, keepdim=True), torch.std(x, 0), "
        "x.var(), x.var(1), torch.var(x, 1, unbiased=False, keepdim=True), x.var(0, correction=0), "
        "x.std(unbiased=True), torch.std(x, correction=2)",
        F32(4, 5),
        expect=("jnp.std(x, ddof=1)", "jnp.std(x, axis=1)", "jnp.var(x, axis=0, ddof=0)"),
    ),
    C(
        "max-min-with-dim-return-values-and-indices",
        "x",
        "m = x.max(1)\nvalues, indices = torch.min(x, 0)\n"
        "return m, m.values, m.indices, m[0], values, indices, x.max(-1, keepdim=True), x.max(dim=0), "
        "x.max(), torch.max(x), x.min(), torch.min(x, 1, True)",
        F32(4, 5),
        expect=("torch_max(x, 1)", "jnp.max(x)", "torch_min(x, 1, keepdim=True)"),
    ),
    C(
        "amax-amin-argmax-argmin",
        "x",
        "return x.amax(1), torch.amax(x, (0, 1)), x.amin(-1, True), torch.amin(x), x.argmax(), x.argmax(1), "
        "torch.argmax(x, dim=0, keepdim=True), x.argmin(-1), torch.argmin(x)",
        F32(3, 4, 5),
        expect=("jnp.max(x, axis=1)", "jnp.argmax(x, axis=1)"),
    ),
    C(
        "all-any-cumsum",
        "b, x",
        "return b.all(), b.any(), b.all(1), torch.any(b, 0), b.any(dim=1, keepdim=True), torch.all(b), "
        "x.cumsum(0), torch.cumsum(x, dim=1)",
        BOOL(3, 4),
        F32(3, 4),
        expect=("jnp.all(b, axis=1)", "jnp.cumsum(x, axis=0)"),
    ),
    C(
        "norm",
        "x",
        'return x.norm(), x.norm(dim=1), x.norm(2, -1, True), x.norm(p=1, dim=0), torch.norm(x), x.norm(p="fro"), '
        'torch.norm(x, dim=(0, 1)), x.norm(float("inf"), 1), torch.linalg.vector_norm(x, 3, 1)',
        F32(3, 4),
        expect=("jnp.linalg.vector_norm(x)", "jnp.linalg.vector_norm(x, ord=2, axis=-1, keepdims=True)"),
    ),
    # -- activations
    C(
        "relu-family",
        "x",
        "return torch.relu(x), x.relu(), F.relu(x), F.relu(x.clone(), inplace=True), F.relu6(x * 4), F.leaky_relu(x), "
        "F.leaky_relu(x, 0.2), F.elu(x), F.elu(x, alpha=0.5), F.silu(x), F.hardswish(x * 4), "
        "F.hardsigmoid(x * 4), F.mish(x)",
        F32(4, 6),
        expect=("jax.nn.relu(x)", "jax.nn.leaky_relu(x)", "jax.nn.leaky_relu(x, negative_slope=0.2)"),
        said=("argument 'inplace' of relu has no equivalent in jax and was dropped",),
    ),
    C(
        "gelu-exact-by-default-tanh-on-request",
        "x",
        'return F.gelu(x), F.gelu(x, approximate="tanh"), F.gelu(x, approximate="none")',
        F32(4, 6),
        expect=("jax.nn.gelu(x, approximate=False)", "jax.nn.gelu(x, approximate=True)"),
    ),
    C(
        # a mode known only when it runs (diffusers' GELU: `approximate=self.approximate`)
        "gelu-mode-from-a-variable",
        "x, mode",
        "return F.gelu(x, approximate=mode)",
        F32(4, 6),
        "tanh",
        expect=('jax.nn.gelu(x, approximate=mode == "tanh")',),
    ),
    C(
        # keyword arguments only: the pass-through pattern's `{*args}` takes none of them
        "sdpa-keyword-arguments-only",
        "q, k, v",
        "return F.scaled_dot_product_attention(query=q, key=k, value=v, is_causal=True)",
        F32(2, 3, 5, 4),
        F32(2, 3, 5, 4),
        F32(2, 3, 5, 4),
        expect=("scaled_dot_product_attention(query=q, key=k, value=v, is_causal=True)",),
    ),
    C(
        # CLIP's attention pooling: keyword arguments, separate q/k/v projections, no weights returned
        "mha-forward-separate-projections",
        "x, wq, wk, wv, b, wo, bo",
        """
        out, _ = F.multi_head_attention_forward(
            query=x, key=x, value=x, embed_dim_to_check=x.shape[-1], num_heads=2, q_proj_weight=wq,
            k_proj_weight=wk, v_proj_weight=wv, in_proj_weight=None, in_proj_bias=b, bias_k=None, bias_v=None,
            add_zero_attn=False, dropout_p=0.0, out_proj_weight=wo, out_proj_bias=bo, use_separate_proj_weight=True,
            training=False, need_weights=False)
        return out
        """,
        F32(5, 2, 8),
        F32(8, 8),
        F32(8, 8),
        F32(8, 8),
        F32(24),
        F32(8, 8),
        F32(8),
        expect=("multi_head_attention_forward(query=x, key=x, value=x, embed_dim_to_check=x.shape[-1]",),
    ),
    C(
        "sigmoid-tanh-softplus",
        "x",
        "return torch.sigmoid(x), x.sigmoid(), F.sigmoid(x), torch.tanh(x), x.tanh(), F.tanh(x), "
        "F.softplus(x * 15), F.softplus(x, beta=2.0), F.softplus(x * 15, 1, 5), F.softplus(x, 1.0, 20.0)",
        F32(4, 6),
        expect=(
            "jax.nn.softplus(x * 15)",
            "torch_softplus(x, 2.0)",
            "torch_softplus(x * 15, 1, 5), jax.nn.softplus(x)",
        ),
    ),
    C(
        "softmax-log-softmax-dim",
        "x",
        "return F.softmax(x, dim=-1), F.softmax(x, 0), torch.softmax(x, 1), x.softmax(-1), x.softmax(dim=0), "
        "F.log_softmax(x, dim=1), torch.log_softmax(x, -1), x.log_softmax(0), F.softmax(x, -1, dtype=torch.float32)",
        F32(3, 4, 5),
        expect=("jax.nn.softmax(x, axis=-1)", "jax.nn.softmax(x.astype(jnp.float32), axis=-1)"),
    ),
    C(
        "normalize",
        "x",
        "return F.normalize(x), F.normalize(x, dim=-1), F.normalize(x, p=1.0, dim=0), F.normalize(x * 0, eps=1e-6)",
        F32(3, 4),
        expect=("torch_normalize(x)", "torch_normalize(x, dim=-1)", "torch_normalize(x, 1.0, 0)"),
    ),
    # -- Python values out of tensors
    C(
        "item-tolist",
        "x",
        "return x.sum().item(), x[0, 0].item(), x.tolist(), (x > 0).tolist()",
        F32(2, 3),
    ),
    # -- matrix products with scaling, losses, devices and grad/autocast plumbing
    C(
        "addmm-baddbmm-beta-alpha",
        "b, m1, m2, bb, b1, b2",
        "return torch.addmm(b, m1, m2), torch.addmm(b + 1, m1, m2, beta=0.5, alpha=2.0), "
        "torch.baddbmm(bb, b1, b2), bb.baddbmm(b1, b2, beta=2)",
        F32(3, 5),
        F32(3, 4),
        F32(4, 5),
        F32(2, 3, 5),
        F32(2, 3, 4),
        F32(2, 4, 5),
        expect=("b + jnp.matmul(m1, m2)", "0.5 * (b + 1) + 2.0 * jnp.matmul(m1, m2)"),
    ),
    C(
        "losses-with-torch-options",
        "x, y, t, logits",
        "return (F.mse_loss(x, y), F.l1_loss(x, y, reduction='sum'), "
        "F.binary_cross_entropy_with_logits(x, torch.sigmoid(y), pos_weight=torch.full((4,), 2.0)), "
        "F.nll_loss(F.log_softmax(logits, dim=1), t, ignore_index=1))",
        F32(3, 4),
        F32(3, 4),
        I64(6, high=5),
        F32(6, 5),
    ),
    C(
        "histc-count-nonzero-matrix-exp-index-add",
        "x, i, m",
        """
        idx = torch.tensor([0, 2, 0])
        src = torch.ones(3, 4)
        return (torch.histc(x, bins=5), x.histc(4, min=-1.0, max=1.0), torch.histc(torch.zeros(3), bins=3),
                torch.count_nonzero(i), i.count_nonzero(dim=1), torch.matrix_exp(m * 0.1),
                torch.linalg.matrix_exp(m * 0.1), x.index_add(0, idx, src), torch.index_add(x, 0, idx, src, alpha=2.5),
                x.index_add(1, torch.tensor([3, 3]), x[:, :2]))
        """,
        F32(3, 4),
        I64(3, 4, high=2),
        F32(2, 3, 3),
        expect=("torch_histc(x, bins=5)", "jnp.count_nonzero(i)", "jax.scipy.linalg.expm("),
    ),
    C(
        "functional-losses-of-the-runtime",
        "x, y, p, q",
        """
        logq = F.log_softmax(x, dim=1)
        return (F.kl_div(logq, F.softmax(y, dim=1), reduction="batchmean"), F.kl_div(logq, F.log_softmax(y, dim=1),
                reduction="sum", log_target=True), F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(p)),
                F.smooth_l1_loss(x, y, beta=0.5), F.huber_loss(x, y, reduction="none", delta=0.3),
                F.soft_margin_loss(x, torch.sign(y)), F.margin_ranking_loss(x[0], y[0], torch.sign(q), margin=0.1),
                F.poisson_nll_loss(x, p, log_input=True))
        """,
        F32(3, 4),
        F32(3, 4),
        Arr((3, 4), "positive"),
        F32(4),
        expect=("kl_div(logq",),
    ),
    C(
        "from-numpy-device-cuda-queries",
        "x",
        """
        import numpy as np
        base = torch.from_numpy(np.arange(6, dtype=np.float32))
        z = torch.zeros(2, device=x.device) + torch.cuda.device_count()
        return base, z, torch.cuda.is_available()
        """,
        F32(2),
    ),
    C(
        "round-divide-diff-checkpoint",
        "x, y",
        """
        import torch.utils.checkpoint as cp
        rounded = (torch.round(x * 3), (x * 300).round(decimals=-2))
        divided = (torch.divide(x, y), torch.div(x, y, rounding_mode="floor"), x.div(y, rounding_mode="trunc"))
        checkpointed = cp.checkpoint(lambda a, b: a * b, x, y, use_reentrant=False)
        steps = [lambda t: t * 2, torch.tanh, lambda t: t + y]
        sequential = (cp.checkpoint_sequential(steps, 2, x), cp.checkpoint_sequential(steps, 1, y, False))
        checkpointed = (checkpointed, sequential)
        arithmetic = (torch.add(x, y), torch.add(x, y, alpha=2), torch.sub(x, y, alpha=0.5), torch.mul(x, y), x.mul(2))
        return rounded, divided, torch.diff(x), x.diff(dim=0), checkpointed, arithmetic
        """,
        F32(3, 4),
        POS(3, 4),
        expect=(
            "jnp.floor_divide(x, y)",
            "torch_run_sequential(steps, x)",
            "jnp.trunc(jnp.true_divide(x, y))",
            "jnp.diff(x, axis=0)",
            "jnp.add(x, 2 * y)",
        ),
    ),
    C(
        "float-predicates-and-bitwise",
        "x, m, n, i, j",
        """
        y = x / (x - x.round())
        preds = (torch.isinf(y), y.isnan(), torch.isfinite(x), (x * 0).isinf())
        bits = (torch.bitwise_xor(m, n), m.bitwise_and(n), torch.bitwise_or(m, n), torch.bitwise_not(m))
        return preds, bits, torch.bitwise_xor(i, j), i.bitwise_and(j), torch.bitwise_not(i)
        """,
        F32(3, 4),
        BOOL(3, 4),
        BOOL(3, 4),
        I64(3, 4, high=16),
        I64(3, 4, high=16),
    ),
    C(
        "linspace",
        "x",
        'return torch.linspace(0, 1, 5), torch.linspace(-2.5, x.shape[0], 7, device="cpu"), '
        "torch.linspace(0, 10, 3, dtype=torch.float32)",
        F32(4),
    ),
    C(
        "autocast-disabled-region",
        "x",
        """
        with torch.autocast("cpu", enabled=False):
            y = x * 2
        return y
        """,
        F32(3),
        expect=('with torch_autocast(None, "bfloat16", enabled=False):',),  # rules/torch_autocast_model.py
    ),
    C(
        "autocast-disabled-object",  # not a `with` item: the op table's autocast_disabled
        "x",
        """
        ctx = torch.autocast("cpu", enabled=False)
        with ctx:
            y = x * 2
        return y
        """,
        F32(3),
    ),
    # -- devices, grad mode, dtypes and sizes
    C(
        "device-grad-mode-size-scalar-tensor-numpy",
        "x, n",
        """
        d, e = torch.device("cuda:1"), torch.device("cuda", 0)
        with torch.enable_grad():  # torch's reference runs under no_grad
            grad = torch.is_grad_enabled()
        sizes = (torch.Size([2, 3]), torch.Size(x.shape[1:]), torch.Size())
        scalars = (torch.scalar_tensor(True), torch.scalar_tensor(3, dtype=torch.int64), torch.scalar_tensor(2.5))
        devices = (d.type, d.index, str(e), torch.device("cpu").index, torch.device(e).type)
        return grad, torch.backends.mps.is_available(), sizes, scalars, devices, x.numpy(), n.numpy()
        """,
        F32(2, 3),
        I64(2, 3),
        expect=(
            'torch_device("cuda:1")',
            "torch_is_grad_enabled()",
            "torch_size([2, 3])",
            "np.asarray(x)",
        ),
    ),
    C(
        # torch reads a tensor of one element, of any rank, as an integer where a size takes one
        # (torchdyn's `torch.Size([dim, n_harmonics, 2])` with `n_harmonics = torch.randint(2, 20,
        # size=(1,))`); JAX and NumPy turn only 0-d arrays into numbers
        "size-of-one-element-tensors",
        "x",
        """
        n = (x > -100).sum().reshape(1)
        sizes = (torch.Size([2, n, 2]), torch.Size([n.reshape(1, 1), 3]), torch.Size([x.shape[0], n]))
        return sizes, torch.zeros(torch.Size([2, n])), torch.distributions.Uniform(0.0, 1.0).sample((n, 2)).shape
        """,
        F32(3),
        expect=("torch_size([2, n, 2])",),
    ),
    # -- indices of nonzero elements, quadrant arctangent, products, logsumexp
    C(
        "nonzero-argwhere",
        "x, b",
        "return (x.nonzero(), torch.nonzero(b), torch.nonzero(b, as_tuple=True), b.nonzero(as_tuple=True), "
        "torch.argwhere(x > 0), (x < 0).argwhere(), torch.nonzero(b[0]))",
        I64(3, 4, high=3),
        BOOL(2, 3, 4),
        expect=("jnp.argwhere(x)", "jnp.nonzero(b)"),
    ),
    C(
        "atan2-prod-logsumexp-logsigmoid",
        "x, y, i, b",
        "return (torch.atan2(x, y), x.atan2(y), torch.atan2(x, y[0]), torch.arctan2(i, i + 1), torch.prod(x), "
        "x.prod(1), x.prod(-1, keepdim=True), torch.prod(i, 0), i.prod(dtype=torch.float32), b.prod(1), "
        "torch.logsumexp(x, 1), x.logsumexp(dim=(0, 1)), torch.logsumexp(x * 30, -1, keepdim=True), "
        "F.logsigmoid(x * 20))",
        F32(3, 4),
        F32(3, 4),
        I64(3, 4, low=1, high=4),
        BOOL(3, 4),
        expect=("jnp.arctan2(x, y)", "jnp.prod(x, axis=1)", "jax.nn.logsumexp(x, axis=1)", "jax.nn.log_sigmoid("),
    ),
    C(
        "diag-cross-addcmul-addcdiv-lerp",
        "v, m, a, c, x, y, p",
        "return (torch.diag(v), torch.diag(v, 1), m.diag(), m.diag(-1), torch.diag(m, diagonal=2), "
        "torch.linalg.cross(a, a.flip(0)), torch.linalg.cross(a, c[:1], dim=-1), torch.cross(c, c.flip(1)), "
        "a.cross(a * 2 + 1, dim=1), torch.cross(c, c.T, 0), torch.addcmul(x, y, p), torch.addcmul(x, y, p, value=0.5), "
        "x.addcmul(y, p[0], value=2), torch.addcdiv(x, y, p, value=-0.5), x.addcdiv(y, p), torch.lerp(x, y, 0.3), "
        "x.lerp(y, 0.7), torch.lerp(x, y, torch.sigmoid(p * 3 - 6)), x.lerp(y, 1.0))",
        F32(4),
        F32(4, 4),
        F32(2, 3),
        F32(3, 3),
        F32(3, 4),
        F32(3, 4),
        POS(3, 4),
        expect=(
            "jnp.diag(v, k=1)",
            "jnp.cross(a, jnp.flip(a, axis=0), axis=-1)",
            "torch_cross(c, jnp.flip(c, axis=1))",
            "x + y * p",
            "x + 0.5 * y * p",
            "x + -0.5 * y / p",
            "torch_lerp(x, y, 0.3)",
        ),
    ),
    C(
        "quantile-nan-to-num-take-along-dim-broadcast-to-isin",
        "x, q, idx, i, j",
        """
        w = torch.cat([x / 0.0, torch.log(x)])
        quantiles = (torch.quantile(x, 0.3), x.quantile(0.5, dim=1),
                     torch.quantile(x, torch.sigmoid(q), dim=0, keepdim=True),
                     x.quantile(0.25, 1, interpolation="nearest"), x.quantile(0.6, -1, True, interpolation="lower"),
                     torch.quantile(x, 0.4, interpolation="midpoint"), x.quantile(0.7, 0, interpolation="higher"))
        cleaned = (torch.nan_to_num(w), w.nan_to_num(1.0), torch.nan_to_num(w, nan=0.5, posinf=9.0, neginf=-9.0),
                   w.nan_to_num(posinf=1e4))
        taken = (torch.take_along_dim(x, idx, dim=1), x.take_along_dim(idx[:, :1], -1), torch.take_along_dim(x, idx[0]),
                 torch.take_along_dim(x, idx[:1], 1))
        broadcast = (torch.broadcast_to(q, (2, 3)), q[:, None].broadcast_to((3, 4)), q.broadcast_to((2, -1)),
                     q[:, None].broadcast_to(2, 3, 4))
        return quantiles, cleaned, taken, broadcast, torch.isin(i, j), torch.isin(i, j, invert=True), torch.isin(i, 2)
        """,
        F32(3, 5),
        F32(3),
        I64(3, 4, high=5),
        I64(3, 4, high=6),
        I64(4, high=6),
        expect=(
            'jnp.quantile(x, 0.25, axis=1, method="nearest")',
            "jnp.nan_to_num(w, nan=0.5, posinf=9.0, neginf=-9.0)",
            "jnp.take_along_axis(jnp.ravel(x), jnp.ravel(idx[0]), axis=0)",
            "torch_expand(q, (2, 3))",
            "jnp.isin(i, j, invert=True)",
        ),
    ),
    C(
        "erfinv-frac-tril-triu-indices-block-diag-cartesian-prod",
        "x, a, b, v, i",
        "return (torch.erfinv(torch.tanh(x)), torch.tanh(x).erfinv(), torch.frac(x * 3), (x * 3).frac(), "
        "torch.tril_indices(3, 4), torch.tril_indices(4, 3, -1), torch.triu_indices(3, 3, 1), "
        "torch.triu_indices(row=3, col=5, offset=-1), torch.block_diag(a, b, v), torch.block_diag(a), "
        "torch.block_diag(a, x.sum()), torch.block_diag(i, i[:1]), torch.cartesian_prod(v, x[0]), "
        "torch.cartesian_prod(v), torch.cartesian_prod(v, v[:2], x[1]), torch.cartesian_prod(i[0], i[1]))",
        F32(3, 4),
        F32(2, 3),
        F32(1, 2),
        F32(3),
        I64(2, 3),
        expect=(
            "jax.scipy.special.erfinv(jnp.tanh(x))",
            "jnp.modf(x * 3)[0]",
            "jnp.stack(jnp.tril_indices(4, -1, 3))",
            "jax.scipy.linalg.block_diag(a, b, v)",
            "torch_cartesian_prod(v, x[0])",
        ),
    ),
    C(
        "special-functions-select",
        "x, p, i",
        "q = torch.sigmoid(x)\n"
        "return (torch.special.ndtr(x), torch.special.ndtri(q * 0.5 + 0.25), torch.logit(q), q.logit(eps=0.3), "
        "torch.special.logit(q, 1e-6), torch.lgamma(p), p.lgamma(), torch.special.gammaln(p), "
        "torch.polygamma(1, p), p.polygamma(2), torch.xlogy(q, p), "
        "q.xlogy(2.0), torch.special.xlog1py(q, p), torch.erfc(x), x.erfc(), torch.special.erfc(x), "
        "torch.exp2(x), x.exp2(), torch.sinc(x), x.sinc(), torch.i0(x), torch.special.i0e(x), "
        "torch.special.i1(x), torch.special.i1e(x), x.select(1, -1), torch.select(x, 0, 1), i.select(-1, 2), "
        "torch.hann_window(8), torch.hann_window(7, periodic=False), torch.hamming_window(6, False, 0.5, 0.5), "
        "torch.blackman_window(9), torch.bartlett_window(5, dtype=torch.float32), torch.hann_window(1))",
        F32(3, 4),
        POS(3, 4),
        I64(3, 4, high=6),
        expect=("jax.scipy.special.ndtr(x)", "jax.scipy.special.gammaln(p)", "jnp.take(x, -1, axis=1)"),
    ),
    C(
        "view-as-real-complex-unfold",
        "x, y, t",
        "c = torch.view_as_complex(x)\n"
        "return (torch.view_as_real(c * c), torch.view_as_real(torch.view_as_complex(y) + c[:1]), "
        "t.unfold(1, 2, 1), t.unfold(-1, 3, 2), t.unfold(0, 2, 2), t[0, 0].unfold(0, 4, 3), "
        "c.angle(), torch.angle(t))",
        F32(3, 2),
        F32(4, 3, 2),
        F32(4, 7, 5),
        expect=("torch_view_as_complex(x)", "torch_unfold(t, 1, 2, 1)"),
    ),
    C(
        # torch-geometric's scatter: `src.new_zeros(size).scatter_reduce_(0, index, src, "amax", include_self=False)`
        "scatter-reduce-functional-and-in-place",
        "x, src, d0, n, m",
        """
        kinds = ("sum", "mean", "amax", "amin")
        out = tuple(x.scatter_reduce(0, d0, src, r) for r in kinds)
        out += tuple(torch.scatter_reduce(x, 0, d0, src, r, include_self=False) for r in kinds)
        out += (n.scatter_reduce(0, d0, m, "mean"), n.scatter_reduce(0, d0, m, "amax", include_self=False))
        fresh = src.new_zeros((4, 5)).scatter_reduce_(0, d0, src, reduce="amax", include_self=False)
        y = x.clone()
        y.scatter_reduce_(0, d0, src, "sum")
        return out, fresh, y
        """,
        F32(4, 5),
        F32(6, 5),
        I64(6, 5, high=3),
        I64(4, 5, low=-9, high=9),
        I64(6, 5, low=-9, high=9),
    ),
    C(
        "scatter-scatter-add-functional-and-in-place",
        "x, r, r2, src, d0, d1, n",
        """
        idx, idx1 = torch.argsort(r, dim=0)[:2], torch.argsort(r2, dim=1)[:, :3]
        out = (x.scatter(0, idx, src), torch.scatter(x, 1, idx1, src), x.scatter(1, idx1, 0.5),
               torch.scatter(x, -1, idx1, value=-2.0), x.scatter(-1, idx1, src, reduce="add"),
               torch.scatter_add(x, 0, d0, src), x.scatter_add(1, d1, src), n.scatter(1, idx1, 7))
        y = x.clone()
        y.scatter_(0, idx, src)
        y.scatter_add_(1, d1, src)
        z = x.clone()
        z[1:].scatter_(1, idx1[1:], 0.0)
        return out, y, z
        """,
        F32(3, 5),
        F32(3, 5),
        F32(3, 5),
        F32(3, 5),
        I64(2, 5, high=3),
        I64(3, 4, high=5),
        I64(3, 5),
        expect=("torch_scatter(x, 0, idx, src)", 'torch_scatter(x, 0, d0, src, reduce="add")'),
    ),
    C(
        "unique-searchsorted-bucketize",
        "u, rows, x, v, m, vv, i",
        """
        seq = torch.sort(x).values
        uniques = (torch.unique(u), u.unique(return_counts=True), torch.unique(u, return_inverse=True),
                   torch.unique(rows, dim=0), torch.unique(u, sorted=True, return_inverse=True, return_counts=True),
                   torch.unique(rows, return_inverse=True, dim=1))
        found = (torch.searchsorted(seq, v), torch.searchsorted(seq, v, right=True),
                 torch.searchsorted(seq, v, side="right"), torch.searchsorted(torch.sort(m, dim=1).values, vv),
                 torch.searchsorted(seq, v, out_int32=True), torch.bucketize(v, seq),
                 torch.bucketize(i, torch.arange(5), right=True), torch.bucketize(i, torch.arange(5)),
                 torch.searchsorted(seq, 0.0))
        return uniques, found
        """,
        I64(10, high=4),
        I64(5, 2, high=2),
        F32(8),
        F32(3, 4),
        F32(3, 6),
        F32(3, 4),
        I64(6, high=6),
        expect=("torch_unique(u, return_counts=True)", "torch_searchsorted(seq, v, right=True)"),
    ),
    C(
        "one-hot-grid-sample",
        "t, inp, g",
        """
        grid = torch.tanh(g) * 1.2
        hot = (F.one_hot(t), F.one_hot(t, 6), F.one_hot(t, num_classes=5))
        sampled = (F.grid_sample(inp, grid, align_corners=False),
                   F.grid_sample(inp, grid, mode="nearest", align_corners=True),
                   F.grid_sample(inp, grid, padding_mode="border", align_corners=False),
                   F.grid_sample(inp, grid, "bilinear", "zeros", True))
        return hot, sampled
        """,
        I64(2, 3, high=5),
        F32(2, 3, 5, 6),
        F32(2, 4, 3, 2),
        expect=("one_hot(t, 6)", 'grid_sample(inp, grid, mode="nearest", align_corners=True)'),
    ),
    C(
        "conv3d-conv-transpose",
        "x5, w3, b4, x3, wt1, x4, wt2, b2, wt2g, wt3",
        "return (F.conv3d(x5, w3), F.conv3d(x5, w3, b4, stride=2, padding=1), F.conv3d(x5, w3, padding='same'), "
        "F.conv_transpose1d(x3, wt1, stride=2, padding=1, output_padding=1), "
        "F.conv_transpose2d(x4, wt2, b2, stride=2), F.conv_transpose2d(x4, wt2g, groups=2), "
        "F.conv_transpose2d(x4, wt2, dilation=2, padding=1), F.conv_transpose3d(x5, wt3, stride=(1, 2, 2)), "
        "F.conv_transpose1d(x3[0], wt1))",
        F32(2, 3, 4, 5, 5),
        F32(4, 3, 3, 3, 3),
        F32(4),
        F32(2, 3, 6),
        F32(3, 2, 3),
        F32(2, 4, 5, 5),
        F32(4, 3, 3, 3),
        F32(3),
        F32(4, 2, 2, 3),
        F32(3, 2, 2, 2, 2),
        expect=("torch_conv3d(x5, w3)", "torch_conv_transpose(x3, wt1, stride=2, padding=1, output_padding=1)"),
    ),
    C(
        "elementwise-logic-remainder-dot-fmin",
        "x, y, p, i, j, v, w",
        """
        nan = y.masked_fill(y > 0.5, float("nan"))
        unary = (x.neg(), torch.neg(x), torch.negative(i), torch.tan(x), x.tan(), torch.acos(torch.tanh(x)),
                 torch.tanh(x).arccos(), torch.asin(torch.tanh(x)), torch.atan(x), x.arctan(), torch.expm1(x * 1e-3),
                 x.expm1(), torch.special.expm1(x), torch.reciprocal(p), p.reciprocal(), torch.reciprocal(i + 1),
                 x.absolute(), torch.conj(x), torch.cosh(x), x.sinh(), torch.asinh(x), torch.acosh(p + 1),
                 (p + 1).arccosh(), torch.atanh(torch.tanh(x)), x.tanh().arctanh(), torch.arcsinh(i),
                 x.to(memory_format=torch.contiguous_format), x.to(torch.ones_like(y, dtype=torch.float16)))
        logic = (torch.logical_and(x > 0, i), torch.logical_or(i, j), x.logical_not(), torch.logical_xor(i, x),
                 i.logical_and(j))
        binary = (torch.remainder(x, 0.7), i.remainder(3), torch.remainder(-i, j + 1), x.remainder(-0.4),
                  torch.dot(v, w), v.dot(w), torch.fmin(x, nan), nan.fmax(x), torch.fmin(nan, nan))
        close = (torch.isclose(x, x + 1e-6), x.isclose(y, atol=0.5), torch.isclose(nan, nan, equal_nan=True),
                 torch.allclose(x, x), x.allclose(y, rtol=1e-2), torch.allclose(x, x + 1e-3, 0.0, 1e-2))
        return unary, logic, binary, close
        """,
        F32(3, 4),
        F32(3, 4),
        POS(3, 4),
        I64(3, 4, high=4),
        I64(3, 4, high=4),
        F32(5),
        F32(5),
        expect=("jnp.negative(x)", "jnp.true_divide(1.0, p)", "jnp.remainder(x, 0.7)", "jnp.fmin(x, nan)"),
    ),
    C(
        "linear-algebra-diagonal-stacks",
        "m, b, v, t",
        "return (torch.mv(m, v), m.mv(v), torch.det(m), m.det(), torch.linalg.det(m[None]), "
        "torch.linalg.solve(m + 3 * torch.eye(3), b), torch.linalg.solve(m + 3 * torch.eye(3), v), "
        "torch.linalg.solve(m + 3 * torch.eye(3), b.T, left=False), torch.diagonal(t), "
        "t.diagonal(1, 1, 2), torch.diagonal(m, -1), t.diagonal(dim1=-1, dim2=0), torch.vstack([v, v]), "
        "torch.row_stack((m, m)), torch.hstack([v, v]), torch.hstack((m, b)))",
        F32(3, 3),
        F32(3, 2),
        F32(3),
        F32(2, 3, 4),
        expect=("jnp.matmul(m, v)", "jnp.linalg.det(m)", "jnp.diagonal(t, 1, 1, 2)", "jnp.vstack([v, v])"),
    ),
    C(
        "bincount-masked-select-cdist-broadcast-median-complex",
        "x, y, i, mask, a, b, a3, b3",
        """
        counts = (torch.bincount(i), i.bincount(minlength=8), torch.bincount(i, weights=x[0, :6]))
        selected = (torch.masked_select(x, mask), x.masked_select(mask[0]))
        distances = (torch.cdist(a, b), torch.cdist(a, b, p=1), torch.cdist(a3, b3, 3.0),
                     torch.cdist(a, b, float("inf")))
        broadcast = (torch.broadcast_tensors(x, y[:, :1]), torch.broadcast_shapes((2, 1), (3,)),
                     torch.atleast_1d(x.sum()), torch.atleast_1d(x))
        medians = (torch.median(x), x.median(1), torch.median(x, 0, keepdim=True), x.median(dim=-1).indices,
                   y[:, :4].median())
        d = x.clone()
        d.detach_()
        flags = (torch.xpu.is_available(), torch.onnx.is_in_onnx_export())
        return counts, selected, distances, broadcast, medians, torch.view_as_real(torch.complex(x, y)), d, flags
        """,
        F32(3, 6),
        F32(3, 6),
        I64(6, high=6),
        BOOL(3, 6),
        F32(4, 3),
        F32(5, 3),
        F32(2, 4, 3),
        F32(2, 5, 3),
        expect=("jnp.bincount(i, minlength=8)", "torch_cdist(a, b, 1)", "tuple(jnp.broadcast_arrays(x, y[:, :1]))"),
    ),
    C(
        "affine-grid-split-with-sizes",
        "theta, theta3, inp, x",
        "return (F.affine_grid(theta, (2, 3, 4, 5), align_corners=False), F.affine_grid(theta, [2, 3, 4, 5]), "
        "F.affine_grid(theta3, (2, 1, 2, 3, 4), align_corners=True), F.affine_grid(theta, (2, 3, 1, 5), True), "
        "F.affine_grid(theta, inp.shape, align_corners=False), "
        "x.split_with_sizes([1, 3], 1), x.split_with_sizes((2, 1)))",
        F32(2, 2, 3),
        F32(2, 3, 4),
        F32(2, 3, 4, 5),
        F32(3, 4),
        expect=("affine_grid(theta, (2, 3, 4, 5), align_corners=False)", "torch_split(x, [1, 3], 1)"),
    ),
    C(
        "var-mean-std-mean-polar-diag-embed-trapezoid",
        "x, y, v, t",
        "return (torch.var_mean(x), torch.std_mean(x, 1), torch.var_mean(x, dim=0, keepdim=True), "
        "torch.std_mean(x, (0, 1), unbiased=False), torch.var_mean(x, 1, correction=0), torch.std_mean(x, dim=[1]), "
        "torch.view_as_real(torch.polar(y.abs(), x)), torch.diag_embed(v), torch.diag_embed(x, 1), "
        "torch.diag_embed(x, offset=-2, dim1=0, dim2=2), x.diag_embed(dim1=-1, dim2=0), torch.trapezoid(x), "
        "torch.trapezoid(x, t, dim=0), torch.trapz(y, dx=0.5), torch.trapezoid(y, v, dim=1))",
        F32(3, 4),
        F32(3, 4),
        F32(4),
        F32(3, 1),
        expect=("torch_var_mean(x, 1, std=True)", "jnp.trapezoid(x)"),
    ),
    C(
        "solve-triangular-slogdet-logspace-real-angles-ravel",
        "m, b, x",
        "upper, lower = torch.triu(m) + 3 * torch.eye(3), torch.tril(m) + 3 * torch.eye(3)\n"
        "return (torch.linalg.solve_triangular(upper, b, upper=True), "
        "torch.linalg.solve_triangular(lower, b, upper=False), "
        "torch.linalg.solve_triangular(upper, b, upper=True, left=True), torch.slogdet(m), "
        "torch.linalg.slogdet(m[None]).logabsdet, m.slogdet(), torch.logspace(0, 2, 5), "
        "torch.logspace(-1, 1, 3, base=2.0), torch.real(x), torch.imag(torch.view_as_complex(b)), torch.rad2deg(x), "
        "x.deg2rad(), torch.ravel(x), x.T.ravel())",
        F32(3, 3),
        F32(3, 2),
        F32(2, 3),
        expect=("jax.scipy.linalg.solve_triangular(upper, b, lower=False)", "jnp.logspace(0, 2, 5)"),
    ),
    C(
        "lu-factor-lu-unpack",
        "m, q",
        "P, L, U = torch.lu_unpack(*m.lu())\n"
        "lu, piv = torch.linalg.lu_factor(q)\n"
        "bp, bl, bu = torch.lu_unpack(lu, piv)\n"
        "return P, L, U, lu, piv, bp @ bl @ bu, m.lu(pivot=True)[1]",
        F32(4, 4),
        F32(2, 3, 3),
        expect=("torch_lu_unpack(*torch_lu_factor(m))",),
    ),
    C(
        "triangular-solve",
        "m, b",
        "a = m + 4 * torch.eye(3)\n"
        "x, coefficient = torch.triangular_solve(b, a)\n"
        "return (x, coefficient, torch.triangular_solve(b, a, upper=False).solution, "
        "torch.triangular_solve(b, a, transpose=True, unitriangular=True)[0], "
        "b.triangular_solve(a[0], upper=False)[0])",
        F32(2, 3, 3),
        F32(2, 3, 2),
        expect=("torch_triangular_solve(b, a)",),
    ),
    C(
        "linalg-inv-ex-shape-as-tensor",
        "m",
        "a = m + 4 * torch.eye(3)\n"
        "inverse, info = torch.linalg.inv_ex(a)\n"
        "return inverse, info, torch.linalg.inv_ex(a, check_errors=False).inverse, torch._shape_as_tensor(m)[0] + 0",
        F32(2, 3, 3),
        expect=("torch_linalg_inv_ex(a)",),
    ),
    C(
        "unfold-fold-pixel-shuffle-cosine-similarity-rms-norm-pool3d",
        "x, c, a, b, w, v",
        "cols = F.unfold(x, 2)\n"
        "return (cols, F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=2), F.unfold(x[0], 3, padding=1), "
        "F.fold(cols, (4, 6), 2), F.fold(F.unfold(x, 3, padding=1, stride=2), x.shape[-2:], 3, padding=1, stride=2), "
        "F.fold(cols[0], output_size=(4, 6), kernel_size=2), F.pixel_shuffle(c, 2), F.pixel_unshuffle(x, 2), "
        "F.pixel_unshuffle(F.pixel_shuffle(c[0], 2), downscale_factor=2), F.cosine_similarity(a, b), "
        "F.cosine_similarity(a, b[:1], dim=-1), F.cosine_similarity(a * 0, b, eps=1e-6), F.rms_norm(a, (4,)), "
        "F.rms_norm(a, [3, 4], w, eps=1e-5), F.max_pool3d(v, 2), F.max_pool3d(v, 3, stride=2, padding=1), "
        "F.avg_pool3d(v, 2), F.avg_pool3d(v, (1, 2, 2), count_include_pad=False))",
        F32(2, 3, 4, 6),
        F32(2, 8, 3, 2),
        F32(2, 3, 4),
        F32(2, 3, 4),
        F32(3, 4),
        F32(2, 2, 4, 4, 5),
        expect=("unfold(x, 2)", "pixel_shuffle(c, 2)", "torch_rms_norm(a, (4,))", "max_pool3d(v, 2)"),
    ),
    C(
        # torch's private MultiheadAttention helpers, called by code copied from it
        # (torch-uncertainty's packed transformer layers)
        "canonical-mask-none-or-dtype-mha-shape-check",
        "x",
        """
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        additive = F._canonical_mask(mask=causal, mask_name="src_mask", other_type=F._none_or_dtype(None),
                                     other_name="", target_type=x.dtype, check_other=False)
        kept = F._canonical_mask(mask=additive, mask_name="m", other_type=F._none_or_dtype(additive), other_name="o",
                                 target_type=x.dtype)
        batched = F._mha_shape_check(x, x, x, None, additive, 2)
        return x @ torch.softmax(additive, -1), kept, batched, F._canonical_mask(mask=None, mask_name="m",
                                                                               other_type=None, other_name="",
                                                                               target_type=x.dtype) is None
        """,
        F32(2, 4, 4),
        expect=("torch_canonical_mask(causal, ", "torch_mha_shape_check(x, x, x, None, additive, 2)"),
    ),
    C(
        # equiformer's basis (`torch.svd`: V, not V^H) and its `F.pairwise_distance`
        "svd-legacy-pairwise-distance",
        "x, y",
        """
        u, s, v = torch.svd(x)
        full = torch.svd(x, some=False)
        return (u @ torch.diag(s) @ v.T, s, full.S, full.U.shape, v.abs().sum(), x.svd().S,
                F.pairwise_distance(x, y), torch.pairwise_distance(x, y, 1.0, keepdim=True),
                F.pairwise_distance(x, y, p=3.0, eps=0.0))
        """,
        F32(4, 3),
        F32(4, 3),
        expect=("torch_svd(x)", "torch_pairwise_distance(x, y, 1.0, keepdim=True)"),
    ),
    C(
        "linalg-norm-eigh-svd-qr-cholesky-trace-flips-glu-device-region",
        "m, x, t",
        """
        spd = m @ m.T + 3 * torch.eye(3)
        w, v = torch.linalg.eigh(spd + torch.triu(m, 1))  # the upper triangle is not read
        named = (torch.linalg.eigh(spd).eigenvalues, torch.linalg.qr(x.T).R.abs(), torch.linalg.svd(x).S)
        u, s, vh = torch.linalg.svd(x, full_matrices=False)
        q, r = torch.linalg.qr(x.T)
        with torch.device("cpu"):
            made = torch.zeros(2)
        norms = (torch.linalg.norm(x), torch.linalg.norm(x, dim=1), torch.linalg.norm(x, 1, -1, True),
                 torch.linalg.norm(x, "fro", (0, 1)), torch.linalg.norm(x, float("inf"), dim=(0, 1)),
                 torch.linalg.norm(t))
        decompositions = (w, v @ torch.diag(w) @ v.T, s, torch.linalg.svd(x).S, u @ torch.diag(s) @ vh, q @ r, r.abs(),
                          torch.linalg.qr(x.T, mode="complete")[1].abs(), torch.linalg.cholesky(spd + torch.triu(m, 1)),
                          torch.linalg.cholesky(spd, upper=True))
        return (norms, decompositions, named, torch.trace(m), m.trace(), torch.flipud(x), x.fliplr(), F.glu(x, 0),
                F.glu(t), made, torch.mps.is_available())
        """,
        F32(3, 3),
        F32(2, 4),
        F32(2, 3, 4),
        expect=("jnp.linalg.norm(x, ord=1, axis=-1, keepdims=True)", "symmetrize_input=False", "jax.nn.glu(x, axis=0)"),
    ),
    C(
        "index-put-is-autocast-enabled",
        "x, i, j, v",
        """
        with torch.autocast("cpu", dtype=torch.bfloat16):
            inside = torch.is_autocast_enabled("cpu")
        rows = torch.argsort(x[:, 0])[:2]
        outside = torch.is_autocast_enabled()
        return x.index_put((rows, j[:2]), v[:2]), torch.index_put(x, (rows,), v[:4]), inside, outside
        """,
        F32(3, 4),
        I64(3, high=3),
        I64(3, high=4),
        F32(4),
        expect=("x.at[(rows, j[:2])].set(v[:2])", "torch_is_autocast_enabled()"),
    ),
    C(
        "index-put-accumulate",
        "x, i, j, v",
        "return x.index_put((i, j), v, accumulate=True), x.index_put((i,), v[:4], accumulate=True)",
        F32(3, 4),
        I64(5, high=3),
        I64(5, high=4),
        F32(5),
        expect=("x.at[(i,)].add(v[:4])",),
    ),
    C(
        "tensor-split-aminmax",
        "x",
        "m = torch.aminmax(x)\n"
        "return (torch.tensor_split(x, 3, 1), x.tensor_split(2), torch.tensor_split(x, 4, dim=-1), m, m.min, m.max, "
        "x.aminmax(dim=1, keepdim=True), torch.aminmax(x, dim=0).max)",
        F32(3, 7),
        expect=("tuple(jnp.array_split(x, 3, axis=1))", 'torch_named_result((jnp.min(x), jnp.max(x)), "min max")'),
    ),
    C(
        "pad-by-one-element-tensors",  # Pytorch-UNet's `diffY = torch.tensor([x2.size()[2] - x1.size()[2]])`
        "x",
        "d = torch.tensor([3 - x.size()[1]])\nreturn F.pad(x, [d // 2, d - d // 2, 1, torch.tensor(0)])",
        F32(2, 2),
        expect=("pad(x, [d // 2, d - d // 2, 1, ",),
    ),
    C(
        "sparse-layouts-stay-dense",  # whisper's `alignment_heads` buffer: `heads.to_sparse()`
        "x",
        "return x.to_sparse().to_dense() + 1, x.to_sparse_coo().to_dense(), x.to_dense(dtype=torch.float16)",
        F32(2, 3),
        expect=("x + 1",),
    ),
    C(
        "pad-sequence",
        "a, b, c, i",
        """
        from torch.nn.utils.rnn import pad_sequence
        return (pad_sequence([a, b, c]), pad_sequence((a, b), batch_first=True, padding_value=-1.0),
                pad_sequence([a[:, 0], c[:, 0]], True, 2.5, padding_side="left"),
                pad_sequence([i, i[:1]], batch_first=True))
        """,
        F32(3, 2),
        F32(5, 2),
        F32(1, 2),
        I64(4),
        expect=("pad_sequence([a, b, c])", "pad_sequence((a, b), batch_first=True, padding_value=-1.0)"),
    ),
]


@pytest.mark.filterwarnings("ignore:torch.meshgrid")  # the reference run of meshgrid without indexing=
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_converted_code_computes_what_torch_computes(case: Case) -> None:
    result = transpile(case.source, to="jax", path="case.py")
    messages = [d.format() for d in result.diagnostics]
    assert not result.unsupported and not result.errors, messages
    assert "torch." not in result.code.split("def f(", 1)[1], result.code
    for text in case.expect:
        assert text in result.code, (text, result.code)
    for text in case.said:
        assert any(text in m for m in messages), (text, messages)

    assert_same(*run_both(case.id, case.source, result.code, case.inputs))


def test_max_dim_result_has_values_and_indices() -> None:
    src = HEADER + "def f(x):\n    return x.max(1)\n"
    ns: dict[str, Any] = {}
    exec(compile(transpile(src, to="jax").code, "converted.py", "exec"), ns)
    result = ns["f"](jnp.asarray([[1.0, 3.0, 2.0], [5.0, 4.0, 6.0]]))
    values, indices = result
    assert result.values is values and result.indices is indices
    assert values.tolist() == [3.0, 6.0] and indices.tolist() == [1, 2]


def test_arange_warning_is_said_once_per_file() -> None:
    src = HEADER + "def f(n):\n    return torch.arange(n), torch.arange(2, n)\n\n\ng = torch.arange(3)\n"
    result = transpile(src, to="jax", path="m.py")
    warnings = [d.format() for d in result.diagnostics if "torch.arange of integers" in d.message]
    assert warnings == [
        "m.py:6:12: warning: torch.arange of integers without dtype= makes int64, jax.numpy.arange int32 "
        "unless jax_enable_x64 is set (the values agree while they fit in int32)"
    ]


# ----------------------------------------------------------------------------------------------
# torch.nn.functional through the Flax runtime: the text they are converted to
# ----------------------------------------------------------------------------------------------

SHIMMED = [
    (
        "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        "scaled_dot_product_attention(q, k, v, is_causal=True)",
    ),
    (
        "F.scaled_dot_product_attention(query=q, key=k, value=v)",
        "scaled_dot_product_attention(query=q, key=k, value=v)",
    ),
    (
        "F.multi_head_attention_forward(q, k, v, 8, 2, w, b, None, None, False, 0.0, wo, bo, training=False)",
        "multi_head_attention_forward(q, k, v, 8, 2, w, b, None, None, False, 0.0, wo, bo, training=False)",
    ),
    ("F.pad(**opts)", "pad(**opts)"),
    ('F.interpolate(x, scale_factor=2, mode="nearest")', 'interpolate(x, scale_factor=2, mode="nearest")'),
    ("F.pad(x, (1, 1, 2, 0), value=0.5)", "pad(x, (1, 1, 2, 0), value=0.5)"),
    ("F.dropout(x, p=0.1, training=self_training)", "dropout(x, p=0.1, training=self_training)"),
    ("F.layer_norm(x, (4,), w, b, eps=1e-6)", "layer_norm(x, (4,), w, b, eps=1e-6)"),
    ("F.group_norm(x, 2, w, b)", "group_norm(x, 2, w, b)"),
    ("F.batch_norm(x, m, v, training=False)", "batch_norm(x, m, v, training=False)"),
    ("F.linear(x, w, b)", "linear(x, w, b)"),
    ("F.embedding(i, w, padding_idx=0)", "embedding(i, w, padding_idx=0)"),
    ('F.cross_entropy(x, t, reduction="sum", **kw)', 'cross_entropy(x, t, reduction="sum", **kw)'),
    ("F.conv1d(x, w, stride=2)", "conv1d(x, w, stride=2)"),
    ("F.conv2d(x, w, b, 1, 1)", "conv2d(x, w, b, 1, 1)"),
    ("F.max_pool1d(x, 2)", "max_pool1d(x, 2)"),
    ("F.max_pool2d(x, 3, 2, 1)", "max_pool2d(x, 3, 2, 1)"),
    ("F.avg_pool1d(x, 2)", "avg_pool1d(x, 2)"),
    ("F.avg_pool2d(x, kernel_size=2, *rest)", "avg_pool2d(x, *rest, kernel_size=2)"),
    ("F.adaptive_avg_pool1d(x, 1)", "adaptive_avg_pool1d(x, 1)"),
    ("F.adaptive_avg_pool2d(x, (1, 1))", "adaptive_avg_pool2d(x, (1, 1))"),
    ("F.adaptive_max_pool2d(x, 7)", "adaptive_max_pool2d(x, 7)"),
    ("torch.unflatten(x, 1, (2, 3))", "unflatten(x, 1, (2, 3))"),
    ("x.unflatten(-1, (2, -1))", "unflatten(x, -1, (2, -1))"),
]


@pytest.mark.parametrize(("call", "shim_call"), SHIMMED, ids=[c for c, _ in SHIMMED])
def test_functional_calls_become_torch_signature_shims(call: str, shim_call: str) -> None:
    """The Flax runtime's functions take torch's signatures: arguments pass through as written."""
    result = transpile(f"{HEADER}y = {call}\n", to="jax", path="m.py")
    rewrites = [r.after for r in result.rewrites if r.rule == "op-pattern"]
    module = runtime_module_of("flax", shim_call.split("(", 1)[0])
    assert f"{module}.{shim_call}" in rewrites, rewrites
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert f"y = {shim_call}\n" in result.code


def test_functional_dropout_warns_about_its_generator() -> None:
    result = transpile(HEADER + "y = F.dropout(x, 0.5)\n", to="jax", path="m.py")
    assert any("rngs=" in d.message and d.severity == "warning" for d in result.diagnostics)


# ----------------------------------------------------------------------------------------------
# What must not be touched, and what must be reported
# ----------------------------------------------------------------------------------------------

NOT_TENSORS = """\
import os
import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x, line, d, s, path):
        parts = line.split(",")
        words = "a b".split()
        fields = line.split()
        kv = line.split(sep="=", maxsplit=1)
        head, tail = os.path.split(path)
        pieces = np.split(np.arange(6), 3)
        items = d.items()
        keys = list(d.keys())
        size = d.get("size")
        y = self.norm(x)
        z = self.relu(y)
        w = self.flatten(z)
        self.head.requires_grad_(False)
        n = [1, 2].index(2)
        return parts, words, fields, kv, head, pieces, items, keys, size, w, n, s.view(-1)
"""


def test_str_dict_list_and_module_methods_are_left_alone() -> None:
    result = transpile(NOT_TENSORS, to="jax", path="m.py")
    assert not result.unsupported, [d.format() for d in result.unsupported]
    body = result.code.split("class Net", 1)[1]
    for line in NOT_TENSORS.split("class Net", 1)[1].splitlines()[2:-1]:
        if "requires_grad_" not in line:
            assert line in body, line
    # a module's requires_grad_ is the runtime's, which calls the converted module's own
    assert "torch_requires_grad_(self.head, False)" in body
    assert "s.reshape(-1)" in body  # ... while the tensor method on the same line is converted


def test_string_split_still_runs_after_conversion() -> None:
    src = HEADER + 'def f(x, line):\n    parts = line.split(",")\n    return x.split(2), parts, line.split()\n'
    ns: dict[str, Any] = {}
    exec(compile(transpile(src, to="jax").code, "converted.py", "exec"), ns)
    pieces, parts, words = ns["f"](jnp.arange(5.0), "a,b c")
    assert [p.tolist() for p in pieces] == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    assert parts == ["a", "b c"] and words == ["a,b", "c"]


UNSUPPORTED = [
    ("F.softmax(x)", "torch.nn.functional.softmax has no mapping to jax: without dim= torch picks the dim"),
    ("F.softmax(x, dim=None)", "torch.nn.functional.softmax has no mapping to jax: without dim="),
    ("F.log_softmax(x)", "torch.nn.functional.log_softmax has no mapping to jax: without dim="),
    ("x.view(torch.int16)", ".view(...) call could not be converted to jax: no pattern matches its arguments"),
    ("torch.cat([x, x], out=y)", "torch.cat has no mapping to jax"),
    ("x.std(unbiased=flag)", ".std(...) call could not be converted to jax"),
    # read twice for its minimum and maximum: only a plain name or attribute is
    ("torch.aminmax(x * 2)", "aminmax with these arguments has no equivalent in jax"),
]


@pytest.mark.parametrize(("expr", "message"), UNSUPPORTED, ids=[e for e, _ in UNSUPPORTED])
def test_unsupported_forms_are_reported_with_position(expr: str, message: str) -> None:
    src = HEADER + f"def f(x, y, mode, flag):\n    return 1, {expr}\n"
    result = transpile(src, to="jax", path="m.py")
    reported = [d.format() for d in result.unsupported]
    assert reported == [f"m.py:6:15: unsupported: {message}"] or any(
        r.startswith("m.py:6:15: unsupported: ") and message in r for r in reported
    ), reported
    # kept (its arguments converted: a dtype symbol becomes JAX's), marked above
    assert f"    return 1, {expr.replace('torch.int16', 'jnp.int16')}\n" in result.code
    assert "# ptranspile: unsupported: " in result.code


def test_method_names_on_literals_and_plain_imports_are_not_tensor_calls() -> None:
    src = 'import torch\nimport re\na = re.split(",", s)\nb = "x".split(",")\nc = ["a"].index("a")\n'
    result = transpile(src, to="jax", path="m.py")
    assert result.code.endswith('a = re.split(",", s)\nb = "x".split(",")\nc = ["a"].index("a")\n')
    assert not result.unsupported


# ----------------------------------------------------------------------------------------------
# Every op of the table is exercised by the cases above
# ----------------------------------------------------------------------------------------------


def test_every_tensor_op_is_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    used: set[str] = set()
    emit = op_patterns_any.OpPatterns._emit

    def recording(self, ctx, op, match, original):  # type: ignore[no-untyped-def]
        used.add(op.name)
        return emit(self, ctx, op, match, original)

    monkeypatch.setattr(op_patterns_any.OpPatterns, "_emit", recording)
    sources = [c.source for c in CASES] + [f"{HEADER}y = {call}\n" for call, _ in SHIMMED]
    sources += [HEADER + f"def f(x, y, mode, flag):\n    return {expr}\n" for expr, _ in UNSUPPORTED]
    for src in sources:
        transpile(src, to="jax")
    table = {name for name, op in load_mappings().ops.items() if "tensor_ops.yaml:" in op.origin}
    assert table - used == set()
