"""`register_buffer` in every call form, and integer buffers meeting floats on Keras.

`self.register_buffer("bank", tensor=t, persistent=False)` (lightly's memory bank) and
`register_buffer(name="ptr", tensor=...)` bind by torch's signature: on JAX they become
`self.bank = Buffer(t, persistent=False)` like the positional form (a Buffer given `tensor=`
built nothing). A buffer made with an integer dtype (`torch.zeros(1, dtype=torch.long)`) holds
integers: added to a float on Keras it goes through `keras.ops.add`, which promotes as torch does
where TensorFlow's `+` refuses. Both targets build, load and verify.
"""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn


class Bank(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("bank", tensor=torch.ones(n, 4), persistent=False)
        self.register_buffer(name="ptr", tensor=torch.zeros(1, dtype=torch.long))
        self.register_buffer("scale", torch.full((4,), 2.0))
        self.register_parameter(name="extra", param=nn.Parameter(torch.ones(4)))

    def forward(self, x):
        return self.lin(x) * self.scale + self.bank[0] + self.ptr + self.extra
"""


def test_keyword_forms_bind_like_positional_ones() -> None:
    code = transpile(SOURCE, to="jax").code
    assert "self.bank = Buffer(jnp.ones((n, 4)), persistent=False)" in code
    assert "self.ptr = Buffer(jnp.zeros(1, dtype=jnp.int64))" in code
    assert "self.scale = Buffer(jnp.full((4,), 2.0))" in code  # the positional form, as before
    tf_code = transpile(SOURCE, to="tf").code
    assert "keras.ops.add(" in tf_code and "self.ptr)" in tf_code


@on_both_targets
def test_buffers_registered_by_keyword_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Bank(3)", ["float32[2,4]"], name="bank")
    assert verdict.passed, verdict


RESHAPED = """import torch
from torch import nn


class PosEmb(nn.Module):
    def __init__(self, dim, seq=4):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.register_buffer("relative_bias", torch.zeros(1, seq, dim))
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        self.relative_bias = self.fc(x)
        self.scale.data = torch.ones(x.shape[1], 1) * 2
        return x * self.scale + self.relative_bias
"""


@on_both_targets
def test_a_buffer_or_parameter_takes_a_tensor_of_another_shape(tmp_path: Path, target: str) -> None:
    """fastervit's `self.relative_bias = self.pos_emb` in forward, a buffer registered with
    another sequence length: torch takes the new shape; a Keras variable refused it."""
    verdict = convert_and_verify(tmp_path, RESHAPED, target, "PosEmb(16)", ["float32[1,9,16]"], name="reshaped")
    assert verdict.passed, verdict
