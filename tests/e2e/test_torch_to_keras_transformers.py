"""Hugging Face transformers models, torch -> Keras 3 (`--to tf`), as installed: converted with
`--entry`, verified against the torch originals at fp32, and run without torch.

The models cover what the Keras counterparts (runtime/keras/transformers.py) and the general
converter have to get right for transformers code: BERT (extended attention masks, the `output`
attribute Keras owns), GPT-2 (Conv1D, the tied head sharing one variable), RoBERTa (a submodule
assigned twice), Llama (rotary embeddings reading `x.device.type`, grouped-query attention,
tensors and flags together in `**kwargs`), OPT and GPT-Neo (`causal_mask *= arange > position`,
a float mask times a bool one; GPT-Neo's local attention), ViT (images, a Conv2d patch embedding),
the T5 encoder (relative position buckets) and Bart (an encoder-decoder sharing its embedding
weight). The other transformers models of benchmarks/corpus.yaml verify too (`python
benchmarks/corpus.py --targets tf --policies fp32`, docs/support.md); they are left out here to
keep this file within a few minutes on a small CPU.
"""

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
pytestmark = [
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype:UserWarning"),
    pytest.mark.needs_torch,
    pytest.mark.needs_tf,
]

IDS = ["int64[2,16]<100"]
CASES = {
    "bert": (
        "models/bert/modeling_bert.py",
        "BertModel(BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, "
        "vocab_size=100))",
        ["int64[2,16]<100", "int64[2,16]<2"],
    ),
    "gpt2": (
        "models/gpt2/modeling_gpt2.py",
        "GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=32, use_cache=False))",
        IDS,
    ),
    "roberta": (
        "models/roberta/modeling_roberta.py",
        "RobertaModel(RobertaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, "
        "intermediate_size=128, vocab_size=100))",
        IDS,
    ),
    "llama": (
        "models/llama/modeling_llama.py",
        "LlamaModel(LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, "
        "intermediate_size=128, vocab_size=100, use_cache=False))",
        IDS,
    ),
    "opt": (
        "models/opt/modeling_opt.py",
        "OPTModel(OPTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, vocab_size=100, "
        "word_embed_proj_dim=64, max_position_embeddings=64, use_cache=False))",
        IDS,
    ),
    "gpt_neo": (
        "models/gpt_neo/modeling_gpt_neo.py",
        "GPTNeoModel(GPTNeoConfig(hidden_size=64, num_layers=2, num_heads=4, vocab_size=100, "
        'attention_types=[[["global", "local"], 1]], max_position_embeddings=64, window_size=8, use_cache=False))',
        IDS,
    ),
    "vit": (
        "models/vit/modeling_vit.py",
        "ViTModel(ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, "
        "image_size=32, patch_size=8))",
        ["float32[2,3,32,32]"],
    ),
    "t5_encoder": (
        "models/t5/modeling_t5.py",
        "T5EncoderModel(T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=100))",
        IDS,
    ),
    "bart": (
        "models/bart/modeling_bart.py",
        "BartModel(BartConfig(d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, "
        "decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100, "
        "max_position_embeddings=64, use_cache=False))",
        IDS,
    ),
}


Converted = Callable[..., tuple[Path, str, tuple[str, ...]]]


