"""Outputs that are objects, not tensors or containers: a result class of the model's own
(pfrl's `DiscreteActionValue`, with a `lazy_property` of torch.distributions.utils) and a
distribution (`Independent(Normal(loc, scale))`, pfrl's Gaussian heads). Verification compares
them by their public attributes (verify/adapters/base.py `flatten_outputs`); before, "the
original model returned no tensors"."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from precision_transpiler.verify.adapters.base import flatten_outputs
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """
import torch
import torch.nn as nn
from torch import distributions
from torch.distributions.utils import lazy_property


class ActionValue:
    def __init__(self, q_values):
        self.q_values = q_values

    @lazy_property
    def greedy(self):
        return self.q_values.argmax(dim=-1)


class QHead(nn.Module):
    def __init__(self, d=4, n=3):
        super().__init__()
        self.fc = nn.Linear(d, n)

    def forward(self, x):
        value = ActionValue(self.fc(x))
        assert value.greedy.shape == (x.shape[0],)
        return value


class GaussianHead(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.mean = nn.Linear(d, d)
        self.log_std = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        normal = distributions.Normal(self.mean(x), self.log_std.exp())
        return distributions.Independent(normal, 1)
"""


def test_objects_flatten_by_public_attributes() -> None:
    class Result:
        def __init__(self) -> None:
            self.logits, self._cache, self.count = 1.5, 2.5, "n"

    pairs = flatten_outputs(Result(), lambda v: isinstance(v, float))
    assert pairs == [("out.logits", 1.5)]  # private and non-tensor attributes left out
    assert flatten_outputs([Result()], lambda v: isinstance(v, float)) == []  # inside an output: not walked

    def function() -> None: ...

    function.logits = 1.5  # type: ignore[attr-defined]
    assert flatten_outputs(function, lambda v: isinstance(v, float)) == []  # a callable is not walked


@on_both_targets
def test_a_result_object_with_a_lazy_property_verifies(tmp_path: Path, target: str) -> None:
    result = transpile(SOURCE, to=target)
    assert "torch." not in result.code.split("class ActionValue")[1] and not result.unsupported
    verdict = convert_and_verify(tmp_path, SOURCE, target, "QHead()", ["float32[2,4]"])
    assert verdict.passed, verdict.failures
    assert [o.name for o in verdict.outputs] == ["out.greedy", "out.q_values"]


@on_both_targets
def test_a_returned_distribution_verifies(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "GaussianHead()", ["float32[2,4]"])
    assert verdict.passed, verdict.failures
    assert [o.name for o in verdict.outputs] == ["out.base_dist.loc", "out.base_dist.scale"]
