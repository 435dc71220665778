"""Converted dtype-level code must compute what the original computes.

Each case is a small function written for one framework. It is run as written (the reference),
then transpiled to every other framework, the converted module is executed, the function is
called on the same numbers (made into the target framework's arrays) and the results are
compared: values with numpy.testing, dtypes by canonical name, read from the frameworks' own
objects (never from our mapping tables). Python-level results (bools, ints, finfo fields, dtype
objects) are compared too.

Where the tool cannot convert something it must say so: those cases assert the `unsupported`
diagnostic and the marker in the output instead of running the code.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import keras
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
import torch

from precision_transpiler import load_mappings, transpile

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

FRAMEWORKS = ("torch", "jax", "tf", "numpy")
MARKER = "# ptranspile: unsupported"
_JAX_SCALAR_TYPE = type(jnp.float32)

# ----------------------------------------------------------------------------------------------
# Independent views of framework objects
# ----------------------------------------------------------------------------------------------


def dtype_name(obj: Any) -> str:
    """Canonical name of a dtype object of any of the four frameworks."""
    if isinstance(obj, torch.dtype):
        return str(obj).removeprefix("torch.")
    if isinstance(obj, tf.dtypes.DType):
        return obj.name
    if isinstance(obj, np.dtype):
        return obj.name
    if isinstance(obj, type) and issubclass(obj, np.generic):
        return np.dtype(obj).name
    if isinstance(obj, _JAX_SCALAR_TYPE):
        return np.dtype(obj.dtype).name
    raise AssertionError(f"not a dtype: {obj!r}")


def _is_dtype(obj: Any) -> bool:
    try:
        dtype_name(obj)
    except AssertionError:
        return False
    return True


@dataclass(frozen=True)
class Arr:
    """An array result: which framework made it, its dtype and its values (as float64/complex)."""

    framework: str
    dtype: str
    values: np.ndarray


def _values(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a
    if np.iscomplexobj(a):
        return a.astype(np.complex128)
    return a.astype(np.float64)


def normalize(value: Any) -> Any:
    """A comparable, framework-neutral description of a function result."""
    if isinstance(value, tuple | list):
        return tuple(normalize(v) for v in value)
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        values = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
        return Arr("torch", dtype_name(t.dtype), _values(values))
    if isinstance(value, jax.Array):
        return Arr("jax", dtype_name(value.dtype), _values(np.asarray(value)))
    if isinstance(value, tf.Tensor):
        return Arr("tf", dtype_name(value.dtype), _values(value.numpy()))
    if isinstance(value, np.ndarray):
        return Arr("numpy", dtype_name(value.dtype), _values(value))
    if isinstance(value, bool | np.bool_):
        return ("bool", bool(value))
    if _is_dtype(value):
        return ("dtype", dtype_name(value))
    if isinstance(value, int | np.integer):
        return ("int", int(value))
    if isinstance(value, float | np.floating):
        return ("float", float(value))
    if isinstance(value, np.generic) and not np.iscomplexobj(value):  # ml_dtypes scalars (bfloat16)
        return ("float", float(value))
    if hasattr(value, "eps") and hasattr(value, "max"):  # finfo of any framework
        return ("finfo", int(value.bits), float(value.eps), float(value.max), float(value.min), float(value.tiny))
    if hasattr(value, "bits") and hasattr(value, "max") and hasattr(value, "min"):  # iinfo
        return ("iinfo", int(value.bits), int(value.min), int(value.max))
    raise AssertionError(f"unexpected result {value!r} ({type(value)})")


_RTOL = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-6, "complex64": 1e-6}


def assert_same(got: Any, ref: Any, target: str, path: str = "result") -> None:
    if isinstance(ref, tuple) and ref and ref[0] not in ("bool", "dtype", "int", "float", "finfo", "iinfo"):
        assert isinstance(got, tuple) and len(got) == len(ref), f"{path}: {got!r} vs {ref!r}"
        for i, (g, r) in enumerate(zip(got, ref, strict=True)):
            assert_same(g, r, target, f"{path}[{i}]")
        return
    if isinstance(ref, Arr):
        assert isinstance(got, Arr), f"{path}: expected an array, got {got!r}"
        assert got.framework == target, f"{path}: a {got.framework} array, expected a {target} one"
        assert got.dtype == ref.dtype, f"{path}: dtype {got.dtype}, expected {ref.dtype}"
        assert got.values.shape == ref.values.shape, f"{path}: shape {got.values.shape} vs {ref.values.shape}"
        rtol = _RTOL.get(ref.dtype, 1e-12)
        np.testing.assert_allclose(got.values, ref.values, rtol=rtol, atol=0, err_msg=path)
        return
    if isinstance(ref, tuple) and ref[0] in ("finfo", "float"):
        assert isinstance(got, tuple) and got[0] == ref[0], f"{path}: {got!r} vs {ref!r}"
        np.testing.assert_allclose(np.array(got[1:], dtype=float), np.array(ref[1:], dtype=float), rtol=1e-6)
        return
    assert got == ref, f"{path}: {got!r}, expected {ref!r}"


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Typed:
    """An input array of a dtype NumPy alone cannot always make (bfloat16): built in each
    framework from float values with that framework's own cast."""

    values: tuple[float, ...]
    dtype: str


def to_framework(value: Any, fw: str) -> Any:
    if isinstance(value, Typed):
        base = np.asarray(value.values, dtype=np.float32)
        if fw == "torch":
            return torch.from_numpy(base).to(getattr(torch, value.dtype))
        if fw == "jax":
            return jnp.asarray(base).astype(value.dtype)
        if fw == "tf":
            return tf.cast(tf.constant(base), value.dtype)
        return base.astype(ml_dtypes.bfloat16 if value.dtype == "bfloat16" else value.dtype)
    if isinstance(value, np.ndarray):
        if fw == "torch":
            return torch.from_numpy(value.copy())
        if fw == "jax":
            return jnp.asarray(value)
        if fw == "tf":
            return tf.constant(value)
        return value.copy()
    return value  # Python data (lists, strings) is passed as it is


# Values every framework casts the same way: exactly representable in float16 and bfloat16,
# in range for int8, and (after squaring) for uint8; float->int truncates toward zero everywhere.
X = np.array([-2.5, -1.0, -0.0, 0.0, 0.5, 1.75, 3.0, 7.25], dtype=np.float32)
X16 = X.astype(np.float16)
X64 = X.astype(np.float64)
I16 = np.array([1, -2, 3, 0, 5, 6, -7, 8], dtype=np.int16)
I32 = np.array([1, -2, 3, 0, 5, 6, -7, 8], dtype=np.int32)
C64 = (X + 1j * X[::-1]).astype(np.complex64)
B = X > 0
XPOS = np.array([0.0, 0.5, 1.75, 2.5, 3.0, 7.25], dtype=np.float32)  # castable to every dtype, uint8 too


# ----------------------------------------------------------------------------------------------
# Running code
# ----------------------------------------------------------------------------------------------


def load(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "converted_module"}
    exec(compile(code, "<converted>", "exec"), namespace)
    return namespace


