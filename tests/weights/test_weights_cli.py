"""`ptranspile weights`, end to end: a small torch CNN is converted to Flax NNX, its torch
checkpoint is converted by the command (both output layouts), loaded back into the converted
model, and the outputs must equal torch's (relative L2 <= 1e-5). Error cases exit 2 with one
line and write nothing."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from precision_transpiler import transpile
from tests.helpers import run_cli

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax]

torch = pytest.importorskip("torch")
nnx = pytest.importorskip("flax.nnx")
pytest.importorskip("safetensors")

SMALL_CNN = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, classes: int = 10, depth: int = 2):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1)
        self.blocks = nn.Sequential(
            *[nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)) for _ in range(depth)]
        )
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.norm = nn.LayerNorm(8)
        self.head = nn.ModuleList([nn.Linear(8, 16), nn.GELU(), nn.Linear(16, classes)])

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = torch.relu(block(x) + x)
        x = self.norm(torch.flatten(self.pool(x), 1))
        for layer in self.head:
            x = layer(x)
        return x
"""


@dataclass
class Case:
    """One converted model and its torch checkpoint, shared by the tests of this module."""

    folder: Path
    original: Path
    converted: Path
    checkpoint: Path  # torch.save(model.state_dict())
    state_dict: dict[str, Any]
    x: np.ndarray
    expected: np.ndarray  # the torch model's output on x (eval mode)


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Case:
    folder = tmp_path_factory.mktemp("weights")
    original = folder / "small_cnn.py"
    original.write_text(SMALL_CNN)
    result = transpile(SMALL_CNN, to="jax", path=str(original))
    assert result.ok, [d.format() for d in result.diagnostics]
    converted = folder / "small_cnn_jax.py"
    converted.write_text(result.code)

    namespace: dict[str, Any] = {}
    exec(compile(SMALL_CNN, str(original), "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Net"]()
    with torch.no_grad():  # BatchNorm statistics that are not the identity, so the buffers matter
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.num_batches_tracked.fill_(7)
    model.eval()
    checkpoint = folder / "small_cnn.pt"
    torch.save(model.state_dict(), checkpoint)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    return Case(folder, original, converted, checkpoint, state, x, expected)


def _converted_model(case: Case, **kwargs: Any) -> Any:
    """A fresh, abstract (no random init) instance of the converted Net."""
    from precision_transpiler.verify.loading import import_converted

    module = import_converted(case.converted, case.converted)
    return nnx.eval_shape(lambda: module.Net(**kwargs))


def _rel_l2(model: Any, case: Case) -> float:
    model.eval()
    got = np.asarray(model(case.x))
    return float(np.linalg.norm(got - case.expected) / np.linalg.norm(case.expected))


def _header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file (dtypes and shapes as stored, and the metadata)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length])


@pytest.mark.slow
def test_torch_named_output_loads_into_the_converted_model(case: Case) -> None:
    from precision_transpiler.weights import load_checkpoint

    out = case.folder / "torch_named.safetensors"
    run = run_cli("weights", str(case.checkpoint), "--to", "jax", "-o", str(out))
    assert run.code == 0, run.err
    assert "wrote" in run.err and "load_checkpoint" in run.err and run.out == ""
    header = _header(out)
    assert header["__metadata__"]["ptranspile.layout"] == "torch"
    assert set(header) - {"__metadata__"} == set(case.state_dict)
    assert header["stem.weight"]["shape"] == [8, 3, 3, 3]  # torch layout (OIHW)
    counter = header["blocks.0.1.num_batches_tracked"]
    assert (counter["dtype"], counter["shape"]) == ("I64", [])  # a 0-d tensor stays 0-d
    model = _converted_model(case)
    load_checkpoint(model, out)
    assert _rel_l2(model, case) <= 1e-5


