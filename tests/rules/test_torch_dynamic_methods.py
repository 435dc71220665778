"""rules/torch_dynamic_methods_model.py: tensor methods looked up by name, converted and run
against torch; and the getattr calls it leaves as written."""

from __future__ import annotations

import numpy as np
import pytest

from precision_transpiler import transpile
from tests.helpers import load_script

SOURCE = """
import torch


def masked_reduce(t, mode="mean", dim=None, keepdim=False):
    if t.ndim == 0:
        return t
    kwargs = dict(dim=dim, keepdim=keepdim) if dim is not None else dict()
    fn = getattr(t, mode)
    return fn(**kwargs)


def spread(t, mode, dim):
    return getattr(t, mode)(dim=dim)


def by_constant(t):
    total = getattr(t, "sum")
    return total(dim=0, keepdim=True)


def extreme(t, mode):
    values, indices = getattr(t, mode)(dim=1)
    return values, indices
"""

CASES = [
    ("masked_reduce", ("mean",), {"dim": -1, "keepdim": True}),
    ("masked_reduce", ("sum",), {"dim": (0, 1)}),
    ("masked_reduce", ("amax",), {}),
    ("masked_reduce", ("prod",), {"dim": 1}),
    ("spread", ("std", 0), {}),
    ("spread", ("var", 1), {}),
    ("spread", ("argmax", 1), {}),
    ("spread", ("logsumexp", -1), {}),
    ("by_constant", (), {}),
    ("extreme", ("max",), {}),
    ("extreme", ("min",), {}),
]


@pytest.fixture(scope="module", params=["jax", "tf"])
def converted(request, tmp_path_factory):
    import torch  # noqa: F401 - the original runs on torch

    folder = tmp_path_factory.mktemp(f"dynamic_{request.param}")
    result = transpile(SOURCE, to=request.param)
    assert not result.unsupported, [d.format() for d in result.diagnostics]
    assert "torch_getattr(t, mode)" in result.code and 'torch_getattr(t, "sum")' in result.code
    (folder / "converted.py").write_text(result.code)
    (folder / "original.py").write_text(SOURCE)
    new = load_script(f"dynamic_{request.param}", folder / "converted.py")
    return new, load_script("dynamic_torch", folder / "original.py")


@pytest.mark.needs_torch
@pytest.mark.needs_jax
@pytest.mark.needs_tf
@pytest.mark.parametrize(("function", "args", "kwargs"), CASES)
def test_methods_looked_up_by_name_follow_torch(converted, function, args, kwargs) -> None:
    import torch

    new, old = converted
    x = np.linspace(-2, 3, 24, dtype=np.float32).reshape(4, 6)
    want = getattr(old, function)(torch.from_numpy(x), *args, **kwargs)
    got = getattr(new, function)(x, *args, **kwargs)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got, strict=True):
        assert tuple(np.shape(g)) == tuple(w.shape)
        np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.needs_jax
@pytest.mark.needs_tf
def test_other_methods_by_name_are_refused_when_they_run(converted) -> None:
    new, _ = converted
    with pytest.raises(NotImplementedError, match="'view'"):
        new.spread(np.ones((2, 3), np.float32), "view", 0)


@pytest.mark.parametrize("to", ["jax", "tf"])
@pytest.mark.parametrize(
    "source",
    [
        # the module itself, a config object, an imported module: not tensors
        "import torch.nn as nn\n\n\nclass M(nn.Module):\n    def forward(self, x, name):\n"
        "        return getattr(self, name)(x)\n",
        "def size(config, key):\n    return getattr(config, key)\n",
        "import math\n\n\ndef f(name, x):\n    return getattr(math, name)(x)\n",
        # a constant name that is no tensor method
        "def f(t):\n    return getattr(t, 'foo', None)\n",
        # a name never read as an array, its method not called with torch's keywords
        "def f(obj, name):\n    return getattr(obj, name)()\n",
    ],
)
def test_getattr_that_is_not_a_tensor_method_stays(source: str, to: str) -> None:
    result = transpile(source, to=to)
    assert "torch_getattr" not in result.code
    assert "getattr(" in result.code