def run(code: str, fw: str, inputs: tuple, *, jax_x64: bool = True, func: str = "f") -> Any:
    """Execute module `code` written for `fw` and call `func` on `inputs` made into `fw` arrays.
    JAX runs with 64-bit types enabled unless told otherwise, so that float64/int64 mean the
    same thing in every framework."""
    if fw == "jax":
        with jax.enable_x64(jax_x64):
            args = [to_framework(v, fw) for v in inputs]
            return normalize(load(code)[func](*args))
    args = [to_framework(v, fw) for v in inputs]
    return normalize(load(code)[func](*args))


def diagnostics(result, severity: str) -> list[str]:
    return [d.message for d in result.diagnostics if d.severity == severity]


@dataclass
class Case:
    id: str
    source: str
    code: str
    inputs: list[tuple] = field(default_factory=lambda: [()])
    jax_x64: bool = True
    #: target -> substring of the `unsupported` diagnostic the tool must report (code not run)
    unsupported: dict[str, str] = field(default_factory=dict)
    #: target -> substrings that must each appear in some `note` diagnostic
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: the reference run uses this code instead (e.g. `.cuda()` -> `.cpu()` on a CPU machine)
    reference_code: str | None = None
    #: strings that must not appear in any converted output
    absent: tuple[str, ...] = ()
    #: callable(target, converted_code) for extra checks
    extra: Callable[[str, str], None] | None = None

    def targets(self) -> list[str]:
        return [t for t in FRAMEWORKS if t != self.source]


