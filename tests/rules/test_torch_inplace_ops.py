"""In-place tensor operations converted to JAX compute what torch computes.

Each case is a small torch function that mutates tensors in place (`h.add_(y)`, `y = h.mul_(2)`,
`h[:, 0].add_(1)`, `h[0] = v`, `h[1:] += v`, `self.buf.mul_(m)`). It runs in real torch, is
converted with `transpile(src, to="jax")`, and the converted code runs in real JAX on the same
inputs: float32 results agree to a relative error of 1e-6 (max|jax - torch| / max|torch|).
Every method of the in-place table (mappings/ops/inplace_ops.yaml) has a case. Forms that cannot
be made an assignment are reported with file:line:col and marked in the output.
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
from tests.compare import assert_max_relative, run_both

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax]

RTOL = 1e-6
HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\n"
MARKER = "# ptranspile: unsupported: "

# ----------------------------------------------------------------------------------------------
# Inputs and comparison
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arr:
    shape: tuple[int, ...]
    kind: str = "float32"

    def make(self, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "float32":
            return rng.standard_normal(self.shape).astype(np.float32)
        if self.kind == "positive":
            return rng.uniform(0.5, 3.0, self.shape).astype(np.float32)
        if self.kind == "bool":
            return rng.random(self.shape) > 0.5
        if self.kind == "index":
            return rng.integers(0, 3, self.shape).astype(np.int64)
        if self.kind == "unit":  # inside (-1, 1): atanh, erfinv, asin
            return rng.uniform(-0.9, 0.9, self.shape).astype(np.float32)
        if self.kind == "above1":  # acosh
            return rng.uniform(1.1, 3.0, self.shape).astype(np.float32)
        raise AssertionError(self.kind)


def F32(*shape: int) -> Arr:
    return Arr(shape)


def POS(*shape: int) -> Arr:
    return Arr(shape, "positive")


def BOOL(*shape: int) -> Arr:
    return Arr(shape, "bool")


def IDX(*shape: int) -> Arr:
    return Arr(shape, "index")


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    if isinstance(value, jax.Array):
        return np.asarray(value)
    if isinstance(value, tuple | list):
        return tuple(_plain(v) for v in value)
    return value


def assert_same(got: Any, ref: Any, path: str = "result", rtol: float = RTOL) -> None:
    got, ref = _plain(got), _plain(ref)
    if isinstance(ref, tuple):
        assert isinstance(got, tuple) and len(got) == len(ref), f"{path}: {got!r} vs {ref!r}"
        for i, (g, r) in enumerate(zip(got, ref, strict=True)):
            assert_same(g, r, f"{path}[{i}]", rtol)
        return
    assert isinstance(ref, np.ndarray) and isinstance(got, np.ndarray), f"{path}: {got!r} vs {ref!r}"
    assert got.shape == ref.shape, f"{path}: shape {got.shape} vs {ref.shape}"
    assert got.dtype == ref.dtype or (got.dtype.kind == ref.dtype.kind == "i"), f"{path}: {got.dtype} vs {ref.dtype}"
    if ref.dtype.kind != "f":
        np.testing.assert_array_equal(got, ref, err_msg=path)
        return
    assert_max_relative(got, ref, path, rtol)


def _messages(result: Any) -> list[str]:
    return [d.format() for d in result.diagnostics]


# ----------------------------------------------------------------------------------------------
# Cases: one torch function each
# ----------------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    params: str
    body: str
    inputs: tuple[Any, ...]
    expect: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()  # in-place methods of the table the case exercises

    @property
    def source(self) -> str:
        body = textwrap.indent(textwrap.dedent(self.body).strip("\n"), "    ")
        return f"{HEADER}def f({self.params}):\n{body}\n"


def C(id: str, params: str, body: str, *inputs: Any, expect: tuple[str, ...] = (), methods: str = "") -> Case:
    return Case(id, params, body, inputs, expect, tuple(methods.split()) if methods else ())


def M(method: str, call: str, *inputs: Any, params: str = "x, y", expect: tuple[str, ...] = ()) -> Case:
    """`h = x.clone(); h.<call>; return h`: one in-place method as a statement on a local tensor."""
    return C(
        f"method-{method}-{call}",
        params,
        f"h = x.clone()\nh.{call}\nreturn h",
        *inputs,
        expect=expect,
        methods=method,
    )


METHOD_CASES = [
    M("scatter_", "scatter_(1, torch.argsort(y, dim=1)[:, :2], 0.5)", F32(3, 4), F32(3, 4)),
    M("scatter_", "scatter_(0, torch.argsort(y, dim=0)[:2], y)", F32(3, 4), F32(3, 4)),
    M("scatter_add_", "scatter_add_(1, torch.argsort(y, dim=1), y)", F32(3, 4), F32(3, 4)),
    M(
        "scatter_reduce_",
        'scatter_reduce_(0, torch.argsort(y, dim=0), y, "amax", include_self=False)',
        F32(3, 4),
        F32(3, 4),
    ),
    M("detach_", "detach_()", F32(3, 4), params="x"),
    M("add_", "add_(y)", F32(3, 4), F32(3, 4), expect=("h = jnp.add(h, y).astype(h.dtype)",)),
    M("add_", "add_(1.5)", F32(3, 4), params="x", expect=("h = jnp.add(h, 1.5)\n",)),
    M("add_", "add_(y, alpha=-0.5)", F32(3, 4), F32(4)),
    M("sub_", "sub_(y)", F32(3, 4), F32(3, 4)),
    M("sub_", "sub_(y, alpha=2)", F32(3, 4), F32(3, 4)),
    M("sub_", "subtract_(y)", F32(3, 4), F32(1, 4)),
    M("mul_", "mul_(y)", F32(3, 4), F32(3, 1)),
    M("mul_", "mul_(0.5)", F32(3, 4), params="x", expect=("h = jnp.multiply(h, 0.5)\n",)),
    M("mul_", "multiply_(y)", F32(3, 4), F32(3, 4)),
    M("div_", "div_(y)", F32(3, 4), POS(3, 4)),
    M("div_", "div_(4)", F32(3, 4), params="x"),
    M("div_", 'div_(y, rounding_mode="floor")', F32(3, 4), POS(3, 4)),
    M("div_", 'div_(y, rounding_mode="trunc")', F32(3, 4), POS(3, 4)),
    M("div_", "div_(y, rounding_mode=None)", F32(3, 4), POS(3, 4)),
    M("div_", "divide_(y)", F32(3, 4), POS(3, 4)),
    M("div_", "true_divide_(y)", F32(3, 4), POS(3, 4)),
    M("pow_", "pow_(2)", F32(3, 4), params="x"),
    M("pow_", "pow_(y)", POS(3, 4), F32(3, 4)),
    M("neg_", "neg_()", F32(3, 4), params="x"),
    M("neg_", "negative_()", F32(3, 4), params="x"),
    M("abs_", "abs_()", F32(3, 4), params="x"),
    M("abs_", "absolute_()", F32(3, 4), params="x"),
    M("addcmul_", "addcmul_(y, y)", F32(3, 4), F32(3, 4)),
    M("addcmul_", "addcmul_(y, x, value=0.25)", F32(3, 4), F32(3, 4)),
    M("addcdiv_", "addcdiv_(x, y)", F32(3, 4), POS(3, 4)),
    M("addcdiv_", "addcdiv_(x, y, value=-2)", F32(3, 4), POS(3, 4)),
    M("lerp_", "lerp_(y, 0.3)", F32(3, 4), F32(3, 4)),
    M("lerp_", "lerp_(y, 0.8)", F32(3, 4), F32(3, 4)),
    M("clamp_", "clamp_(-0.5, 0.5)", F32(3, 4), params="x", expect=("jnp.clip(h, min=-0.5, max=0.5)",)),
    M("clamp_", "clamp_(min=0)", F32(3, 4), params="x"),
    M("clamp_", "clamp_(max=0.1)", F32(3, 4), params="x"),
    M("clamp_", "clip_(-1, 1)", F32(3, 4), params="x"),
    M("clamp_", "clamp_(y, y + 1)", F32(3, 4), F32(3, 4)),
    M("clamp_min_", "clamp_min_(0.2)", F32(3, 4), params="x"),
    M("clamp_max_", "clamp_max_(y)", F32(3, 4), F32(3, 4)),
    M("relu_", "relu_()", F32(3, 4), params="x"),
    M("sigmoid_", "sigmoid_()", F32(3, 4), params="x"),
    M("tanh_", "tanh_()", F32(3, 4), params="x"),
    M("exp_", "exp_()", F32(3, 4), params="x"),
    M("sqrt_", "sqrt_()", POS(3, 4), params="x"),
    M("rsqrt_", "rsqrt_()", POS(3, 4), params="x"),
    M("masked_fill_", "masked_fill_(m, -1e9)", F32(3, 4), BOOL(3, 4), params="x, m"),
    M("masked_fill_", 'masked_fill_(m, float("-inf"))', F32(3, 4), BOOL(1, 4), params="x, m"),
    M("fill_", "fill_(2.5)", F32(3, 4), params="x", expect=("h = jnp.full_like(h, 2.5)",)),
    M("zero_", "zero_()", F32(3, 4), params="x", expect=("h = jnp.zeros_like(h)",)),
    M("copy_", "copy_(y)", F32(3, 4), F32(4), expect=("jnp.broadcast_to(y, h.shape).astype(h.dtype)",)),
    M("copy_", "copy_(y, non_blocking=True)", F32(3, 4), F32(3, 4)),
    M("unsqueeze_", "unsqueeze_(1)", F32(3, 4), params="x"),
    M("unsqueeze_", "unsqueeze_(-1)", F32(3, 4), params="x"),
    M("squeeze_", "squeeze_()", F32(3, 1, 4), params="x"),
    M("squeeze_", "squeeze_(1)", F32(3, 1, 4), params="x"),
    M("squeeze_", "squeeze_(0)", F32(3, 1, 4), params="x"),
    M("t_", "t_()", F32(3, 4), params="x", expect=("h = h.T",)),
    M("transpose_", "transpose_(0, 2)", F32(2, 3, 4), params="x"),
]

#: the table's `derived:` methods (their values are their out-of-place methods'), with inputs
#: in each function's domain
_UNIT, _ABOVE1 = Arr((3, 4), "unit"), Arr((3, 4), "above1")
_DERIVED_UNARY = {
    **dict.fromkeys(["acos_", "arccos_", "arcsin_", "asin_", "atanh_", "arctanh_", "erfinv_"], _UNIT),
    **dict.fromkeys(["acosh_", "arccosh_"], _ABOVE1),
    **dict.fromkeys(["log_", "log1p_", "log2_", "reciprocal_"], POS(3, 4)),
    **dict.fromkeys(
        ["arcsinh_", "asinh_", "arctan_", "atan_", "ceil_", "cos_", "cosh_", "deg2rad_", "erf_", "expm1_"], F32(3, 4)
    ),
    **dict.fromkeys(["floor_", "frac_", "rad2deg_", "round_", "sign_", "sin_", "sinh_", "square_", "tan_"], F32(3, 4)),
}
METHOD_CASES += [M(m, f"{m}()", arr, params="x") for m, arr in _DERIVED_UNARY.items()]
METHOD_CASES += [
    M("nan_to_num_", "nan_to_num_(0.0)", F32(3, 4), params="x"),
    M("atan2_", "atan2_(y)", F32(3, 4), F32(3, 4)),
    M("arctan2_", "arctan2_(y)", F32(3, 4), F32(1, 4)),
    M("remainder_", "remainder_(y)", F32(3, 4), POS(3, 4)),
    M("cumsum_", "cumsum_(1)", F32(3, 4), params="x"),
    M("cumprod_", "cumprod_(dim=0)", F32(3, 4), params="x"),
    M("tril_", "tril_()", F32(4, 4), params="x"),
    M("triu_", "triu_(1)", F32(4, 4), params="x", expect=("h = jnp.triu(h, k=1)",)),
    M("fill_diagonal_", "fill_diagonal_(2.5)", F32(3, 4), params="x"),
    M("fill_diagonal_", "fill_diagonal_(-1, wrap=True)", F32(7, 3), params="x"),
    M("index_add_", "index_add_(1, torch.tensor([0, 0, 3]), y)", F32(3, 4), F32(3, 3)),
    # comparisons and logical ops keep the receiver's dtype (float 0/1 here, as torch)
    M("eq_", "eq_(y)", F32(3, 4), F32(3, 4), expect=("h = jnp.equal(h, y).astype(h.dtype)",)),
    M("ne_", "ne_(0.5)", F32(3, 4), params="x"),
    M("gt_", "gt_(y)", F32(3, 4), F32(1, 4)),
    M("ge_", "ge_(0)", F32(3, 4), params="x"),
    M("lt_", "lt_(y)", F32(3, 4), F32(3, 4)),
    M("le_", "le_(0.1)", F32(3, 4), params="x"),
    M("logical_not_", "logical_not_()", F32(3, 4), params="x", expect=("jnp.logical_not(h).astype(h.dtype)",)),
    M("logical_and_", "logical_and_(y)", F32(3, 4), F32(3, 4)),
    M("logical_or_", "logical_or_(y > 0)", F32(3, 4), F32(3, 4)),
    M("logical_xor_", "logical_xor_(y)", F32(3, 4), F32(3, 4)),
]

FORM_CASES = [
    # -- the value of an in-place call
    C(
        "value-assigned",
        "x",
        """
        h = x.clone()
        y = h.mul_(2)
        return h, y
        """,
        F32(3, 4),
        expect=("h = y = jnp.multiply(h, 2)",),
    ),
    C(
        "value-assigned-to-itself-and-tuple-targets",
        "x",
        """
        h = x.clone()
        h = h.mul_(2)
        a = b = h.sub_(1)
        return h, a, b
        """,
        F32(3, 4),
        expect=("    h = jnp.multiply(h, 2)\n", "h = a = b = jnp.subtract(h, 1)"),
    ),
    C(
        "value-returned",
        "x, y",
        """
        h = x.clone()
        return h.add_(y, alpha=3)
        """,
        F32(3, 4),
        F32(3, 4),
        expect=("return jnp.add(h, jnp.multiply(3, y)).astype(h.dtype)",),
    ),
    C(
        "statement-suite-and-several-on-a-line",
        "x, y",
        """
        h = x.clone()
        if True: h.mul_(y)
        h.add_(1); h.relu_()
        return h
        """,
        F32(3, 4),
        F32(3, 4),
    ),
    C(
        "chain-of-statements-in-a-loop",
        "x",
        """
        h = x.clone()
        for i in range(3):
            h.mul_(0.5)
            h.add_(i)
        return h
        """,
        F32(3, 4),
    ),
    C(
        "inside-an-expression-moved-before-its-statement",
        "x, m",
        """
        idx = torch.arange(x.shape[1])
        mask = m.clone()
        idx.sub_(mask.logical_not_().cumsum(dim=0))
        h = x.clone()
        total = torch.tanh(h.mul_(2)).sum() + 1
        return idx, mask, h, total, torch.isnan(x).logical_not_()
        """,
        F32(3, 4),
        BOOL(4),
        expect=("mask = jnp.logical_not(mask).astype(mask.dtype); idx = ",),
    ),
    C(
        "value-of-a-returned-conditional",
        "x, inplace",
        """
        h = x.clone()
        return h.mul_(h.sigmoid()) if inplace else h.mul(h.sigmoid())
        """,
        F32(3, 4),
        True,
    ),
    C(
        "temporary-receiver-inside-an-expression",
        "x, y",
        """
        return (x - y).abs_().sum(), torch.tanh((x * 2).clamp_(0, 1))
        """,
        F32(3, 4),
        F32(3, 4),
        expect=("jnp.abs((x - y))",),
    ),
    C(
        "chain-on-a-fresh-tensor",  # the usual causal mask: each link's receiver is the fresh tensor
        "x",
        """
        n = x.shape[0]
        mask = torch.empty(n, n).fill_(-float("inf")).triu_(1)
        ones = torch.zeros(n).add_(1).mul_(x[:, 0])
        return x + mask.clamp(min=-1.0), ones
        """,
        F32(4, 4),
    ),
    C(
        "chain-on-a-method-result",  # kornia's `hi = hi.long().clamp_(0, 5)`: the allocated result only
        "x",
        """
        hi = torch.floor(x * 6) % 6
        hi = hi.long().clamp_(0, 5)
        a = x.abs().clamp_(0, 1)
        return hi, a, x.exp().mul_(2).sum()
        """,
        F32(3, 4),
    ),
    # -- in-place methods on a basic-indexed view
    C(
        "view-receiver",
        "x, y",
        """
        h = x.clone()
        h[:, 0].add_(1)
        h[1].mul_(y[1])
        h[..., -1].clamp_(0, 0.1)
        h[0, 1:3].zero_()
        h[2, None].copy_(y[0])
        h[1:, :2].fill_(7)
        return h
        """,
        F32(3, 4),
        F32(3, 4),
        expect=("h = h.at[:, 0].set(jnp.add(h[:, 0], 1))", "h = h.at[2, None].set(y[0])"),
        methods="add_ mul_ clamp_ zero_ copy_ fill_",
    ),
    # -- subscript assignment
    C(
        "subscript-set",
        "x, y",
        """
        h = torch.zeros(3, 4)
        h[0] = 1.0
        h[:, 1] = y[:, 1]
        h[1:, 2:] = x[1:, 2:]
        return h
        """,
        F32(3, 4),
        F32(3, 4),
        expect=("h = h.at[0].set(1.0)", "h = h.at[:, 1].set(y[:, 1])"),
    ),
    C(
        "subscript-augmented-basic",
        "x, y",
        """
        h = x.clone()
        h[0] += 1.0
        h[:, 1] -= y[:, 1]
        h[1:, 2:] *= 3
        h[2] /= 4
        h[1, :] **= 2
        return h
        """,
        F32(3, 4),
        F32(3, 4),
        expect=(
            "h = h.at[0].add(1.0)",
            "h = h.at[:, 1].subtract(y[:, 1])",
            "h = h.at[1:, 2:].multiply(3)",
            "h = h.at[2].divide(4)",
            "h = h.at[1, :].power(2)",
        ),
    ),
    C(
        "subscript-augmented-tensor-index-does-not-accumulate",
        "x, idx",
        """
        h = x.clone()
        h[idx] += 1.0
        h[idx, 0] -= 2 * x[idx, 0]
        return h
        """,
        F32(3, 4),
        IDX(5),  # repeated indices: torch adds once, as .at[].set(h[idx] + v) does
        expect=("h = h.at[idx].set(h[idx] + 1.0)", "h = h.at[idx, 0].set(h[idx, 0] - (2 * x[idx, 0]))"),
    ),
    C(
        "subscript-set-with-a-mask-and-floor-divide",
        "x, m",
        """
        h = x.clone()
        h[m] = 0.0
        h[0] //= 0.5
        return h
        """,
        F32(3, 4),
        BOOL(3, 4),
        expect=("h = h.at[m].set(0.0)", "h = h.at[0].set(h[0] // 0.5)"),
    ),
    C(
        "annotated-parameter-is-a-tensor",
        "x: torch.Tensor",
        """
        x[0] = 5.0
        return x
        """,
        F32(3, 4),
        expect=("x = x.at[0].set(5.0)",),
    ),
    C(
        "positional-encoding",
        "n",
        """
        pe = torch.zeros(n, 6)
        position = torch.arange(0, n, dtype=torch.float32).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, 6, 2).float() * (-4.0 / 6))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe.unsqueeze_(0)
        return pe
        """,
        5,
        methods="unsqueeze_",
    ),
    # -- lists and dicts are left alone
    C(
        "lists-and-dicts-untouched",
        "x",
        """
        out = {}
        out["a"] = x
        parts = [x, x]
        parts[1] = x * 2
        counts = [0, 0]
        counts[0] += 1
        return out["a"], parts[1], torch.tensor(counts)
        """,
        F32(2, 2),
        expect=('out["a"] = x', "parts[1] = x * 2", "counts[0] += 1"),
    ),
    # -- `inplace=True` arguments and layers
    C(
        "inplace-keyword-of-functional-relu",
        "x",
        """
        h = x * 2
        h = F.relu(h, inplace=True)
        return F.relu6(h, True)
        """,
        F32(3, 4),
    ),
]

CASES = METHOD_CASES + FORM_CASES


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_converted_code_computes_what_torch_computes(case: Case) -> None:
    result = transpile(case.source, to="jax", path="case.py")
    messages = _messages(result)
    assert not result.unsupported and not result.errors, messages
    converted_body = result.code.split("def f(", 1)[1]
    assert "torch." not in converted_body and "_(" not in converted_body, result.code
    for text in case.expect:
        assert text in result.code, (text, result.code)

    assert_same(*run_both(case.id, case.source, result.code, case.inputs))


def test_every_inplace_method_of_the_table_has_a_case() -> None:
    table = {
        p.method_name
        for op in load_mappings().ops.values()
        if "inplace_ops.yaml:" in op.origin
        for p in op.patterns["torch"]
    }
    covered = {f"{c.body.split('h.', 1)[-1].split('(', 1)[0]}" for c in METHOD_CASES}
    assert table - covered == set()
    ops = {op.name for op in load_mappings().ops.values() if "inplace_ops.yaml:" in op.origin}
    assert ops - {m for c in CASES for m in c.methods} == set()


def test_the_inplace_table_is_never_read_by_the_op_pattern_rule_alone() -> None:
    # its patterns are emit-only for every framework: the op-pattern rule alone would convert
    # `h.add_(y)` to its value and drop the mutation; only the in-place rule reads them
    table = load_mappings()
    inplace = [op for op in table.ops.values() if "inplace_ops.yaml:" in op.origin]
    assert inplace
    for op in inplace:
        for framework in ("torch", "jax", "tf"):
            assert op.patterns[framework] and all(p.emit_only for p in op.patterns[framework]), (op.name, framework)


# ----------------------------------------------------------------------------------------------
# dtypes: an in-place op keeps the receiver's dtype
# ----------------------------------------------------------------------------------------------


def test_inplace_ops_keep_the_receivers_dtype() -> None:
    src = HEADER + textwrap.dedent(
        """
        def f(x, y):
            h = x.half()
            h.add_(y)
            h.mul_(y)
            h.clamp_(y - 1, y + 1)
            g = x.half()
            g[0] += y[0]
            return h, g
        """
    )
    result = transpile(src, to="jax")
    assert not result.unsupported, _messages(result)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    reference: dict[str, Any] = {}
    exec(compile(src, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    expected = reference["f"](torch.from_numpy(x), torch.from_numpy(y))
    got = converted["f"](jnp.asarray(x), jnp.asarray(y))
    assert [np.asarray(g).dtype for g in got] == [np.float16, np.float16]
    assert_same(got, expected, rtol=2e-3)


# ----------------------------------------------------------------------------------------------
# Module attributes: buffers and parameters are nnx Variables, updated with [...] =
# ----------------------------------------------------------------------------------------------

MODULE = HEADER + textwrap.dedent(
    """
    class Ema(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("avg", torch.zeros(n))
            self.register_buffer("count", torch.zeros(()), persistent=False)
            self.bias = nn.Parameter(torch.zeros(n))
            self.scale = torch.ones(n)

        def forward(self, x):
            self.avg.mul_(0.9)
            self.avg.add_(x.mean(0), alpha=0.1)
            self.count.add_(1)
            self.scale.mul_(1.5)
            self.bias.clamp_(-1, 1)
            return x - self.avg + self.bias, self.scale * 1
    """
)


def test_buffer_and_attribute_updates_match_torch_eagerly_and_under_jit() -> None:
    from flax import nnx

    result = transpile(MODULE, to="jax", path="ema.py")
    assert not result.unsupported and not result.errors, _messages(result)
    code = result.code
    assert "self.avg[...] = jnp.multiply(self.avg, 0.9)" in code
    assert "self.avg[...] = jnp.add(self.avg, jnp.multiply(0.1, jnp.mean(x, axis=0)))" in code
    assert "self.count[...] = jnp.add(self.count, 1)" in code
    assert "self.bias[...] = jnp.clip(self.bias, min=-1, max=1)" in code
    assert "self.scale = jnp.multiply(self.scale, 1.5)" in code  # a plain array attribute: rebound

    reference: dict[str, Any] = {}
    exec(compile(MODULE, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(code, "c.py", "exec"), converted)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(3)]

    torch_model = reference["Ema"](3)
    with torch.no_grad():
        expected = [torch_model(torch.from_numpy(x)) for x in xs]
    eager = converted["Ema"](3)
    got = [eager(jnp.asarray(x)) for x in xs]
    for g, e in zip(got, expected, strict=True):
        assert_same(g, e)
    assert_same(eager.avg[...], torch_model.avg)
    assert_same(eager.count[...], torch_model.count)
    assert type(eager.avg).__name__ == "Buffer" and isinstance(eager.bias, nnx.Param)

    jitted = converted["Ema"](3)

    @nnx.jit
    def step(model: Any, x: jax.Array) -> Any:
        return model(x)

    got = [step(jitted, jnp.asarray(x)) for x in xs]
    for g, e in zip(got, expected, strict=True):
        assert_same(g, e)
    assert_same(jitted.avg[...], torch_model.avg)
    assert type(jitted.avg).__name__ == "Buffer"


# ----------------------------------------------------------------------------------------------
# Initialisation stays the torch-inplace-init rule's
# ----------------------------------------------------------------------------------------------


def test_zero_and_fill_on_parameters_stay_initialisation() -> None:
    src = HEADER + textwrap.dedent(
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
                self.pos = nn.Parameter(torch.empty(1, 3).zero_())
                self.fc.bias.data.zero_()
                for p in self.parameters():
                    p.fill_(0.5)

            def _init_weights(self, w):
                w.zero_()

            def forward(self, x):
                return self.fc(x)


        def init(m):
            w = m.weight
            w.fill_(1.0)
        """
    )
    result = transpile(src, to="jax", path="net.py")
    code = result.code
    # only the fresh tensor's `zero_()` is the in-place rule's: a value (nothing else holds that tensor)
    inplace = [r.before for r in result.rewrites if r.rule == "torch-inplace-ops"]
    assert inplace == ["torch.empty(1, 3).zero_()"], result.rewrites
    assert "jnp.zeros_like(jnp.empty((1, 3)))" in code
    assert "jnp.zeros_like(w)" not in code and "full_like" not in code
    notes = [d.format() for d in result.diagnostics if d.code == "init-dropped"]
    assert len(notes) == 4, _messages(result)


