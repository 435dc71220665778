"""Idioms of widely copied model files (pyGAT, the Annotated Transformer, pytorch/examples), each
converted to both targets and verified against torch: the mechanisms, not the files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.test_wild_mechanisms import _verify as verify_source
from tests.rules.test_torch_namespace_values import RNN_BY_NAME

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

TARGETS = ("jax", "tf")


def _verify(tmp_path: Path, name: str, source: str, to: str, entry: str, spec: str, policy: str = "fp32") -> str:
    """Convert, assert nothing is reported unsupported, verify against torch; the converted code."""
    return verify_source(tmp_path, name, source, to, policy, entry, spec).code


HEADS_IN_A_LIST = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.W = nn.Parameter(torch.empty(size=(d, d)))
        nn.init.xavier_uniform_(self.W.data, gain=1.414)

    def forward(self, x):
        return F.elu(torch.mm(x, self.W))


class GAT(nn.Module):
    def __init__(self, d=4, nheads=2):
        super().__init__()
        self.attentions = [Head(d) for _ in range(nheads)]
        for i, attention in enumerate(self.attentions):
            self.add_module('attention_{}'.format(i), attention)
        self.scales = [1.0, 2.0]

    def forward(self, x):
        return torch.cat([att(x) * s for att, s in zip(self.attentions, self.scales)], dim=1)
"""


@pytest.mark.parametrize("to", TARGETS)
def test_modules_held_in_a_plain_list_and_registered_by_name(tmp_path: Path, to: str) -> None:
    """pyGAT: a plain list of heads, each registered with `add_module`. nnx refuses a list of
    modules as a static attribute; torch's state dict names the heads by their registered names."""
    _verify(tmp_path, "gat", HEADS_IN_A_LIST, to, "GAT()", "float32[3,4]")


RESIDUAL_SUBLAYER = """
import copy
import math

import torch
import torch.nn as nn


def attention(query, key, value, mask=None):
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.matmul(scores.softmax(dim=-1), value)


class SublayerConnection(nn.Module):
    def __init__(self, size, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class Layer(nn.Module):
    def __init__(self, size, dropout):
        super().__init__()
        self.proj = nn.Linear(size, size)
        self.sublayer = SublayerConnection(size, dropout)

    def forward(self, x, mask):
        return self.sublayer(x, lambda x: attention(self.proj(x), x, x, mask))


class Encoder(nn.Module):
    def __init__(self, size=4, n=2, dropout=0.1):
        super().__init__()
        c = copy.deepcopy
        layer = Layer(size, dropout)
        self.layers = nn.ModuleList([c(layer) for _ in range(n)])

    def forward(self, x):
        mask = (x[..., 0] > 0).unsqueeze(-2)
        for layer in self.layers:
            x = layer(x, mask)
        return x
"""


@pytest.mark.parametrize("to", TARGETS)
def test_sublayers_handed_to_forward_aliased_copies_and_masks_compared_with_numbers(tmp_path: Path, to: str) -> None:
    """The Annotated Transformer: `forward(self, x, sublayer)` applies what it is handed (no
    `rngs` passed to it on Flax), `c = copy.deepcopy` then `c(layer)` (Keras deep-copies through
    the runtime), `scores.masked_fill(mask == 0, -1e9)` with a boolean mask (TensorFlow cannot
    compare a bool tensor with 0 by `==`)."""
    code = _verify(tmp_path, "encoder", RESIDUAL_SUBLAYER, to, "Encoder()", "float32[2,3,4]")
    assert "sublayer(self.norm(x))" in code
    if to == "tf":
        assert "c = torch_deepcopy" in code and "keras.ops.equal(mask, 0)" in code


WORD_LANGUAGE_MODEL = RNN_BY_NAME  # pytorch/examples' word language model: `getattr(nn, rnn_type)`


@pytest.mark.slow
@pytest.mark.parametrize("to", TARGETS)
def test_idioms_under_mixed_precision(tmp_path: Path, to: str) -> None:
    _verify(tmp_path, "gat", HEADS_IN_A_LIST, to, "GAT()", "float32[3,4]", policy="mixed")
    _verify(tmp_path, "encoder", RESIDUAL_SUBLAYER, to, "Encoder()", "float32[2,3,4]", policy="mixed")
    _verify(tmp_path, "rnn", WORD_LANGUAGE_MODEL, to, "RNNModel('GRU')", "int64[5,2]<10", policy="mixed")


FROZEN_BACKBONE = """
import torch.nn as nn


class Finetune(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)
        for p in self.backbone.parameters():
            p.requires_grad = False
        for name, p in self.head.named_parameters():
            p.requires_grad_(name != "bias")

    def forward(self, x):
        return self.head(self.backbone(x))
"""


