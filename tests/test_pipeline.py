"""The pipeline remembers sibling modules it converted (pipeline._CONVERTED_SIBLINGS): a second
model of the same package reuses them, and a changed sibling is converted again."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from precision_transpiler import pipeline, transpile

LAYERS = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x)){extra}
"""

MODEL = """
from torch import nn

from .layers import Block


class {name}(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.block = Block(d)

    def forward(self, x):
        return self.block(x)
"""


def _sibling_keys(path: Path) -> list[tuple[int, str, bool, str, str]]:
    return [key for key in pipeline._CONVERTED_SIBLINGS if key[3] == str(path)]


def test_sibling_conversions_are_reused_and_refreshed(tmp_path: Path) -> None:
    package = tmp_path / "cachepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    layers = package / "layers.py"
    layers.write_text(LAYERS.format(extra=""))
    first, second = package / "first.py", package / "second.py"
    first.write_text(MODEL.format(name="First"))
    second.write_text(MODEL.format(name="Second"))

    one = transpile(first.read_text(), to="jax", path=str(first))
    assert "class Block(TorchModule)" in one.code
    assert len(_sibling_keys(layers)) == 1
    two = transpile(second.read_text(), to="jax", path=str(second))
    assert len(_sibling_keys(layers)) == 1  # served from memory
    assert one.code.replace("First", "Second") == two.code

    # the sibling changed on disk: converted again, and the output says what it now does
    layers.write_text(LAYERS.format(extra=" * 2"))
    three = transpile(second.read_text(), to="jax", path=str(second))
    assert len(_sibling_keys(layers)) == 2
    assert "* 2" in three.code and "* 2" not in two.code
    # another target is another conversion
    keras = transpile(second.read_text(), to="tf", path=str(second))
    assert "keras" in keras.code and len(_sibling_keys(layers)) == 3


def test_a_run_retried_on_a_deep_stack_starts_from_the_input() -> None:
    """A chain deep enough that the rule engine runs out of the default stack is converted again
    on a deep stack, from a new Document: the result is the one a deep stack gives at once
    (nothing from the failed try counted twice)."""
    body = "x" + " + torch.ones(1)" * 400
    source = "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n"
    source += f"        return {body}\n"
    retried = transpile(source, to="jax", policy="mixed")
    assert not retried.errors
    assert retried.code.count("jnp.ones(1)") == 400
    assert retried.code.splitlines().count("import jax.numpy as jnp") == 1  # (copied functions import inside)
    assert len(retried.rewrites) == len({(r.line, r.col, r.rule) for r in retried.rewrites})
    at_once: list = []
    limit, size = sys.getrecursionlimit(), threading.stack_size()
    try:  # a stack deep enough for the first try
        threading.stack_size(512 * 1024 * 1024)
        sys.setrecursionlimit(200_000)
        thread = threading.Thread(target=lambda: at_once.append(transpile(source, to="jax", policy="mixed")))
        thread.start()
        thread.join()
    finally:
        threading.stack_size(size)
        sys.setrecursionlimit(limit)
    assert at_once[0].code == retried.code
    assert at_once[0].rewrites == retried.rewrites and at_once[0].diagnostics == retried.diagnostics
    assert at_once[0].imports_added == retried.imports_added


MLP = """import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d=16, h=32):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.norm = nn.LayerNorm(h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        return F.softmax(self.fc2(self.norm(x)), dim=-1)
"""


class _CountingDocument(pipeline.Document):
    """A Document that counts the parses and prints of the model it holds."""

    parses = 0
    prints = 0

    def tree(self):  # type: ignore[no-untyped-def]
        if self._tree is None:
            self.parses += 1
        return super().tree()

    def code(self) -> str:
        if self._code is None:
            self.prints += 1
        return super().code()


def test_a_model_is_parsed_once_and_printed_once() -> None:
    """Converting a 16-line model, with or without a policy, on either target: the document parses
    the input once and prints the converted model once (the import edit hands on the text it
    printed; the runtime definitions are inserted as statements)."""
    from precision_transpiler.options import Options

    for to in ("jax", "tf"):
        for policy in ("fp32", "mixed"):
            for runtime in ("inline", "module"):
                options = Options.build(to=to, policy=policy, runtime=runtime)
                doc = _CountingDocument(MLP, "<string>")
                pipeline.run_pipeline(doc, options.job("<string>"))
                assert (doc.parses, doc.prints) == (1, 1), (to, policy, runtime)
                assert not doc.unchanged and ("nnx" if to == "jax" else "keras") in doc.code()
    # the counter counts: text set by a stage is parsed again when the next stage asks for a tree
    doc = _CountingDocument(MLP, "<string>")
    doc.tree()
    doc.set_code(doc.code() + "\n")
    doc.tree()
    assert (doc.parses, doc.prints) == (2, 0)  # (the input's text is held: no print)


def test_every_stage_declares_what_it_works_on() -> None:
    stages = {*pipeline.PREPARE, *pipeline.OTHERWISE, *(s for plan in pipeline.PLANS.values() for s in plan)}
    assert {
        stage.__name__: stage.works_on for stage in stages if stage.works_on not in ("tree", "text", "nothing")
    } == {}
    # the stages the tree passes through from the parse to the end of a torch model's conversion
    assert [s.works_on for s in pipeline.PREPARE if s.__name__ in ("Parse", "RewriteSymbols")] == ["tree", "tree"]
    assert pipeline.VendorRuntime.works_on == "tree"