def _dedent(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


CASES: list[Case] = [
    # ---------------------------------------------------------------- torch as the source
    Case(
        # legacy typed constructors given values (pytorch-tabnet's `torch.FloatTensor([0.5])`)
        "torch-legacy-constructors",
        "torch",
        _dedent("""
            import torch

            def f(x):
                scale = torch.FloatTensor([0.5, 2.0])
                index = torch.LongTensor([1, 0])
                keep = torch.BoolTensor((True, False))
                return x * scale, index, keep
        """),
        inputs=[(Typed((1.0, -2.5), "float32"),)],
    ),
    Case(
        # the legacy constructors given a name (data or a size: torch decides by the value) or sizes;
        # torch leaves allocated tensors uninitialised, so the sizes here are empty ones
        "torch-legacy-sizes-or-data",
        "torch",
        _dedent("""
            import torch

            def f(x):
                mean = [0.5, 2.0]
                index = (3, 1)
                flags = [True, False]
                n = 0
                return (
                    x * torch.Tensor(n).sum(),
                torch.Tensor(),
                torch.FloatTensor(),
                torch.Tensor(mean),
                torch.Tensor(2, 0),
                torch.FloatTensor(mean),
                torch.FloatTensor(2, 0),
                torch.DoubleTensor(mean),
                torch.DoubleTensor(2, 0),
                torch.HalfTensor(mean),
                torch.HalfTensor(2, 0),
                torch.BFloat16Tensor(mean),
                torch.BFloat16Tensor(2, 0),
                torch.LongTensor(index),
                torch.LongTensor(2, 0),
                torch.IntTensor(index),
                torch.IntTensor(2, 0),
                torch.ShortTensor(index),
                torch.ShortTensor(2, 0),
                torch.CharTensor(index),
                torch.CharTensor(2, 0),
                torch.ByteTensor(index),
                torch.ByteTensor(2, 0),
                torch.BoolTensor(flags),
                torch.BoolTensor(2, 0),
                torch.Tensor(x.shape).fill_(1.0),
                torch.FloatTensor(x.size()).fill_(2.0),
                )
        """),
        inputs=[(Typed((1.0, -2.5), "float32"),)],
        unsupported={"numpy": "has no mapping to numpy"},  # NumPy output carries no runtime to decide
    ),
    Case(
        "torch-half-float-finfo-eps",
        "torch",
        _dedent("""
            import torch

            def f(x):
                y = x.half()
                z = y.float() * torch.finfo(torch.float16).eps
                return z.to(torch.float64), x.is_floating_point(), x.element_size()
        """),
        inputs=[(X,), (X64,), (I32,)],
    ),
    Case(
        "torch-cast-methods",
        "torch",
        _dedent("""
            import torch

            def f(x):
                sq = x * x
                return (
                    x.half(), x.bfloat16(), x.float(), x.double(),
                    x.long(), x.int(), x.short(), x.char(), sq.byte(), x.bool(),
                )
        """),
        inputs=[(X,), (X16,)],
    ),
    Case(
        "torch-to-and-type",
        "torch",
        _dedent("""
            import torch

            def f(x, other):
                return (
                    x.to(torch.float16),
                    x.to(dtype=torch.float64),
                    x.type(torch.int32),
                    x.type(torch.bfloat16),
                    x.type_as(other),
                    x.type(other.type()),
                    x.to(torch.complex64),
                    x.to(torch.bfloat16, copy=True),
                    (x * x).to(torch.uint8, non_blocking=False),
                    x.to(torch.cdouble),
                )
        """),
        inputs=[(X, I16), (X64, I32)],
    ),
    Case(
        "torch-to-device-and-dtype",
        "torch",
        _dedent("""
            import torch

            def f(x, device):
                a = x.to("cpu", torch.float64)
                b = x.to(device=device, dtype=torch.float16)
                c = x.to(device, torch.int32, non_blocking=True)
                d = x.to(device)
                e = x.cpu()
                g = x.to("cpu")
                return a, b, c, (d + e) * g
        """),
        inputs=[(X, "cpu")],
        notes={t: ["device"] for t in ("jax", "tf", "numpy")},
    ),
    Case(
        "torch-cuda-removed",
        "torch",
        _dedent("""
            import torch

            def f(x):
                y = x.cuda()
                z = x.to("cuda")
                w = x.to("cuda:0", torch.float16)
                return (y + z).cpu(), w.float()
        """),
        reference_code=_dedent("""
            import torch

            def f(x):
                y = x.cpu()
                z = x.to("cpu")
                w = x.to("cpu", torch.float16)
                return (y + z).cpu(), w.float()
        """),
        inputs=[(X,)],
        absent=("cuda", ".cpu("),
    ),
    Case(
        "torch-dtype-is",
        "torch",
        _dedent("""
            import torch

            def f(x):
                if x.dtype is torch.float16:
                    return x.float() * 2
                elif x.dtype is not torch.float32:
                    return x.to(torch.float32) - 1
                return x + 1

            def g(x):
                return x.dtype is torch.float16, x.dtype is not torch.bfloat16
        """),
        inputs=[(X16,), (X,), (X64,)],
        extra=lambda target, code: _run_g_and_compare(code, target),
    ),
    Case(
        "torch-finfo-iinfo",
        "torch",
        _dedent("""
            import torch

            def f(x):
                return (
                    torch.finfo(torch.bfloat16),
                    torch.finfo(torch.float16),
                    torch.finfo(x.dtype),
                    torch.iinfo(torch.int16),
                    torch.iinfo(torch.uint8),
                    torch.finfo(torch.float16).max,
                    torch.finfo(torch.float32).tiny,
                    torch.iinfo(torch.int8).min,
                    torch.finfo(torch.float64).bits,
                )
        """),
        inputs=[(X,), (X64,)],
    ),
    Case(
        "torch-predicates",
        "torch",
        _dedent("""
            import torch

            def f(x):
                return (
                    x.is_floating_point(), torch.is_floating_point(x),
                    x.is_complex(), torch.is_complex(x),
                    x.element_size(),
                    x.dtype.is_floating_point, x.dtype.is_complex,
                )
        """),
        # bfloat16 is floating in torch; NumPy's np.floating excludes it, so the NumPy
        # translation must test for ml_dtypes.bfloat16 as well.
        inputs=[(X,), (X16,), (X64,), (I16,), (I32,), (C64,), (B,), (Typed((1.0, -2.5), "bfloat16"),)],
    ),
    Case(
        # The same predicates on expressions other than a name (which a translation must not
        # evaluate twice): bfloat16 must still count as floating.
        "torch-predicates-of-expressions",
        "torch",
        _dedent("""
            import torch

            def f(x):
                return (
                    (x * 2).is_floating_point(),
                    x[1:].is_floating_point(),
                    torch.is_floating_point(x[None]),
                    (x * 2).is_complex(),
                    x[1:].element_size(),
                )
        """),
        inputs=[(X,), (I32,), (C64,), (Typed((1.0, -2.5), "bfloat16"),)],  # TF has no bool * int
    ),
    Case(
        "torch-bfloat16-size-and-complex",
        "torch",
        _dedent("""
            import torch

            def f(x):
                return x.element_size(), x.is_complex(), torch.finfo(x.dtype).eps, x.float()
        """),
        inputs=[(Typed((1.0, 2.5, -0.375), "bfloat16"),)],
    ),
    Case(
        "torch-tensor-as-tensor-from-lists",
        "torch",
        _dedent("""
            import torch

            def f(data, idata):
                return (
                    torch.tensor(data, dtype=torch.float16),
                    torch.as_tensor(data, dtype=torch.bfloat16),
                    torch.tensor(idata, dtype=torch.int64),
                    torch.as_tensor(data, dtype=torch.float64),
                    torch.tensor(data, dtype=torch.complex64),
                    torch.as_tensor(idata, dtype=torch.int8),
                    torch.as_tensor(data, device="cpu", dtype=torch.float32),
                )
        """),
        inputs=[([1.0, 2.5, -3.0], [1, 2, -3])],
    ),
    Case(
        # `dtype=None` passed on from a parameter (kornia's kernel builders, its `tensor.to(device=...,
        # dtype=dtype)`): each framework's own inference, and no cast to None
        "torch-tensor-dtype-parameter",
        "torch",
        _dedent("""
            import torch

            def f(data, dtype=None):
                x = torch.tensor(data, dtype=dtype)
                return x, torch.as_tensor(data, dtype=dtype), x.to(dtype=dtype), x.to(device="cpu", dtype=dtype)
        """),
        inputs=[(Typed((1.0, 2.5, -3.0), "float32"),)],
    ),
    Case(
        # Values float32 cannot hold: made from Python floats, they must keep float64 precision
        # (a float32 intermediate would turn 0.1 into 0.10000000149011612).
        "torch-tensor-float64-from-lists",
        "torch",
        _dedent("""
            import torch

            def f(data):
                return (
                    torch.tensor(data, dtype=torch.float64),
                    torch.as_tensor(data, dtype=torch.float64),
                    torch.tensor(data, dtype=torch.complex128),
                )
        """),
        inputs=[([0.1, 1 / 3, 2.0**-30 + 1.0],)],
    ),
    Case(
        "torch-as-tensor-of-a-tensor",
        "torch",
        _dedent("""
            import torch

            def f(x):
                return torch.as_tensor(x, dtype=torch.float16), torch.as_tensor(x, dtype=torch.float64)
        """),
        inputs=[(X,)],
    ),
    Case(
        "torch-promote-types",
        "torch",
        _dedent("""
            import torch

            def f():
                return (
                    torch.promote_types(torch.uint8, torch.int8),
                    torch.promote_types(torch.float16, torch.bfloat16),
                    torch.promote_types(torch.int8, torch.float32),
                    torch.promote_types(torch.bool, torch.int16),
                    torch.promote_types(torch.float32, torch.complex64),
                    torch.promote_types(torch.int32, torch.float16),
                    torch.promote_types(torch.int64, torch.float32),
                )
        """),
        # torch, JAX and Keras share a promotion lattice (test_promote_types_lattices); NumPy
        # promotes int32 with float16 to float64, so that target is not mapped.
        unsupported={"numpy": "promote_types"},
    ),
    Case(
        "torch-can-cast",
        "torch",
        _dedent("""
            import torch

            def f():
                return (
                    torch.can_cast(torch.int8, torch.int16),
                    torch.can_cast(torch.float32, torch.int32),
                    torch.can_cast(torch.float64, torch.float32),
                    torch.can_cast(torch.int32, torch.int8),
                    torch.can_cast(torch.complex64, torch.float32),
                    torch.can_cast(torch.bool, torch.int8),
                    torch.can_cast(torch.int8, torch.bool),
                    torch.can_cast(torch.float16, torch.bfloat16),
                    torch.can_cast(torch.uint8, torch.int8),
                )
        """),
        unsupported={"tf": "can_cast"},
    ),
    # ---------------------------------------------------------------- jax as the source
    Case(
        "jax-astype",
        "jax",
        _dedent("""
            import jax.numpy as jnp

            def f(x, other):
                return (
                    x.astype(jnp.float16),
                    x.astype("bfloat16"),
                    x.astype(jnp.int32),
                    x.astype(other.dtype),
                    x.astype(jnp.complex64, copy=False),
                    x.astype("float64"),
                    x.astype(jnp.bool_),
                    (x * x).astype("uint8"),
                )
        """),
        inputs=[(X, I16)],
    ),
    Case(
        "jax-dtype-utilities",
        "jax",
        _dedent("""
            import jax.numpy as jnp

            def f(x):
                return (
                    jnp.issubdtype(x.dtype, jnp.floating),
                    jnp.iscomplexobj(x),
                    x.dtype.itemsize,
                    jnp.finfo(jnp.float16).max,
                    jnp.iinfo(jnp.int8).min,
                    jnp.finfo(jnp.bfloat16),
                    jnp.iinfo(jnp.int16),
                    jnp.dtype("float16"),
                    jnp.dtype(jnp.int8),
                )
        """),
        inputs=[(X,), (I32,), (C64,), (X16,)],
    ),
    Case(
        "jax-array-creation",
        "jax",
        _dedent("""
            import jax.numpy as jnp

            def f(data):
                return (
                    jnp.asarray(data, dtype="float16"),
                    jnp.array(data, dtype=jnp.float32),
                    jnp.asarray(data, dtype=jnp.bfloat16),
                    jnp.array(data, dtype="float64"),
                )
        """),
        inputs=[([1.0, 2.5, -3.0],)],
    ),
    Case(
        "jax-promote-types",
        "jax",
        _dedent("""
            import jax.numpy as jnp

            def f():
                return (
                    jnp.promote_types(jnp.int8, jnp.uint8),
                    jnp.promote_types(jnp.int32, jnp.float16),
                    jnp.promote_types(jnp.bfloat16, jnp.float16),
                    jnp.promote_types(jnp.bool_, jnp.int16),
                    jnp.promote_types(jnp.float32, jnp.complex64),
                )
        """),
        unsupported={"numpy": "promote_types"},
    ),
    Case(
        "jax-can-cast",
        "jax",
        _dedent("""
            import jax.numpy as jnp

            def f():
                return (
                    jnp.can_cast(jnp.int8, jnp.int16, casting="same_kind"),
                    jnp.can_cast(jnp.float32, jnp.int32, casting="same_kind"),
                    jnp.can_cast(jnp.float64, jnp.float32, casting="same_kind"),
                    jnp.can_cast(jnp.int32, jnp.int8, "same_kind"),
                    jnp.can_cast(jnp.complex64, jnp.float32, casting="same_kind"),
                )
        """),
        unsupported={"tf": "can_cast"},
    ),
    Case(
        # NumPy's default casting="safe" (float64 -> float32 is not allowed) is not torch's rule.
        "jax-can-cast-safe",
        "jax",
        _dedent("""
            import jax.numpy as jnp

            def f():
                return jnp.can_cast(jnp.float64, jnp.float32), jnp.can_cast(jnp.int8, jnp.int16, casting="safe")
        """),
        unsupported={t: "can_cast" for t in ("torch", "tf", "numpy")},
    ),
    # ---------------------------------------------------------------- tf as the source
    Case(
        "tf-cast",
        "tf",
        _dedent("""
            import keras
            import tensorflow as tf

            def f(x, other):
                return (
                    tf.cast(x, tf.float16),
                    tf.dtypes.cast(x, tf.dtypes.bfloat16),
                    keras.ops.cast(x, "float64"),
                    tf.cast(x, other.dtype),
                    tf.cast(x, tf.int32),
                    tf.cast(x, "bool"),
                    tf.cast(x, tf.complex64),
                    tf.cast(x, tf.half),
                )
        """),
        inputs=[(X, I16)],
    ),
    Case(
        "tf-dtype-utilities",
        "tf",
        _dedent("""
            import numpy as np
            import tensorflow as tf

            def f(x):
                return (
                    x.dtype.is_floating,
                    x.dtype.is_complex,
                    x.dtype.size,
                    tf.experimental.numpy.finfo(tf.float16).eps,
                    tf.experimental.numpy.finfo(tf.bfloat16),
                    np.iinfo(tf.dtypes.as_dtype(tf.int8).as_numpy_dtype).max,
                    np.iinfo(tf.dtypes.as_dtype(tf.uint8).as_numpy_dtype),
                    tf.dtypes.as_dtype("float16"),
                    tf.as_dtype(tf.int8),
                )
        """),
        inputs=[(X,), (I32,), (C64,), (B,)],
    ),
    Case(
        # NumPy's promotion lattice (int32 with float16 gives float64): mapped nowhere.
        "tf-result-type",
        "tf",
        _dedent("""
            import tensorflow as tf

            def f():
                return tf.experimental.numpy.result_type(tf.int8, tf.uint8)
        """),
        unsupported={t: "result_type" for t in ("torch", "jax", "numpy")},
    ),
    Case(
        "tf-tensor-creation",
        "tf",
        _dedent("""
            import tensorflow as tf

            def f(data):
                return (
                    tf.convert_to_tensor(data, dtype="float16"),
                    tf.constant(data, dtype=tf.half),
                    tf.constant(data, dtype=tf.float64),
                    tf.convert_to_tensor(data, dtype=tf.bfloat16),
                )
        """),
        inputs=[([1.0, 2.5, -3.0],)],
    ),
    # ---------------------------------------------------------------- numpy as the source
    Case(
        "numpy-astype-symbols",
        "numpy",
        _dedent("""
            import ml_dtypes
            import numpy as np

            def f(x, other):
                return (
                    x.astype(np.half),
                    x.astype(ml_dtypes.bfloat16),
                    x.astype(other.dtype),
                    x.astype(np.intc),
                    x.astype(np.float64, copy=True),
                    x.astype(np.csingle),
                    x.astype(np.bool_),
                )
        """),
        inputs=[(X, I16)],
    ),
    Case(
        "numpy-astype-strings",
        "numpy",
        _dedent("""
            import numpy as np

            def f(x):
                return x.astype("float16"), x.astype("float"), x.astype("f4"), x.astype("double"), x.astype("i8")
        """),
        inputs=[(X,)],
    ),
    Case(
        "numpy-dtype-utilities",
        "numpy",
        _dedent("""
            import numpy as np

            def f(x):
                return (
                    np.issubdtype(x.dtype, np.floating),
                    np.iscomplexobj(x),
                    x.itemsize,
                    np.finfo(np.float16).eps,
                    np.iinfo(np.int8).max,
                    np.finfo(np.float32),
                    np.dtype("float16"),
                    np.dtype(np.int8),
                )
        """),
        inputs=[(X,), (I32,), (C64,), (X64,)],
    ),
    Case(
        # NumPy's promotion lattice (int32 with float16 gives float64): mapped nowhere.
        "numpy-promote-types",
        "numpy",
        _dedent("""
            import numpy as np

            def f():
                return np.promote_types(np.int8, np.uint8), np.promote_types(np.int32, np.float16)
        """),
        unsupported={t: "promote_types" for t in ("torch", "jax", "tf")},
    ),
    Case(
        "numpy-array-creation",
        "numpy",
        _dedent("""
            import numpy as np

            def f(data):
                return (
                    np.asarray(data, dtype="float16"),
                    np.array(data, dtype=np.single),
                    np.asarray(data, dtype=np.float64),
                    np.array(data, dtype="float32"),
                )
        """),
        inputs=[([1.0, 2.5, -3.0],)],
    ),
    Case(
        "numpy-can-cast",
        "numpy",
        _dedent("""
            import numpy as np

            def f():
                return (
                    np.can_cast(np.int8, np.int16, casting="same_kind"),
                    np.can_cast(np.float32, np.int32, casting="same_kind"),
                    np.can_cast(np.float64, np.float32, casting="same_kind"),
                    np.can_cast(np.int32, np.int8, "same_kind"),
                    np.can_cast(np.complex64, np.float32, casting="same_kind"),
                )
        """),
        unsupported={"tf": "can_cast"},
    ),
    Case(
        # NumPy's default casting="safe" (float64 -> float32 is not allowed) is not torch's rule.
        "numpy-can-cast-safe",
        "numpy",
        _dedent("""
            import numpy as np

            def f():
                return np.can_cast(np.float64, np.float32), np.can_cast(np.int8, np.int16, casting="safe")
        """),
        unsupported={t: "can_cast" for t in ("torch", "jax", "tf")},
    ),
]


def _run_g_and_compare(code: str, target: str) -> None:
    """The `is`-comparisons of torch-dtype-is, evaluated directly."""
    for x in (X16, X, Typed((1.0,), "bfloat16")):
        got = run(code, target, (x,), func="g")
        ref = run(_case("torch-dtype-is").code, "torch", (x,), func="g")
        assert got == ref, f"g({x!r}) in {target}: {got} != {ref}\n{code}"


def _case(case_id: str) -> Case:
    return next(c for c in CASES if c.id == case_id)


PARAMS = [pytest.param(case, target, id=f"{case.id}->{target}") for case in CASES for target in case.targets()]


@pytest.mark.parametrize(("case", "target"), PARAMS)
def test_converted_code_computes_the_same(case: Case, target: str) -> None:
    result = transpile(case.code, to=target, from_=case.source)
    assert not result.errors, [d.format() for d in result.errors]
    assert result.source_framework == case.source
    expected_unsupported = case.unsupported.get(target)
    if expected_unsupported is not None:
        messages = diagnostics(result, "unsupported")
        assert any(expected_unsupported in m for m in messages), (messages, result.code)
        assert MARKER in result.code, result.code
        return
    for note in case.notes.get(target, ()):
        assert any(note in m for m in diagnostics(result, "note")), (note, [d.format() for d in result.diagnostics])
    for text in case.absent:
        assert text not in result.code, f"{text!r} left in\n{result.code}"
    reference = case.reference_code or case.code
    for inputs in case.inputs:
        ref = run(reference, case.source, inputs, jax_x64=case.jax_x64)
        got = run(result.code, target, inputs, jax_x64=case.jax_x64)
        assert_same(got, ref, target, f"{case.id}->{target} with inputs {inputs!r}:\n{result.code}\nresult")
    if case.extra is not None:
        case.extra(target, result.code)


@pytest.mark.parametrize(("case", "target"), [p for p in PARAMS if p.values[1] not in p.values[0].unsupported])
def test_convertible_code_reports_nothing_unsupported(case: Case, target: str) -> None:
    """Everything in these cases converts (the test above proves it runs correctly), so the
    tool must not report it as unsupported nor mark it in the output."""
    result = transpile(case.code, to=target, from_=case.source)
    assert not result.unsupported, "\n".join(d.format() for d in result.unsupported) + "\n" + result.code
    assert MARKER not in result.code, result.code


# Which case exercises each op row of mappings/ops/dtype_ops.yaml (op -> (case, source text)).
OP_COVERAGE = {
    "cast": [
        ("torch-cast-methods", "x.half()"),
        ("torch-to-and-type", "x.type(torch.int32)"),
        ("torch-to-device-and-dtype", 'x.to("cpu", torch.float64)'),
        ("jax-astype", "x.astype(jnp.float16)"),
        ("tf-cast", "tf.cast(x, tf.float16)"),
        ("tf-cast", 'keras.ops.cast(x, "float64")'),
        ("numpy-astype-symbols", "x.astype(np.half)"),
    ],
    "cast_like": [("torch-to-and-type", "x.type_as(other)"), ("torch-to-and-type", "x.type(other.type())")],
    "to_device": [("torch-cuda-removed", "x.cuda()"), ("torch-to-device-and-dtype", "x.cpu()")],
    "finfo": [
        ("torch-finfo-iinfo", "torch.finfo(torch.bfloat16)"),
        ("jax-dtype-utilities", "jnp.finfo(jnp.bfloat16)"),
        ("tf-dtype-utilities", "tf.experimental.numpy.finfo(tf.bfloat16)"),
        ("numpy-dtype-utilities", "np.finfo(np.float32)"),
    ],
    "iinfo": [
        ("torch-finfo-iinfo", "torch.iinfo(torch.int16)"),
        ("jax-dtype-utilities", "jnp.iinfo(jnp.int16)"),
        ("tf-dtype-utilities", "np.iinfo(tf.dtypes.as_dtype(tf.uint8).as_numpy_dtype)"),
        ("numpy-dtype-utilities", "np.iinfo(np.int8)"),
    ],
    "is_floating_point": [
        ("torch-predicates", "x.is_floating_point()"),
        ("torch-predicates", "torch.is_floating_point(x)"),
        ("jax-dtype-utilities", "jnp.issubdtype(x.dtype, jnp.floating)"),
        ("tf-dtype-utilities", "x.dtype.is_floating"),
        ("numpy-dtype-utilities", "np.issubdtype(x.dtype, np.floating)"),
    ],
    "float_tensor": [("torch-legacy-constructors", "torch.FloatTensor([0.5, 2.0])")],
    "long_tensor": [("torch-legacy-constructors", "torch.LongTensor([1, 0])")],
    "bool_tensor": [("torch-legacy-constructors", "torch.BoolTensor((True, False))")],
    "legacy_tensor_empty": [("torch-legacy-sizes-or-data", "torch.Tensor()")],
    "legacy_tensor": [("torch-legacy-sizes-or-data", "torch.Tensor(mean)")],
    "legacy_tensor_of_shape": [("torch-legacy-sizes-or-data", "torch.Tensor(x.shape)")],
    "legacy_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.Tensor(2, 0)")],
    "legacy_float_tensor": [("torch-legacy-sizes-or-data", "torch.FloatTensor(mean)")],
    "legacy_float_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.FloatTensor(2, 0)")],
    "legacy_double_tensor": [("torch-legacy-sizes-or-data", "torch.DoubleTensor(mean)")],
    "legacy_double_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.DoubleTensor(2, 0)")],
    "legacy_half_tensor": [("torch-legacy-sizes-or-data", "torch.HalfTensor(mean)")],
    "legacy_half_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.HalfTensor(2, 0)")],
    "legacy_bfloat16_tensor": [("torch-legacy-sizes-or-data", "torch.BFloat16Tensor(mean)")],
    "legacy_bfloat16_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.BFloat16Tensor(2, 0)")],
    "legacy_long_tensor": [("torch-legacy-sizes-or-data", "torch.LongTensor(index)")],
    "legacy_long_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.LongTensor(2, 0)")],
    "legacy_int_tensor": [("torch-legacy-sizes-or-data", "torch.IntTensor(index)")],
    "legacy_int_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.IntTensor(2, 0)")],
    "legacy_short_tensor": [("torch-legacy-sizes-or-data", "torch.ShortTensor(index)")],
    "legacy_short_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.ShortTensor(2, 0)")],
    "legacy_char_tensor": [("torch-legacy-sizes-or-data", "torch.CharTensor(index)")],
    "legacy_char_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.CharTensor(2, 0)")],
    "legacy_byte_tensor": [("torch-legacy-sizes-or-data", "torch.ByteTensor(index)")],
    "legacy_byte_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.ByteTensor(2, 0)")],
    "legacy_bool_tensor": [("torch-legacy-sizes-or-data", "torch.BoolTensor(flags)")],
    "legacy_bool_tensor_sizes": [("torch-legacy-sizes-or-data", "torch.BoolTensor(2, 0)")],
    "dtype_is_floating_point": [("torch-predicates", "x.dtype.is_floating_point")],
    "dtype_is_complex": [("torch-predicates", "x.dtype.is_complex")],
    "is_complex": [
        ("torch-predicates", "torch.is_complex(x)"),
        ("jax-dtype-utilities", "jnp.iscomplexobj(x)"),
        ("tf-dtype-utilities", "x.dtype.is_complex"),
    ],
    "element_size": [
        ("torch-predicates", "x.element_size()"),
        ("jax-dtype-utilities", "x.dtype.itemsize"),
        ("tf-dtype-utilities", "x.dtype.size"),
        ("numpy-dtype-utilities", "x.itemsize"),
    ],
    "as_tensor": [
        ("torch-tensor-as-tensor-from-lists", "torch.as_tensor(data, dtype=torch.bfloat16)"),
        ("jax-array-creation", 'jnp.asarray(data, dtype="float16")'),
        ("tf-tensor-creation", 'tf.convert_to_tensor(data, dtype="float16")'),
        ("numpy-array-creation", 'np.asarray(data, dtype="float16")'),
    ],
    "tensor": [
        ("torch-tensor-as-tensor-from-lists", "torch.tensor(data, dtype=torch.float16)"),
        ("torch-tensor-dtype-parameter", "torch.tensor(data, dtype=dtype)"),
        ("jax-array-creation", "jnp.array(data, dtype=jnp.float32)"),
        ("tf-tensor-creation", "tf.constant(data, dtype=tf.half)"),
        ("numpy-array-creation", "np.array(data, dtype=np.single)"),
    ],
    "as_dtype": [
        ("jax-dtype-utilities", 'jnp.dtype("float16")'),
        ("tf-dtype-utilities", 'tf.dtypes.as_dtype("float16")'),
        ("tf-dtype-utilities", "tf.as_dtype(tf.int8)"),
        ("numpy-dtype-utilities", "np.dtype(np.int8)"),
    ],
    # kornia's `tensor.to(device=device, dtype=dtype)` with `dtype=None`: torch keeps the dtype
    "cast_optional": [
        ("torch-tensor-dtype-parameter", "x.to(dtype=dtype)"),
        ("torch-tensor-dtype-parameter", 'x.to(device="cpu", dtype=dtype)'),
    ],
    # Mapped between torch and JAX only (tf-result-type, numpy-promote-types: unsupported).
    "promote_types": [
        ("torch-promote-types", "torch.promote_types(torch.uint8, torch.int8)"),
        ("jax-promote-types", "jnp.promote_types(jnp.int8, jnp.uint8)"),
    ],
    "can_cast": [
        ("torch-can-cast", "torch.can_cast(torch.int8, torch.int16)"),
        ("jax-can-cast", 'jnp.can_cast(jnp.int8, jnp.int16, casting="same_kind")'),
        ("jax-can-cast", 'jnp.can_cast(jnp.int32, jnp.int8, "same_kind")'),
        ("numpy-can-cast", 'np.can_cast(np.int8, np.int16, casting="same_kind")'),
        ("numpy-can-cast", 'np.can_cast(np.int32, np.int8, "same_kind")'),
    ],
    # Covered by test_default_float_dtype / test_set_default_float64 below.
    "default_float_dtype": [],
    "set_default_float_dtype": [],
}