# ----------------------------------------------------------------------------------------------
# What is reported
# ----------------------------------------------------------------------------------------------

UNSUPPORTED = [
    # under a condition or `and`/`or` (it may not run): not moved before the statement
    ("    h = x * 1\n    return g(h.add_(1)) if i else h\n", 6, 14, "h.add_(...) used inside an expression"),
    ("    h = x * 1\n    s = h.add_(1).sum() or y\n", 6, 9, "h.add_(...) used inside an expression"),
    # the statement reads h before the call: moving the call would change what it reads
    ("    h = x * 1\n    s = h.sum() + h.add_(1).sum()\n", 6, 19, "h.add_(...) used inside an expression"),
    ("    (x + 1).add_(y)\n", 5, 5, "only a plain name, a basic index of one, or an attribute of self"),
    # a cast may return x itself (x.float() of a float tensor): changed in place, x changes too
    ("    b = x.float().clamp_(0, 1)\n", 5, 9, "only a plain name, a basic index of one, or an attribute of self"),
    ("    h = x * 1\n    h[i].add_(1)\n", 6, 5, "with an index that may be a tensor"),
    ("    h = x * 1\n    y = h[0].add_(1)\n", 6, 9, "the value of h[0].add_(...)"),
    ("    h = x * 1\n    h.add_(1, 2, 3)\n", 6, 5, "its arguments match no form of the in-place table"),
    ("    h = torch.zeros(3)\n    h[f(i)] += 1\n", 6, 5, "an augmented assignment whose index has calls"),
    ("    h = torch.zeros(3)\n    h[0] = g[0] = 1\n", 6, 5, "a subscript in a chained assignment"),
    ("    global G\n    return G.add_(1)\n", 6, 12, "of a global or nonlocal name"),
]


