"""`torch.autocast` regions in model code, converted to Flax NNX and Keras (rules/torch_autocast_model.py).

The converted code keeps each region as `with torch_autocast(self, dtype, enabled=...)`: the
Linear/Conv/attention layers under the module and the matmul-class calls written in the region
compute in the region's dtype, as torch's do, and nothing of torch is left. `ptranspile verify`
derives the tolerance of such an original from the regions' own error (the original run again
with its regions disabled), as for a mixed policy. The shims' semantics (restored exactly, nested
and disabled regions, `jax.jit`) are checked on the shims themselves.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np
import pytest
import torch

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

REGION = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    """A bf16 region around a Linear and a matmul, a disabled region inside it, a LayerNorm outside."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.fc(x)
            a = torch.matmul(h, h.transpose(-1, -2))
            with torch.autocast(device_type="cpu", enabled=False):
                g = self.proj(x)
        return self.norm(h + g) + a.sum(-1, keepdim=True)
'''

DECORATED = '''
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, d: int = 16):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    @torch.autocast("cpu", dtype=torch.bfloat16)
    def attend(self, x):
        """Attention logits and values in bfloat16, as torch's autocast computes them."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return (q @ k.transpose(-1, -2)).softmax(-1) @ v

    def forward(self, x):
        return self.out(self.attend(x).float())
'''

FUNCTION = """
import torch


def scores(q, k):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return torch.matmul(q, k.transpose(-1, -2))
"""


def _mentions_torch(code: str) -> bool:
    """Whether converted code imports or names torch (docstrings may mention it)."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            return True
        if isinstance(node, ast.Name) and node.id == "torch":
            return True
    return False


def _convert(source: str, tmp_path: Path, name: str, to: str) -> tuple[Path, Path, str]:
    original = tmp_path / f"{name}.py"
    original.write_text(source)
    result = transpile(source, to=to, path=str(original))
    assert result.ok, [d.format() for d in result.diagnostics]
    assert not [d for d in result.diagnostics if d.severity == "unsupported"], [d.format() for d in result.diagnostics]
    assert not _mentions_torch(result.code)
    converted = tmp_path / f"{name}_{to}.py"
    converted.write_text(result.code)
    return original, converted, result.code


def _namespace(code: str, path: Path) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": path.stem}
    exec(compile(code, str(path), "exec"), namespace)
    return namespace


# -- conversion and verification ------------------------------------------------------------------


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_region_converts_runs_and_verifies(to: str, tmp_path: Path) -> None:
    original, converted, code = _convert(REGION, tmp_path, "region", to)
    assert 'with torch_autocast(self, "bfloat16", enabled=True):' in code
    assert 'with torch_autocast(self, "bfloat16", enabled=False):' in code
    matmul = "jnp.matmul" if to == "jax" else "keras.ops.matmul"
    assert f"torch_autocast_call({matmul}, h, " in code
    notes = transpile(REGION, to=to, path="region.py").diagnostics
    assert [d.line for d in notes if d.code == "autocast-region"] == [16, 19]

    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[4,16]"]))
    assert verdict.passed, verdict.failures
    assert [o.dtype_converted for o in verdict.outputs] == ["float32"]  # as torch's
    tolerance = verdict.tolerance
    assert tolerance["rule"].startswith("autocast regions: 2 x their own error (either model against a run with them")
    assert tolerance["reference"] == "the original with its torch.autocast regions disabled"
    assert tolerance["reference_err"] > 1e-4  # the region matters: a float32 conversion would not be it
    assert tolerance["max_rel_err"] == pytest.approx(2 * tolerance["reference_err"] + 1e-5)
    layers = {layer.path: layer for layer in verdict.layers}
    assert layers["proj"].rel_err is not None and layers["proj"].rel_err <= 1e-5  # the disabled region: fp32
    assert layers["fc"].reference_err is not None and layers["fc"].reference_err > 1e-4
    # the verifier put torch's autocast back
    assert torch.autocast is torch.amp.autocast_mode.autocast
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("cpu")


