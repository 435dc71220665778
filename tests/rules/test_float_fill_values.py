"""torch.full and torch.arange infer their dtype from the values: a Python float makes float32
in torch as in JAX, so only integer values get the int32-without-x64 warning (`unless_float:` on
the JAX patterns, mappings/ops/tensor_ops.yaml)."""

from __future__ import annotations

import pytest

from precision_transpiler import transpile

HEADER = "import math\n\nimport torch\n\n\ndef f(n, x):\n    return "


def _implicit(call: str) -> list[str]:
    result = transpile(HEADER + call + "\n", to="jax")
    return [d.message for d in result.diagnostics if d.code == "implicit-dtype"]


@pytest.mark.parametrize(
    "call",
    [
        "torch.full((n, n), 0.5)",
        "torch.full((n, n), -1e9)",
        'torch.full((n, n), float("-inf"))',
        'torch.full((n, n), -float("inf"))',
        "torch.full((n, n), math.inf)",
        "torch.full((n, n), -math.inf)",
        "torch.full((n, n), fill_value=float('nan'))",
        "torch.full((n, n), 2 * 0.5)",
        "torch.arange(0.0, n)",
        "torch.arange(0, n, 0.5)",
    ],
)
def test_float_values_are_not_warned_about_as_integers(call: str) -> None:
    assert _implicit(call) == []


@pytest.mark.parametrize(
    "call", ["torch.full((n, n), 3)", "torch.full((n, n), -1)", "torch.full((n, n), x)", "torch.arange(0, n)"]
)
def test_integer_or_unknown_values_are_still_warned_about(call: str) -> None:
    assert any("jax_enable_x64" in m for m in _implicit(call)), call
