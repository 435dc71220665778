"""torch calls given positional arguments unpacked from a sequence (op-pattern's `_star_call`).

`x.clamp(*self.bounds)` fills torch's parameters only at run time: the call goes through a lambda
with torch's parameters, its body the converted call, and the user's arguments are passed to it
as written. Calls of the user's own functions and of methods that are not tensor methods keep
their star arguments as written.
"""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
from torch import nn


def scale(x, *factors):  # the user's own: its star arguments stay
    for f in factors:
        x = x * f
    return x


class Net(nn.Module):
    def __init__(self, bounds=(-0.5, 0.5)):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bounds = tuple(bounds)
        self.dims = (1,)
        self.floor = (0.0,)  # `min` alone: on Keras another call than for both bounds
        self.gain = nn.Parameter(torch.ones(8))

    def forward(self, x):
        y = self.lin(x).clamp(*self.bounds)
        z = torch.clamp(x, *self.bounds)
        w = torch.cat([y, z], *self.dims)
        return scale(w, *[2.0, 0.5]) + self.gain.clamp(*self.bounds) + w.clamp(*self.floor)
"""


def test_star_arguments_go_through_a_lambda_with_torchs_parameters() -> None:
    result = transpile(SOURCE, to="jax")
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    code = result.code
    assert "(lambda min=None, max=None: jnp.clip(self.lin(x), min=min, max=max))(*self.bounds)" in code
    assert "(lambda input, min=None, max=None: jnp.clip(input, min=min, max=max))(x, *self.bounds)" in code
    assert "(lambda tensors, dim=0: jnp.concatenate(tensors, axis=dim))([y, z], *self.dims)" in code
    assert "return scale(w, *[2.0, 0.5]) + (lambda min=None, max=None: jnp.clip(self.gain" in code


def test_a_method_strs_have_too_needs_a_tensor_receiver() -> None:
    # `names.split(*seps)` may be the str's: left as written (and reported, as any method call on
    # an unknown receiver that no pattern matches), never turned into a tensor split
    source = SOURCE.replace(
        "        w = torch.cat",
        '        names = "a,b".upper()\n        parts = names.split(*[","])\n        w = torch.cat',
    )
    code = transpile(source, to="jax").code
    assert 'parts = names.split(*[","])' in code and "torch_split" not in code


def test_on_keras_the_bounds_given_choose_the_call_at_run_time() -> None:
    code = transpile(SOURCE, to="tf").code
    assert (
        "(lambda min=None, max=None: keras.ops.minimum(keras.ops.maximum(w, min), max) if min is not None and "
        "max is not None else keras.ops.maximum(w, min) if min is not None and max is None else "
        "keras.ops.minimum(w, max))(*self.floor)"
    ) in code


def test_without_star_arguments_nothing_changes() -> None:
    plain = SOURCE.replace("*self.bounds", "-0.5, 0.5").replace("*self.dims", "1").replace("*self.floor", "0.0")
    code = transpile(plain, to="jax").code
    assert "lambda" not in code.split("class Net", 1)[1]


@on_both_targets
def test_star_argument_calls_verify(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,4]"], name="stars")
    assert verdict.passed, verdict