@pytest.mark.parametrize("to", TARGETS)
def test_parameters_frozen_while_building(tmp_path: Path, to: str) -> None:
    """Fine-tuning code freezes a backbone: an nnx Param refuses `requires_grad`, a Keras variable
    has no `requires_grad_`. On Keras the flags become `trainable`."""
    code = _verify(tmp_path, "finetune", FROZEN_BACKBONE, to, "Finetune()", "float32[2,4]")
    if to == "tf":
        namespace: dict = {}
        exec(compile(code, "<converted>", "exec"), namespace)
        model = namespace["Finetune"]()
        trainable = model.trainable_variables
        assert len(trainable) == 1 and trainable[0] is model.head.weight, [v.path for v in trainable]


STAGE_WITH_OPTIONAL_DOWNSAMPLE = """
import torch
import torch.nn as nn


class Merge(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.reduction = nn.Linear(2 * dim, dim)
        self.reduction.weight = nn.init.kaiming_normal_(self.reduction.weight, a=0.01)

    def forward(self, x):
        return self.reduction(torch.cat([x, x * torch.pi], dim=-1))


class Stage(nn.Module):
    def __init__(self, dim=4, downsample=Merge):
        super().__init__()
        self.downsample = downsample
        if callable(self.downsample):
            self.downsample = downsample(dim=dim)
        self.att_mat = torch.Tensor()

    def forward(self, x):
        offsets = torch.arange(4) * torch.tensor([1, 2, 1, 2])
        return self.downsample(x) + offsets.float() + self.att_mat.numel()
"""


@pytest.mark.parametrize("to", TARGETS)
def test_an_attribute_holding_a_layer_class_then_the_layer(tmp_path: Path, to: str) -> None:
    """Swin-style stages keep the downsample class and then the layer built from it on the same
    attribute (nnx holds a class as static and refused the layer); around them, an initialiser
    assigned back to its tensor, `torch.pi`, an empty `torch.Tensor()` placeholder and
    `torch.tensor` of integers times an int64 `torch.arange` (TensorFlow's int32 failed)."""
    _verify(tmp_path, "stage", STAGE_WITH_OPTIONAL_DOWNSAMPLE, to, "Stage()", "float32[3,4]")


TORCH_ATTRIBUTES_OF_LAYERS = """
import torch
import torch.nn as nn


class Embeddings(nn.Module):
    def __init__(self, cardinalities=(3, 5), d=4):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(c, d) for c in cardinalities])
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        scale = self.embeddings[0].embedding_dim ** -0.5
        h = torch.stack([e(x[:, i]) for i, e in enumerate(self.embeddings)], dim=1) * scale
        return self.norm(h) * (1.0 - self.drop.p) + self.norm.eps + self.norm.normalized_shape[0]
"""


@pytest.mark.parametrize("to", TARGETS)
def test_torch_attributes_read_from_layers(tmp_path: Path, to: str) -> None:
    """rtdl's `self.embeddings[0].embedding_dim`: nnx.Embed calls it `features`. A file that reads
    a torch attribute the direct Flax class lacks builds the layer as the torch-signature class."""
    code = _verify(tmp_path, "attrs", TORCH_ATTRIBUTES_OF_LAYERS, to, "Embeddings()", "int64[2,2]<3")
    if to == "jax":
        assert "nnx.Embed(" not in code and "nnx.Dropout(" not in code


RESET_PARAMETERS = """
import torch
import torch.nn as nn


class Scaled(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(d))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.scale)

    def forward(self, x):
        return x * self.scale


class MLP(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.lins = nn.ModuleList([nn.Linear(d, d), nn.Linear(d, d)])
        self.norms = nn.ModuleList([nn.BatchNorm1d(d), nn.LayerNorm(d)])
        self.scaled = Scaled(d)
        self.reset_parameters()

    def reset_parameters(self):
        for lin in self.lins:
            lin.reset_parameters()
        for norm in self.norms:
            if norm is not None:
                norm.reset_parameters()
        self.scaled.reset_parameters()

    def forward(self, x):
        for lin, norm in zip(self.lins, self.norms):
            x = norm(lin(x)).relu()
        return self.scaled(x)
"""


@pytest.mark.parametrize("to", TARGETS)
def test_reset_parameters_on_any_layer(tmp_path: Path, to: str) -> None:
    """torch-geometric's MLP resets every linear layer and norm it holds: torch layers have
    `reset_parameters`, the target's (nnx.Linear, the runtime's BatchNorm1d) do not. The call
    becomes the runtime's `reset_parameters(m)`: a converted module's own method, else nothing
    (the weights come from the torch checkpoint)."""
    code = _verify(tmp_path, "reset", RESET_PARAMETERS, to, "MLP()", "float32[3,4]")
    assert "self.reset_parameters()" in code  # a class's own call stays a method call


