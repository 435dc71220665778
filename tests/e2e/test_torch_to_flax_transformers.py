"""Hugging Face transformers models, torch -> Flax NNX, as installed: BERT's encoder and GPT-2's
causal LM head with tied embeddings, converted with `--entry`, verified against the torch
originals (fp32 and the mixed policy), and run without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from precision_transpiler.verify import VerifyOptions, verify_files
from tests.real_models import import_torchvision, load_beside, package_file

import_torchvision()
# every test here converts a transformers model file (seconds each) and most run it: all slow
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype:UserWarning"),
    pytest.mark.needs_torch,
    pytest.mark.needs_jax,
]

BERT = (
    "BertModel(BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, "
    "vocab_size=100))"
)
GPT2 = "GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=32, use_cache=False))"
CASES = {
    "bert": ("models/bert/modeling_bert.py", BERT, ["int64[2,16]<100", "int64[2,16]<2"]),
    "gpt2": ("models/gpt2/modeling_gpt2.py", GPT2, ["int64[2,16]<100"]),
}


Converted = Callable[..., tuple[Path, str, tuple[str, ...]]]


@pytest.fixture(scope="module")
def convert(converted) -> Converted:
    """A model's file converted with its `--entry` (once per test run: tests/conftest.py)."""

    def run(name: str, policy: str = "fp32") -> tuple[Path, str, tuple[str, ...]]:
        rel, entry, _ = CASES[name]
        original = package_file("transformers", rel)
        result = converted(original, to="jax", policy=policy, entry=entry, prune_to_entry=True)
        assert not result.errors, [d.format() for d in result.errors]
        return original, result.code, tuple(d.format() for d in result.diagnostics)

    return run


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_transformers_model_converts_to_torch_free_flax(name: str, convert: Converted) -> None:
    original, code, diagnostics = convert(name)
    imports = "\n".join(ln for ln in code.splitlines() if ln.startswith(("import ", "from ")))
    assert "torch" not in imports.replace("transformers", "")
    assert "class PreTrainedModel(TorchLayer)" in code  # the Flax counterpart, copied in
    # The model file converts whole; helpers it imports may report what they cannot convert
    # (pytorch_utils.prune_linear_layer writes into parameters in place), and that is said.
    model_file = str(original)
    assert not [d for d in diagnostics if d.startswith(model_file) and ": unsupported:" in d]
    assert any("--entry" in d and "left out" in d for d in diagnostics)
    # --entry left out the heads with losses and what only they import
    assert "ForSequenceClassification" not in code and "CrossEntropyLoss" not in code


@pytest.mark.parametrize("name", ["bert", "gpt2"])
@pytest.mark.parametrize("policy", ["fp32", "mixed"])
def test_transformers_model_matches_the_torch_original(name: str, policy: str, convert: Converted) -> None:
    original, code, _ = convert(name, policy)
    _, entry, inputs = CASES[name]
    virtual = original.with_name(f"{original.stem}_ptranspile_{policy}_test.py")
    options = VerifyOptions(entry=entry, inputs=inputs, layers=policy == "fp32")
    verdict = verify_files(original, virtual, options, converted_code=code)
    assert verdict.passed, verdict.failures
    assert verdict.max_rel_err is not None
    if policy == "fp32":
        assert verdict.max_rel_err <= 1e-5
        assert len(verdict.layers) > 10
    else:
        assert verdict.tolerance["reference"] == "torch.autocast(cpu, bfloat16)"
        assert 1e-4 < verdict.max_rel_err <= verdict.tolerance["max_rel_err"]


def test_gpt2_output_embeddings_share_the_input_table(convert: Converted) -> None:
    """transformers ties lm_head.weight to wte.weight; the converted model shares the one nnx
    Param, so training or loading either name changes both, and use_cache=True runs."""
    import jax.numpy as jnp
    from transformers import GPT2Config

    _, code, _ = convert("gpt2")
    module = load_beside(code, "transformers.models.gpt2", "modeling_gpt2_ptranspile_tied")
    model = module.GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=50, n_positions=16))
    model.eval()
    assert model.lm_head.weight is model.transformer.wte.embedding
    ids = jnp.arange(16, dtype=jnp.int32).reshape(2, 8) % 50
    cached = model(ids)  # config.use_cache defaults to True: a DynamicCache comes back
    assert cached.past_key_values.get_seq_length() == 8
    before = model(ids, use_cache=False).logits
    assert jnp.allclose(before, cached.logits, atol=1e-6)
    model.transformer.wte.embedding[...] = model.transformer.wte.embedding[...] * 2.0
    after = model(ids, use_cache=False).logits
    assert not jnp.allclose(before, after)


def test_converted_bert_runs_with_torch_unimportable(tmp_path: Path, convert: Converted) -> None:
    """The converted file needs transformers only for its (plain Python) config class."""
    _, code, _ = convert("bert")
    converted = tmp_path / "bert_jax.py"
    converted.write_text(code)
    script = textwrap.dedent(
        f"""
        import sys, types
        sys.modules["torch"] = None  # any `import torch` now fails
        import jax.numpy as jnp
        from transformers.models.bert.configuration_bert import BertConfig
        module = types.ModuleType("transformers.models.bert.bert_jax")
        module.__package__ = "transformers.models.bert"
        sys.modules[module.__name__] = module
        exec(compile(open({str(converted)!r}).read(), {str(converted)!r}, "exec"), module.__dict__)
        config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
        out = module.BertModel(config)(jnp.ones((1, 8), jnp.int32))
        print(type(out).__name__, out.last_hidden_state.shape)
        """
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "BaseModelOutputWithPoolingAndCrossAttentions (1, 8, 32)" in done.stdout