def test_every_op_row_is_covered() -> None:
    """Each op of the dtype op table is exercised; each listed use really is in its case and is
    rewritten when the case is converted. (tensor_ops.yaml has its own: test_tensor_ops_execute.)"""
    ops = {name for name, op in load_mappings().ops.items() if "dtype_ops.yaml:" in op.origin}
    assert set(OP_COVERAGE) == ops
    for op, uses in OP_COVERAGE.items():
        for case_id, text in uses:
            case = _case(case_id)
            assert text in case.code, (op, case_id, text)
            target = next(t for t in case.targets() if t not in case.unsupported)
            rewrites = transpile(case.code, to=target, from_=case.source).rewrites
            assert any(text in r.before and r.rule == "op-pattern" for r in rewrites), (
                op,
                case_id,
                text,
                target,
                [(r.rule, r.before) for r in rewrites],
            )
    assert {c.source for c in CASES} == set(FRAMEWORKS)


# ----------------------------------------------------------------------------------------------
# Default float dtype: get and set (global state: restored afterwards)
# ----------------------------------------------------------------------------------------------

GET_DEFAULT = {
    "torch": "import torch\n\ndef f():\n    return torch.get_default_dtype()\n",
    "jax": "import jax.numpy as jnp\n\ndef f():\n    return jnp.result_type(float)\n",
    "numpy": "import numpy as np\n\ndef f():\n    return np.result_type(float)\n",
    "tf": "import keras\nimport tensorflow as tf\n\ndef f():\n    return tf.dtypes.as_dtype(keras.config.floatx())\n",
}