STORE_INTO_A_HELPERS_RESULT = """
import torch
import torch.nn as nn


def fill_like(attr, n):
    return attr.new_full((n,) + attr.shape[1:], 0.5)


class SelfLoops(nn.Module):
    def forward(self, edge_index: torch.Tensor, edge_attr: torch.Tensor):
        mask = edge_index[0] != edge_index[1]
        loop_attr = fill_like(edge_attr, 4)
        loop_attr[edge_index[0][~mask]] = edge_attr[~mask]
        names = {}
        names["loops"] = loop_attr.sum()
        return torch.cat([edge_attr[mask], loop_attr], dim=0) + names["loops"]
"""


@pytest.mark.parametrize("to", TARGETS)
def test_store_into_a_helpers_result_at_a_tensor_index(tmp_path: Path, to: str) -> None:
    """torch-geometric's `add_remaining_self_loops`: `loop_attr[edge_index[0][inv_mask]] = ...`
    where `loop_attr` comes from a helper (the converter cannot tell it is a tensor) and the index
    is a tensor. Left as written it failed at the first call (JAX and TensorFlow tensors are
    immutable); it becomes the runtime's `torch_setitem`, and a dict's store stays as written."""
    code = verify_source(
        tmp_path, "loops", STORE_INTO_A_HELPERS_RESULT, to, "fp32", "SelfLoops()", "int64[2,5]<4", "float32[5,3]"
    ).code
    assert "loop_attr = torch_setitem(loop_attr, " in code
    assert 'names["loops"] = ' in code


INPLACE_CHAINS = """
import torch
import torch.nn as nn


class Coalesce(nn.Module):
    def __init__(self, n=5):
        super().__init__()
        self.n = n
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        idx = torch.zeros(h.size(0) + 1)
        idx[1:] = h[:, 0]
        idx[1:].mul_(self.n).add_(h[:, 1])
        idx[1:], perm = torch.sort(idx[1:])
        row = h[:, 2].clone()[perm]
        out = row.mul_(2.0).add_(h[:, 3]).sub_(1.0)
        return idx[1:] + out + row
"""


@pytest.mark.parametrize("to", TARGETS)
def test_chained_inplace_methods_on_views_and_names(tmp_path: Path, to: str) -> None:
    """torch-geometric's coalesce (`idx[1:].mul_(n).add_(e)`) and negative sampling
    (`idx = row.mul_(n).add_(col)`): every link changes the tensor, as torch's do."""
    code = _verify(tmp_path, "chains", INPLACE_CHAINS, to, "Coalesce()", "float32[3,4]")
    assert not re.search(r"\.(mul|add|sub)_\(", code)


IMPORTED_BY_NAME = """
import importlib

import torch
import torch.nn as nn

layers = importlib.import_module("einops.layers.torch")
F = importlib.import_module(name="torch.nn.functional")


class Patches(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.to_tokens = layers.Rearrange("b c (h p) w -> b (h w) (p c)", p=2)
        self.fc = nn.Linear(2 * d, d)

    def forward(self, x):
        return F.gelu(self.fc(self.to_tokens(x)))
"""


@pytest.mark.parametrize("to", TARGETS)
def test_torch_modules_imported_by_name_at_run_time(tmp_path: Path, to: str) -> None:
    """monai imports einops' layers with `optional_import("einops.layers.torch", name=...)`,
    others with `importlib.import_module`: the listed helpers become the imports they perform,
    which the tables convert (the converted code never loads torch's modules)."""
    code = _verify(tmp_path, "patches", IMPORTED_BY_NAME, to, "Patches()", "float32[2,4,2,3]")
    assert 'import_module("' not in code and "import einops.layers.torch" not in code


OWN_LINEAR = """
import torch
import torch.nn as nn


class Linear(nn.Module):
    \"\"\"A library's own Linear (torch-geometric's), named like torch's.\"\"\"

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels))

    def forward(self, x):
        return x @ self.weight.t()


class Conv(nn.Module):
    def __init__(self, nn, d=4):
        super().__init__()
        self.nn = nn
        self.own = Linear(d, d)

    def forward(self, x):
        return self.nn(self.own(x))
"""


@pytest.mark.parametrize("to", TARGETS)
@pytest.mark.parametrize("policy", ["fp32", "mixed"])
def test_entry_layers_named_like_the_models_own_classes(tmp_path: Path, to: str, policy: str) -> None:
    """`GINConv(nn=torch.nn.Linear(8, 16))` where the library defines a `Linear` of its own: the
    entry's layer is the runtime's counterpart of torch's, not the library's class (whose
    constructor takes no `dtype` under a policy, and is another class at fp32)."""
    _verify(tmp_path, "own_linear", OWN_LINEAR, to, "Conv(nn=torch.nn.Linear(4, 3))", "float32[2,4]", policy)
