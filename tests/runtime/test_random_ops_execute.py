"""torch's random functions converted to JAX and Keras draw what torch draws.

The values cannot match torch's (its generator is not shared), so each case checks what torch
guarantees: shape, dtype, range, the distribution's moments on many samples (within 6 standard
errors: a real bug moves them much further), permutations being permutations, zero weights
never drawn, and that two draws differ. The JAX cases also check where the key comes from: a
module's own stream (its `__init__` makes it; every call advances it, under `nnx.jit` too), the
builder's rngs, and the process-wide keys of a free function, which the converter warns about.
Every op of mappings/ops/random_ops.yaml is exercised on both targets.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

from precision_transpiler import load_mappings, transpile
from precision_transpiler.rules import op_patterns_any

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

HEADER = "import torch\nimport torch.nn.functional as F\n\n\n"
N = 20000  # samples for the moment checks

# (id, expression over `w` (weights (3, 5), row 1 with zeros) and `x` (float32 (4, 6)), check)
CASES: list[tuple[str, str, str]] = [
    ("randn", "torch.randn(N)", "normal"),
    ("randn-sizes", "torch.randn(2, 3, dtype=torch.float16)", "shape(2,3):float16"),
    ("randn-tuple", "torch.randn((4, 2), device='cpu', requires_grad=False)", "shape(4,2):float32"),
    ("rand", "torch.rand(N)", "uniform01"),
    ("rand-size-kw", "torch.rand(size=(3, 2))", "shape(3,2):float32"),
    ("randint", "torch.randint(3, 9, (N,))", "ints[3,9)"),
    ("randint-high", "torch.randint(4, size=(N,))", "ints[0,4)"),
    ("randn-like", "torch.randn_like(x.new_zeros(N))", "normal"),
    ("rand-like", "torch.rand_like(x)", "shape(4,6):float32"),
    ("randint-like", "torch.randint_like(x, 2, 7)", "shape(4,6):float32"),
    ("randperm", "torch.randperm(50)", "permutation50"),
    ("multinomial", "torch.multinomial(w, 3)", "distinct-nonzero"),
    ("multinomial-method", "w.multinomial(2, replacement=True)", "nonzero(3,2)"),
    ("bernoulli", "torch.bernoulli(x.new_full((N,), 0.25))", "bernoulli0.25"),
    ("bernoulli-p", "x.new_zeros(N).bernoulli(0.75)", "bernoulli0.75"),
    ("bernoulli-inplace", "x.new_empty(N).bernoulli_(0.5)", "bernoulli0.5"),
    ("normal-size", "torch.normal(2.0, 3.0, size=(N,))", "normal(2,3)"),
    ("normal-tensors", "torch.normal(x.new_full((N,), -1.0), 0.5)", "normal(-1,0.5)"),
    ("normal-inplace", "x.new_empty(N).normal_(1.0, 2.0)", "normal(1,2)"),
    ("uniform-inplace", "x.new_empty(N).uniform_(-2, 3)", "uniform(-2,3)"),
    ("exponential-inplace", "x.new_empty(N).exponential_(2.0)", "exponential2"),
    ("dropout", "F.dropout(x.new_ones(N), 0.25)", "dropout0.25"),
]


def _source(expr: str) -> str:
    return HEADER + f"N = {N}\n\n\ndef f(w, x):\n    return {expr}\n"


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    w = np.array([[1, 2, 0, 3, 4], [0, 0, 5, 0, 1], [1, 1, 1, 1, 1]], np.float32)
    return w, np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)


def _close(value: float, expected: float, sd: float, n: int) -> None:
    assert abs(value - expected) <= 6 * sd / np.sqrt(n), (value, expected)


def _check(kind: str, out: np.ndarray, w: np.ndarray) -> None:
    if kind.startswith("shape"):
        shape, dtype = kind[len("shape") :].split(":")
        assert out.shape == tuple(int(s) for s in shape.strip("()").split(",")) and out.dtype == np.dtype(dtype)
        assert np.unique(out).size > 1
        return
    n = out.size
    if kind == "normal":
        assert out.dtype == np.float32
        _close(out.mean(), 0.0, 1.0, n)
        assert abs(out.std() - 1.0) < 0.05
    elif kind.startswith("normal("):
        mean, sd = (float(v) for v in kind[len("normal(") : -1].split(","))
        _close(out.mean(), mean, sd, n)
        assert abs(out.std() / sd - 1.0) < 0.05
    elif kind == "uniform01":
        assert out.min() >= 0.0 and out.max() < 1.0
        _close(out.mean(), 0.5, np.sqrt(1 / 12), n)
    elif kind.startswith("uniform("):
        a, b = (float(v) for v in kind[len("uniform(") : -1].split(","))
        assert out.min() >= a and out.max() < b
        _close(out.mean(), (a + b) / 2, (b - a) / np.sqrt(12), n)
    elif kind.startswith("ints["):
        low, high = (int(v) for v in kind[len("ints[") : -1].split(","))
        assert np.issubdtype(out.dtype, np.integer) and set(np.unique(out)) == set(range(low, high))
    elif kind == "permutation50":
        assert np.issubdtype(out.dtype, np.integer) and sorted(out.tolist()) == list(range(50))
        assert out.tolist() != list(range(50))
    elif kind == "distinct-nonzero":
        assert out.shape == (3, 3) and np.issubdtype(out.dtype, np.integer)
        for row, drawn in zip(w, out, strict=True):
            assert len(set(drawn.tolist())) == 3
            assert all(row[i] > 0 for i in drawn[: int((row > 0).sum())])
    elif kind == "nonzero(3,2)":
        assert out.shape == (3, 2) and all(w[r, i] > 0 for r in range(3) for i in out[r])
    elif kind.startswith("bernoulli"):
        p = float(kind[len("bernoulli") :])
        assert set(np.unique(out).tolist()) == {0.0, 1.0} and out.dtype == np.float32
        _close(out.mean(), p, np.sqrt(p * (1 - p)), n)
    elif kind == "exponential2":
        assert out.min() >= 0.0
        _close(out.mean(), 0.5, 0.5, n)
    elif kind == "dropout0.25":
        kept = np.unique(out[out != 0])
        assert kept.size == 1 and np.isclose(kept[0], 1 / 0.75)
        _close((out == 0).mean(), 0.25, np.sqrt(0.25 * 0.75), n)
    else:
        raise AssertionError(kind)


def _run(code: str, target: str) -> tuple[np.ndarray, np.ndarray]:
    namespace: dict[str, object] = {}
    exec(compile(code, "converted.py", "exec"), namespace)
    w, x = _inputs()
    if target == "jax":
        import jax.numpy as jnp

        args = (jnp.asarray(w), jnp.asarray(x))
    else:
        import keras

        args = (keras.ops.convert_to_tensor(w), keras.ops.convert_to_tensor(x))
    first, second = (np.asarray(namespace["f"](*args)) for _ in range(2))  # type: ignore[operator]
    return first, second


@pytest.mark.parametrize("target", ["jax", "tf"])
@pytest.mark.parametrize(("case_id", "expr", "kind"), CASES, ids=[c[0] for c in CASES])
def test_random_draws_have_torchs_distribution(case_id: str, expr: str, kind: str, target: str) -> None:
    import torch

    w, x = _inputs()
    reference: dict[str, object] = {}
    exec(compile(_source(expr), "torch_case.py", "exec"), reference)
    _check(kind, reference["f"](torch.from_numpy(w), torch.from_numpy(x)).numpy(), w)  # type: ignore[operator]

    result = transpile(_source(expr), to=target, path="m.py")
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert "torch." not in result.code.split("def f")[1]
    first, second = _run(result.code, target)
    _check(kind, first, w)
    assert not np.array_equal(first, second)  # each call draws anew, as torch's generator does
    if target == "jax":
        # a free function has no module stream: the converter says where it draws from
        assert any(d.code == "process-random" for d in result.diagnostics)


@pytest.mark.parametrize("target", ["jax", "tf"])
@pytest.mark.parametrize(
    ("method", "kind"),
    [("normal_(1.0, 2.0)", "normal(1,2)"), ("uniform_(-2, 3)", "uniform(-2,3)"), ("bernoulli_(0.5)", "bernoulli0.5")],
)
def test_a_random_inplace_statement_on_a_local_tensor_is_a_draw(method: str, kind: str, target: str) -> None:
    """`h.normal_(...)` as a statement outside an initialiser draws into h (it is not dropped as
    initialisation): `h = tensor_normal_(h, ...)`."""
    src = HEADER + f"N = {N}\n\n\ndef f(w, x):\n    h = x.new_zeros(N)\n    h.{method}\n    return h\n"
    # a module alias is not a tensor: `init.normal_(w)` is torch.nn.init's function (dropped)
    src += "\n\ndef g(w):\n    init.normal_(w, std=0.01)\n    return w\n"
    src = src.replace("import torch\n", "import torch\nimport torch.nn.init as init\n", 1)
    result = transpile(src, to=target, path="m.py")
    assert not result.unsupported, [d.format() for d in result.unsupported]
    dropped = [d.format() for d in result.diagnostics if d.code == "init-dropped"]
    assert len(dropped) == 1 and dropped[0].startswith("m.py:16:5:") and "init.normal_(w" in dropped[0]  # g's only
    first, second = _run(result.code, target)
    _check(kind, first, _inputs()[0])
    assert not np.array_equal(first, second)


MODULE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Noisy(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.token = nn.Parameter(torch.randn(1, d))

    def forward(self, x):
        h = self.fc(x + 0.1 * torch.randn_like(x))
        return F.dropout(h, 0.5, training=self.training), torch.randperm(x.shape[0])
"""