def actual_default_float(fw: str) -> str:
    """The dtype a framework gives a new floating-point array, observed directly."""
    if fw == "torch":
        return dtype_name(torch.tensor([1.5]).dtype)
    if fw == "jax":
        return dtype_name(jnp.array([1.5]).dtype)
    if fw == "numpy":
        return dtype_name(np.array([1.5]).dtype)
    return dtype_name(tf.dtypes.as_dtype(keras.config.floatx()))  # what Keras layers/weights get


@pytest.mark.parametrize(
    ("source", "target"), [(s, t) for s in FRAMEWORKS for t in FRAMEWORKS if s != t], ids=lambda v: v
)
def test_default_float_dtype(source: str, target: str) -> None:
    """`torch.get_default_dtype()` and friends: the converted call returns the target
    framework's own default float dtype (float32, but NumPy's is float64)."""
    assert not jax.config.jax_enable_x64
    ref = run(GET_DEFAULT[source], source, (), jax_x64=False)
    assert ref == ("dtype", actual_default_float(source))
    result = transpile(GET_DEFAULT[source], to=target, from_=source)
    assert result.ok, [d.format() for d in result.diagnostics]
    got = run(result.code, target, (), jax_x64=False)
    assert got == ("dtype", actual_default_float(target)), result.code


