"""rules/dtype_symbol_any.py: dtype symbols renamed, and torch dtypes no target has (the
table's `without_equivalent`) named by the runtime's placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.runtime.dtypes import TorchOnlyDtype
from tests.helpers import convert_and_verify, on_both_targets

MEMBERSHIP = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if x.dtype not in (torch.float16, torch.float32, torch.complex32, torch.quint8):
            raise ValueError("not a float dtype")
        return self.fc(x) * (2.0 if torch.complex32 != torch.float32 else 1.0)
"""


@on_both_targets
def test_a_dtype_without_counterpart_keeps_torchs_answer(tmp_path: Path, target: str) -> None:
    """kornia's `dtype not in (..., torch.complex32, ...)` made the output import torch where it
    ran; the placeholder compares as torch's dtype does."""
    result = transpile(MEMBERSHIP, to=target)
    assert 'TorchOnlyDtype("complex32")' in result.code and "torch." not in result.code.split("class Net")[1]
    warnings = [d for d in result.diagnostics if d.code == "dtype-without-equivalent"]
    assert [(d.line, d.col) for d in warnings] == [(12, 58), (12, 75), (14, 37)], warnings
    verdict = convert_and_verify(tmp_path, MEMBERSHIP, target, "Net()", ["float32[2,4]"])
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_the_placeholder_is_refused_as_a_dtype_naming_torchs(target: str) -> None:
    placeholder = TorchOnlyDtype("complex32")
    assert placeholder == TorchOnlyDtype("complex32") and placeholder != TorchOnlyDtype("qint8")
    assert len({placeholder, TorchOnlyDtype("complex32")}) == 1
    if target == "jax":
        jnp = pytest.importorskip("jax.numpy")
        assert placeholder != jnp.float32 and jnp.dtype("float32") != placeholder
        with pytest.raises(TypeError, match=r"torch\.complex32"):
            jnp.zeros(2, dtype=placeholder)
    else:
        tf = pytest.importorskip("tensorflow")
        assert placeholder != tf.float32 and tf.float32 != placeholder
        with pytest.raises(TypeError, match=r"torch\.complex32"):
            tf.zeros(2, dtype=placeholder)


def test_to_torch_or_numpy_nothing_changes() -> None:
    source = "import torch\nd = torch.complex32\n"
    assert transpile(source, to="torch").code == source
    result = transpile(source, to="numpy")
    assert "TorchOnlyDtype" not in result.code and any("complex32" in d.message for d in result.diagnostics)