def test_jax_module_draws_from_its_own_stream_also_under_jit() -> None:
    import jax.numpy as jnp
    from flax import nnx

    result = transpile(MODULE, to="jax", path="m.py")
    assert "self.torch_rng = random_stream(rngs)" in result.code
    assert "torch_randn_like(x, rngs=self)" in result.code and "rngs=self)" in result.code.split("dropout(h")[1]
    assert "torch_randn(1, d, rngs=rngs)" in result.code
    assert not [d for d in result.diagnostics if d.code == "process-random"]
    namespace: dict[str, object] = {}
    exec(compile(result.code, "converted.py", "exec"), namespace)
    model = namespace["Noisy"](4, rngs=nnx.Rngs(0))  # type: ignore[operator]
    x = jnp.ones((8, 4))
    eager = [np.asarray(model(x)[0]) for _ in range(2)]
    assert not np.array_equal(*eager)

    @nnx.jit
    def step(m: nnx.Module, v: jnp.ndarray) -> jnp.ndarray:
        return m(v)[0]

    jitted = [np.asarray(step(model, x)) for _ in range(2)]
    assert not np.array_equal(*jitted)  # the stream is nnx state: jit advances it too
    # the same seed draws the same values: a converted model is reproducible
    again = namespace["Noisy"](4, rngs=nnx.Rngs(0))  # type: ignore[operator]
    assert np.array_equal(np.asarray(again(x)[0]), eager[0])
    model.eval()
    dropped = np.asarray(model(x)[0])
    assert (dropped == 0).mean() < 0.05  # eval: no dropout (the noise stays, as in torch)