@pytest.fixture(scope="module")
def convert(converted) -> Converted:
    """A model's file converted with its `--entry` (once per test run: tests/conftest.py)."""

    def run(name: str, policy: str = "fp32") -> tuple[Path, str, tuple[str, ...]]:
        rel, entry, _ = CASES[name]
        original = package_file("transformers", rel)
        result = converted(original, to="tf", policy=policy, entry=entry, prune_to_entry=True)
        assert not result.errors, [d.format() for d in result.errors]
        return original, result.code, tuple(d.format() for d in result.diagnostics)

    return run


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_transformers_model_converts_to_torch_free_keras(name: str, convert: Converted) -> None:
    original, code, diagnostics = convert(name)
    imports = "\n".join(ln for ln in code.splitlines() if ln.startswith(("import ", "from ")))
    assert "torch" not in imports.replace("transformers", "")
    assert "class PreTrainedModel(TorchModule)" in code  # the Keras counterpart, copied in
    assert "class ModelOutput(collections.OrderedDict)" in code
    # The model file converts whole; helpers it imports may report what they cannot convert
    # (pytorch_utils.prune_linear_layer writes into parameters in place), and that is said.
    model_file = str(original)
    assert not [d for d in diagnostics if d.startswith(model_file) and ": unsupported:" in d]
    assert any("Keras counterparts" in d for d in diagnostics)
    assert not any("siblings-not-converted" in d or "left imported, not converted" in d for d in diagnostics)
    # --entry left out the heads with losses and what only they import
    assert "ForSequenceClassification" not in code and "CrossEntropyLoss" not in code


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_transformers_model_matches_the_torch_original(name: str, convert: Converted) -> None:
    original, code, _ = convert(name)
    _, entry, inputs = CASES[name]
    virtual = original.with_name(f"{original.stem}_ptranspile_tf_test.py")
    layers = name == "bert"  # per-layer capture once: it doubles the run
    # these keep transformers' helpers whose modules import torch (`check_model_inputs` of
    # utils/generic.py, flex attention's), reported while converting and said in the verdict's notes
    torch_free = name not in ("llama", "opt", "gpt_neo", "vit", "t5_encoder", "bart")
    options = VerifyOptions(entry=entry, inputs=inputs, layers=layers, torch_free=torch_free)
    verdict = verify_files(original, virtual, options, converted_code=code)
    assert verdict.passed, verdict.failures
    assert torch_free or any("when loaded" in note for note in verdict.notes), verdict.notes
    assert verdict.max_rel_err is not None and verdict.max_rel_err <= 1e-5
    if layers:
        assert len(verdict.layers) > 10


@pytest.mark.slow
def test_gpt2_output_embeddings_share_the_input_variable(convert: Converted) -> None:
    """transformers ties lm_head.weight to wte.weight; the converted model shares the one Keras
    variable (listed once in `model.weights`), so assigning it changes the logits."""
    import numpy as np
    from transformers import GPT2Config

    _, code, _ = convert("gpt2")
    module = load_beside(code, "transformers.models.gpt2", "modeling_gpt2_ptranspile_keras_tied")
    model = module.GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=50, n_positions=16))
    assert model.lm_head.weight is model.transformer.wte.weight
    table = model.transformer.wte.weight
    # one (vocab, hidden) weight: the untied Linear that post_init replaced is not tracked
    assert [w for w in model.weights if tuple(w.shape) == (50, 32)] == [table]
    ids = (np.arange(16, dtype=np.int64).reshape(2, 8)) % 50
    cached = model(ids)  # config.use_cache defaults to True: a DynamicCache comes back
    assert cached.past_key_values.get_seq_length() == 8
    before = np.asarray(model(ids, use_cache=False).logits)
    np.testing.assert_allclose(before, np.asarray(cached["logits"]), atol=1e-6)
    assert np.asarray(cached[0]).shape == (2, 8, 50)  # ModelOutput: tuple indexing too
    table.assign(table.numpy() * 2.0)
    after = np.asarray(model(ids, use_cache=False).logits)
    assert not np.allclose(before, after)


