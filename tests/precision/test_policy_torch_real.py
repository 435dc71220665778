"""torch -> torch precision policies on real model code (torchvision ResNet, transformers BERT).

The converted file runs, returns the policy's output dtype, and its relative error against the
fp32 original is no worse than 1.5x that of plain torch.autocast on the same model and input.
"""

from __future__ import annotations

import pytest

from precision_transpiler import transpile
from tests.real_models import (
    calibrate_batchnorm,
    import_torchvision,
    load_beside,
    package_file,
    perturb_,
    relative_error,
)

pytestmark = pytest.mark.needs_torch

torch = pytest.importorskip("torch")


def _convert(path, policy: str, **kw) -> str:
    result = transpile(path.read_text(), to="torch", policy=policy, path=str(path), **kw)
    assert not result.errors, result.errors
    return result.code


@pytest.fixture(scope="module")
def resnet_modules(converted):
    import_torchvision()
    import torchvision.models.resnet as original

    path = package_file("torchvision", "models/resnet.py")
    result = converted(path, to="torch", policy="mixed")
    assert not result.errors, result.errors
    mixed = load_beside(result.code, "torchvision.models", "_ptx_resnet_mixed")
    return original, mixed, path


@pytest.mark.parametrize("arch", ["resnet18", "resnet50"])
def test_resnet_mixed_matches_autocast_error(resnet_modules, arch: str) -> None:
    """Small inputs: bf16 runs ~9x slower than fp32 on CPUs without native bf16 instructions."""
    original, mixed, _ = resnet_modules
    torch.manual_seed(0)
    batch = torch.randn(2, 3, 64, 64)
    reference = getattr(original, arch)(num_classes=10).eval()
    perturb_(reference)
    calibrate_batchnorm(reference, torch.randn(4, 3, 64, 64))
    converted = getattr(mixed, arch)(num_classes=10).eval()
    converted.load_state_dict(reference.state_dict())
    with torch.no_grad():
        fp32 = reference(batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = reference(batch)
        ours = converted(batch)
    assert ours.dtype == torch.float32  # the policy's output dtype
    assert torch.isfinite(ours).all()
    err_autocast = relative_error(fp32, autocast)
    err_ours = relative_error(fp32, ours)
    assert 0 < err_ours <= 1.5 * err_autocast, (err_ours, err_autocast)


def test_resnet_policy_roundtrip(resnet_modules, converted) -> None:
    _, _, path = resnet_modules
    source = path.read_text()
    mixed = converted(path, to="torch", policy="mixed").code
    assert "@_ptranspile_policy\n    def forward" in mixed
    assert _convert_text(mixed, "mixed") == mixed  # idempotent
    assert _convert_text(mixed, "fp32") == source  # exactly reversible


def _convert_text(code: str, policy: str) -> str:
    return transpile(code, to="torch", policy=policy).code


@pytest.fixture(scope="module")
def bert_modules():
    pytest.importorskip("transformers")
    import transformers.models.bert.modeling_bert as original

    path = package_file("transformers", "models/bert/modeling_bert.py")
    result = transpile(path.read_text(), to="torch", policy="mixed", path=str(path))
    assert not result.errors
    mixed = load_beside(result.code, "transformers.models.bert", "_ptx_bert_mixed")
    return original, mixed, result


def test_bert_mixed_matches_autocast_error(bert_modules) -> None:
    original, mixed, result = bert_modules
    from transformers import BertConfig

    config = BertConfig(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        vocab_size=500,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    reference = original.BertModel(config).eval()
    perturb_(reference)
    converted = mixed.BertModel(config).eval()
    converted.load_state_dict(reference.state_dict())
    ids = torch.randint(0, 500, (2, 24))
    mask = torch.ones_like(ids)
    mask[1, 18:] = 0
    with torch.no_grad():
        fp32 = reference(input_ids=ids, attention_mask=mask).last_hidden_state
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = reference(input_ids=ids, attention_mask=mask).last_hidden_state
        ours = converted(input_ids=ids, attention_mask=mask).last_hidden_state
    assert ours.dtype == torch.float32
    err_autocast = relative_error(fp32, autocast.float())
    err_ours = relative_error(fp32, ours)
    assert 0 < err_ours <= 1.5 * err_autocast, (err_ours, err_autocast)
    # The islands the policy needs in BERT: every LayerNorm and the attention softmax.
    touched = {(d.op_class, d.action) for d in result.precision}
    assert ("norm", "fp32 island") in touched and ("softmax", "fp32 island") in touched


def test_bf16_policy_stores_bf16_params_and_keeps_norms_fp32(bert_modules) -> None:
    _, _, _ = bert_modules
    from transformers import BertConfig

    path = package_file("transformers", "models/bert/modeling_bert.py")
    bf16 = load_beside(_convert(path, "bf16"), "transformers.models.bert", "_ptx_bert_bf16")
    config = BertConfig(
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=128,
        vocab_size=100,
        attn_implementation="eager",
    )
    model = bf16.BertModel(config).eval()
    with torch.no_grad():
        out = model(input_ids=torch.randint(0, 100, (1, 8))).last_hidden_state
    assert out.dtype == torch.bfloat16
    assert model.encoder.layer[0].intermediate.dense.weight.dtype == torch.bfloat16
    assert model.embeddings.LayerNorm.weight.dtype == torch.float32


def test_nan_fallback_recomputes_in_fp32(caplog) -> None:
    # 1e5 * 1 overflows float16 (max 65504) but not float32.
    src = (
        "import torch\nimport torch.nn as nn\n\n\nclass Big(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        return self.fc(x) * 0 + x * 1e5\n"
    )
    code = transpile(src, to="torch", policy="fp16", nan_fallback=True).code
    namespace: dict = {}
    exec(compile(code, "<nan>", "exec"), namespace)
    model = namespace["Big"]()
    with torch.no_grad(), caplog.at_level("WARNING", logger="ptranspile"):
        out = model(torch.ones(1, 4))
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert torch.allclose(out, torch.full((1, 4), 1e5))
    assert "recomputing in float32" in caplog.text
    # without the fallback, the same model returns inf in float16
    plain: dict = {}
    exec(compile(transpile(src, to="torch", policy="fp16").code, "<plain>", "exec"), plain)
    with torch.no_grad():
        assert not torch.isfinite(plain["Big"]()(torch.ones(1, 4))).all()


def test_overrides_by_path_and_class_run_in_fp32(tmp_path) -> None:
    """A path glob (`encoder.layer.*.attention`) and a class name keep those modules in fp32,
    children included, while the rest runs in bf16."""
    pytest.importorskip("transformers")
    from transformers import BertConfig

    policy = tmp_path / "bert.yaml"
    policy.write_text(
        "extends: mixed\noverrides:\n  - path: 'encoder.layer.*.attention'\n    compute: float32\n"
        "  - class: BertPooler\n    compute: float32\n"
    )
    path = package_file("transformers", "models/bert/modeling_bert.py")
    code = transpile(path.read_text(), to="torch", policy=str(policy)).code
    module = load_beside(code, "transformers.models.bert", "_ptx_bert_override")
    config = BertConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        vocab_size=100,
        attn_implementation="eager",
    )
    model = module.BertModel(config).eval()
    seen: dict[str, torch.dtype] = {}
    layer = model.encoder.layer[1]
    for name, sub in [
        ("query", layer.attention.self.query),
        ("attn_out", layer.attention.output.dense),
        ("intermediate", layer.intermediate.dense),
        ("pooler", model.pooler.dense),
    ]:
        sub.register_forward_hook(lambda m, i, o, name=name: seen.__setitem__(name, o.dtype))
    with torch.no_grad():
        model(input_ids=torch.randint(0, 100, (1, 8)))
    assert seen == {
        "query": torch.float32,
        "attn_out": torch.float32,
        "intermediate": torch.bfloat16,
        "pooler": torch.float32,
    }
