"""Integer tensors combined with floats, converted to Keras (rules/torch_int_promotion_tf.py), give
torch's dtypes and values: int64 * float -> float32, int64 / int -> float32, int64 * int -> int64."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from precision_transpiler import transpile
from tests.runtime.test_tensor_ops_execute_tf import plain_tf

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_tf]

SOURCE = """
import torch


def widths(depth: int, w_a: float, w_0: int):
    cont = torch.arange(depth) * w_a + w_0
    half = torch.arange(depth) / 2
    idx = torch.arange(depth)
    scaled = 0.5 * idx
    return cont, half, idx * 3, scaled
"""


def test_int_tensors_meeting_floats_promote_as_in_torch() -> None:
    result = transpile(SOURCE, to="tf")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "keras.ops.multiply(torch_arange(depth), w_a)" in result.code
    assert "keras.ops.true_divide(torch_arange(depth), 2)" in result.code
    assert "idx * 3" in result.code  # int times int: nothing to promote
    reference: dict[str, Any] = {}
    exec(compile(SOURCE, "t.py", "exec"), reference)
    converted: dict[str, Any] = {}
    exec(compile(result.code, "c.py", "exec"), converted)
    expected = reference["widths"](5, 27.89, 8)
    got = plain_tf(converted["widths"](5, 27.89, 8))
    for g, e in zip(got, expected, strict=True):
        e = e.numpy() if isinstance(e, torch.Tensor) else e
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-6)
