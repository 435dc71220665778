"""convert/class_reach.py: what a class copied from another module keeps. A subclass of one of
Python's containers keeps its overrides of the container's methods although the converted code
never names them: whoever reads the container calls them (torchmultimodal's
`ModelOutput(OrderedDict)` returns its dataclass fields from `values` and `items`; left out,
Keras flattened the model's output to nothing). Other classes still lose what nothing reaches."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from precision_transpiler import transpile
from precision_transpiler.convert.class_reach import kept_members
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.convert.siblings.packages import write_package
from tests.helpers import on_both_targets

OUTPUTS = """
    from collections import OrderedDict
    from dataclasses import dataclass, fields
    from typing import Any

    from torch import Tensor


    class ModelOutput(OrderedDict):
        def keys(self) -> Any:
            for field in fields(self):
                yield field.name

        def __getitem__(self, key: Any) -> Any:
            return getattr(self, key)

        def __iter__(self) -> Any:
            yield from self.keys()

        def values(self) -> Any:
            for field in fields(self):
                yield getattr(self, field.name)

        def items(self) -> Any:
            for field in fields(self):
                yield field.name, getattr(self, field.name)

        def describe(self) -> str:
            return "unused"


    @dataclass
    class HeadOutput(ModelOutput):
        logits: Tensor
        loss: Tensor
"""

HEAD = """
    from torch import nn

    from .outputs import HeadOutput


    class Head(nn.Module):
        def __init__(self, d=8, n=5):
            super().__init__()
            self.fc = nn.Linear(d, n)

        def forward(self, x):
            logits = self.fc(x)
            return HeadOutput(logits=logits, loss=logits.sum() * 0)
"""


def _members(source: str) -> list[str]:
    cls = ast.parse(textwrap.dedent(source)).body[-1]
    assert isinstance(cls, ast.ClassDef)
    return [getattr(stmt, "name", "") for stmt in kept_members(cls, set())]


def test_a_container_subclass_keeps_its_container_methods() -> None:
    kept = _members(
        "class Out(OrderedDict):\n    def items(self): ...\n    def values(self): ...\n    def describe(self): ..."
    )
    assert kept == ["items", "values"]
    plain = _members("class Out(Base):\n    def items(self): ...\n    def values(self): ...")
    assert plain == []  # not a container: nothing reaches them


@on_both_targets
def test_a_returned_mapping_subclass_verifies(tmp_path: Path, target: str) -> None:
    write_package(tmp_path, {"out_pkg/outputs.py": OUTPUTS, "out_pkg/head.py": HEAD})
    model = tmp_path / "out_pkg/head.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert "def items(self)" in result.code and "def describe" not in result.code, result.code
    converted = tmp_path / f"head_{target}.py"
    converted.write_text(result.code)
    verdict = verify_files(model, converted, VerifyOptions(entry="Head()", inputs=["float32[2,8]"], torch_free=True))
    assert verdict.passed, verdict.failures