@pytest.mark.parametrize(("body", "line", "col", "message"), UNSUPPORTED, ids=[u[3][:40] for u in UNSUPPORTED])
def test_unsupported_forms_are_reported_with_position(body: str, line: int, col: int, message: str) -> None:
    src = "import torch\n\n\ndef f(x, i, y):\n" + body
    result = transpile(src, to="jax", path="m.py")
    found = [d for d in result.unsupported if message in d.message]
    assert found, _messages(result)
    assert found[0].format().startswith(f"m.py:{line}:{col}: unsupported:"), found[0].format()
    assert MARKER in result.code and message in result.code.split(MARKER, 1)[1], result.code


MODULE_UNSUPPORTED = [
    ("self.other.add_(1)", 14, 9, "self.other is not assigned or registered in this class"),
    ("self.buf.unsqueeze_(0)", 14, 9, "changes the shape of a buffer or parameter"),
    ("y = self.buf.add_(1)", 14, 13, "the value of self.buf.add_(...) on a module attribute"),
    ("self.add_(1)", 14, 9, "on the module itself"),
]


@pytest.mark.parametrize(
    ("statement", "line", "col", "message"), MODULE_UNSUPPORTED, ids=[u[0] for u in MODULE_UNSUPPORTED]
)
def test_unsupported_module_forms_are_reported_with_position(statement: str, line: int, col: int, message: str) -> None:
    src = HEADER + textwrap.dedent(
        f"""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("buf", torch.zeros(3))
                self.w = nn.Parameter(torch.zeros(3))

            def forward(self, x):
                {statement}
                return x
        """
    )
    result = transpile(src, to="jax", path="net.py")
    found = [d for d in result.unsupported if message in d.message]
    assert found, _messages(result)
    assert found[0].format().startswith(f"net.py:{line}:{col}: unsupported:"), found[0].format()
    assert MARKER in result.code