@pytest.mark.slow
def test_converted_bert_runs_with_torch_unimportable(tmp_path: Path, convert: Converted) -> None:
    """The converted file needs transformers only for its (plain Python) config class, and its
    output is a ModelOutput that keras.tree flattens."""
    _, code, _ = convert("bert")
    converted = tmp_path / "bert_keras.py"
    converted.write_text(code)
    script = textwrap.dedent(
        f"""
        import sys, types
        sys.modules["torch"] = None  # any `import torch` now fails
        import keras, numpy as np
        from transformers.models.bert.configuration_bert import BertConfig
        module = types.ModuleType("transformers.models.bert.bert_keras")
        module.__package__ = "transformers.models.bert"
        sys.modules[module.__name__] = module
        exec(compile(open({str(converted)!r}).read(), {str(converted)!r}, "exec"), module.__dict__)
        config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
        out = module.BertModel(config)(np.ones((1, 8), np.int64))
        print(type(out).__name__, tuple(out.last_hidden_state.shape), len(keras.tree.flatten(out)))
        """
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "BaseModelOutputWithPoolingAndCrossAttentions (1, 8, 32) 2" in done.stdout


def _counterparts() -> list[str]:
    import ast

    from precision_transpiler.convert.vendor import SHIM_DIR

    tree = ast.parse((SHIM_DIR / "keras" / "transformers.py").read_text())
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    names += [t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_") or n.startswith("_prepare_4d")]


@pytest.mark.parametrize("name", _counterparts())
def test_keras_counterpart_is_copyable_alone(name: str) -> None:
    """The converter copies each counterpart into a converted file on its own, with the helpers
    it names (TorchModule from runtime/keras/modules.py included): the copy runs without the package."""
    import ast

    from precision_transpiler.convert.vendor import vendor_shims

    code, missing = vendor_shims(
        f"import precision_transpiler\n\nOBJ = precision_transpiler.runtime.keras.transformers.{name}\n"
    )
    tree = ast.parse(code)
    imported = [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not missing and not [i for i in imported if "precision_transpiler" in i], imported
    namespace: dict[str, object] = {"__name__": "copied_counterparts"}
    exec(compile(code, f"<copied {name}>", "exec"), namespace)
    assert namespace["OBJ"] is not None


def test_torch_module_takes_tensors_and_flags_together_in_var_keywords() -> None:
    """transformers passes `**kwargs` down the layers (`position_ids=t, use_cache=False`), which
    Keras' argument check refuses as "mixed"; TorchModule hands the non-tensors to `call` around
    it, keeps tensors visible to Keras, and restores `call` after. A torch `mask` argument is
    not a Keras mask: no warning that it is dropped."""
    import warnings

    import numpy as np
    from keras import ops

    from precision_transpiler.runtime.keras.modules import TorchModule

    class Inner(TorchModule):
        def call(self, x, mask=None, **kwargs):
            return x + ops.cast(kwargs["position_ids"], x.dtype) + (1.0 if kwargs["use_cache"] else 0.0)

    class Outer(TorchModule):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Inner()

        def call(self, x, **kwargs):
            return self.inner(x, mask=x, **kwargs)

    model = Outer()
    x = np.zeros((2, 3), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = model(x, position_ids=ops.arange(3), use_cache=True)
    np.testing.assert_allclose(np.asarray(out), np.tile(np.arange(3.0) + 1.0, (2, 1)))
    assert "call" not in model.__dict__ and "call" not in model.inner.__dict__


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_transformers_model_under_the_mixed_policy(name: str, convert: Converted) -> None:
    """`--policy mixed` on a converted transformers model: Keras dtype policies and autocast
    regions (precision/passes/keras_torch.py), within 2x torch autocast's own error."""
    _, entry, inputs = CASES[name]
    original, code, _ = convert(name, "mixed")
    assert "@_ptranspile_module" in code
    virtual = original.with_name(f"{original.stem}_ptranspile_tf_mixed_test.py")
    torch_free = name != "llama"  # llama's keeps transformers' `check_model_inputs` (utils/generic.py)
    options = VerifyOptions(entry=entry, inputs=inputs, layers=False, policy="mixed", torch_free=torch_free)
    verdict = verify_files(original, virtual, options, converted_code=code)
    assert verdict.passed, verdict.failures
    assert verdict.max_rel_err is not None and verdict.max_rel_err > 1e-5  # bfloat16 did happen
