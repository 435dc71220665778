"""torch functions passed around as values (rules/op_references.py, op-pattern's `_reference`).

`act = F.relu` becomes the target function itself when an op maps a one-tensor call of it to a
one-argument call (`jax.nn.relu`). A function whose target call takes its arguments otherwise
(`partial(torch.cat, dim=-1)`: `jnp.concatenate(tensors, axis=dim)`) becomes a lambda with torch's
parameters and the converted call as its body, so it is called as the original was, by position
or by torch's keywords. Names that are not torch's stay as written.
"""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


def cat(parts, dim=0):  # the user's own: not torch's
    return parts[0]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = F.relu
        self.floor = partial(torch.clamp, min=0.0)  # `max` left out: None, torch's "not given"

    def forward(self, x):
        y = self.act(self.lin(x))
        a, b = map(partial(torch.cat, dim=-1), ((x, y), (y, x)))
        join = torch.cat
        c = join(tensors=[a, b], dim=0)
        # factories handed around with torch's keywords (equiformer's `partial(torch.arange, device=device)`)
        arange, ones = partial(torch.arange, device=x.device), partial(torch.ones, dtype=x.dtype)
        counts = arange(c.shape[-1], dtype=x.dtype) + torch.zeros(c.shape[-1]) + ones(1, c.shape[-1]) + ones((1, 1))
        # checkpointing handed around (memory-efficient-attention's `partial(checkpoint, fn)`)
        checkpointed = partial(checkpoint, torch.add)
        return self.floor(c) + cat([c]) + checkpointed(counts, 1.0, use_reentrant=False)
"""


def test_references_become_functions_or_lambdas() -> None:
    jax_code = transpile(SOURCE, to="jax").code
    assert "self.act = jax.nn.relu" in jax_code
    assert "partial(lambda tensors, dim=0: jnp.concatenate(tensors, axis=dim), dim=-1)" in jax_code
    assert "join = lambda tensors, dim=0: jnp.concatenate(tensors, axis=dim)" in jax_code
    assert "return self.floor(c) + cat([c])" in jax_code
    assert (
        "partial(lambda input, min=None, max=None: jnp.clip(input, min=min, max=max), min=0.0)" in jax_code
        and "def cat(parts, dim=0):" in jax_code
    )
    assert "arange, ones = partial(torch_arange_function, device=" in jax_code
    assert "partial(torch_ones, dtype=x.dtype)" in jax_code
    assert "checkpointed = partial(torch_checkpoint, lambda input, other, alpha=1: " in jax_code
    assert "make = torch_zeros" in transpile("import torch\n\nmake = torch.empty\n", to="jax").code
    tf_code = transpile(SOURCE, to="tf").code
    assert "lambda tensors, dim=0: keras.ops.concatenate(tensors, axis=dim)" in tf_code


@on_both_targets
def test_passed_torch_functions_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,4]"], name="refs")
    assert verdict.passed, verdict


INITIALISERS = """from functools import partial

from torch import nn


def init_weights(m, fn=nn.init.kaiming_normal_):
    if isinstance(m, nn.Linear):
        fn(m.weight)


class Net(nn.Module):
    def __init__(self, init=partial(nn.init.normal_, std=0.02)):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        init(self.lin.weight)
        self.apply(init_weights)

    def forward(self, x):
        return self.lin(x)
"""


@on_both_targets
def test_initialisers_passed_as_values_leave_the_tensor_and_say_so(tmp_path: Path, target: str) -> None:
    # initialiser statements are dropped (the torch weights are loaded); handed around as values,
    # they become the runtime's function that returns the tensor as it is, with the same note
    result = transpile(INITIALISERS, to=target)
    assert "def init_weights(m, fn=torch_init_skipped):" in result.code
    assert "partial(torch_init_skipped, std=0.02)" in result.code
    assert not [ln for ln in result.code.splitlines() if ln.startswith(("import torch", "from torch"))]
    notes = [d for d in result.diagnostics if d.code == "init-dropped"]
    assert [(d.line, d.col) for d in notes] == [(6, 24), (12, 37)], [d.format() for d in notes]
    verdict = convert_and_verify(tmp_path, INITIALISERS, target, "Net()", ["float32[2,4]"], name="inits")
    assert verdict.passed, verdict


def test_a_torch_type_in_an_annotation_or_isinstance_stays_a_type() -> None:
    # torch-uncertainty's `device: torch.device | None`: `(lambda ...) | None` would raise when
    # the converted file is imported
    source = (
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n"
        "    def __init__(self, device: torch.device | None = None):\n        super().__init__()\n"
        "        self.ok = isinstance(device, torch.device)\n\n    def forward(self, x):\n        return x\n"
    )
    for target in ("jax", "tf"):
        code = transpile(source, to=target).code
        assert "lambda" not in code.split("class M")[1]
        assert "device: TorchDevice | None = None" in code and "isinstance(device, TorchDevice)" in code
