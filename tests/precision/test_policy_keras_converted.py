"""Precision policies on torch code converted to Keras (`--to tf --policy ...`), run for real.

precision/passes/keras_torch.py expresses a policy as torch runs it (`model.to(param)` plus
autocast regions): layers of low-precision classes get a Keras dtype policy computing in bfloat16
and hand results back in their input's dtype, keep-fp32 classes compute in float32, functional
matmuls are autocast one op at a time. These tests convert real torch code, check what the
converted model's layers hold, and verify the outputs against the torch original within the
tolerance derived from torch's own autocast error (the verification command's rule).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import numpy as np
import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.e2e.test_torch_to_flax import SMALL_CNN
from tests.real_models import import_torchvision, package_file

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_tf]

import_torchvision()

BLOCKS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.norm = norm_layer(dim)
        self.fc = nn.Linear(dim, dim)
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        h = self.fc(self.norm(x))
        a = torch.matmul(h, h.transpose(-1, -2))
        a = F.softmax(a, dim=-1)
        return x + self.scale * (a @ h)  # an fp32 island's result meets a low-precision one


class Net(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(2)])
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        return self.head(self.blocks(x).mean(1))
"""


def _convert(tmp_path: Path, source: str, policy: str) -> tuple[Path, Path, str]:
    original = tmp_path / "blocks.py"
    original.write_text(source)
    result = transpile(source, to="tf", policy=policy, path=str(original))
    assert result.ok and not result.unsupported, [d.format() for d in result.diagnostics]
    converted = tmp_path / "blocks_tf.py"
    converted.write_text(result.code)
    return original, converted, result.code


def _load(code: str, path: Path) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": path.stem}
    exec(compile(code, str(path), "exec"), namespace)
    return namespace


def test_mixed_layers_get_dtype_policies_and_results_come_back_in_float32(tmp_path: Path) -> None:
    _, converted, code = _convert(tmp_path, BLOCKS, "mixed")
    assert "@_ptranspile_module\nclass Block(TorchModule)" in code
    assert "self.fc = Linear(dim, dim, dtype=_PTRANSPILE_LOW)" in code
    assert "_ptranspile_autocast(keras.ops.matmul, h, " in code
    assert "keras.ops.softmax(_ptranspile_fp32(a), axis=-1)" in code
    assert "self.scale * _ptranspile_autocast(keras.ops.matmul, a, h)" in code  # `@` is keras.ops.matmul too
    model = _load(code, converted)["Net"]()
    layers = dict(model.named_modules())
    assert layers["blocks.0.fc"].dtype_policy.name == "mixed_bfloat16"
    assert layers["blocks.0.norm"].dtype_policy.name == "float32"  # built by a factory: found at run time
    assert layers["blocks.0"].dtype_policy.name == "float32"  # the model outside its layers: param dtype
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype("float32")
    out = model(x)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    # the region hands the bfloat16 result back in the input's dtype
    fc_out = layers["head"](keras.ops.convert_to_tensor(x[:, 0]))
    assert keras.backend.standardize_dtype(fc_out.dtype) == "float32"


@pytest.mark.parametrize("policy", ["mixed", "bf16", "fp16"])
def test_policies_verify_against_the_torch_original(tmp_path: Path, policy: str) -> None:
    original, converted, code = _convert(tmp_path, BLOCKS, policy)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,5,16]"], policy=policy)
    verdict = verify_files(original, converted, options, converted_code=code)
    assert verdict.passed, verdict.failures
    assert verdict.max_rel_err is not None and verdict.max_rel_err > 1e-5  # low precision did happen


def test_path_overrides_follow_the_torch_module_paths(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: first-block-fp32\nextends: mixed\noverrides:\n  - path: blocks.0\n    compute: float32\n")
    _, converted, code = _convert(tmp_path, BLOCKS, str(policy))
    layers = dict(_load(code, converted)["Net"]().named_modules())
    assert layers["blocks.0.fc"].dtype_policy.name == "float32"
    assert layers["blocks.1.fc"].dtype_policy.name == "mixed_bfloat16"


def test_fp32_removes_what_the_mixed_policy_inserted(tmp_path: Path) -> None:
    mixed = transpile(BLOCKS, to="tf", policy="mixed").code
    plain = transpile(BLOCKS, to="tf").code
    assert "_ptranspile_" in mixed and "_ptranspile_" not in plain
    assert transpile(mixed, to="tf", policy="fp32").code == plain


def test_small_cnn_mixed_verifies(tmp_path: Path) -> None:
    original, converted, code = _convert(tmp_path, SMALL_CNN, "mixed")
    options = VerifyOptions(entry="Net()", inputs=["float32[2,3,16,16]"], policy="mixed")
    verdict = verify_files(original, converted, options, converted_code=code)
    assert verdict.passed, verdict.failures


@pytest.mark.slow
def test_torchvision_resnet18_mixed_verifies() -> None:
    original = package_file("torchvision", "models/resnet.py")
    result = transpile(original.read_text(), to="tf", policy="mixed", path=str(original))
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    virtual = original.with_name("resnet_ptranspile_tf_mixed_test.py")
    options = VerifyOptions(
        entry="resnet18(num_classes=10)", inputs=["float32[2,3,64,64]"], calibrate_bn=True, policy="mixed", layers=False
    )
    verdict = verify_files(original, virtual, options, converted_code=result.code)
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize("to", ["tf", "jax"])
def test_report_positions_are_lines_of_the_converted_output(to: str) -> None:
    """A policy on a converted model decides on the converted code: its report lines point at
    the written output (after the policy helpers and shims were put in), not at the input."""
    result = transpile(BLOCKS, to=to, policy="mixed")
    lines = result.code.splitlines()
    linear = sorted(d.line for d in result.precision if d.op.endswith("Linear"))
    assert "self.fc = " in lines[linear[0] - 1] and "self.head = " in lines[linear[-1] - 1], linear
    (block,) = [d.line for d in result.precision if d.op == "Block"]
    assert lines[block - 1].strip().startswith(("class Block", "@_ptranspile", "def __call__")), lines[block - 1]
    (softmax,) = [d.line for d in result.precision if "softmax" in d.op]
    assert "softmax(_ptranspile_fp32(a)" in lines[softmax - 1]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fp32", "mixed"])
def test_torchvision_vision_transformer(policy: str) -> None:
    """torchvision's VisionTransformer (class token, encoder blocks built in a loop over an
    OrderedDict, MultiheadAttention, a zero-initialised head) on Keras, fp32 and mixed."""
    original = package_file("torchvision", "models/vision_transformer.py")
    entry = (
        "VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128, "
        "num_classes=10)"
    )
    result = transpile(
        original.read_text(), to="tf", policy=policy, path=str(original), entry=entry, prune_to_entry=True
    )
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    virtual = original.with_name(f"vision_transformer_ptranspile_tf_{policy}_test.py")
    options = VerifyOptions(entry=entry, inputs=["float32[2,3,32,32]"], policy=policy, layers=False)
    verdict = verify_files(original, virtual, options, converted_code=result.code)
    assert verdict.passed, verdict.failures
    if policy == "fp32":
        assert verdict.max_rel_err is not None and verdict.max_rel_err <= 1e-5
