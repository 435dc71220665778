"""torch's Module internals that real model code touches, on converted classes and on user
subclasses of runtime layers: `_modules`, `_parameters`, `_buffers` read directly (pytorchcv's
containers iterate `self._modules.values()`, in registration order), a subclass of a norm layer
that registers its own `running_mean` / `running_var` (lightly's SplitBatchNorm), and buffers set
to new tensors outside `register_buffer`. Each converts to JAX and Keras,
builds, takes the torch weights and computes what torch computes, torch-free."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

INTERNALS = """import torch
import torch.nn as nn


class Concurrent(nn.Sequential):
    def forward(self, x):
        return torch.cat([m(x) for m in self._modules.values()], dim=1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.branches = Concurrent()
        self.branches.add_module("a", nn.Conv2d(3, 4, 1))
        self.branches.add_module("b", nn.Conv2d(3, 2, 3, padding=1))
        self.scale = nn.Parameter(torch.ones(1))
        self.register_buffer("shift", torch.zeros(1))

    def forward(self, x):
        names = sorted(self._parameters) + sorted(self._buffers) + sorted(self._modules)
        assert names == ["scale", "shift", "branches"], names
        return self.branches(x) * self._parameters["scale"] + self._buffers["shift"]
"""

SPLIT_BATCH_NORM = """import torch
import torch.nn as nn


class SplitBatchNorm(nn.BatchNorm2d):
    def __init__(self, num_features, num_splits=2, **kw):
        super().__init__(num_features, **kw)
        self.num_splits = num_splits
        self.register_buffer("running_mean", torch.zeros(num_features * self.num_splits))
        self.register_buffer("running_var", torch.ones(num_features * self.num_splits))

    def forward(self, input):
        return nn.functional.batch_norm(
            input, self.running_mean[: self.num_features], self.running_var[: self.num_features],
            self.weight, self.bias, False, self.momentum, self.eps,
        )
"""

EMBEDDING_SUBCLASS = """import torch.nn as nn
import torch.nn.functional as F


class PosEmb(nn.Embedding):
    # fair-esm's LearnedPositionalEmbedding hands torch's whole signature to F.embedding
    def forward(self, idx):
        return F.embedding(
            idx, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
        )
"""

MODULE_DICT_SUBCLASS = """import torch
import torch.nn as nn


class MixedConv(nn.ModuleDict):
    # geffnet's MixedConv2d: a ModuleDict with attributes of its own, iterated for its modules
    def __init__(self, channels=4, kernels=(1, 3)):
        super().__init__()
        self.splits = [channels // len(kernels)] * len(kernels)
        self.in_channels = channels
        for i, k in enumerate(kernels):
            self.add_module(str(i), nn.Conv2d(self.splits[i], self.splits[i], k, padding=k // 2))

    def forward(self, x):
        parts = torch.split(x, self.splits, 1)
        assert len(self) == len(self.splits) and list(self.keys()) == ["0", "1"]
        return torch.cat([conv(parts[i]) for i, conv in enumerate(self.values())], 1)
"""

DROPPED_BIAS = """import torch
from torch import nn


class Net(nn.Module):
    # spikingjelly's BatchNormThroughTime: `bn.bias = None` drops the parameter, as torch does
    def __init__(self, c: int = 4, steps: int = 2):
        super().__init__()
        self.bns = nn.ModuleList(nn.BatchNorm1d(c) for _ in range(steps))
        for bn in self.bns:
            bn.bias = None
        self.conv = nn.Conv1d(c, c, 3, padding=1)
        self.conv.bias = None

    def forward(self, x):
        return self.conv(self.bns[1](self.bns[0](x)))
"""

# pytorchcv's MultiOutputSequential: children run in the order they were added, which is not the
# order of their names (`final_pool` comes last); the JAX verifier runs under jax.jit, where nnx
# rebuilds the module with its attributes sorted by name
REGISTRATION_ORDER = """import torch
import torch.nn as nn


class Chain(nn.Sequential):
    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = Chain()
        self.features.add_module("stem", nn.Conv2d(3, 4, 3))
        self.features.add_module("body", nn.Conv2d(4, 4, 3))
        self.features.add_module("final_pool", nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(4, 2)
        self.bias = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        names = [name for name, _ in self.named_parameters()]
        assert names[0] == "bias" and names[1].startswith("features.stem."), names
        return self.head(self.features(x).flatten(1)) + self.bias
"""

# torch-uncertainty's MCBatchNorm: a buffer of a layer (its own or its base's) set to a new tensor
# from outside register_buffer stays a buffer, in the state dict (also with another shape)
BUFFER_SET_AGAIN = """import torch
import torch.nn as nn


class MCNorm(nn.BatchNorm1d):
    def __init__(self, n):
        super().__init__(n)
        self.register_buffer("means", torch.zeros(n))
        self.register_buffer("counts", torch.zeros(1))

    def reset(self):
        self.running_mean = torch.full_like(self.running_mean, 0.25)
        self.counts = torch.ones(2)


class Net(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.norm = MCNorm(n)
        self.norm.reset()
        self.norm.means = torch.ones(n)

    def forward(self, x):
        return self.norm(x) + self.norm.means + self.norm.counts.sum()
"""

# microsoft Swin's blocks: `attn_mask = None` unless shifted, then
# `self.register_buffer("attn_mask", attn_mask)`: no state-dict key when None, handed on and
# tested as None
NONE_BUFFER = """import torch
import torch.nn as nn


def attend(x, mask=None):
    return x if mask is None else x + mask


class Block(nn.Module):
    def __init__(self, shift=0):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        if shift > 0:
            attn_mask = torch.full((4,), -1.0)
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x):
        y = attend(self.lin(x), mask=self.attn_mask)
        return y if self.attn_mask is None else y * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(0), Block(1)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""


def test_registration_order_survives_nnx_merge() -> None:
    """nnx.split then nnx.merge (what nnx.jit does) sorts a module's attributes by name; the
    walks keep torch's order (`_modules`, `named_parameters`, `state_dict`)."""
    from flax import nnx

    namespace: dict = {}
    exec(compile(transpile(REGISTRATION_ORDER, to="jax").code, "model_jax.py", "exec"), namespace)
    merged = nnx.merge(*nnx.split(namespace["Net"]()))
    assert list(merged.features._modules) == ["stem", "body", "final_pool"]
    assert [name for name, _ in merged.named_children()] == ["features", "head"]
    assert list(merged.state_dict())[:3] == ["bias", "features.stem.weight", "features.stem.bias"]


# nflows' LULinear: index arrays made with NumPy held in a plain tuple attribute (nnx refused
# them as static: "Found data on value of type tuple assigned to static attribute")
NUMPY_INDICES = """import numpy as np
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.lower_indices = np.tril_indices(n, k=-1)
        self.entries = nn.Parameter(torch.randn((n - 1) * n // 2))
        self.n = n

    def forward(self, x):
        lower = x.new_zeros(self.n, self.n)
        lower[self.lower_indices[0], self.lower_indices[1]] = self.entries
        return x @ (lower + torch.eye(self.n))
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
@pytest.mark.parametrize(
    ("source", "entry", "shape"),
    [
        (INTERNALS, "Net()", "float32[2,3,5,5]"),
        (SPLIT_BATCH_NORM, "SplitBatchNorm(4)", "float32[2,4,3,3]"),
        (EMBEDDING_SUBCLASS, "PosEmb(10, 4, padding_idx=1)", "int64[2,5]<10"),
        (MODULE_DICT_SUBCLASS, "MixedConv()", "float32[1,4,6,6]"),
        (DROPPED_BIAS, "Net()", "float32[2,4,5]"),
        (REGISTRATION_ORDER, "Net()", "float32[2,3,8,8]"),
        (BUFFER_SET_AGAIN, "Net()", "float32[3,4]"),
        (NONE_BUFFER, "Net()", "float32[3,4]"),
        (NUMPY_INDICES, "Net()", "float32[3,4]"),
    ],
    ids=[
        "module-internals",
        "norm-subclass-buffers",
        "embedding-subclass-attributes",
        "module-dict-attributes",
        "dropped-bias",
        "registration-order",
        "buffer-set-again",
        "buffer-registered-as-none",
        "numpy-index-arrays-in-a-tuple",
    ],
)
def test_internals_convert_and_verify(tmp_path: Path, target: str, source: str, entry: str, shape: str) -> None:
    original = tmp_path / "model.py"
    original.write_text(source, encoding="utf-8")
    result = transpile(source, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    verdict = verify_files(original, converted, VerifyOptions(entry=entry, inputs=[shape], torch_free=True))
    assert verdict.passed, verdict.failures