SET_FLOAT64 = {
    "torch": "import torch\n\ndef f():\n    torch.set_default_dtype(torch.float64)\n",
    "jax": 'import jax\n\ndef f():\n    jax.config.update("jax_enable_x64", True)\n',
    "tf": 'import keras\n\ndef f():\n    keras.config.set_floatx("float64")\n',
}


class _RestoreDefaults:
    def __enter__(self) -> None:
        self.torch = torch.get_default_dtype()
        self.x64 = jax.config.jax_enable_x64
        self.floatx = keras.config.floatx()

    def __exit__(self, *exc: object) -> None:
        torch.set_default_dtype(self.torch)
        jax.config.update("jax_enable_x64", self.x64)
        keras.config.set_floatx(self.floatx)


@pytest.mark.parametrize(
    ("source", "target"), [(s, t) for s in SET_FLOAT64 for t in FRAMEWORKS if s != t], ids=lambda v: v
)
def test_set_default_float64(source: str, target: str) -> None:
    result = transpile(SET_FLOAT64[source], to=target, from_=source)
    assert not result.errors
    if target == "numpy":  # NumPy's default float dtype is fixed
        assert any("set_default_float_dtype" in m for m in diagnostics(result, "unsupported")), result.code
        assert MARKER in result.code
        return
    assert result.ok, [d.format() for d in result.diagnostics]
    with _RestoreDefaults():
        assert actual_default_float(source) == "float32"
        load(SET_FLOAT64[source])["f"]()
        assert actual_default_float(source) == "float64"  # the reference really switches
    with _RestoreDefaults():
        assert actual_default_float(target) == "float32"
        load(result.code)["f"]()
        assert actual_default_float(target) == "float64", result.code
        # and the converted get-default agrees
        getter = transpile(GET_DEFAULT["torch"], to=target, from_="torch").code
        assert load(getter)["f"]() is not None
        assert dtype_name(load(getter)["f"]()) == "float64", getter
    assert actual_default_float(target) == "float32"  # restored
    assert not jax.config.jax_enable_x64


# ----------------------------------------------------------------------------------------------
# String dtypes: every string a framework accepts, as a cast and as a `dtype=` keyword
# ----------------------------------------------------------------------------------------------

_STRING_SOURCES = {
    "jax": ("import jax.numpy as jnp", "x.astype({s!r})", "jnp.asarray(data, dtype={s!r})"),
    "numpy": ("import numpy as np\nimport ml_dtypes", "x.astype({s!r})", "np.asarray(data, dtype={s!r})"),
    "tf": ("import tensorflow as tf", "tf.cast(x, {s!r})", "tf.convert_to_tensor(data, dtype={s!r})"),
}


