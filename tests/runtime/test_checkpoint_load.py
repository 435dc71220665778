"""`torch.load` converted: runtime/checkpoint.py reads torch's checkpoint files without torch.

Both of torch's formats (the zip archive `torch.save` writes, and the legacy stream that
`_use_new_zipfile_serialization=False` and older releases write) come back as NumPy arrays of the
saved dtypes, shapes and values, views and non-contiguous tensors included; a file that pickles
any other Python object is refused, as `torch.load(weights_only=True)` refuses it. A module that
loads its bundled weights in its constructor (facenet-pytorch's MTCNN networks) converts and
verifies torch-free on both targets.
"""

from __future__ import annotations

import collections
import io
import pickle
from pathlib import Path

import numpy as np
import pytest

from precision_transpiler import transpile
from precision_transpiler.runtime.checkpoint import torch_load
from precision_transpiler.verify import VerifyOptions, verify_files

torch = pytest.importorskip("torch")


def _state() -> collections.OrderedDict:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(3, 4, generator=generator)
    return collections.OrderedDict(
        weight=weight,
        transposed=torch.arange(6).reshape(2, 3).t(),
        half=torch.randn(5, generator=generator).half(),
        bf16=torch.randn(2, 2, generator=generator).bfloat16(),
        scalar=torch.tensor(3.0),
        mask=torch.tensor([True, False]),
        parameter=torch.nn.Parameter(torch.ones(2)),
        view=weight[1:, 2:],
    )


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_both_formats_read_into_numpy(tmp_path: Path, zip_format: bool) -> None:
    state = _state()
    path = tmp_path / "ckpt.pt"
    torch.save({"state_dict": state, "epoch": 3, "names": ["x"]}, path, _use_new_zipfile_serialization=zip_format)
    loaded = torch_load(str(path), map_location="cpu", weights_only=True)
    assert loaded["epoch"] == 3 and loaded["names"] == ["x"]
    assert list(loaded["state_dict"]) == list(state)
    for name, tensor in state.items():
        got = loaded["state_dict"][name]
        assert isinstance(got, np.ndarray) and got.shape == tuple(tensor.shape), name
        assert str(got.dtype) == str(tensor.dtype).removeprefix("torch."), (name, got.dtype)
        np.testing.assert_array_equal(got.astype(np.float64), tensor.detach().double().numpy(), err_msg=name)
    with path.open("rb") as stream:  # an open file as well as a path
        assert list(torch_load(stream)) == ["state_dict", "epoch", "names"]


class Pickled:
    pass


def test_other_pickled_objects_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "object.pt"
    torch.save({"model": Pickled()}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"test_checkpoint_load.Pickled"):
        torch_load(path)
    with pytest.raises(pickle.UnpicklingError, match="not a torch checkpoint"):
        torch_load(io.BytesIO(pickle.dumps(1)))


BUNDLED = """import os
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, pretrained=True):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 2)
        if pretrained:  # weights shipped beside the module, as facenet-pytorch's MTCNN does
            state_dict = torch.load(os.path.join(os.path.dirname(__file__), "net.pt"), map_location="cpu")
            self.load_state_dict(state_dict)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))
"""


@pytest.mark.needs_jax
@pytest.mark.needs_tf
@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_module_loading_its_bundled_weights_converts_and_verifies(tmp_path: Path, target: str) -> None:
    original = tmp_path / "model.py"
    original.write_text(BUNDLED, encoding="utf-8")
    namespace: dict = {"__file__": str(original)}
    exec(compile(BUNDLED, str(original), "exec"), namespace)
    torch.save(namespace["Net"](pretrained=False).state_dict(), tmp_path / "net.pt")
    result = transpile(BUNDLED, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert "state_dict = torch_load(" in result.code and "import torch\n" not in result.code
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    verdict = verify_files(
        original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,3,8,8]"], torch_free=True)
    )
    assert verdict.passed, verdict.failures
