"""torch.distributions converted to JAX and Keras compute what torch computes.

The families of runtime/distributions.py (over each target's ops in
runtime/<target>/distributions.py) are checked against torch's own on the same parameters:
`log_prob`, `entropy`, `cdf`/`icdf`, `mean`, `mode`, `variance` and `stddev` to float32
rounding, sample shapes (`sample_shape + batch_shape + event_shape`), and the moments of many
samples (within 6 standard errors; torch's generator is not shared, so values cannot match).
Then model code that builds distributions in its forward (every import form) converts, and
verifies torch-free on both targets, with the key source in reach for JAX.
"""

from __future__ import annotations

import importlib
import os
import re

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from pathlib import Path

import numpy as np
import pytest

from precision_transpiler import load_mappings, transpile
from precision_transpiler.runtime import runtime_module
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

N = 20000
_RNG = np.random.default_rng(0)
LOC = _RNG.standard_normal((3, 4)).astype("float32")
SCALE = (_RNG.random((3, 4)) + 0.5).astype("float32")
UNIT = (_RNG.random((3, 4)) * 0.9 + 0.05).astype("float32")
PROBS = _RNG.random((3, 5)).astype("float32")
COV = (np.eye(4) * 2 + 0.3).astype("float32")

# (family, positional parameters, keyword parameters, a value in the support)
FAMILIES = [
    ("Normal", (LOC, SCALE), {}, UNIT + 0.1),
    ("LogNormal", (LOC, SCALE), {}, UNIT + 0.1),
    ("Uniform", (LOC, LOC + SCALE), {}, LOC + 0.5 * SCALE),
    ("Laplace", (LOC, SCALE), {}, UNIT + 0.1),
    ("Exponential", (SCALE,), {}, UNIT + 0.1),
    ("Gamma", (SCALE, SCALE + 1), {}, UNIT + 0.1),
    ("Beta", (SCALE, SCALE + 1), {}, UNIT),
    ("Bernoulli", (), {"probs": UNIT}, (UNIT > 0.5).astype("float32")),
    ("Bernoulli", (), {"logits": LOC}, (UNIT > 0.5).astype("float32")),
    ("Categorical", (), {"probs": PROBS}, np.array([1, 4, 0])),
    ("Categorical", (), {"logits": LOC}, np.array([3, 0, 2])),
    ("OneHotCategorical", (), {"probs": PROBS}, np.eye(5, dtype="float32")[[1, 4, 0]]),
    ("MultivariateNormal", (LOC,), {"covariance_matrix": COV}, UNIT),
    ("MultivariateNormal", (LOC,), {"scale_tril": np.linalg.cholesky(COV)}, UNIT),
]


def _runtime(target: str):  # type: ignore[no-untyped-def]
    return importlib.import_module(runtime_module(target, "distributions"))


def _pair(target: str, family: str, args: tuple, kwargs: dict):  # type: ignore[no-untyped-def]
    import torch

    torch.distributions.Distribution.set_default_validate_args(False)
    original = getattr(torch.distributions, family)(
        *[torch.tensor(a) for a in args], **{k: torch.tensor(v) for k, v in kwargs.items()}
    )
    extra = {}
    if target == "jax":
        from flax import nnx

        extra = {"rngs": nnx.Rngs(0)}
    return original, getattr(_runtime(target), family)(*args, **kwargs, **extra)