def _string_module(source: str) -> tuple[str, list[str]]:
    header, cast, make = _STRING_SOURCES[source]
    lines = [header, ""]
    names = []
    for canon, spellings in load_mappings().dtype_strings[source].items():
        for s in spellings:
            name = f"f{len(names)}"
            names.append(name)
            lines += [
                f"def {name}(x, data):  # {canon}",
                f"    return {cast.format(s=s)}, {make.format(s=s)}",
                "",
            ]
    return "\n".join(lines), names


def _string_data(source_code: str, name: str) -> list:
    canon = source_code.split(f"def {name}(x, data):  # ")[1].split("\n")[0]
    if canon == "bool":
        return [True, False, True]
    if canon.startswith(("int", "uint")):
        return [1, 0, 2]
    return [1.0, 0.0, 2.5]


@pytest.mark.parametrize(
    ("source", "target"), [(s, t) for s in _STRING_SOURCES for t in FRAMEWORKS if s != t], ids=lambda v: v
)
def test_string_dtypes_keep_their_meaning(source: str, target: str) -> None:
    """`x.astype("float")` is float64 in NumPy but `tf.cast(x, "float")` is float32; "f4" means
    nothing to TensorFlow. Each string must mean the same dtype after conversion."""
    code, names = _string_module(source)
    result = transpile(code, to=target, from_=source)
    assert not result.errors
    wrong = []
    for name in names:
        inputs = (XPOS, _string_data(code, name))
        ref = run(code, source, inputs, func=name)
        try:
            got = run(result.code, target, inputs, func=name)
            assert_same(got, ref, target)
        except Exception as exc:  # collect every string that goes wrong
            line = next(ln for ln in code.splitlines() if ln.startswith(f"def {name}("))
            body = code.split(line)[1].splitlines()[1].strip()
            why = " ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())[:160]
            wrong.append(f"{body}  # {line.split('# ')[1]}: {type(exc).__name__}: {why}")
    assert not wrong, f"{source} -> {target}:\n" + "\n".join(wrong)


def test_bfloat16_string_runs_in_a_fresh_numpy_process() -> None:
    """NumPy only knows "bfloat16" once ml_dtypes is imported: converted code must import it."""
    code = (
        'import jax.numpy as jnp\n\ndef f(x):\n    return x.astype("bfloat16"), jnp.asarray([1.5], dtype="bfloat16")\n'
    )
    result = transpile(code, to="numpy", from_="jax")
    script = result.code + "\nimport numpy\nprint(*(str(a.dtype) for a in f(numpy.ones(2, dtype=numpy.float32))))\n"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{result.code}\n{proc.stderr[-2000:]}"
    assert proc.stdout.split() == ["bfloat16", "bfloat16"]


# ----------------------------------------------------------------------------------------------
# Semantics that differ between frameworks: the converted value must match or be reported
# ----------------------------------------------------------------------------------------------


def _warned(result, line: int) -> bool:
    return any(d.line == line and d.severity in ("warning", "unsupported", "error") for d in result.diagnostics)


DIVERGENT = [
    # torch.promote_types(int32, float16) is float16 (JAX and Keras agree); NumPy and TF's NumPy API say float64.
    ("torch", "import torch\n\ndef f():\n    return torch.promote_types(torch.int32, torch.float16)\n"),
    ("torch", "import torch\n\ndef f():\n    return torch.promote_types(torch.int64, torch.float32)\n"),
    ("jax", "import jax.numpy as jnp\n\ndef f():\n    return jnp.promote_types(jnp.int32, jnp.float16)\n"),
    # torch.can_cast allows same-kind downcasts; NumPy/JAX use 'safe' casting by default.
    ("torch", "import torch\n\ndef f():\n    return torch.can_cast(torch.float64, torch.float32)\n"),
    ("torch", "import torch\n\ndef f():\n    return torch.can_cast(torch.int32, torch.int8)\n"),
    ("numpy", "import numpy as np\n\ndef f():\n    return np.can_cast(np.float64, np.float32)\n"),
    ("jax", "import jax.numpy as jnp\n\ndef f():\n    return jnp.can_cast(jnp.float64, jnp.float32)\n"),
    # ... but NumPy's "same_kind" is not torch's rule for signed -> unsigned integers:
    # torch.can_cast(int8, uint8) is True, np/jnp.can_cast(int8, uint8, casting="same_kind") False.
    ("torch", "import torch\n\ndef f():\n    return torch.can_cast(torch.int8, torch.uint8)\n"),
    ("numpy", 'import numpy as np\n\ndef f():\n    return np.can_cast(np.int16, np.uint8, casting="same_kind")\n'),
    (
        "jax",
        'import jax.numpy as jnp\n\ndef f():\n    return jnp.can_cast(jnp.int32, jnp.uint8, casting="same_kind")\n',
    ),
    # Creation without a dtype: the default dtype of the data differs between frameworks.
    ("torch", "import torch\n\ndef f():\n    return torch.tensor([1.5, 2.0])\n"),
    ("torch", "import torch\n\ndef f():\n    return torch.as_tensor([1, 2])\n"),
    ("numpy", "import numpy as np\n\ndef f():\n    return np.array([1.5, 2.0])\n"),
    ("tf", "import tensorflow as tf\n\ndef f():\n    return tf.constant([1.5, 2.0])\n"),
    # bfloat16 is a floating type everywhere, but not an np.floating subtype: the NumPy
    # translation must say True for bfloat16 arrays too. (The reverse direction, a NumPy source's
    # np.issubdtype(x.dtype, np.floating), is deliberately read as is_floating_point and so
    # becomes True for bfloat16: see test_numpy_floating_check_becomes_the_bf16_aware_predicate.)
    ("torch", "import torch\n\ndef f(x):\n    return x.is_floating_point()\n"),
    ("jax", "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.issubdtype(x.dtype, jnp.floating)\n"),
    ("tf", "import tensorflow as tf\n\ndef f(x):\n    return x.dtype.is_floating\n"),
]


@pytest.mark.parametrize(
    ("source", "code", "target"),
    [
        pytest.param(s, c, t, id=f"{s}:{c.splitlines()[-1].strip().removeprefix('return ')}->{t}")
        for s, c in DIVERGENT
        for t in FRAMEWORKS
        if t != s
    ],
)
def test_divergent_semantics_match_or_are_reported(source: str, code: str, target: str) -> None:
    """Either the converted code gives the same result, or the tool says it may not. The
    comparison runs the frameworks with their default configuration (JAX without x64)."""
    result = transpile(code, to=target, from_=source)
    assert not result.errors
    inputs = (Typed((1.0, 2.0), "bfloat16"),) if "def f(x)" in code else ()
    ref = run(code, source, inputs, jax_x64=False)
    line = len(code.splitlines())
    if _warned(result, line):
        return  # reported: the user has been told to check this line
    got = run(result.code, target, inputs, jax_x64=False)
    try:
        assert_same(got, ref, target)
    except AssertionError as exc:
        raise AssertionError(
            f"silently different: {source} gives {ref}, converted {target} code gives {got}\n"
            f"{code}\n->\n{result.code}\n{exc}"
        ) from None


# ----------------------------------------------------------------------------------------------
# The semantic decisions behind the op tables, checked against the frameworks themselves
# ----------------------------------------------------------------------------------------------

