"""The lazy position finder agrees with LibCST's PositionProvider on every node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from precision_transpiler.rewrite.positions import PositionFinder

TRICKY = '''"""Doc."""
import torch ; import numpy as np


@torch.no_grad()
@decorate(
    lambda x: x.half(),
)
def f(a, b=torch.float16):
    if a:
        x = (
            a.to(torch.bfloat16)
            + b
        )
    elif b:  # comment
        for i in range(3):
            y = i; z = torch.half
        else:
            pass
    else:
        try:
            w = torch.float
        except ValueError as err:
            w = torch.double
        finally:
            q = 1
    while a:
        with ctx() as c:
            class Inner(torch.nn.Module):
                dtype = torch.int8
    return [t.float() for t in a]
'''


def _check(source: str) -> int:
    module = cst.parse_module(source)
    truth = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    finder = PositionFinder(module, source)
    checked = 0

    class Walk(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            self.stack.append(node)
            if isinstance(node, cst.Name | cst.Attribute | cst.Call):
                nonlocal checked
                pos = truth[node].start
                assert finder.find(node, self.stack) == (pos.line, pos.column + 1), cst.Module([]).code_for_node(node)
                checked += 1
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            self.stack.pop()

    module.visit(Walk())
    return checked


def test_tricky_layout() -> None:
    assert _check(TRICKY) > 50


PROJECT_FILES = [
    p
    for p in sorted(Path(__file__).resolve().parents[2].glob("precision_transpiler/**/*.py"))
    if "def " in p.read_text()
]


@pytest.mark.parametrize(
    "path",
    # files over 20 kB take seconds each: `slow` (make test checks every file, make test-fast the rest)
    [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.stat().st_size > 20_000 else []) for p in PROJECT_FILES],
)
def test_real_files(path: Path) -> None:
    assert _check(path.read_text()) > 0
