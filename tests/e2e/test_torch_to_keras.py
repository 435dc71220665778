"""torch -> Keras 3 model conversion (`--to tf`), verified numerically: convert torch model code,
copy the torch weights into the converted model (`load_torch_state_dict_keras`), and compare
outputs (fp32 relative error <= 1e-5) with the verification command's machinery."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.e2e.test_torch_to_flax import SMALL_CNN, _mentions_torch
from tests.real_models import import_torchvision, package_file

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_tf]

import_torchvision()

MLP = '''
import torch
import torch.nn as nn


class Scale(nn.Module):
    """A learned gain and a fixed shift: an nn.Parameter and buffers."""

    def __init__(self, dim):
        super().__init__()
        self.gain = nn.Parameter(torch.tensor([1.5] * dim, dtype=torch.float32))
        self.register_buffer("shift", torch.tensor([0.25] * dim, dtype=torch.float32))
        self.register_buffer("scratch", torch.tensor([0.0] * dim, dtype=torch.float32), persistent=False)

    def forward(self, x):
        return x * self.gain + self.shift


class MLP(nn.Module):
    def __init__(self, dim=8, hidden=16, classes=4):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.SiLU()
        self.drop = nn.Dropout(0.1)
        self.scale = Scale(hidden)
        self.fc2 = nn.Linear(hidden, classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.fc2(self.scale(self.drop(self.act(self.fc1(x)))))
'''

SUBCLASSES = """
import torch.nn as nn


class Stage(nn.Sequential):
    def __init__(self, dim):
        super().__init__(nn.Linear(dim, dim), nn.ReLU())


class Residual(Stage):
    def forward(self, x):
        return super().forward(x) + x


class Net(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.body = Residual(dim)
        self.add_module("extra", Stage(dim))
        self.branches = nn.ModuleDict({"a": nn.Linear(dim, dim), "b": nn.Identity()})
        self.head = nn.Linear(dim, 2)

    def features(self, x):
        return self.extra(self.branches["a"](self.body(x)) + self.branches["b"](x))

    def forward(self, x):
        return self.head(self.features(x))


class Twice(Net):
    def forward(self, x):
        return super().forward(x) * 2 + self.forward_once(x)

    def forward_once(self, x):
        return Net.forward(self, x)
"""

TRAINING_MODEL = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        x = self.bn(self.fc(x))
        if self.training:
            x = x * 2
        return x
"""


def _convert(source: str, tmp_path: Path, name: str) -> tuple[Path, Path, str]:
    original = tmp_path / f"{name}.py"
    original.write_text(source)
    result = transpile(source, to="tf", path=str(original))
    assert result.ok, [d.format() for d in result.diagnostics]
    assert not _mentions_torch(result.code)
    converted = tmp_path / f"{name}_tf.py"
    converted.write_text(result.code)
    return original, converted, result.code


def _namespace(code: str, path: Path) -> dict:
    namespace: dict = {"__name__": path.stem}
    exec(compile(code, str(path), "exec"), namespace)
    return namespace


def test_small_cnn_converts_without_torch_and_matches(tmp_path: Path) -> None:
    """Helper functions, a `norm_layer` class, nn.Sequential built in a loop, ModuleList,
    LayerNorm, GELU, torch.flatten."""
    original, converted, code = _convert(SMALL_CNN, tmp_path, "small_cnn")
    assert "class Net(TorchModule)" in code and "def call(self, x)" in code and "def forward(self, x)" not in code
    assert "rngs" not in code and "nnx" not in code
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,3,16,16]"]))
    assert verdict.passed, verdict.failures
    assert verdict.source == "torch" and verdict.target == "tf"
    assert verdict.max_rel_err is not None and verdict.max_rel_err <= 1e-5
    paths = {layer.path for layer in verdict.layers}
    assert {"stem", "blocks.0.conv", "blocks.1.bn", "head.2"} <= paths  # torch's paths, layers paired


