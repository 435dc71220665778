"""A dataset class in a model's file (`class Pairs(torch.utils.data.Dataset)`) stays a plain
Python class on both targets (runtime/common.py's `TorchDataset`), so a whole file with one loads
torch-free; torch's `DataLoader` is data loading outside the model, and reported where used."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from precision_transpiler import transpile

pytestmark = [pytest.mark.needs_jax, pytest.mark.needs_tf]

SOURCE = """import torch
from torch.utils.data import Dataset, DataLoader
import torch.utils.data as data


class Pairs(Dataset):
    def __init__(self, n):
        self.x = torch.arange(n).float()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] * 2


class Stream(data.IterableDataset):
    def __iter__(self):
        yield from range(3)


def batches(ds: Dataset[int]):
    return DataLoader(ds, batch_size=2)
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_dataset_classes_stay_plain_python(target: str) -> None:
    result = transpile(SOURCE, to=target, path="data.py")
    (loader,) = result.unsupported
    assert loader.format().startswith("data.py:23:12: unsupported: torch.utils.data.DataLoader")
    assert "class Pairs(TorchDataset):" in result.code and "class Stream(TorchDataset):" in result.code
    module_code = result.code.split("def batches")[0]
    assert not re.search(r"^(import|from) torch\b", module_code, re.MULTILINE)
    namespace: dict[str, Any] = {}
    exec(compile(module_code, "data_converted.py", "exec"), namespace)
    pairs = namespace["Pairs"](4)
    assert len(pairs) == 4 and float(np.asarray(pairs[3])) == 6.0
    assert list(namespace["Stream"]()) == [0, 1, 2]
    assert isinstance(pairs, namespace["TorchDataset"])