AUTOCAST_VALUE = """
from functools import partial

import torch
import torch.nn as nn
from torch.amp import autocast


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.no_amp = partial(autocast, "cuda", enabled=False)  # autocast as a value, not a `with` item

    def forward(self, x):
        with self.no_amp():
            return self.fc(x) @ x[:, :8].T
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_autocast_passed_as_a_value_becomes_the_runtime_s(to: str, tmp_path: Path) -> None:
    """A torch callable handed around (here to `partial`) must not keep torch imported: the
    runtime's `autocast`, with torch's signature, makes the region when called."""
    original, converted, code = _convert(AUTOCAST_VALUE, tmp_path, "value", to)
    assert 'partial(autocast, "cuda", enabled=False)' in code
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[4,16]"]))
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_decorated_method_becomes_a_region_around_its_body(to: str, tmp_path: Path) -> None:
    original, converted, code = _convert(DECORATED, tmp_path, "decorated", to)
    assert "@" not in code.split("class Head", 1)[1].split("def attend", 1)[0]  # the decorator is gone
    body = code.split("def attend(self, x):\n", 1)[1]
    assert body.startswith('        """Attention logits')  # the docstring stays first
    assert '        with torch_autocast(self, "bfloat16", enabled=True):\n' in body
    verdict = verify_files(original, converted, VerifyOptions(entry="Head()", inputs=["float32[2,5,16]"]))
    assert verdict.passed, verdict.failures
    assert verdict.tolerance["reference_err"] > 1e-4


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_region_in_a_plain_function_autocasts_its_matmul(to: str, tmp_path: Path) -> None:
    _, converted, code = _convert(FUNCTION, tmp_path, "function", to)
    assert 'with torch_autocast(None, "bfloat16", enabled=True):' in code
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 3, 8), dtype=np.float32), rng.standard_normal((2, 4, 8), dtype=np.float32)
    expected = _namespace(FUNCTION, tmp_path / "function.py")["scores"](torch.from_numpy(q), torch.from_numpy(k))
    assert expected.dtype == torch.bfloat16
    got = _namespace(code, converted)["scores"](q, k)
    # JAX returns torch's bfloat16; Keras hands the result back in its input's dtype (TensorFlow
    # refuses bfloat16 + float32), with the bfloat16 values
    assert got.dtype.name == ("bfloat16" if to == "jax" else "float32")
    got32 = np.asarray(got, dtype=np.float32)
    want = expected.float().numpy()
    assert np.abs(got32 - want).max() <= 1e-2 * np.abs(want).max()
    fp32 = q @ np.swapaxes(k, -1, -2)
    assert np.abs(got32 - fp32).max() > 1e-4  # bfloat16, not float32


# -- the Keras shim ------------------------------------------------------------------------------


def test_keras_layers_compute_in_bfloat16_inside_a_region_and_are_restored() -> None:
    import keras

    from precision_transpiler.runtime.keras import modules as M
    from precision_transpiler.runtime.keras.layers import Linear
    from precision_transpiler.runtime.keras.norm import LayerNorm

    class Net(M.TorchModule):
        def __init__(self) -> None:
            super().__init__()
            self.fc = Linear(16, 16)
            self.norm = LayerNorm(16)

    net = Net()
    x = keras.ops.convert_to_tensor(np.random.default_rng(1).standard_normal((4, 16), dtype=np.float32))
    fp32 = keras.ops.convert_to_numpy(net.fc(x))
    reference = Linear(16, 16, dtype="mixed_bfloat16")  # Keras' own bf16 compute, same weights
    reference.set_weights(net.fc.get_weights())
    bf16 = keras.ops.convert_to_numpy(keras.ops.cast(reference(x), "float32"))
    before = {k: v for k, v in vars(net.fc).items() if k in ("_dtype_policy", "call", "_convert_input_args")}

    with M.torch_autocast(net, "bfloat16", enabled=True):
        assert net.fc.dtype_policy.name == "mixed_bfloat16" and net.norm.dtype_policy.name == "float32"
        inside = net.fc(x)
        assert keras.backend.standardize_dtype(inside.dtype) == "float32"  # handed back in the input's dtype
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(inside), bf16)
        assert np.abs(keras.ops.convert_to_numpy(inside) - fp32).max() > 1e-4
        with M.torch_autocast(net, "bfloat16", enabled=False):  # a disabled region inside: float32 again
            np.testing.assert_allclose(keras.ops.convert_to_numpy(net.fc(x)), fp32, rtol=1e-6, atol=1e-6)
        assert net.fc.dtype_policy.name == "mixed_bfloat16"
        assert M.torch_autocast_call(keras.ops.matmul, x, keras.ops.transpose(x)).dtype == x.dtype
    after = {k: v for k, v in vars(net.fc).items() if k in ("_dtype_policy", "call", "_convert_input_args")}
    assert after == before and net.fc.dtype_policy.name == "float32" and "call" not in vars(net.fc)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(net.fc(x)), fp32)

    with pytest.raises(RuntimeError), M.torch_autocast(net, "bfloat16"):  # restored on exceptions too
        raise RuntimeError("boom")
    assert net.fc.dtype_policy.name == "float32" and not M._TORCH_AUTOCAST_STACK
    # outside a region the functional wrapper runs the op as written
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(M.torch_autocast_call(keras.ops.matmul, x, keras.ops.transpose(x))),
        keras.ops.convert_to_numpy(keras.ops.matmul(x, keras.ops.transpose(x))),
    )