def test_mlp_with_parameter_and_buffers(tmp_path: Path) -> None:
    """nn.Parameter -> a trainable variable, register_buffer -> a non-trainable one filled from the
    state_dict; a non-persistent buffer is not expected by the loader; init loops dropped."""
    import torch

    from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras

    original, converted, code = _convert(MLP, tmp_path, "mlp")
    assert 'self.register_buffer("shift"' in code and "self.gain = Parameter(" in code
    assert "for m in modules(self):" in code
    verdict = verify_files(original, converted, VerifyOptions(entry="MLP()", inputs=["float32[3,8]"]))
    assert verdict.passed, verdict.failures
    assert verdict.max_rel_err is not None and verdict.max_rel_err <= 1e-5

    reference = _namespace(MLP, original)["MLP"]()
    model = _namespace(code, converted)["MLP"]()
    scale = model.scale
    assert scale.gain.trainable and not scale.shift.trainable and scale._torch_non_persistent == ["scratch"]
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in reference.named_parameters()]
    assert [n for n, _ in model.named_buffers()] == [n for n, _ in reference.named_buffers()]
    assert [n for n, _ in model.named_modules()] == [n for n, _ in reference.named_modules()]
    with torch.no_grad():
        reference.scale.gain.mul_(3.0)
        reference.scale.shift.add_(1.0)
    assert load_torch_state_dict_keras(model, reference.state_dict()) == []  # strict: scratch not expected
    np.testing.assert_allclose(np.asarray(model.scale.shift), reference.scale.shift.numpy())
    x = np.random.default_rng(0).standard_normal((3, 8)).astype("float32")
    reference.eval()
    with torch.no_grad():
        expected = reference(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(np.asarray(model(x)), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(model.forward(x)), expected, rtol=1e-5, atol=1e-6)


def test_subclasses_super_forward_and_torch_layer_bases(tmp_path: Path) -> None:
    """A class deriving from a torch layer gets TorchModule as a second base; `super().forward`
    and `Net.forward(self, x)` reach the converted `call`; add_module, ModuleDict."""
    original, converted, code = _convert(SUBCLASSES, tmp_path, "subclasses")
    assert "class Stage(Sequential, TorchModule)" in code and "class Residual(Stage)" in code
    assert "return super().call(x) + x" in code and 'add_module(self, "extra", Stage(dim))' in code
    for entry in ("Net()", "Twice()"):
        verdict = verify_files(original, converted, VerifyOptions(entry=entry, inputs=["float32[3,8]"]))
        assert verdict.passed, (entry, verdict.failures)
        assert verdict.max_rel_err is not None and verdict.max_rel_err <= 1e-5
    model = _namespace(code, converted)["Twice"]()
    reference = _namespace(SUBCLASSES, original)["Twice"]()
    assert [n for n, _ in model.named_modules()] == [n for n, _ in reference.named_modules()]
    assert model.body.training is False and hasattr(model.body, "register_buffer")


def test_training_mode_follows_train_eval_and_the_training_argument(tmp_path: Path) -> None:
    """Converted models start in inference mode; train()/eval() switch every converted module,
    `self.training` reads the mode of the call, BatchNorm follows it (batch statistics and
    torch's running-statistics update), and an explicit `training=` wins."""
    import torch

    from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras

    original, converted, code = _convert(TRAINING_MODEL, tmp_path, "training")
    assert "if self.training:" in code
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[4,4]"]))
    assert verdict.passed, verdict.failures  # both in inference mode: no doubling

    model = _namespace(code, converted)["Net"]()
    reference = _namespace(TRAINING_MODEL, original)["Net"]()
    load_torch_state_dict_keras(model, reference.state_dict())
    x = np.random.default_rng(1).standard_normal((4, 4)).astype("float32")

    def torch_out(train: bool) -> np.ndarray:
        reference.train(train)
        with torch.no_grad():
            return reference(torch.from_numpy(x)).numpy()

    assert model.training is False
    np.testing.assert_allclose(np.asarray(model(x)), torch_out(False), rtol=1e-5, atol=1e-6)
    assert model.train() is model and model.training
    np.testing.assert_allclose(np.asarray(model(x)), torch_out(True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(model.bn.running_var), reference.bn.running_var.numpy(), rtol=1e-5)
    model.eval()
    assert not model.training
    np.testing.assert_allclose(np.asarray(model(x, training=True)), torch_out(True), rtol=1e-5, atol=1e-6)
    assert not model.training  # the argument does not change the module's mode
    np.testing.assert_allclose(np.asarray(model(x)), torch_out(False), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_torchvision_resnet18_converts_and_matches(converted) -> None:
    original = package_file("torchvision", "models/resnet.py")
    result = converted(original, to="tf")
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    assert not _mentions_torch(result.code)
    assert "WeightsEnum" not in result.code and "register_model" not in result.code
    assert "class ResNet(TorchModule)" in result.code
    virtual = original.with_name("resnet_ptranspile_tf_test.py")
    options = VerifyOptions(entry="resnet18(num_classes=10)", inputs=["float32[4,3,64,64]"], calibrate_bn=True)
    verdict = verify_files(original, virtual, options, converted_code=result.code)
    assert verdict.passed, verdict.failures
    assert verdict.max_rel_err is not None and verdict.max_rel_err <= 1e-5
    assert {"layer1.0.conv1", "layer2.0.downsample.1", "fc"} <= {layer.path for layer in verdict.layers}


@pytest.mark.slow
def test_torchvision_resnet50_bottlenecks(converted) -> None:
    original = package_file("torchvision", "models/resnet.py")
    code = converted(original, to="tf").code
    virtual = original.with_name("resnet_ptranspile_tf_test.py")
    options = VerifyOptions(entry="resnet50(num_classes=10)", inputs=["float32[2,3,64,64]"], layers=False)
    verdict = verify_files(original, virtual, options, converted_code=code)
    assert verdict.passed, verdict.failures  # measured 1.8e-6


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_torch_layers_get_rngs_only_for_flax(to: str) -> None:
    code = transpile("import torch.nn as nn\n\n\ndef head():\n    return nn.Linear(4, 2)\n", to=to).code
    assert ("rngs" in code) == (to == "jax")


EMBED = """
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab=20, dim=8, length=5, tags=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.flat = nn.Flatten()
        self.head = nn.Sequential(nn.Linear(length * dim, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, tags))

    def forward(self, tokens):
        return self.head(self.flat(self.embed(tokens)))
"""


def test_integer_inputs_through_the_keras_adapter(tmp_path: Path) -> None:
    """int64 token ids in (the Keras adapter passes them as they are), Dropout off in inference."""
    original, converted, _ = _convert(EMBED, tmp_path, "tagger")
    options = VerifyOptions(entry="Tagger()", inputs=["int64[4,5]<20"])
    verdict = verify_files(original, converted, options)
    assert verdict.passed, verdict.failures
    assert verdict.max_rel_err is not None and verdict.max_rel_err <= 1e-5


UNSUPPORTED = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.dtype = torch.float32
        self.output = nn.Identity()
        self.device, self.trainable = None, True  # a tuple target (torch-uncertainty's MCBatchNorm)

    def forward(self, x):
        h = self.fc(x)
        h.add_(1)
        g = torch.tensor([1.0, 2.0], dtype=torch.float32)
        g[0] = 2.0
        return self.output(h)
"""


def test_what_is_not_converted_is_said() -> None:
    """Attributes keras.layers.Layer owns are renamed with a note, never left to fail; in-place
    tensor operations are converted (rules/torch_inplace_ops_model.py); `self.output` (BERT) is
    fine: TorchModule makes it assignable."""
    result = transpile(UNSUPPORTED, to="tf")
    assert not result.unsupported, [d.format() for d in result.unsupported]
    notes = [d.message for d in result.diagnostics if d.code == "keras-reserved-attribute"]
    assert len(notes) == 2 and notes[0].startswith("self.dtype renamed self.dtype_"), notes
    assert "self.dtype_ = tf.float32" in result.code and "self.device, self.trainable_ = None, True" in result.code
    assert '_torch_renamed = {"dtype_": "dtype", "trainable_": "trainable"}' in result.code
    assert "h = keras.ops.add(h, 1)" in result.code and "g = torch_at(g)[0].set(2.0)" in result.code


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_attribute_patterns_leave_assignment_targets_alone(to: str) -> None:
    """`self.device = k.device` (transformers' cache_utils): the `{x}.device` pattern reads a
    tensor's device; an assignment target is no read (it used to become a call: invalid code)."""
    source = (
        "import torch\n\n\nclass A:\n    def f(self, k: torch.Tensor):\n"
        "        self.dtype, self.device = k.dtype, k.device\n"
    )
    code = transpile(source, to=to).code
    assert "self.dtype, self.device = k.dtype, " in code


DENSE_PATTERNS = """
import torch
import torch.nn as nn


class Transition(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm = nn.BatchNorm2d(cin)
        self.relu = nn.ReLU()
        self.conv = nn.Conv2d(cin, cout, 1)


class Block(nn.ModuleDict):
    def __init__(self, n, c):
        super().__init__()
        for i in range(n):
            self.add_module("layer%d" % (i + 1), nn.Conv2d(c, c, 3, padding=1))

    def forward(self, x):
        for name, layer in self.items():
            x = x + layer(x)
        return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block(2, 4)
        self.trans = Transition(4, 8)

    def forward(self, x):
        return self.trans(self.block(x))
"""


def test_children_added_to_module_dicts_and_assigned_in_sequentials(tmp_path: Path) -> None:
    """torchvision DenseNet's patterns: `add_module` on a ModuleDict subclass makes entries that
    `items()` walks, and layers assigned as attributes of a Sequential subclass are its children,
    run in assignment order; torch's state_dict names reach them."""
    original, converted, code = _convert(DENSE_PATTERNS, tmp_path, "dense")
    options = VerifyOptions(entry="Net()", inputs=["float32[2,4,8,8]"])
    verdict = verify_files(original, converted, options, converted_code=code)
    assert verdict.passed, verdict.failures
    assert {"block.layer1", "block.layer2", "trans.norm", "trans.conv"} <= {layer.path for layer in verdict.layers}