@pytest.mark.slow
def test_training_checkpoint_state_dict_is_found(case: Case) -> None:
    ckpt = case.folder / "train.pt"
    torch.save({"epoch": 3, "model": case.state_dict, "optimizer": {"lr": 0.1}}, ckpt)
    out, by_key = case.folder / "train.safetensors", case.folder / "train_key.safetensors"
    run = run_cli("weights", str(ckpt), "--to", "jax", "-o", str(out))
    assert run.code == 0, run.err
    assert "using the state_dict under 'model'" in run.err
    assert run_cli("weights", str(ckpt), "--to", "jax", "-o", str(by_key), "--key", "model", "-q").code == 0
    from precision_transpiler.weights import read_tensors

    for path in (out, by_key):
        arrays, _ = read_tensors(path)
        assert arrays.keys() == case.state_dict.keys()
        for name, tensor in case.state_dict.items():
            np.testing.assert_array_equal(arrays[name], tensor.numpy())


@pytest.mark.slow
def test_bfloat16_checkpoint_is_stored_as_bfloat16(case: Case) -> None:
    from precision_transpiler.weights import load_checkpoint

    ckpt, out = case.folder / "bf16.pt", case.folder / "bf16.safetensors"
    torch.save({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in case.state_dict.items()}, ckpt)
    run = run_cli("weights", str(ckpt), "--to", "jax", "-o", str(out))
    assert run.code == 0, run.err
    assert _header(out)["stem.weight"]["dtype"] == "BF16"
    from safetensors.torch import load_file

    back = load_file(out)  # bit-exact, and readable by torch's own safetensors loader
    assert torch.equal(back["stem.weight"], case.state_dict["stem.weight"].to(torch.bfloat16))
    model = _converted_model(case)
    load_checkpoint(model, out)  # cast to the model's float32 parameters
    assert model.stem.kernel[...].dtype == np.float32
    assert _rel_l2(model, case) <= 2e-2  # bf16 weights: only the rounding of the checkpoint differs