_LATTICE = (
    "bool", "uint8", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)  # fmt: skip


def _np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else name)


def _jnp_dtype(name: str) -> Any:
    return getattr(jnp, "bool_" if name == "bool" else name)


@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_promote_types_lattices(x64: bool) -> None:
    """Why promote_types is mapped to JAX and Keras only: torch, jnp.promote_types and the
    Keras runtime's torch_promote_types agree on every pair, while NumPy and TF's NumPy API promote
    int32 with float16 to float64 (torch: float16)."""
    from precision_transpiler.runtime.keras.tensor import torch_promote_types

    with jax.enable_x64(x64):
        differ = [
            (a, b)
            for a in _LATTICE
            for b in _LATTICE
            if dtype_name(torch.promote_types(getattr(torch, a), getattr(torch, b)))
            != dtype_name(jnp.promote_types(_jnp_dtype(a), _jnp_dtype(b)))
        ]
    assert differ == []
    keras_differ = [
        (a, b)
        for a in _LATTICE
        for b in _LATTICE
        if dtype_name(torch.promote_types(getattr(torch, a), getattr(torch, b)))
        != tf.as_dtype(torch_promote_types(tf.as_dtype(a), tf.as_dtype(b))).name
    ]
    assert keras_differ == []
    assert dtype_name(torch.promote_types(torch.int32, torch.float16)) == "float16"
    assert dtype_name(np.promote_types(np.int32, np.float16)) == "float64"
    assert dtype_name(tf.experimental.numpy.result_type(tf.int32, tf.float16)) == "float64"


# Pairs on which torch.can_cast and NumPy's casting="same_kind" give different answers.
_CAN_CAST_SIGNED_TO_UNSIGNED = {(a, "uint8") for a in ("int8", "int16", "int32", "int64")}


def test_can_cast_same_kind_is_torchs_rule() -> None:
    """Why torch.can_cast maps to can_cast(..., casting="same_kind"): NumPy and JAX agree with
    torch on every pair but signed -> unsigned integers (torch allows them, see DIVERGENT);
    NumPy's default "safe" casting differs, e.g. float64 -> float32."""
    torch_rule = {(a, b): torch.can_cast(getattr(torch, a), getattr(torch, b)) for a in _LATTICE for b in _LATTICE}
    numpy_rule = {
        (a, b): bool(np.can_cast(_np_dtype(a), _np_dtype(b), casting="same_kind")) for a in _LATTICE for b in _LATTICE
    }
    with jax.enable_x64(True):
        jax_rule = {
            (a, b): bool(jnp.can_cast(_jnp_dtype(a), _jnp_dtype(b), casting="same_kind"))
            for a in _LATTICE
            for b in _LATTICE
        }
    assert {k for k in torch_rule if torch_rule[k] != numpy_rule[k]} == _CAN_CAST_SIGNED_TO_UNSIGNED
    assert {k for k in torch_rule if torch_rule[k] != jax_rule[k]} == _CAN_CAST_SIGNED_TO_UNSIGNED
    assert torch.can_cast(torch.float64, torch.float32) and not np.can_cast(np.float64, np.float32)
    assert not jnp.can_cast(jnp.float32, jnp.float16)


def test_numpy_floating_check_becomes_the_bf16_aware_predicate() -> None:
    """A NumPy source's `np.issubdtype(x.dtype, np.floating)` is read as is_floating_point.
    NumPy itself says False for ml_dtypes.bfloat16 arrays; the converted code deliberately
    gives the target framework's own answer (True: bfloat16 is floating in torch, JAX and TF),
    on bfloat16 and on every other dtype."""
    code = "import numpy as np\n\ndef f(x):\n    return np.issubdtype(x.dtype, np.floating)\n"
    own = {
        "torch": "import torch\n\ndef f(x):\n    return x.is_floating_point()\n",
        "jax": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.issubdtype(x.dtype, jnp.floating)\n",
        "tf": "import tensorflow as tf\n\ndef f(x):\n    return x.dtype.is_floating\n",
    }
    bf16 = Typed((1.0, 2.0), "bfloat16")
    assert run(code, "numpy", (bf16,)) == ("bool", False)  # what NumPy says, and why this differs
    for target, predicate in own.items():
        result = transpile(code, to=target, from_="numpy")
        assert result.ok, [d.format() for d in result.diagnostics]
        for x in (bf16, X, X16, X64, I32, C64, B):
            expected = run(predicate, target, (x,))
            assert run(result.code, target, (x,)) == expected, (target, x, result.code)
        assert run(predicate, target, (bf16,)) == ("bool", True)


_CREATE_WITHOUT_DTYPE = {
    "torch": ("import torch", ("torch.tensor(data)", "torch.as_tensor(data)")),
    "jax": ("import jax.numpy as jnp", ("jnp.array(data)", "jnp.asarray(data)")),
    "numpy": ("import numpy as np", ("np.array(data)", "np.asarray(data)")),
    "tf": ("import tensorflow as tf", ("tf.constant(data)", "tf.convert_to_tensor(data)")),
}


@pytest.mark.parametrize(
    ("source", "target"), [(s, t) for s in FRAMEWORKS for t in FRAMEWORKS if s != t], ids=lambda v: v
)
def test_creation_without_dtype_warns(source: str, target: str) -> None:
    """Each framework infers its own dtype from data (torch.tensor([1.5]) is float32, np.array
    float64, [1] is int64 in torch/NumPy but int32 in JAX/TF): converting creation without
    dtype= warns ("implicit-dtype") on that line; with dtype= it does not. torch -> Keras does
    not warn: the runtime's torch_tensor infers torch's dtypes (checked here on both samples)."""
    header, calls = _CREATE_WITHOUT_DTYPE[source]
    for call in calls:
        code = f"{header}\n\ndef f(data):\n    return {call}\n"
        result = transpile(code, to=target, from_=source)
        warned = [d for d in result.diagnostics if d.code == "implicit-dtype"]
        if (source, target) == ("torch", "tf"):
            assert warned == [], [d.format() for d in result.diagnostics]
            for data in ([1.5], [1], [True]):
                converted, original = load(result.code)["f"](data), load(code)["f"](data)
                got, want = normalize(converted), normalize(original)
                assert (got.dtype, got.values.tolist()) == (want.dtype, want.values.tolist()), (data, result.code)
            continue
        assert [(d.severity, d.line) for d in warned] == [("warning", 4)], [d.format() for d in result.diagnostics]
    # the defaults really do differ (so the warning is not noise); JAX's depend on x64
    assert len(_creation_defaults(source) | _creation_defaults(target)) > 1


def _creation_defaults(fw: str) -> set[tuple[str, str]]:
    """(float dtype, int dtype) a framework gives arrays made from [1.5] and [1], observed."""
    if fw == "torch":
        return {(dtype_name(torch.tensor([1.5]).dtype), dtype_name(torch.tensor([1]).dtype))}
    if fw == "numpy":
        return {(dtype_name(np.array([1.5]).dtype), dtype_name(np.array([1]).dtype))}
    if fw == "tf":
        return {(dtype_name(tf.constant([1.5]).dtype), dtype_name(tf.constant([1]).dtype))}
    seen = set()
    for x64 in (False, True):
        with jax.enable_x64(x64):
            seen.add((dtype_name(jnp.array([1.5]).dtype), dtype_name(jnp.array([1]).dtype)))
    return seen
