"""Verification on real PyTorch model code (torch -> torch policies): passes, failures that must
be caught (a wrong LayerNorm eps, fp16 attention logits that overflow), the guilty layer named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.real_models import import_torchvision, package_file

pytestmark = pytest.mark.needs_torch

import_torchvision()

BERT_ENTRY = (
    "BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, "
    "intermediate_size=64, vocab_size=100, attn_implementation='eager'))"
)

OVERFLOW_MODEL = """
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)

    def forward(self, x):
        logits = self.q(x) @ self.k(x).transpose(-1, -2)  # no 1/sqrt(d): large logits
        return torch.softmax(logits, dim=-1) @ self.v(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.attn = Attention()
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.attn(self.embed(x)))
"""


def _virtual(original: Path) -> Path:
    return original.with_name(f"{original.stem}_ptranspile_test.py")


@pytest.mark.parametrize("policy", ["fp32", "mixed", "bf16"])
def test_resnet18_policies_pass(policy: str) -> None:
    original = package_file("torchvision", "models/resnet.py")
    code = transpile(original.read_text(), to="torch", policy=policy).code
    options = VerifyOptions(entry="resnet18(num_classes=10)", inputs=["float32[2,3,64,64]"], calibrate_bn=True)
    result = verify_files(original, _virtual(original), options, converted_code=code)
    assert result.passed, result.failures
    assert result.source == result.target == "torch"
    report = result.to_json()
    for key in ("passed", "max_abs_err", "max_rel_err", "cosine", "argmax_agreement", "nonfinite", "tolerance"):
        assert key in report
    paths = [layer.path for layer in result.layers]
    assert paths[:2] == ["conv1", "bn1"] and "layer4.1.conv2" in paths and paths[-1] == "fc"
    conv = next(layer for layer in result.layers if layer.path == "layer1.0.conv1")
    # the line of torchvision's own file, the converted code's beside it
    assert conv.source == f"{original}:{_line_of(original.read_text(), 'self.conv1 = conv3x3')}"
    assert conv.converted_source == f"{_virtual(original)}:{_line_of(code, 'self.conv1 = conv3x3')}"
    if policy == "fp32":
        assert result.max_rel_err == 0.0 and result.tolerance["max_rel_err"] == 1e-5
        assert all(layer.rel_err == 0.0 for layer in result.layers)
    else:
        ref = result.tolerance["reference_err"]
        assert 1e-4 < ref < 0.2, ref
        assert result.tolerance["max_rel_err"] == pytest.approx(2 * ref + 1e-5)
        assert 0 < result.max_rel_err <= result.tolerance["max_rel_err"]
        assert result.outputs[0].dtype_converted == "float32" if policy == "mixed" else "bfloat16"
        assert all(layer.reference_err is not None for layer in result.layers if layer.rel_err)


def _line_of(code: str, needle: str) -> int:
    return next(i for i, line in enumerate(code.splitlines(), 1) if needle in line)


@pytest.mark.slow
def test_bert_mixed_passes_with_int_inputs_from_a_package() -> None:
    original = package_file("transformers", "models/bert/modeling_bert.py")
    code = transpile(original.read_text(), to="torch", policy="mixed").code
    options = VerifyOptions(entry=BERT_ENTRY, inputs=["int64[2,12]<100"])
    result = verify_files(original, _virtual(original), options, converted_code=code)
    assert result.passed, result.failures
    names = [o.name for o in result.outputs]
    assert names == ["out['last_hidden_state']", "out['pooler_output']"]
    assert result.max_rel_err is not None and result.max_rel_err > 0
    assert any(layer.path == "encoder.layer.1.attention.output.LayerNorm" for layer in result.layers)


def test_wrong_layernorm_eps_is_caught_and_the_layer_named() -> None:
    original = package_file("transformers", "models/bert/modeling_bert.py")
    code = transpile(original.read_text(), to="torch", policy="fp32").code
    start = code.index("class BertSelfOutput")
    needle = "eps=config.layer_norm_eps"
    at = code.index(needle, start)
    broken = code[:at] + "eps=1e-2" + code[at + len(needle) :]
    options = VerifyOptions(entry=BERT_ENTRY, inputs=["int64[2,12]<100"])
    result = verify_files(original, _virtual(original), options, converted_code=broken)
    assert not result.passed
    assert any("relative error" in f for f in result.failures)
    assert result.first_bad_layer == "encoder.layer.0.attention.output.LayerNorm"
    line = broken[:at].count("\n") + 1
    assert result.first_bad_converted_source is not None and result.first_bad_converted_source.endswith(f":{line}")
    text = original.read_text()
    line = text[: text.index(needle, text.index("class BertSelfOutput"))].count("\n") + 1
    assert result.first_bad_source == f"{original}:{line}"  # transformers' own line
    earlier = [layer for layer in result.layers if layer.order < 5]
    assert earlier and all(layer.rel_err == 0.0 for layer in earlier)


def test_fp16_attention_overflow_is_caught_and_the_layer_named(tmp_path: Path) -> None:
    original = tmp_path / "overflow.py"
    original.write_text(OVERFLOW_MODEL)
    code = transpile(OVERFLOW_MODEL, to="torch", policy="mixed-fp16").code
    converted = tmp_path / "overflow_fp16.py"
    converted.write_text(code)
    itself = verify_files(original, original, VerifyOptions(entry="Net()", inputs=["float32[2,6,8]~300"]))
    assert itself.passed and itself.nonfinite == 0  # in fp32 the model is fine on these inputs
    result = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,6,8]~300"]))
    assert result.policy == "mixed-fp16"  # read from the converted file's marker
    assert not result.passed
    assert result.nonfinite > 0 and any("non-finite" in f for f in result.failures)
    assert result.first_bad_layer == "attn"
    attn = next(layer for layer in result.layers if layer.path == "attn")
    assert attn.nonfinite and attn.source == f"{original}:{_line_of(OVERFLOW_MODEL, 'self.attn = Attention()')}"
    assert attn.converted_source == f"{converted}:{_line_of(code, 'self.attn = Attention()')}"
    json.dumps(result.to_json())  # the report is plain JSON


def test_entry_and_structure_problems_are_errors_not_results(tmp_path: Path) -> None:
    from precision_transpiler.errors import UsageError, VerifyError

    original = tmp_path / "overflow.py"
    original.write_text(OVERFLOW_MODEL)
    with pytest.raises(VerifyError, match=r"failed in the original module.*NameError"):
        verify_files(original, original, VerifyOptions(entry="Nett()", inputs=["float32[2,8]"]))
    with pytest.raises(VerifyError, match="not a torch model"):
        verify_files(original, original, VerifyOptions(entry="nn.Linear", inputs=["float32[2,8]"]))
    with pytest.raises(UsageError, match="expected dtype"):
        verify_files(original, original, VerifyOptions(entry="Net()", inputs=["float32(2,8)"]))
    other = tmp_path / "other.py"
    other.write_text(OVERFLOW_MODEL.replace("nn.Linear(16, 4)", "nn.Linear(16, 5)"))
    with pytest.raises(VerifyError, match="state_dict"):
        verify_files(original, other, VerifyOptions(entry="Net()", inputs=["float32[2,6,8]"]))