@pytest.mark.slow
def test_model_output_is_keyed_by_nnx_paths_and_round_trips(case: Case) -> None:
    from precision_transpiler.weights import load_checkpoint, load_flax_safetensors

    out = case.folder / "flax.safetensors"
    run = run_cli(
        "weights", str(case.checkpoint), "--to", "jax", "-o", str(out),
        "--model", str(case.converted), "--entry", "Net()", "--original", str(case.original),
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "runs that file" in run.err and "load_flax_safetensors" in run.err
    header = _header(out)
    assert header["__metadata__"]["ptranspile.layout"] == "flax-nnx"
    assert header["__metadata__"]["ptranspile.entry"] == "Net()"
    names = set(header) - {"__metadata__"}
    assert {"stem.kernel", "stem.bias", "blocks.0.1.mean", "blocks.1.0.kernel", "norm.scale", "head.2.kernel"} <= names
    assert not any(name.endswith((".weight", ".running_mean")) for name in names)
    assert header["stem.kernel"]["shape"] == [3, 3, 3, 8]  # Flax layout (HWIO)
    assert header["head.2.kernel"]["shape"] == [16, 10]  # Linear (in, out)

    model = _converted_model(case)
    load_flax_safetensors(model, out)
    assert _rel_l2(model, case) <= 1e-5
    assert int(model.blocks[0][1].num_batches_tracked[...]) == 7

    with pytest.raises(Exception, match="use load_flax_safetensors"):
        load_checkpoint(_converted_model(case), out)  # the layouts are not confused with each other
    with pytest.raises(Exception, match=r"missing key\(s\): 'blocks.2"):
        load_flax_safetensors(_converted_model(case, depth=3), out)


@pytest.mark.slow
def test_no_strict_loads_what_fits(case: Case) -> None:
    """Missing keys: the model is built for real (random init kept); unexpected keys: skipped."""
    from precision_transpiler.weights import read_tensors

    out, shallow = case.folder / "deeper.safetensors", case.folder / "shallow.safetensors"
    args = ["weights", str(case.checkpoint), "--to", "jax", "--model", str(case.converted), "--no-strict"]
    run = run_cli(*args, "-o", str(out), "--entry", "Net(depth=3)")
    assert run.code == 0, run.err
    assert "--no-strict: 6 missing key(s), left at their initial values: blocks.2.0.weight" in run.err
    arrays, _ = read_tensors(out)
    assert arrays["blocks.2.0.kernel"].shape == (3, 3, 8, 8) and np.abs(arrays["blocks.2.0.kernel"]).sum() > 0
    run = run_cli(*args, "-o", str(shallow), "--entry", "Net(depth=1)")
    assert run.code == 0, run.err
    assert "--no-strict: 6 unexpected key(s), skipped: blocks.1.0.weight" in run.err
    assert "blocks.1.0.kernel" not in read_tensors(shallow)[0]
    np.testing.assert_array_equal(
        arrays["blocks.0.0.kernel"], case.state_dict["blocks.0.0.weight"].numpy().transpose(2, 3, 1, 0)
    )


def _error_cases(case: Case) -> dict[str, tuple[list[str], str]]:
    ckpt, folder = str(case.checkpoint), case.folder
    (folder / "notes.txt").write_text("not a checkpoint\n")
    torch.save(torch.nn.Sequential(torch.nn.Linear(2, 2)), folder / "whole_model.pt")
    torch.save({"epoch": 1, "weights": case.state_dict}, folder / "odd_key.pt")
    model = ["--model", str(case.converted)]
    return {
        "missing file": ([str(folder / "nope.pt"), "--to", "jax"], "nope.pt: no such file"),
        "not a checkpoint": ([str(folder / "notes.txt"), "--to", "jax"], "notes.txt: not a torch checkpoint"),
        "whole model pickled": (
            [str(folder / "whole_model.pt"), "--to", "jax"],
            "refused it: it pickles the Python object torch.nn.modules.container.Sequential",
        ),
        "no state_dict found": (
            [str(folder / "odd_key.pt"), "--to", "jax"],
            "not a state_dict, and no entry 'state_dict', 'model_state_dict', 'model' holds one "
            "(top-level keys: 'epoch', 'weights'); pass --key KEY",
        ),
        "key not found": ([ckpt, "--to", "jax", "--key", "ema"], "no entry 'ema' (top-level keys: 'stem.weight'"),
        "mismatching model": (
            [ckpt, "--to", "jax", *model, "--entry", "Net(depth=3)"],
            "small_cnn_jax.py: load_torch_state_dict(Net): 6 missing key(s): blocks.2.",
        ),
        "wrong shapes": (
            [ckpt, "--to", "jax", *model, "--entry", "Net(classes=3)"],
            "head.2.weight has shape (10, 16)",
        ),
        "bad entry": ([ckpt, "--to", "jax", *model, "--entry", "Nett()"], "NameError: name 'Nett' is not defined"),
        "unknown --to": ([ckpt, "--to", "mxnet"], "argument --to: invalid choice: 'mxnet'"),
        "--to tf --model, not .weights.h5": (
            [ckpt, "--to", "tf", *model, "--entry", "Net()"],
            "--to tf --model writes a Keras weights file; name it OUT.weights.h5",
        ),
        "--entry without --model": ([ckpt, "--to", "jax", "--entry", "Net()"], "apply with --model"),
    }


ERROR_NAMES = [
    "missing file",
    "not a checkpoint",
    "whole model pickled",
    "no state_dict found",
    "key not found",
    "mismatching model",
    "wrong shapes",
    "bad entry",
    "--to tf --model, not .weights.h5",
    "unknown --to",
    "--entry without --model",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", ERROR_NAMES)
def test_errors_are_one_line_exit_2_and_write_nothing(case: Case, name: str) -> None:
    args, expected = _error_cases(case)[name]
    out = case.folder / "error_out" / "never.safetensors"
    run = run_cli("weights", *args, "-o", str(out))
    assert run.code == 2, (run.code, run.err)
    lines = [line for line in run.err.splitlines() if not line.startswith("ptranspile: weights: ")]
    assert len(lines) == 1, run.err
    assert lines[0].startswith("ptranspile"), run.err
    assert expected in lines[0], run.err
    assert "Traceback" not in run.err and run.out == ""
    assert not out.parent.exists()


def test_output_must_be_safetensors_and_not_an_input(case: Case) -> None:
    run = run_cli("weights", str(case.checkpoint), "--to", "jax", "-o", str(case.folder / "out.npz"))
    assert run.code == 2 and "name it OUT.safetensors" in run.err
    same = case.folder / "twice.safetensors"
    assert run_cli("weights", str(case.checkpoint), "--to", "jax", "-o", str(same), "-q").code == 0
    before = same.read_bytes()
    run = run_cli("weights", str(same), "--to", "jax", "-o", str(same))
    assert run.code == 2 and "would overwrite the input" in run.err
    assert same.read_bytes() == before


@pytest.mark.slow
def test_safetensors_checkpoint_needs_no_torch(case: Case) -> None:
    """torch is imported for torch.save files only: a .safetensors CKPT is re-keyed without it."""
    import subprocess
    import sys

    source = case.folder / "from_torch.safetensors"
    assert run_cli("weights", str(case.checkpoint), "--to", "jax", "-o", str(source), "-q").code == 0
    out = case.folder / "copy.safetensors"
    code = (
        "import sys\nfrom precision_transpiler.cli import main\n"
        f"rc = main(['weights', {str(source)!r}, '--to', 'jax', '-o', {str(out)!r}, '-q'])\n"
        "print(rc, 'torch' in sys.modules, 'jax' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["0", "False", "False"], proc.stderr
    from precision_transpiler.weights import read_tensors

    (copied, meta), (original, _) = read_tensors(out), read_tensors(source)
    assert meta["ptranspile.source"] == "from_torch.safetensors" and copied.keys() == original.keys()
    assert all(np.array_equal(copied[k], original[k]) for k in copied)


@pytest.mark.slow
def test_keras_weights_file_round_trips(case: Case) -> None:
    """`--to tf`: the torch-named file loads into the converted Keras model, and `--model` writes a
    Keras `.weights.h5` that restores it (no torch names left)."""
    import keras

    from precision_transpiler.verify.loading import import_converted
    from precision_transpiler.weights import load_checkpoint_keras, load_keras_weights

    converted = case.folder / "small_cnn_tf.py"
    converted.write_text(transpile(SMALL_CNN, to="tf", path=str(case.original)).code)
    module = import_converted(converted, case.original)

    def rel_l2(model: Any) -> float:
        got = np.asarray(keras.ops.convert_to_numpy(model(case.x)))
        return float(np.linalg.norm(got - case.expected) / np.linalg.norm(case.expected))

    named = case.folder / "keras_named.safetensors"
    run = run_cli("weights", str(case.checkpoint), "--to", "tf", "-o", str(named))
    assert run.code == 0 and "load_checkpoint_keras" in run.err, run.err
    model = module.Net()
    assert load_checkpoint_keras(model, named) == []
    assert rel_l2(model) <= 1e-5

    h5 = case.folder / "small_cnn.weights.h5"
    run = run_cli(
        "weights", str(case.checkpoint), "--to", "tf", "-o", str(h5),
        "--model", str(converted), "--entry", "Net()", "--original", str(case.original),
    )  # fmt: skip
    assert run.code == 0 and "load_keras_weights" in run.err, run.err
    restored = module.Net()
    load_keras_weights(restored, h5)
    assert rel_l2(restored) <= 1e-5
    with pytest.raises(Exception, match="does not fit"):
        load_keras_weights(module.Net(depth=3), h5)