@pytest.mark.parametrize("target", ["jax", "tf"])
@pytest.mark.parametrize(
    ("family", "args", "kwargs", "value"), FAMILIES, ids=[f[0] + "-" + ",".join(f[2]) for f in FAMILIES]
)
def test_family_computes_what_torch_computes(target: str, family: str, args: tuple, kwargs: dict, value) -> None:  # type: ignore[no-untyped-def]
    import torch

    original, converted = _pair(target, family, args, kwargs)
    assert tuple(converted.batch_shape) == tuple(original.batch_shape)
    assert tuple(converted.event_shape) == tuple(original.event_shape)
    value_t = torch.tensor(value)
    checks = [
        ("log_prob", original.log_prob(value_t), converted.log_prob(value)),
        ("entropy", original.entropy(), converted.entropy()),
    ]
    for name in ("mean", "mode", "variance", "stddev"):
        if family not in ("Categorical",) or name == "mode":
            checks.append((name, getattr(original, name), getattr(converted, name)))
    if family in ("Normal", "LogNormal", "Uniform", "Laplace", "Exponential"):
        checks.append(("cdf", original.cdf(torch.tensor(UNIT)), converted.cdf(UNIT)))
    if family in ("Normal", "LogNormal", "Uniform", "Exponential"):
        checks.append(("icdf", original.icdf(torch.tensor(UNIT)), converted.icdf(UNIT)))
    for name, expected, got in checks:
        np.testing.assert_allclose(
            np.asarray(got, "float64"), expected.double().numpy(), rtol=2e-4, atol=2e-5, err_msg=name
        )
    assert tuple(converted.sample((7, 2)).shape) == tuple(original.sample((7, 2)).shape)
    assert tuple(converted.sample().shape) == tuple(original.sample().shape)
    drawn = np.asarray(converted.sample((N,)), "float64")
    if family == "Categorical":
        drawn = np.eye(original.probs.shape[-1])[drawn.astype(int)]
    mean = original.probs.numpy() if "Categorical" in family else original.mean.numpy()
    std = np.sqrt(original.probs.numpy()) if "Categorical" in family else original.stddev.numpy()
    assert (np.abs(drawn.mean(0) - mean) <= 6 * std / np.sqrt(N) + 1e-3).all()


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_kl_independent_expand_and_rsample_gradients(target: str) -> None:
    import torch

    D, M = torch.distributions, _runtime(target)
    extra = {}
    if target == "jax":
        from flax import nnx

        extra = {"rngs": nnx.Rngs(1)}
    t = torch.tensor
    pairs = [
        (D.Normal(t(LOC), t(SCALE)), D.Normal(t(UNIT), t(SCALE + 1)), M.Normal(LOC, SCALE), M.Normal(UNIT, SCALE + 1)),
        (D.Bernoulli(t(UNIT)), D.Bernoulli(logits=t(LOC)), M.Bernoulli(UNIT), M.Bernoulli(logits=LOC)),
        (D.Categorical(t(PROBS)), D.Categorical(logits=t(PROBS)), M.Categorical(PROBS), M.Categorical(logits=PROBS)),
        (D.Laplace(t(LOC), t(SCALE)), D.Laplace(t(UNIT), t(SCALE)), M.Laplace(LOC, SCALE), M.Laplace(UNIT, SCALE)),
        (D.Exponential(t(SCALE)), D.Exponential(t(UNIT)), M.Exponential(SCALE), M.Exponential(UNIT)),
    ]
    for p, q, p2, q2 in pairs:
        np.testing.assert_allclose(
            np.asarray(M.kl_divergence(p2, q2)), D.kl_divergence(p, q).numpy(), rtol=2e-5, atol=1e-6
        )
    independent = M.Independent(M.Normal(LOC, SCALE, **extra), 1)
    expected = D.Independent(D.Normal(t(LOC), t(SCALE)), 1)
    assert independent.batch_shape == (3,) and independent.event_shape == (4,)
    np.testing.assert_allclose(np.asarray(independent.log_prob(UNIT)), expected.log_prob(t(UNIT)).numpy(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(independent.entropy()), expected.entropy().numpy(), rtol=1e-5)
    kl = M.kl_divergence(independent, M.Independent(M.Normal(UNIT, SCALE), 1))
    assert tuple(kl.shape) == (3,)
    expanded = M.Normal(0.0, 1.0, **extra).expand((2, 3))
    assert expanded.batch_shape == (2, 3) and tuple(expanded.sample((5,)).shape) == (5, 2, 3)
    assert M.Categorical(PROBS).expand((2, 3)).batch_shape == (2, 3)
    with pytest.raises(NotImplementedError, match="expand of Independent"):
        independent.expand((2, 3))
    with pytest.raises(ValueError, match="probs"):
        M.Bernoulli()
    with pytest.raises(NotImplementedError, match="Normal and Uniform"):
        M.kl_divergence(M.Normal(LOC, SCALE), M.Uniform(LOC, LOC + 1))


def test_rsample_carries_gradients_and_sample_does_not() -> None:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from precision_transpiler.runtime.flax.distributions import Normal

    def draw(loc, how):  # type: ignore[no-untyped-def]
        return jnp.sum(getattr(Normal(loc, 1.0, rngs=nnx.Rngs(0)), how)((3,)))

    assert float(jnp.sum(jax.grad(draw)(jnp.zeros(4), "rsample"))) == pytest.approx(12.0)
    assert float(jnp.sum(jnp.abs(jax.grad(draw)(jnp.zeros(4), "sample")))) == 0.0


MODEL = """import torch
from torch import nn
from torch.distributions import Normal, Categorical, kl_divergence
from torch.distributions.bernoulli import Bernoulli
import torch.distributions as D


class Head(nn.Module):
    def __init__(self, dim=8, latent=4):
        super().__init__()
        self.mu = nn.Linear(dim, latent)
        self.logvar = nn.Linear(dim, latent)
        self.out = nn.Linear(latent, dim)

    def posterior(self, x) -> D.Distribution:
        return Normal(self.mu(x), torch.exp(0.5 * self.logvar(x)))

    def forward(self, x):
        q = self.posterior(x)
        assert isinstance(q, D.Normal)
        z = q.rsample() if self.training else q.mean
        prior = torch.distributions.Normal(torch.zeros_like(z), torch.ones_like(z))
        kl = kl_divergence(q, prior).sum(-1, keepdim=True)
        pi = D.Categorical(logits=self.out(z))
        gate = Bernoulli(logits=z).log_prob(torch.ones_like(z)).sum(-1, keepdim=True)
        sampled = D.Uniform(0.0, 1.0).sample((x.shape[0], 1)) * 0  # drawn, then multiplied away
        return self.out(z) + kl + pi.entropy().unsqueeze(-1) + gate + q.log_prob(z).sum(-1, keepdim=True) + sampled
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_model_building_distributions_converts_and_verifies(tmp_path: Path, target: str) -> None:
    original = tmp_path / "model.py"
    original.write_text(MODEL, encoding="utf-8")
    result = transpile(MODEL, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert not re.search(r"^\s*(import|from) torch\b", result.code, re.MULTILINE)
    if target == "jax":  # the module's own stream draws the samples
        assert "rngs=self)" in result.code
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    verdict = verify_files(
        original, converted, VerifyOptions(entry="Head().eval()", inputs=["float32[2,8]"], torch_free=True)
    )
    assert verdict.passed, verdict.failures


def test_every_entry_of_the_table_has_a_runtime_definition_on_both_targets() -> None:
    table = {name: op for name, op in load_mappings().ops.items() if "distributions.yaml:" in op.origin}
    assert len(table) == 13
    for target in ("jax", "tf"):
        module = _runtime(target)
        for op in table.values():
            emitted = op.patterns[target][0].text.split("(")[0]
            assert emitted.startswith(module.__name__ + "."), emitted
            assert hasattr(module, emitted.rsplit(".", 1)[-1]), emitted
