"""rules/torch_namespace_values_model.py: torch modules read as values, converted and run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

SOURCE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def by_name(layer, function):
    acts = {n: a for n, a in vars(torch.nn.modules.activation).items() if isinstance(a, type)}
    return acts[layer](), getattr(F, function), getattr(nn, "Tanh")()
"""


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("to", ["jax", "tf"])
@pytest.mark.parametrize(("layer", "function"), [("GELU", "silu"), ("Hardswish", "relu6"), ("SiLU", "gelu")])
def test_layers_and_functions_looked_up_by_name(tmp_path: Path, to: str, layer: str, function: str) -> None:
    import torch

    result = transpile(SOURCE, to=to)
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "torch" not in result.code.split("def by_name")[1]
    path = tmp_path / f"ns_{to}.py"
    path.write_text(result.code)
    converted = _load(path, f"ns_{to}_{layer}")
    original = _load(_write(tmp_path, SOURCE), f"ns_torch_{layer}")
    x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(2, 12)
    want = [f(torch.from_numpy(x)).numpy() for f in original.by_name(layer, function)]
    got = [np.asarray(f(x)) for f in converted.by_name(layer, function)]
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ns_torch.py"
    path.write_text(text)
    return path


def test_partial_namespaces_are_said() -> None:
    result = transpile("import torch.nn as nn\n\n\ndef make(name):\n    return getattr(nn, name)()\n", to="jax")
    assert any(d.code == "partial-namespace" for d in result.diagnostics)
    assert "types.SimpleNamespace" in result.code


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_a_registry_filtered_by_a_module_base_held_in_a_variable(tmp_path: Path, to: str) -> None:
    """torch-geometric's resolver: `base_cls = torch.nn.Module`, then `issubclass(act, base_cls)`
    over `vars(torch.nn.modules.activation)`: every runtime layer passes on both targets."""
    source = (
        "import torch\n\n\ndef acts():\n    base = torch.nn.Module\n"
        "    found = vars(torch.nn.modules.activation).values()\n"
        "    return sorted(a.__name__ for a in found if isinstance(a, type) and issubclass(a, base))\n"
    )
    result = transpile(source, to=to)
    path = tmp_path / f"registry_{to}.py"
    path.write_text(result.code)
    import torch

    expected = sorted(
        a.__name__
        for a in vars(torch.nn.modules.activation).values()
        if isinstance(a, type) and issubclass(a, torch.nn.Module) and a.__module__ == "torch.nn.modules.activation"
    )
    assert _load(path, f"registry_{to}").acts() == expected


RNN_BY_NAME = """
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, rnn_type="LSTM", ntoken=10, ninp=4, nhid=4):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid)
        else:
            self.rnn = nn.RNN(ninp, nhid, nonlinearity={"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type])
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input):
        output, hidden = self.rnn(self.encoder(input))
        return self.decoder(output)
"""


@pytest.mark.parametrize("to", ["jax", "tf"])
@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU"])
def test_layers_named_in_the_files_strings_join_a_partial_namespace(tmp_path: Path, to: str, rnn_type: str) -> None:
    """pytorch/examples' word language model: `getattr(nn, rnn_type)` with `rnn_type="LSTM"`."""
    from precision_transpiler.verify import VerifyOptions, verify_files

    original = tmp_path / "rnn_model.py"
    original.write_text(RNN_BY_NAME)
    result = transpile(RNN_BY_NAME, to=to, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert any("what the file names in strings: GRU, LSTM" in d.message for d in result.diagnostics)
    converted = tmp_path / f"rnn_model_{to}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry=f"RNNModel({rnn_type!r})", inputs=["int64[5,2]<10"])
    verdict = verify_files(original, converted, options)
    assert verdict.passed, verdict.failures


TEMPLATES = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dimensions=2, c=4, norm="Batch", activation="ReLU"):
        super().__init__()
        conv_class = getattr(nn, "Conv{}d".format(dimensions))
        norm_class = getattr(nn, f"{norm}Norm{dimensions}d")
        self.conv = conv_class(c, c, 3, padding=1)
        self.norm = norm_class(c)
        self.act = getattr(nn, activation)()
        self.drop = getattr(nn, "Dropout%dd" % dimensions)(0.0)

    def forward(self, x):
        return self.drop(self.act(self.norm(self.conv(x))))
"""


@on_both_targets
def test_layers_a_string_template_spells_join_a_partial_namespace(tmp_path: Path, target: str) -> None:
    """unet's `getattr(nn, "Conv{}d".format(dimensions))`: the layers a `.format`, f-string or
    `%` template of the file can spell are in the namespace, and said."""
    result = transpile(TEMPLATES, to=target)
    said = " ".join(d.message for d in result.diagnostics if d.code == "partial-namespace")
    for name in ("Conv1d", "Conv2d", "Conv3d", "BatchNorm2d", "InstanceNorm3d", "Dropout2d"):
        assert name in said, said
    verdict = convert_and_verify(tmp_path, TEMPLATES, target, "Block()", ["float32[1,4,5,5]"], name="block")
    assert verdict.passed, verdict


FUNCTION_TEMPLATES = """import torch
from torch import nn
import torch.nn.functional as F


class FiniteDifference(nn.Module):
    def __init__(self, c, n_dim=2):
        super().__init__()
        self.conv = getattr(nn, f"Conv{n_dim}d")(c, c, 3, padding=1)
        self.conv_function = getattr(F, f"conv{n_dim}d")
        self.pool = getattr(F, "avg_pool%dd" % n_dim)

    def forward(self, x):
        return self.pool(self.conv_function(x, self.conv.weight, padding=1) + self.conv(x), 2)
"""


@on_both_targets
def test_functions_a_string_template_spells_join_a_partial_namespace(tmp_path: Path, target: str) -> None:
    """neuraloperator's `getattr(F, f"conv{n_dim}d")`: the functions the op tables map that a
    template of the file can spell are in torch.nn.functional's namespace, and said."""
    result = transpile(FUNCTION_TEMPLATES, to=target)
    said = " ".join(d.message for d in result.diagnostics if d.code == "partial-namespace")
    for name in ("conv1d", "conv2d", "conv3d", "avg_pool2d"):
        assert name in said, said
    verdict = convert_and_verify(
        tmp_path, FUNCTION_TEMPLATES, target, "FiniteDifference(4)", ["float32[1,4,8,8]"], name="fd"
    )
    assert verdict.passed, verdict


PROBED = """
import torch
import torch.nn.functional as F
from torch import nn

compile_fn = getattr(torch, "compile", None)
gelu = getattr(F, "gelu", None)
missing = getattr(torch, "compile")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.compiles = compile_fn is not None  # read, never called: the same model either way

    def forward(self, x):
        return gelu(self.fc(x))
"""


@on_both_targets
def test_a_feature_probed_with_a_default_takes_the_default_where_the_target_lacks_it(
    tmp_path: Path, target: str
) -> None:
    result = transpile(PROBED, to=target)
    assert "compile_fn = None" in result.code, result.code
    notes = [d for d in result.diagnostics if d.code == "feature-detection"]
    assert [d.line for d in notes] == [6], [d.format() for d in result.diagnostics]
    assert any(d.line == 8 and d.severity == "unsupported" for d in result.diagnostics)  # no default: reported
    source = PROBED.replace('missing = getattr(torch, "compile")\n', "")
    verdict = convert_and_verify(tmp_path, source, target, "Net()", ["float32[2,4]"])
    assert verdict.passed, verdict.failures  # loads and runs without torch