def test_keras_module_draws_anew_on_each_call() -> None:
    import keras

    result = transpile(MODULE, to="tf", path="m.py")
    namespace: dict[str, object] = {}
    exec(compile(result.code, "converted.py", "exec"), namespace)
    model = namespace["Noisy"](4)  # type: ignore[operator]
    x = keras.ops.ones((8, 4))
    first, second = (np.asarray(model(x)[0]) for _ in range(2))
    assert not np.array_equal(first, second)


def test_every_random_op_is_exercised_on_both_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    used: dict[str, set[str]] = {"jax": set(), "tf": set()}
    emit = op_patterns_any.OpPatterns._emit

    def recording(self, ctx, op, match, original):  # type: ignore[no-untyped-def]
        replacement = emit(self, ctx, op, match, original)
        if replacement is not None:
            used[ctx.target].add(op.name)
        return replacement

    monkeypatch.setattr(op_patterns_any.OpPatterns, "_emit", recording)
    for target in used:
        for _, expr, _ in CASES:
            transpile(_source(expr), to=target)
    table = {name for name, op in load_mappings().ops.items() if "random_ops.yaml:" in op.origin}
    assert table and all(load_mappings().ops[name].draws for name in table)
    assert table - used["jax"] == set() and table - used["tf"] == set()
