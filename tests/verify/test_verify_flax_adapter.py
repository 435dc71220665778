"""The Flax NNX verification adapter, executed with real JAX on CPU.

The model is written to a file and imported (not exec'd from a string) so that `layer_source`
can point at real lines. It has what the adapter must handle: an `nnx.List` of convolutions,
BatchNorm (calibration, constant scale/bias), Dropout (eval mode), an attention block whose
`query` layer is called twice and whose output layer starts at zero, and a dict output.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from precision_transpiler import transpile

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")

from precision_transpiler.verify.adapters.flax_adapter import FlaxAdapter  # noqa: E402

pytestmark = pytest.mark.needs_jax

MODEL = """\
import jax
import jax.numpy as jnp
from flax import nnx


class Attention(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs, eps: float = 1e-6):
        self.norm = nnx.LayerNorm(dim, epsilon=eps, rngs=rngs)
        self.query = nnx.Linear(dim, dim, rngs=rngs)
        self.key = nnx.Linear(dim, dim, rngs=rngs)
        self.out = nnx.Linear(dim, dim, kernel_init=nnx.initializers.zeros, rngs=rngs)

    def __call__(self, x):
        h = self.norm(x)
        q, k = self.query(h), self.key(h)
        v = self.query(h)  # the same layer twice
        weights = jax.nn.softmax(q @ k.swapaxes(-1, -2) / 4.0, axis=-1)
        return x + self.out(weights @ v)


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, eps: float = 1e-6):
        self.convs = nnx.List(
            [nnx.Conv(3, 8, kernel_size=(3, 3), rngs=rngs), nnx.Conv(8, 16, kernel_size=(3, 3), rngs=rngs)]
        )
        self.bn = nnx.BatchNorm(16, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.block = Attention(16, rngs, eps)
        self.head = nnx.Linear(16, 10, rngs=rngs)

    def __call__(self, x):
        for conv in self.convs:
            x = nnx.relu(conv(x))
        x = self.drop(self.bn(x))
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        x = self.block(x)
        return {"logits": self.head(x.mean(axis=1)), "features": x}


class Tokens(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.embed = nnx.Embed(50, 8, rngs=rngs)
        self.proj = nnx.Linear(8, 4, rngs=rngs)

    def __call__(self, ids):
        return self.proj(self.embed(ids)), ids
"""

ORDER = ["convs.0", "convs.1", "bn", "drop", "block.norm", "block.query", "block.key", "block.out", "block", "head"]
_COUNTER = itertools.count()


def _import(path: Path) -> ModuleType:
    name = f"_ptx_flax_adapter_{next(_COUNTER)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _written(tmp_path_factory: pytest.TempPathFactory, name: str, text: str) -> ModuleType:
    path = tmp_path_factory.mktemp(name) / f"{name}.py"
    path.write_text(text)
    return _import(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return _written(tmp_path_factory, "flax_net", MODEL)


@pytest.fixture(scope="module")
def inputs() -> list[np.ndarray]:
    return [np.random.default_rng(0).standard_normal((2, 8, 8, 3)).astype(np.float32)]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||a|| in float64."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a64 - b64) / np.linalg.norm(a64))


def _pair(models: ModuleType, inputs: list[np.ndarray], **kwargs: float) -> tuple[FlaxAdapter, object, object]:
    adapter = FlaxAdapter()
    original, converted = models.Net(nnx.Rngs(0)), models.Net(nnx.Rngs(1), **kwargs)
    adapter.prepare(original, inputs, seed=0, perturb=True, calibrate_bn=True)
    adapter.copy_weights(original, converted)
    return adapter, original, converted


@pytest.mark.slow
def test_identical_models_agree_exactly(models: ModuleType, inputs: list[np.ndarray]) -> None:
    adapter, original, converted = _pair(models, inputs)
    assert adapter.is_model(original) and not adapter.is_model(object())
    base, other = adapter.run(original, inputs, capture=True), adapter.run(converted, inputs, capture=True)
    assert [n for n, _, _ in base.outputs] == ["out['features']", "out['logits']"]
    assert [d for _, _, d in base.outputs] == ["float32", "float32"]
    for (_, a, _), (_, b, _) in zip(base.outputs, other.outputs, strict=True):
        assert _rel(a, b) == 0.0
    assert base.order == other.order == ORDER
    for path in ORDER:
        for a, b in zip(base.layers[path], other.layers[path], strict=True):
            assert a.dtype == np.float32 and _rel(a, b) == 0.0


@pytest.mark.slow
def test_capture_paths_calls_and_cleanup(models: ModuleType, inputs: list[np.ndarray]) -> None:
    adapter = FlaxAdapter()
    model = models.Net(nnx.Rngs(0))
    adapter.prepare(model, inputs, seed=0, perturb=False, calibrate_bn=False)
    capture = adapter.run(model, inputs, capture=True)
    assert capture.order == ORDER  # execution order, the root is not a layer
    assert {p: len(v) for p, v in capture.layers.items()} == {p: 2 if p == "block.query" else 1 for p in ORDER}
    assert capture.kinds["convs.0"] == "Conv" and capture.kinds["block"] == "Attention"
    assert capture.layers["bn"][0].shape == (2, 8, 8, 16)  # nnx.Conv pads SAME
    assert type(model.convs[0]) is nnx.Conv and type(model.block) is models.Attention  # classes restored
    assert adapter.run(model, inputs, capture=False).layers == {}
    plain = model(jax.numpy.asarray(inputs[0]))["logits"]
    assert _rel(np.asarray(plain), dict((n, a) for n, a, _ in capture.outputs)["out['logits']"]) == 0.0


def test_perturb_changes_constant_tensors_and_is_seeded(models: ModuleType, inputs: list[np.ndarray]) -> None:
    adapter = FlaxAdapter()
    a, b = models.Net(nnx.Rngs(0)), models.Net(nnx.Rngs(0))
    adapter.prepare(a, inputs, seed=3, perturb=True, calibrate_bn=False)
    adapter.prepare(b, inputs, seed=3, perturb=True, calibrate_bn=False)
    scale, bias = np.asarray(a.bn.scale[...]), np.asarray(a.bn.bias[...])
    assert not np.allclose(scale, 1.0) and not np.allclose(bias, 0.0)
    assert np.abs(np.asarray(a.block.out.kernel[...])).min() > 0  # zero-initialised
    assert np.asarray(a.bn.var[...]).min() > 1.0 and not np.allclose(np.asarray(a.bn.mean[...]), 0.0)
    assert a.drop.deterministic and a.bn.use_running_average  # eval mode
    np.testing.assert_array_equal(np.asarray(a.head.kernel[...]), np.asarray(b.head.kernel[...]))


def test_calibrate_sets_running_stats_to_batch_stats(models: ModuleType, inputs: list[np.ndarray]) -> None:
    adapter = FlaxAdapter()
    model = models.Net(nnx.Rngs(0))
    adapter.prepare(model, inputs, seed=0, perturb=True, calibrate_bn=True)
    assert model.bn.momentum == 0.99 and model.bn.use_running_average
    feature = np.maximum(adapter.run(model, inputs, capture=True).layers["convs.1"][0], 0.0)  # relu(convs.1)
    np.testing.assert_allclose(np.asarray(model.bn.mean[...]), feature.mean(axis=(0, 1, 2)), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(model.bn.var[...]), feature.var(axis=(0, 1, 2)), rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_a_different_layer_shows_up_exactly_there(models: ModuleType, inputs: list[np.ndarray]) -> None:
    adapter, original, converted = _pair(models, inputs, eps=1e-1)  # LayerNorm epsilon differs
    base, other = adapter.run(original, inputs, capture=True), adapter.run(converted, inputs, capture=True)
    errors = {p: max(_rel(a, b) for a, b in zip(base.layers[p], other.layers[p], strict=True)) for p in ORDER}
    first_bad = next(p for p in ORDER if errors[p] > 0)
    assert first_bad == "block.norm" and errors["block.norm"] > 1e-3
    assert all(errors[p] == 0.0 for p in ORDER[: ORDER.index("block.norm")])

    adapter, original, converted = _pair(models, inputs)
    converted.head.kernel[...] = converted.head.kernel[...] * 1.01  # a weight tweaked after the copy
    base, other = adapter.run(original, inputs, capture=True), adapter.run(converted, inputs, capture=True)
    assert [p for p in ORDER if _rel(base.layers[p][0], other.layers[p][0]) > 0] == ["head"]
    outputs = {n: _rel(a, b) for (n, a, _), (_, b, _) in zip(base.outputs, other.outputs, strict=True)}
    assert outputs["out['features']"] == 0.0 and outputs["out['logits']"] > 1e-3


@pytest.mark.slow
def test_run_reference_is_bf16_and_leaves_the_model_alone(models: ModuleType, inputs: list[np.ndarray]) -> None:
    adapter = FlaxAdapter()
    model = models.Net(nnx.Rngs(0))
    adapter.prepare(model, inputs, seed=0, perturb=True, calibrate_bn=True)
    before = adapter.run(model, inputs, capture=True)
    for param in ("float32", "bfloat16"):
        reference = adapter.run_reference(model, lambda: None, inputs, compute="bfloat16", param=param, capture=True)
        assert [d for _, _, d in reference.outputs] == ["bfloat16", "bfloat16"]
        for (_, a, _), (_, b, _) in zip(before.outputs, reference.outputs, strict=True):
            assert 1e-4 < _rel(a, b) < 1e-1, (param, _rel(a, b))
        assert reference.order == ORDER
    assert model.head.dtype is None and model.head.kernel[...].dtype == np.float32
    after = adapter.run(model, inputs, capture=False)
    for (_, a, _), (_, b, _) in zip(before.outputs, after.outputs, strict=True):
        assert _rel(a, b) == 0.0


@pytest.mark.slow
def test_copy_weights_casts_to_a_bf16_policy_model(
    models: ModuleType, inputs: list[np.ndarray], tmp_path: Path
) -> None:
    path = tmp_path / "flax_net_bf16.py"
    path.write_text(transpile(MODEL, to="jax", policy="bf16").code)
    low = _import(path)
    adapter = FlaxAdapter()
    original, converted = models.Net(nnx.Rngs(0)), low.Net(nnx.Rngs(1))
    adapter.prepare(original, inputs, seed=0, perturb=True, calibrate_bn=True)
    adapter.copy_weights(original, converted)
    kernel = converted.head.kernel[...]
    assert kernel.dtype == jax.numpy.bfloat16
    np.testing.assert_array_equal(np.asarray(kernel), np.asarray(original.head.kernel[...].astype(kernel.dtype)))
    result = adapter.run(converted, inputs, capture=True)
    assert [d for _, _, d in result.outputs] == ["bfloat16", "bfloat16"]
    assert all(a.dtype == np.float32 for _, a, _ in result.outputs)
    base = adapter.run(original, inputs, capture=False)
    assert 1e-4 < _rel(base.outputs[1][1], result.outputs[1][1]) < 1e-1
    assert result.order == ORDER


def test_int64_inputs_stay_integer(models: ModuleType) -> None:
    adapter = FlaxAdapter()
    model = models.Tokens(nnx.Rngs(0))
    ids = np.arange(12, dtype=np.int64).reshape(2, 6)
    adapter.prepare(model, [ids], seed=0, perturb=True, calibrate_bn=True)
    capture = adapter.run(model, [ids], capture=True)
    names = {n: (a, d) for n, a, d in capture.outputs}
    assert list(names) == ["out[0]", "out[1]"]
    assert names["out[1]"][1] == "int32" and names["out[1]"][0].dtype == np.int32  # JAX without x64
    np.testing.assert_array_equal(names["out[1]"][0], ids)
    assert capture.order == ["embed", "proj"]


def test_layer_source_points_at_the_assignment(models: ModuleType) -> None:
    adapter = FlaxAdapter()
    model = models.Net(nnx.Rngs(0))
    file = Path(models.__file__)
    lines = file.read_text().splitlines()

    def line_of(text: str) -> str:
        return f"{file}:{next(i for i, line in enumerate(lines, 1) if text in line)}"

    assert adapter.layer_source(model, "convs.1") == line_of("self.convs = nnx.List(")
    assert adapter.layer_source(model, "bn") == line_of("self.bn = ")
    assert adapter.layer_source(model, "block.query") == line_of("self.query = ")
    assert adapter.layer_source(model, "block") == line_of("self.block = ")
    assert adapter.layer_source(model, "nothing.here") is None


def test_param_bytes_counts_variables_and_arrays_held_as_plain_attributes() -> None:
    """transformers' rotary embeddings keep `self.original_inv_freq = self.inv_freq`; converted,
    the model holds that array as a plain attribute, which nnx's state lists as the array itself
    (no Variable): it is counted, and measuring does not fail."""
    import jax.numpy as jnp
    from flax import nnx

    class Rotary(nnx.Module):
        def __init__(self) -> None:
            self.inv_freq = nnx.Variable(jnp.ones(8, dtype=jnp.float32))
            self.original_inv_freq = self.inv_freq[...]
            self.rngs = nnx.Rngs(0)  # random-number state: not counted

    assert FlaxAdapter().param_bytes(Rotary()) == 2 * 8 * 4


COMPILED = """\
import jax.numpy as jnp
from flax import nnx


class Counting(nnx.Module):
    '''A forward that updates state (a counter variable) and branches on a value when told to.'''

    def __init__(self, rngs: nnx.Rngs, branch: bool = False):
        self.proj = nnx.Linear(4, 4, rngs=rngs)
        self.calls = nnx.Variable(jnp.zeros((), jnp.int32))
        self.branch = branch

    def __call__(self, x):
        self.calls[...] = self.calls[...] + 1
        y = self.proj(x)
        if self.branch and float(y.sum()) > 1e9:  # a Python branch on a value: cannot be traced
            y = -y
        return y
"""


@pytest.fixture(scope="module")
def counting(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return _written(tmp_path_factory, "flax_counting", COMPILED)


@pytest.mark.parametrize("branch", [False, True], ids=["traceable", "value-branch"])
def test_a_compiled_run_matches_the_eager_one_and_keeps_the_state(counting: ModuleType, branch: bool) -> None:
    # compiled=True runs the forward under jax.jit; a model that cannot be traced (a Python
    # branch on a value) runs eagerly instead. Either way outputs, layers and state updates are
    # what the eager run gives.
    adapter = FlaxAdapter()
    x = [np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)]
    eager_model, compiled_model = counting.Counting(nnx.Rngs(0), branch), counting.Counting(nnx.Rngs(0), branch)
    eager = adapter.run(eager_model, x, capture=True)
    compiled = adapter.run(compiled_model, x, capture=True, compiled=True)
    assert [n for n, _, _ in compiled.outputs] == [n for n, _, _ in eager.outputs] == ["out"]
    assert np.allclose(compiled.outputs[0][1], eager.outputs[0][1], rtol=1e-6, atol=1e-6)
    assert compiled.order == eager.order == ["proj"] and compiled.kinds == eager.kinds
    assert np.allclose(compiled.layers["proj"][0], eager.layers["proj"][0], rtol=1e-6, atol=1e-6)
    assert int(compiled_model.calls[...]) == int(eager_model.calls[...]) == 1
    adapter.run(compiled_model, x, capture=False, compiled=True)
    assert int(compiled_model.calls[...]) == 2
