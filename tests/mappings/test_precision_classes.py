"""mappings/precision_classes.yaml: the runtime's definitions in each precision class are derived
from the layer and op tables (the Flax and Keras counterparts of the torch symbols the class
lists), so the YAML names only torch symbols and the target libraries' own classes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from precision_transpiler import MappingError
from precision_transpiler.mappings import builtin_mappings_dir, load_mappings

RUNTIME = "precision_transpiler.runtime."

#: The runtime entries of each class as mappings/precision_classes.yaml listed them before they
#: were derived (below the runtime package; classes and targets not named here had none).
LISTED = {
    "linear": {
        "jax": {
            "flax.distance.Bilinear",
            "flax.functional.linear",
            "flax.layers.Linear",
            "flax.recurrent.GRU",
            "flax.recurrent.GRUCell",
            "flax.recurrent.LSTM",
            "flax.recurrent.LSTMCell",
            "flax.recurrent.RNN",
            "flax.recurrent.RNNCell",
        },
        "tf": {
            "keras.distance.Bilinear",
            "keras.functional.linear",
            "keras.layers.Linear",
            "keras.recurrent.GRU",
            "keras.recurrent.GRUCell",
            "keras.recurrent.LSTM",
            "keras.recurrent.LSTMCell",
            "keras.recurrent.RNN",
            "keras.recurrent.RNNCell",
        },
    },
    "conv": {
        "jax": {
            "flax.conv.Conv1d",
            "flax.conv.Conv2d",
            "flax.conv.Conv3d",
            "flax.conv.ConvTranspose1d",
            "flax.conv.ConvTranspose2d",
            "flax.conv.ConvTranspose3d",
            "flax.conv.conv1d",
            "flax.conv.conv2d",
        },
        "tf": {
            "keras.conv.Conv1d",
            "keras.conv.Conv2d",
            "keras.conv.Conv3d",
            "keras.conv.ConvTranspose1d",
            "keras.conv.ConvTranspose2d",
            "keras.conv.ConvTranspose3d",
            "keras.conv.conv1d",
            "keras.conv.conv2d",
        },
    },
    "attention": {
        "jax": {
            "flax.attention.MultiheadAttention",
            "flax.attention.multi_head_attention_forward",
            "flax.attention.scaled_dot_product_attention",
        },
        "tf": {
            "keras.attention.MultiheadAttention",
            "keras.attention.multi_head_attention_forward",
            "keras.attention.scaled_dot_product_attention",
        },
    },
    "embedding": {
        "jax": {"flax.embedding.EmbeddingBag", "flax.layers.Embedding"},
        "tf": {"keras.embedding.EmbeddingBag", "keras.layers.Embedding"},
    },
    "norm": {
        "jax": {
            "flax.norm.GroupNorm",
            "flax.norm.InstanceNorm1d",
            "flax.norm.InstanceNorm2d",
            "flax.norm.InstanceNorm3d",
            "flax.norm.LayerNorm",
            "flax.norm.RMSNorm",
            "flax.norm.group_norm",
            "flax.norm.layer_norm",
        },
        "tf": {
            "keras.norm.GroupNorm",
            "keras.norm.InstanceNorm1d",
            "keras.norm.InstanceNorm2d",
            "keras.norm.InstanceNorm3d",
            "keras.norm.LayerNorm",
            "keras.norm.LocalResponseNorm",
            "keras.norm.RMSNorm",
            "keras.norm.group_norm",
            "keras.norm.layer_norm",
        },
    },
    "batch_norm": {
        "jax": {"flax.norm.BatchNorm1d", "flax.norm.BatchNorm2d", "flax.norm.BatchNorm3d", "flax.norm.SyncBatchNorm"},
        "tf": {
            "keras.norm.BatchNorm1d",
            "keras.norm.BatchNorm2d",
            "keras.norm.BatchNorm3d",
            "keras.norm.SyncBatchNorm",
            "keras.norm.batch_norm",
        },
    },
    "softmax": {
        "jax": {"flax.functional.log_softmax", "flax.functional.softmax"},
        "tf": {
            "keras.activations.LogSoftmax",
            "keras.activations.Softmax",
            "keras.functional.log_softmax",
            "keras.functional.softmax",
        },
    },
}


def _runtime_entries(classes: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, set[str]]]:
    found: dict[str, dict[str, set[str]]] = {}
    for name, per_fw in classes.items():
        for fw, symbols in per_fw.items():
            runtime = {s[len(RUNTIME) :] for s in symbols if s.startswith(RUNTIME)}
            if runtime:
                found.setdefault(name, {})[fw] = runtime
    return found


def test_each_class_holds_the_runtime_definitions_it_listed() -> None:
    assert _runtime_entries(load_mappings(()).precision_classes) == LISTED


def test_the_target_lists_keep_their_own_libraries_symbols() -> None:
    classes = load_mappings(()).precision_classes
    assert "flax.nnx.Linear" in classes["linear"]["jax"]
    assert "keras.layers.Dense" in classes["linear"]["tf"]
    assert classes["pooling"]["jax"] == ["flax.nnx.max_pool", "flax.nnx.avg_pool"]
    assert "torch.nn.Linear" in classes["linear"]["torch"]


def test_the_yaml_restates_no_derived_runtime_entry() -> None:
    """Only what the layer and op tables cannot give is listed: the runtime's `softmax` and
    `log_softmax`, which references to `F.softmax` passed as values become (rules/op_references.py)."""
    data = yaml.safe_load((builtin_mappings_dir() / "precision_classes.yaml").read_text(encoding="utf-8"))
    listed = {
        (name, fw, symbol)
        for name, per_fw in data["classes"].items()
        for fw, symbols in per_fw.items()
        if isinstance(symbols, list)
        for symbol in symbols
        if symbol.startswith(RUNTIME)
    }
    assert listed == {
        ("softmax", fw, f"{RUNTIME}{package}.functional.{name}")
        for fw, package in (("jax", "flax"), ("tf", "keras"))
        for name in ("softmax", "log_softmax")
    }


def _table(tmp_path: Path, body: str) -> Path:
    (tmp_path / "classes.yaml").write_text("kind: precision_classes\nclasses:\n" + textwrap.indent(body, "  "))
    return tmp_path


def test_a_table_can_leave_a_torch_symbols_runtime_counterpart_out(tmp_path: Path) -> None:
    table = _table(
        tmp_path,
        "mine:\n  torch: [torch.nn.Linear, torch.nn.Conv2d]\n  jax: [flax.nnx.Linear]\n"
        "  not_derived: {jax: [torch.nn.Conv2d], tf: all}\n",
    )
    mine = load_mappings([table]).precision_classes["mine"]
    assert mine["jax"] == ["flax.nnx.Linear", f"{RUNTIME}flax.layers.Linear"]
    assert "tf" not in mine


@pytest.mark.parametrize(
    ("not_derived", "message"),
    [
        ("{jax: [torch.nn.Conv3d]}", "torch.nn.Conv3d is not in classes.mine.torch"),
        ("{jax: [torch.matmul]}", "torch.matmul has no runtime counterpart in jax"),
        ("{jax: some}", "expected a list of torch symbols or 'all'"),
    ],
)
def test_not_derived_names_torch_symbols_of_the_class(tmp_path: Path, not_derived: str, message: str) -> None:
    table = _table(tmp_path, f"mine:\n  torch: [torch.nn.Linear, torch.matmul]\n  not_derived: {not_derived}\n")
    with pytest.raises(MappingError, match=message):
        load_mappings([table])
