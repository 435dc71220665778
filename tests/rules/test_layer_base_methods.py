"""A layer's methods called through its class in a subclass of it (rules/torch_layers_model.py).

loralib's LoRA layers derive from `nn.Embedding` / `nn.Linear` and call the base by name:
`nn.Embedding.__init__(self, ...)`, `nn.Embedding.forward(self, x)`, `nn.Embedding.train(self,
mode)`. Converted, the class is the one the base became and the method is the target's
(`forward` is Flax's `__call__`, Keras' `call`; `train` is TorchModule's; `reset_parameters`
keeps the values drawn at build), instead of an unsupported `torch.nn.Embedding.forward` left
importing torch. On Keras, TorchModule goes right after the layer base, before the mixin, so the
layer's own `super().__init__(dtype=...)` never reaches the mixin's `__init__` (torch's
Module.__init__ ends the chain too). Both targets verify.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
import torch.nn as nn


class LoRALayer:  # a plain mixin with an `__init__` of its own, called explicitly

    def __init__(self, r: int):
        self.r = r


class Embedding(nn.Embedding, LoRALayer):
    def __init__(self, num_embeddings, embedding_dim, r=2, **kwargs):
        nn.Embedding.__init__(self, num_embeddings, embedding_dim, **kwargs)
        LoRALayer.__init__(self, r=r)
        self.lora_A = nn.Parameter(torch.zeros(r, num_embeddings))
        self.lora_B = nn.Parameter(torch.zeros(embedding_dim, r))
        self.reset_parameters()

    def reset_parameters(self):
        nn.Embedding.reset_parameters(self)

    def train(self, mode: bool = True):
        nn.Embedding.train(self, mode)
        return self

    def forward(self, x):
        result = nn.Embedding.forward(self, x)
        return result + (self.lora_B @ self.lora_A).transpose(0, 1)[x]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = Embedding(32, 8)

    def forward(self, ids):
        return self.emb(ids)
"""


@pytest.mark.parametrize(("to", "call"), [("jax", "__call__"), ("tf", "call")])
def test_base_methods_name_the_converted_class(to: str, call: str) -> None:
    result = transpile(SOURCE, to=to)
    assert not result.unsupported, result.unsupported
    assert "Embedding.__init__(self, num_embeddings, embedding_dim, **kwargs)" in result.code
    assert f"Embedding.{call}(self, x)" in result.code
    assert "TorchModule.train(self, mode)" in result.code
    assert "Embedding.reset_parameters(self)" in result.code
    assert "import torch" not in result.code


@on_both_targets
def test_a_lora_embedding_verifies(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["int64[2,5]<32"], name="lora")
    assert verdict.passed, verdict