# -- the Flax shim -------------------------------------------------------------------------------


def test_flax_layers_compute_in_bfloat16_inside_a_region_also_under_jit() -> None:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from precision_transpiler.runtime.flax import modules as M
    from precision_transpiler.runtime.flax.conv import Conv2d

    class Net(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.fc = nnx.Linear(16, 16, rngs=rngs)
            self.conv = Conv2d(3, 4, 3, rngs=rngs)
            self.norm = nnx.LayerNorm(16, rngs=rngs)

        def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            with M.torch_autocast(self, "bfloat16", enabled=True):
                h = self.fc(x)
                with M.torch_autocast(self, "bfloat16", enabled=False):
                    g = self.fc(x)
                a = M.torch_autocast_call(jnp.matmul, x, x.T)
            return h, g, a

    net = Net(nnx.Rngs(0))
    x = jnp.asarray(np.random.default_rng(2).standard_normal((4, 16), dtype=np.float32))
    for run in (net, jax.jit(lambda x: net(x))):  # jit: the attributes change while tracing
        h, g, a = run(x)
        assert (h.dtype, g.dtype, a.dtype) == (jnp.bfloat16, jnp.float32, jnp.bfloat16)
        assert net.fc.dtype is None and net.conv.dtype is None and net.norm.dtype is None
        assert not M._TORCH_AUTOCAST_STACK
    bf16 = nnx.Linear(16, 16, dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    bf16.kernel[...], bf16.bias[...] = net.fc.kernel[...], net.fc.bias[...]
    np.testing.assert_array_equal(np.asarray(net(x)[0], np.float32), np.asarray(bf16(x), np.float32))
    with pytest.raises(RuntimeError), M.torch_autocast(net, "bfloat16"):
        assert net.conv.dtype == jnp.bfloat16
        raise RuntimeError("boom")
    assert net.conv.dtype is None and not M._TORCH_AUTOCAST_STACK


@pytest.mark.parametrize("module", ["flax.modules", "keras.modules"])
@pytest.mark.parametrize("name", ["torch_autocast", "torch_autocast_call"])
def test_shims_are_copyable_alone(module: str, name: str) -> None:
    """The converter copies each definition into the converted file with the helpers it names
    (convert/vendor.py): the copy runs without the package, with the module-level region stack."""
    from precision_transpiler.convert.vendor import vendor_shims

    code, missing = vendor_shims(f"import precision_transpiler\n\nOBJ = precision_transpiler.runtime.{module}.{name}\n")
    assert not missing and "import precision_transpiler" not in code
    namespace = _namespace(code, Path(f"copied_{name}.py"))
    assert namespace["OBJ"].__doc__ and "torch" in namespace["OBJ"].__doc__
    assert namespace["_TORCH_AUTOCAST_STACK"] == []
    if name == "torch_autocast":
        with namespace["torch_autocast"](None, "bfloat16", enabled=True):
            assert len(namespace["_TORCH_AUTOCAST_STACK"]) == 1
        assert namespace["_TORCH_AUTOCAST_STACK"] == []


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_autocast_is_available_for_any_device(to: str) -> None:
    """`torch.amp.is_autocast_available(x.device.type)` guards an autocast region (kornia's
    SigLIP): the runtime's autocast takes any device, so the guard holds."""
    source = "import torch\n\n\ndef ok(x):\n    return torch.amp.is_autocast_available(x.device.type)\n"
    result = transpile(source, to=to)
    assert result.code.rstrip().endswith("return True") and not result.unsupported
