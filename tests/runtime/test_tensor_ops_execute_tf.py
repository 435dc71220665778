"""torch tensor functions and methods converted to Keras 3 (TensorFlow) compute what torch computes.

The cases of tests/runtime/test_tensor_ops_execute.py (imported, not copied), plus a few that only the
Keras shims need, are converted with `transpile(src, to="tf")`; the converted module (with the
shims copied into it) runs on TensorFlow tensors made from the same NumPy inputs as torch's, and
the results are compared with the same rules: float32 to a relative error of 1e-6 (max|got - ref|
/ max|ref| per array), integers and bools exactly, where torch's int64 may be TensorFlow's int32.
The `expect=` substrings of those cases are JAX code and are not checked here.

What has no Keras form is listed with a reason (EXPECTED_UNSUPPORTED_TF, UNSUPPORTED_TF) and must
be reported with file:line:col, never converted silently; every op of tensor_ops.yaml with a `tf:`
pattern must be exercised by some case.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import ast
from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch

from precision_transpiler import load_mappings, transpile
from precision_transpiler.convert.vendor import vendor_shims
from precision_transpiler.rules import op_patterns_any
from tests.runtime import runtime_module_of
from tests.runtime.test_tensor_ops_execute import (
    BOOL,
    CASES,
    F32,
    HEADER,
    I64,
    POS,
    SHIMMED,
    UNSUPPORTED,
    C,
    Case,
    assert_same,
)

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_tf]

assert keras.backend.backend() == "tensorflow", "these tests need KERAS_BACKEND=tensorflow before keras is imported"

KERAS_TENSOR = Path(__file__).resolve().parents[2] / "precision_transpiler" / "runtime" / "keras" / "tensor.py"

# ----------------------------------------------------------------------------------------------
# Cases only the Keras side needs: shims written for it (losses, embedding, unflatten) and the
# places where keras.ops' defaults differ from torch's (int64 results, round with decimals,
# vector norms over two dims, var/std corrections, diff with prepend/append).
# ----------------------------------------------------------------------------------------------

TF_CASES = [
    C(
        "tf-cross-entropy-ignore-index-weights-smoothing",
        "x, t, w, p, x3, t3",
        "return (F.cross_entropy(x, t), F.cross_entropy(x, t, ignore_index=2, reduction='sum'), "
        "F.cross_entropy(x, t, weight=w, label_smoothing=0.1), F.cross_entropy(x, t, reduction='none', "
        "label_smoothing=0.2), F.cross_entropy(x, F.softmax(p, dim=1)), F.cross_entropy(x3, t3, weight=w), "
        "F.cross_entropy(x[0], t[0]))",
        F32(6, 5),
        I64(6, high=5),
        POS(5),
        F32(6, 5),
        F32(2, 5, 3),
        I64(2, 3, high=5),
    ),
    C(
        "tf-nll-loss-weights-embedding-padding",
        "logp, t, w, idx, table",
        "return (F.nll_loss(logp, t, weight=w), F.nll_loss(logp, t, reduction='none'), "
        "F.embedding(idx, table), F.embedding(idx, table, padding_idx=0), F.embedding(idx, table, padding_idx=-1), "
        "F.mse_loss(logp, logp * 2, reduction='none'), F.l1_loss(logp, logp * 0), "
        "F.binary_cross_entropy_with_logits(logp, torch.sigmoid(logp), weight=w, reduction='sum'))",
        F32(4, 5),
        I64(4, high=5),
        POS(5),
        I64(3, 2, high=6),
        F32(6, 4),
    ),
    C(
        "tf-int64-results-like-torch",
        "x, c, n",
        "return (torch.arange(3), torch.arange(n), torch.arange(1, 2.5, 0.5), torch.arange(0, 4, dtype=torch.int32), "
        "torch.full((2,), 3), torch.full((2,), False), torch.full((2,), 3, dtype=torch.float64), x.argmax(), "
        "x.argmin(1), torch.where(c), x.max(0).indices, torch.min(x, -1)[1])",
        F32(3, 4),
        BOOL(3, 4),
        5,
    ),
    C(
        "tf-round-decimals-norms-spread-diff",
        "x, y",
        "return (torch.round(x * 1000, decimals=-2), x.round(decimals=3), torch.round(x, decimals=1), "
        "x.norm(1, (0, 1)), torch.linalg.vector_norm(x, 0), torch.linalg.vector_norm(x, float('-inf'), dim=0), "
        "x.norm(p=3, dim=(0, 1), keepdim=True), torch.norm(x, p='fro', dim=1), x.var(dim=(0, 1), correction=0), "
        "x[:1].var(0), x.std(1, correction=3), torch.var(x, 0, keepdim=True), "
        "torch.diff(x, n=2, dim=0), x.diff(prepend=y, append=y), torch.diff(x, dim=0, prepend=x[:1]))",
        F32(3, 4),
        F32(3, 1),
    ),
    C(
        "tf-unflatten-squeeze-0d-narrow-tensor-start-new-tensor-float64",
        "x, i, d",
        "return (torch.unflatten(x, 1, (2, 3)), x.unflatten(-1, (3, -1)), x.sum().squeeze(0), "
        "x.narrow(1, i, 2), x.new_tensor([0.1, 1e20]), x.new_tensor([2.7, -2.7], dtype=torch.int64), "
        "d.new_tensor([0.1]), x.clamp(1.0, -1.0), torch.clamp(x, min=x * 0), x.to(torch.float64).softmax(0).sum(0), "
        "torch.sum(x > 0), (x > 0).sum(1), torch.true_divide(x, 2), x.new_full((2,), True), "
        "torch.numel(x), x.nelement(), x.ndimension())",
        F32(2, 6),
        np.array(2),  # a 0-d int64 tensor as narrow's start
        np.arange(3, dtype=np.float64) / 7,  # float64: new_tensor keeps it
    ),
]

#: cases of CASES that must be reported for tf instead of converted: id -> why.
EXPECTED_UNSUPPORTED_TF: dict[str, str] = {
    "index-put-accumulate": "a repeated index must add up; the Keras runtime's torch_at(x)[i].add(v) is torch's "
    "`x[i] += v`, where it adds once",
}

#: the reported message (a substring) for each unsupported form of test_tensor_ops_execute.py.
UNSUPPORTED_TF = {
    "F.softmax(x)": "torch.nn.functional.softmax has no mapping to tf: without dim= torch picks the dim",
    "F.softmax(x, dim=None)": "torch.nn.functional.softmax has no mapping to tf: without dim=",
    "F.log_softmax(x)": "torch.nn.functional.log_softmax has no mapping to tf: without dim=",
    "F.gelu(x, approximate=mode)": "gelu with these arguments has no equivalent in tf",
    "x.view(torch.int16)": ".view(...) call could not be converted to tf: no pattern matches its arguments",
    "torch.cat([x, x], out=y)": "torch.cat has no mapping to tf",
    "x.std(unbiased=flag)": ".std(...) call could not be converted to tf",
    "torch.aminmax(x * 2)": "aminmax with these arguments has no equivalent in tf",
}

# ----------------------------------------------------------------------------------------------
# Running the torch source and its conversion on the same inputs
# ----------------------------------------------------------------------------------------------


def convert(source: str) -> Any:
    return transpile(source, to="tf", path="case.py")


def _runnable(code: str) -> str:
    """The converted code with the shims it names copied in, as `ptranspile --to tf` writes it
    (a no-op where transpile() already copied them)."""
    vendored, missing = vendor_shims(code)
    assert not missing, missing
    return vendored


def run_both_tf(case: Case, converted_code: str) -> tuple[Any, Any]:
    """`f` of the torch source on torch tensors and of the converted code on tf.Tensors made from
    the same NumPy arrays (drawn as tests/compare.py's run_both draws them)."""
    rng = np.random.default_rng(sum(map(ord, case.id)))
    values = [v.make(rng) if hasattr(v, "make") else v for v in case.inputs]
    reference: dict[str, Any] = {}
    exec(compile(case.source, "torch_case.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(converted_code, "converted.py", "exec"), converted)
    with torch.no_grad():
        expected = reference["f"](*[torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v for v in values])
    got = converted["f"](*[tf.convert_to_tensor(v) if isinstance(v, np.ndarray) else v for v in values])
    return got, expected


def plain_tf(value: Any) -> Any:
    """TensorFlow results in the form assert_same compares: tensors as NumPy arrays, TensorShape
    (TF's torch.Size) as a tuple of ints, tuples (the (values, indices) pair too) as tuples."""
    if isinstance(value, tf.Tensor | tf.Variable | keras.Variable):
        return np.asarray(keras.ops.convert_to_numpy(value))
    if isinstance(value, tf.TensorShape):
        return tuple(value.as_list())
    if isinstance(value, list):
        return [plain_tf(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_tf(v) for v in value)
    return value


ALL_CASES = CASES + TF_CASES


@pytest.mark.filterwarnings("ignore:torch.meshgrid")  # the reference run of meshgrid without indexing=
@pytest.mark.filterwarnings("ignore:var\\(\\).*degrees of freedom")  # torch's, for var with N <= correction
@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_converted_code_computes_what_torch_computes(case: Case) -> None:
    result = convert(case.source)
    messages = [d.format() for d in result.diagnostics]
    if case.id in EXPECTED_UNSUPPORTED_TF:
        assert result.unsupported, (case.id, "converts now: drop it from EXPECTED_UNSUPPORTED_TF", messages)
        assert all(m.startswith("case.py:") for m in map(str, (d.format() for d in result.unsupported)))
        assert "# ptranspile: unsupported: " in result.code
        return
    assert not result.unsupported and not result.errors, messages
    assert "torch." not in result.code.split("def f(", 1)[1], result.code
    for text in case.said:  # the cases' other warnings are JAX's (int32 without jax_enable_x64)
        if "has no equivalent in jax and was dropped" in text:
            assert any(text.replace("jax", "tf") in m for m in messages), (text, messages)
    got, ref = run_both_tf(case, _runnable(result.code))
    assert_same(plain_tf(got), ref)


def test_expected_unsupported_cases_exist() -> None:
    assert set(EXPECTED_UNSUPPORTED_TF) <= {c.id for c in CASES}
    assert all(reason for reason in EXPECTED_UNSUPPORTED_TF.values())


def test_int64_where_torch_makes_int64() -> None:
    """TensorFlow refuses arithmetic mixing int32 and int64, so the converted code keeps torch's
    int64 where keras.ops would make int32 (argmax, arange and full of integers, where(c), the
    indices of max(dim)); assert_same alone allows either width."""
    case = next(c for c in TF_CASES if c.id == "tf-int64-results-like-torch")
    got, ref = run_both_tf(case, _runnable(convert(case.source).code))
    flat_got = [g for item in plain_tf(got) for g in (item if isinstance(item, tuple) else (item,))]
    flat_ref = [r for item in ref for r in (item if isinstance(item, tuple) else (item,))]
    assert [str(g.dtype) for g in flat_got] == [str(r.dtype).removeprefix("torch.") for r in flat_ref]


@pytest.mark.parametrize("call", ["torch.arange(5)", "torch.arange(1, n)", "torch.full((2,), 3)"])
def test_jax_x64_warnings_are_said_for_jax_only(call: str) -> None:
    """The int32-without-jax_enable_x64 warnings are written under the JAX patterns: the Keras
    shims keep torch's int64, so converting to tf says nothing about it."""
    src = f"{HEADER}def f(n):\n    return {call}\n"
    jax_messages = [d.message for d in transpile(src, to="jax").diagnostics if d.code == "implicit-dtype"]
    tf_messages = [d.message for d in convert(src).diagnostics]
    assert any("jax_enable_x64" in m for m in jax_messages), jax_messages
    assert not any("jax_enable_x64" in m or "jax.numpy" in m for m in tf_messages), tf_messages


def test_dropout_generator_warning_names_each_targets_remedy() -> None:
    src = HEADER + "y = F.dropout(x, 0.5)\n"
    jax_warnings = [d.message for d in transpile(src, to="jax").diagnostics if d.severity == "warning"]
    tf_warnings = [d.message for d in convert(src).diagnostics if d.severity == "warning"]
    assert any("rngs=" in m for m in jax_warnings) and not any("rngs=" in m for m in tf_warnings)
    assert any("seed=" in m for m in tf_warnings), tf_warnings


def test_max_dim_result_has_values_and_indices() -> None:
    src = HEADER + "def f(x):\n    return x.max(1)\n"
    ns: dict[str, Any] = {}
    exec(compile(_runnable(convert(src).code), "converted.py", "exec"), ns)
    result = ns["f"](tf.constant([[1.0, 3.0, 2.0], [5.0, 4.0, 6.0]]))
    values, indices = result
    assert result.values is values and result.indices is indices
    assert values.numpy().tolist() == [3.0, 6.0] and indices.numpy().tolist() == [1, 2]


def test_converted_code_traces_in_a_tf_function() -> None:
    """Converted code holds symbolic tf.Tensors inside tf.function (as in Keras layers): the
    shims use keras.ops, never NumPy or Python-level values, except where torch itself needs
    concrete values (item, tolist, equal, shapes that decide how to split)."""
    src = HEADER + (
        "def f(x, i):\n"
        "    a, b = x.chunk(2, 1)\n"
        "    s = x.split([1, 3], 1)[1].squeeze(0).expand(2, -1, -1).flatten(1)\n"
        "    m = x.max(-1)\n"
        "    return (a + b, s, m.indices + torch.arange(3), x.gather(1, i), x.narrow(0, -2, 2).std(), "
        "x.norm(dim=1), torch.full((2,), 1) + x.argmax(1)[:2], F.normalize(x), x.masked_fill(x > 0, 0.0), "
        "F.cross_entropy(x, i[:, 0]), x.view_as(x.t()).numel())\n"
    )
    ns: dict[str, Any] = {}
    exec(compile(_runnable(convert(src).code), "converted.py", "exec"), ns)
    rng = np.random.default_rng(0)
    x, i = rng.standard_normal((3, 4)).astype(np.float32), rng.integers(0, 4, (3, 2))
    eager = ns["f"](tf.constant(x), tf.constant(i))
    traced = tf.function(ns["f"])(tf.constant(x), tf.constant(i))
    for e, t in zip(eager, traced, strict=True):
        np.testing.assert_allclose(np.asarray(t), np.asarray(e), rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# torch.nn.functional through the Keras shims: the text they are converted to
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "shim_call"), SHIMMED, ids=[c for c, _ in SHIMMED])
def test_functional_calls_become_torch_signature_shims(call: str, shim_call: str) -> None:
    """The Keras runtime's functions take torch's signatures, under the Flax runtime's names:
    arguments pass through as written."""
    result = transpile(f"{HEADER}y = {call}\n", to="tf", path="m.py")
    rewrites = [r.after for r in result.rewrites if r.rule == "op-pattern"]
    module = runtime_module_of("keras", shim_call.split("(", 1)[0])
    assert f"{module}.{shim_call}" in rewrites, rewrites
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert f"y = {shim_call}\n" in _runnable(result.code)


# ----------------------------------------------------------------------------------------------
# What must be reported
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "_jax_message"), UNSUPPORTED, ids=[e for e, _ in UNSUPPORTED])
def test_unsupported_forms_are_reported_with_position(expr: str, _jax_message: str) -> None:
    assert expr in UNSUPPORTED_TF, f"say what converting {expr} to tf reports (UNSUPPORTED_TF)"
    message = UNSUPPORTED_TF[expr]
    src = HEADER + f"def f(x, y, mode, flag):\n    return 1, {expr}\n"
    result = transpile(src, to="tf", path="m.py")
    reported = [d.format() for d in result.unsupported]
    assert any(r.startswith("m.py:6:15: unsupported: ") and message in r for r in reported), reported
    # kept (its arguments converted: a dtype symbol becomes TF's), marked above
    assert f"    return 1, {expr.replace('torch.int16', 'tf.int16')}\n" in result.code
    assert "# ptranspile: unsupported: " in result.code


def test_ops_without_a_tf_pattern_say_why() -> None:
    table = {name: op for name, op in load_mappings().ops.items() if "tensor_ops.yaml:" in op.origin}
    without = {name for name, op in table.items() if not op.patterns.get("tf")}
    assert without == {"softmax_implicit_dim"}
    assert all(table[name].unsupported.get("tf") for name in without)


def test_keras_code_is_not_read_by_the_tensor_table() -> None:
    """tensor_ops.yaml's tf patterns are emit-only: keras.ops calls are not converted to torch by it."""
    result = transpile("import keras\n\ny = keras.ops.reshape(x, (2, 3))\n", to="torch", path="m.py")
    assert "keras.ops.reshape(x, (2, 3))" in result.code and ".reshape" not in result.code.replace("ops.reshape", "")


# ----------------------------------------------------------------------------------------------
# The shim module: each definition is copied alone into converted files
# ----------------------------------------------------------------------------------------------


def _keras_tensor_public() -> list[str]:
    tree = ast.parse(KERAS_TENSOR.read_text(encoding="utf-8"))
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    return [n for n in names if not n.startswith("_")]


def test_keras_tensor_imports_only_the_allowed_modules() -> None:
    tree = ast.parse(KERAS_TENSOR.read_text(encoding="utf-8"))
    imports = {ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
    allowed = {"import math", "import keras", "import numpy as np", "import tensorflow as tf", "from keras import ops"}
    shim_imports = {i for i in imports if i.startswith("from precision_transpiler.runtime.")}
    assert imports - shim_imports <= allowed
    assert all(name.startswith(("torch_", "Torch")) for name in _keras_tensor_public())


@pytest.mark.parametrize("name", _keras_tensor_public())
def test_keras_tensor_definition_is_copyable(name: str) -> None:
    code, missing = vendor_shims(f"import precision_transpiler\n\nOBJ = {runtime_module_of('keras', name)}.{name}\n")
    tree = ast.parse(code)
    imported = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not missing and not [i for i in imported if "precision_transpiler" in i], imported
    copied = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert len({n.name for n in copied}) == len(copied)
    namespace: dict[str, Any] = {"__name__": "copied_shims"}
    exec(compile(code, f"<copied {name}>", "exec"), namespace)
    assert namespace["OBJ"].__doc__ and "torch" in namespace["OBJ"].__doc__, f"{name} needs a docstring naming torch"


# ----------------------------------------------------------------------------------------------
# Every op of the table with a tf pattern is exercised by the cases above
# ----------------------------------------------------------------------------------------------


def test_every_tensor_op_with_a_tf_pattern_is_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    used: set[str] = set()
    emit = op_patterns_any.OpPatterns._emit

    def recording(self, ctx, op, match, original):  # type: ignore[no-untyped-def]
        replacement = emit(self, ctx, op, match, original)
        if replacement is not None:
            used.add(op.name)
        return replacement

    monkeypatch.setattr(op_patterns_any.OpPatterns, "_emit", recording)
    sources = [c.source for c in ALL_CASES] + [f"{HEADER}y = {call}\n" for call, _ in SHIMMED]
    for src in sources:
        transpile(src, to="tf")
    table = {
        name for name, op in load_mappings().ops.items() if "tensor_ops.yaml:" in op.origin and op.patterns.get("tf")
    }
    assert table - used == set()
