"""Verification end to end for Flax NNX -> Flax NNX and Keras -> Keras policies: passes on
real code, and failures (a wrong normalisation epsilon) caught with the guilty layer named.

Keras: keras.applications' MobileNetV2 (real model code from an installed package, converted
beside it). Flax: no installed package ships Flax NNX model code, so a small ViT-style encoder
written in the style of Flax's own examples (patch embedding conv, LayerNorm, attention with an
einsum, MLP, head, in nnx.List) stands in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.helpers import run_cli
from tests.real_models import package_file

pytestmark = [pytest.mark.needs_jax, pytest.mark.needs_tf]

VIT = """
import jax
import jax.numpy as jnp
from flax import nnx


class Attention(nnx.Module):
    def __init__(self, dim: int, heads: int, rngs: nnx.Rngs):
        self.heads = heads
        self.qkv = nnx.Linear(dim, 3 * dim, rngs=rngs)
        self.proj = nnx.Linear(dim, dim, rngs=rngs)

    def __call__(self, x):
        b, t, d = x.shape
        q, k, v = jnp.split(self.qkv(x), 3, axis=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads) for z in (q, k, v))
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // self.heads)
        weights = jax.nn.softmax(logits, axis=-1)
        return self.proj(jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, t, d))


class EncoderBlock(nnx.Module):
    def __init__(self, dim: int, heads: int, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = Attention(dim, heads, rngs)
        self.norm2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, 2 * dim, rngs=rngs)
        self.fc2 = nnx.Linear(2 * dim, dim, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(nnx.gelu(self.fc1(self.norm2(x)), approximate=False))


class ViT(nnx.Module):
    def __init__(self, dim: int = 32, depth: int = 2, heads: int = 4, classes: int = 10, *, rngs: nnx.Rngs):
        self.patch = nnx.Conv(3, dim, kernel_size=(4, 4), strides=(4, 4), rngs=rngs)
        self.blocks = nnx.List([EncoderBlock(dim, heads, rngs) for _ in range(depth)])
        self.norm = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, classes, rngs=rngs)

    def __call__(self, images):
        x = self.patch(images)
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(axis=1))
"""
VIT_ENTRY = "ViT(rngs=nnx.Rngs(0))"
VIT_INPUT = ["float32[2,16,16,3]"]
MOBILENET_ENTRY = "MobileNetV2(weights=None, input_shape=(32, 32, 3), alpha=0.35, classes=10)"


def _vit(tmp_path: Path) -> Path:
    path = tmp_path / "vit.py"
    path.write_text(VIT)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fp32", "mixed", "bf16"])
def test_flax_vit_policies_pass(tmp_path: Path, policy: str) -> None:
    original = _vit(tmp_path)
    code = transpile(VIT, to="jax", policy=policy).code
    converted = tmp_path / f"vit_{policy}.py"
    converted.write_text(code)
    result = verify_files(original, converted, VerifyOptions(entry=VIT_ENTRY, inputs=VIT_INPUT))
    assert result.passed, result.failures
    assert result.source == result.target == "jax" and result.policy == policy
    paths = [layer.path for layer in result.layers]
    assert paths[0] == "patch" and "blocks.1.attn.qkv" in paths and paths[-1] == "head"
    if policy == "fp32":
        assert result.max_rel_err == 0.0
    else:
        assert 0 < result.max_rel_err <= result.tolerance["max_rel_err"]
        assert result.tolerance["reference"] == "Flax layers with dtype=bfloat16"
        assert result.outputs[0].dtype_converted == ("float32" if policy == "mixed" else "bfloat16")


@pytest.mark.slow
def test_flax_wrong_layernorm_epsilon_is_named_with_its_line(tmp_path: Path) -> None:
    original = _vit(tmp_path)
    code = transpile(VIT, to="jax", policy="mixed").code
    needle = "self.norm2 = nnx.LayerNorm(dim, rngs=rngs"
    assert needle in code
    broken = code.replace(needle, "self.norm2 = nnx.LayerNorm(dim, epsilon=0.5, rngs=rngs")
    converted = tmp_path / "vit_broken.py"
    converted.write_text(broken)
    result = verify_files(original, converted, VerifyOptions(entry=VIT_ENTRY, inputs=VIT_INPUT))
    assert not result.passed
    assert result.first_bad_layer == "blocks.0.norm2"
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "epsilon=0.5" in text)
    assert result.first_bad_converted_source == f"{converted}:{line}"
    line = next(i for i, text in enumerate(VIT.splitlines(), 1) if "self.norm2 = nnx.LayerNorm(" in text)
    assert result.first_bad_source == f"{original}:{line}"  # the user's own line


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fp32", "mixed"])
def test_keras_mobilenet_v2_policies_pass(policy: str) -> None:
    original = package_file("keras", "src/applications/mobilenet_v2.py")
    code = transpile(original.read_text(), to="tf", policy=policy).code
    virtual = original.with_name("mobilenet_v2_ptranspile_test.py")
    options = VerifyOptions(entry=MOBILENET_ENTRY, inputs=["float32[2,32,32,3]"])
    result = verify_files(original, virtual, options, converted_code=code)
    assert result.passed, result.failures
    assert result.source == result.target == "tf"
    kinds = [layer.kind for layer in result.layers]
    assert kinds.count("Conv2D") > 10 and "BatchNormalization" in kinds
    if policy == "mixed":
        assert result.tolerance["reference"] == "Keras dtype policy mixed_bfloat16"
        assert 0 < result.max_rel_err <= result.tolerance["max_rel_err"]
        assert result.outputs[0].dtype_converted == "float32"
    else:
        assert result.max_rel_err == 0.0


def test_keras_wrong_batchnorm_epsilon_is_caught_at_that_layer() -> None:
    original = package_file("keras", "src/applications/mobilenet_v2.py")
    code = transpile(original.read_text(), to="tf", policy="fp32").code
    needle = 'epsilon=1e-3, momentum=0.999, name="Conv_1_bn"'
    assert needle in code
    broken = code.replace(needle, 'epsilon=0.5, momentum=0.999, name="Conv_1_bn"')
    virtual = original.with_name("mobilenet_v2_ptranspile_test.py")
    options = VerifyOptions(entry=MOBILENET_ENTRY, inputs=["float32[2,32,32,3]"])
    result = verify_files(original, virtual, options, converted_code=broken)
    assert not result.passed
    bad = next(layer for layer in result.layers if layer.path == result.first_bad_layer)
    assert bad.kind == "BatchNormalization"
    earlier = [layer for layer in result.layers if layer.order < bad.order]
    assert len(earlier) > 20 and all(layer.rel_err == 0.0 for layer in earlier if layer.rel_err is not None)


@pytest.mark.slow
def test_flax_policy_auto_through_the_cli(tmp_path: Path) -> None:
    original = _vit(tmp_path)
    policy = tmp_path / "vit.policy.yaml"
    run = run_cli(
        str(original), "--to", "jax", "--policy", "auto", "--tolerance", "1e-3", "-o", str(tmp_path / "vit_auto.py"),
        "--policy-out", str(policy), "--entry", VIT_ENTRY, "--input", VIT_INPUT[0], "--no-layers",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "verification runs" in run.err and policy.is_file()
    text = policy.read_text()
    assert "extends: mixed" in text