def test_mutating_a_parameter_says_the_caller_no_longer_sees_it() -> None:
    src = "import torch\n\n\ndef f(x):\n    x.add_(1)\n    x.mul_(2)\n    return x\n"
    result = transpile(src, to="jax", path="m.py")
    notes = [d for d in result.diagnostics if d.code == "inplace-parameter"]
    assert len(notes) == 1 and notes[0].format().startswith("m.py:5:5: note:"), _messages(result)
    assert "x = jnp.add(x, 1)" in result.code and not result.unsupported


def test_relu_layers_with_inplace_true_convert_and_run() -> None:
    src = HEADER + textwrap.dedent(
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.ReLU(inplace=True)
                self.act6 = nn.ReLU6(inplace=True)
                self.lrelu = nn.LeakyReLU(0.1, inplace=True)

            def forward(self, x):
                return self.lrelu(self.act6(self.act(x) * 10 - 5) - 3)
        """
    )
    result = transpile(src, to="jax", path="net.py")
    assert not result.unsupported and not result.errors, _messages(result)
    reference: dict[str, Any] = {}
    exec(compile(src, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    with torch.no_grad():
        expected = reference["Net"]()(torch.from_numpy(x))
    assert_same(converted["Net"]()(jnp.asarray(x)), expected)


ALIASED = [
    ("y = h.mul_(2)\n    h.add_(1)\n    return h, y", 7, "h shares memory with y"),
    ("y = h.view(-1)\n    h.zero_()\n    return h, y", 7, "h shares memory with y"),
    ("y = h\n    z = y.t()\n    h[0] = 1.0\n    return h, z", 8, "h shares memory with z"),
    ("y = h[0]\n    y.mul_(2)\n    return h, y", 7, "y shares memory with h"),
    ("y = h.view(-1)\n    h = h.t()\n    h.mul_(2)\n    return y", 8, "h shares memory with y"),
]


@pytest.mark.parametrize(("body", "line", "message"), ALIASED, ids=[a[0].split("\n")[0] for a in ALIASED])
def test_an_inplace_change_read_through_another_name_is_reported(body: str, line: int, message: str) -> None:
    """The other name is read after the change (returned here; mamba.py's parallel scan reads
    its inputs after writing through views of them): the converted code cannot give torch's
    result, so it is reported, where it happens."""
    src = f"import torch\n\n\ndef f(x):\n    h = x.clone()\n    {body}\n"
    result = transpile(src, to="jax", path="m.py")
    reports = [d for d in result.diagnostics if d.code == "inplace-alias"]
    assert len(reports) == 1 and message in reports[0].message, _messages(result)
    assert reports[0].format().startswith(f"m.py:{line}:5: unsupported:"), reports[0].format()


LOOPED = [
    "for a, c in zip(x.split(2), h.chunk(2)):\n        c.mul_(a)",
    "for i, row in enumerate(h):\n        row.mul_(i)",
    "for c in h.unbind(0):\n        c.div_(2)",
    # a split whose sizes are a list (chunks of one `split(size)` are written back instead:
    # tests/rules/test_torch_split_write_back.py)
    "pairs = zip(x.split(2), h.split([1, 1]))\n    for i, (a, c) in enumerate(pairs):\n        c.add_(a)",
]


@pytest.mark.parametrize("loop", LOOPED, ids=[loop.split(":")[0] for loop in LOOPED])
def test_an_inplace_change_of_a_loop_target_read_through_what_it_iterates_is_reported(loop: str) -> None:
    """A loop over a tensor's rows or over `split`/`chunk`/`unbind` chunks binds views of it
    (`for c in h.unbind(0): c.div_(2)`, then `return h`): the converted write changes the loop
    variable only, and what the write-back of split chunks cannot be sure of is reported."""
    src = f"import torch\n\n\ndef f(x):\n    h = x.clone()\n    {loop}\n    return h\n"
    result = transpile(src, to="jax", path="m.py")
    reports = [d for d in result.diagnostics if d.code == "inplace-alias"]
    assert len(reports) == 1 and "shares memory with h" in reports[0].message, _messages(result)
    line = 6 + loop.count("\n")
    assert reports[0].format().startswith(f"m.py:{line}:9: unsupported:"), reports[0].format()


def test_loops_over_layers_ranges_and_fresh_values_are_not_aliases() -> None:
    src = (
        "import torch\n\n\ndef f(x, layers):\n    h = x.clone()\n    for layer in layers:\n        h = layer(h)\n"
        "    for i in range(3):\n        h.add_(i)\n    for c in [h * 2, h + 1]:\n        c.mul_(2)\n    return h\n"
    )
    result = transpile(src, to="jax", path="m.py")
    assert not [d for d in result.diagnostics if d.code == "inplace-alias"], _messages(result)


WARNED = [
    ("y = h.view(-1)\n    y.add_(1)\n    return y", 7, "y may share memory with h"),
    ("y = h\n    h.mul_(2)\n    return h", 7, "h may share memory with y"),
]


@pytest.mark.parametrize(("body", "line", "message"), WARNED, ids=[a[0].split("\n")[0] for a in WARNED])
def test_an_inplace_change_the_other_name_never_reads_again_is_warned_about(body: str, line: int, message: str) -> None:
    src = f"import torch\n\n\ndef f(x):\n    h = x.clone()\n    {body}\n"
    result = transpile(src, to="jax", path="m.py")
    warnings = [d for d in result.diagnostics if d.code == "inplace-alias"]
    assert len(warnings) == 1 and message in warnings[0].message, _messages(result)
    assert warnings[0].format().startswith(f"m.py:{line}:5: warning:"), warnings[0].format()
    assert not result.unsupported


def test_no_alias_warning_when_the_view_is_taken_after_the_change() -> None:
    src = (
        "import torch\n\n\ndef f(x):\n    h = x.clone()\n    h.add_(1)\n    y = h.view(-1)\n    h = h * 2\n"
        "    h.mul_(2)\n    y = y + 1\n    y.add_(h)\n    return y\n"
    )
    result = transpile(src, to="jax", path="m.py")
    assert not [d for d in result.diagnostics if d.severity != "note"], _messages(result)


def test_parts_unpacked_from_one_value_do_not_share_memory_with_each_other() -> None:
    # lie-transformer's GlobalPool: `coords, vals, mask = x`, then `vals.masked_fill_(...)` and a
    # read of `mask`; each part may share memory with `x`, not with the other parts
    src = (
        "import torch\n\n\ndef pool(x):\n    coords, vals, mask = x\n    vals.masked_fill_(~mask[..., None], 0.0)\n"
        "    return vals.sum(1) / mask.sum(-1, keepdim=True)\n"
    )
    result = transpile(src, to="jax", path="m.py")
    reports = [d for d in result.diagnostics if d.code == "inplace-alias"]
    assert [(d.severity, d.message.split(" (")[0]) for d in reports] == [("warning", "vals may share memory with x")]
