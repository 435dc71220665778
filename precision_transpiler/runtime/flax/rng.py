"""torch's random functions (`torch.randn`, `torch.randint`, `torch.multinomial`, ...) for JAX.

torch draws from one global generator; JAX has none: every draw takes a key. The converter gives
each call the key source that the code around it has (mappings/ops/random_ops.yaml, and the
op-pattern rule that appends `rngs=`):

* while building layers (a module `__init__`, a builder function): the builder's `nnx.Rngs`,
  whose `params` stream draws initial values (the torch checkpoint replaces them);
* in a module's methods (a forward pass drawing noise, masks, permutations): `rngs=self`, the
  module's own stream, which the converted `__init__` made (`self.torch_rng =
  random_stream(rngs)`, an nnx.RngStream forked from the `dropout` stream, as nnx.Dropout
  does). It is nnx state: every call advances it, also under `nnx.jit`;
* elsewhere (a free function): a process-wide sequence of keys seeded with 0. Under `jax.jit`
  the drawn values are fixed when the function is traced, so the converter says so where it
  emits such a call.

Each function takes torch's arguments (`generator`, `device`, `layout`, `requires_grad`,
`pin_memory` are accepted and ignored) and returns torch's dtypes: float32 unless told, int64
indices (int32 unless JAX runs with x64, as everywhere in converted code).
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from precision_transpiler.runtime.common import _size

#: keys for draws that have no module stream (free functions): a process-wide NumPy generator
#: seeds each one, so successive eager calls differ as torch's do
_PROCESS_SEEDS = np.random.default_rng(0)


def default_rngs():
    """The nnx.Rngs of layers built where no model's `rngs` reaches (a layer factory called in a
    default argument, a layer built at module level, a helper called without one): seeded from the
    process-wide sequence, so layers built one after another start from different values, as
    torch's draw from its global generator (`manual_seed` restarts the sequence)."""
    return nnx.Rngs(int(_PROCESS_SEEDS.integers(2**31)))


def manual_seed(seed):
    """torch.manual_seed for what draws from the process-wide sequence (default_rngs and draws
    outside any module); returns None where torch returns its generator."""
    global _PROCESS_SEEDS
    _PROCESS_SEEDS = np.random.default_rng(int(seed))


def random_stream(rngs):
    """The stream a converted module's methods draw torch's random numbers from (torch has one
    global generator; nnx modules keep their own): a fork of the `dropout` stream of the builder's
    nnx.Rngs (nnx.Rngs falls back to `default`; an Rngs with neither gives its first stream),
    the fork of an nnx.RngStream, or a stream seeded with 0 when there are no rngs."""
    if isinstance(rngs, nnx.Rngs):
        streams = dict(vars(rngs))
        name = next((n for n in ("dropout", "default") if isinstance(streams.get(n), nnx.RngStream)), None)
        if name is None:
            name = next(n for n, s in streams.items() if isinstance(s, nnx.RngStream))
        return streams[name].fork()
    if isinstance(rngs, nnx.RngStream):
        return rngs.fork()
    return nnx.Rngs(0).default.fork()


def _random_key(rngs):
    """A fresh key from what the converter passed as `rngs`: a builder's nnx.Rngs (its `params`
    stream), an nnx.RngStream, a module (its `torch_rng` stream), a key, or None."""
    if isinstance(rngs, nnx.Rngs):
        return rngs.params()
    if isinstance(rngs, nnx.RngStream):
        return rngs()
    if isinstance(rngs, nnx.Module):
        stream = getattr(rngs, "torch_rng", None)
        if isinstance(stream, nnx.RngStream):
            return stream()
        rngs = None
    if rngs is None:
        return jax.random.key(int(_PROCESS_SEEDS.integers(2**31)))
    return rngs


def _float_dtype(dtype):
    return jnp.float32 if dtype is None else dtype


def _index_dtype(dtype):
    """torch's int64 (JAX's int32 without x64), or the dtype asked for."""
    return jax.dtypes.canonicalize_dtype(jnp.int64 if dtype is None else dtype)


def torch_randn(*args, size=None, dtype=None, rngs=None, **factory_kwargs):
    """torch.randn(*size): standard-normal samples (size as ints or one sequence; torch's
    generator, layout, device, requires_grad and pin_memory keywords have no meaning here)."""
    return jax.random.normal(_random_key(rngs), _size(args if size is None else (size,)), _float_dtype(dtype))


def torch_rand(*args, size=None, dtype=None, rngs=None, **factory_kwargs):
    """torch.rand(*size): uniform samples in [0, 1) (as torch_randn)."""
    return jax.random.uniform(_random_key(rngs), _size(args if size is None else (size,)), _float_dtype(dtype))


def torch_randint(
    *args, size=None, generator=None, dtype=None, layout=None, device=None, requires_grad=False, rngs=None
):
    """torch.randint(high, size) / torch.randint(low, high, size): integers in [low, high), int64
    unless told (jax.random.randint takes the shape first: key, shape, low, high)."""
    if size is None:
        *args, size = args
    low, high = (0, args[0]) if len(args) == 1 else args
    return jax.random.randint(_random_key(rngs), _size((size,)), low, high, _index_dtype(dtype))


def torch_randn_like(
    input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None, rngs=None
):
    """torch.randn_like(x): standard-normal samples of x's shape and dtype."""
    return jax.random.normal(_random_key(rngs), jnp.shape(input), dtype or jnp.result_type(input))


def torch_rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None, rngs=None):
    """torch.rand_like(x): uniform [0, 1) samples of x's shape and dtype."""
    return jax.random.uniform(_random_key(rngs), jnp.shape(input), dtype or jnp.result_type(input))


def torch_randint_like(
    input, low=0, high=None, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None, rngs=None
):
    """torch.randint_like(x, high) / (x, low, high): integers in [low, high) of x's shape and dtype."""
    if high is None:
        low, high = 0, low
    result = jax.random.randint(_random_key(rngs), jnp.shape(input), low, high, _index_dtype(None))
    return result.astype(dtype or jnp.result_type(input))


def torch_randperm(
    n, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, rngs=None
):
    """torch.randperm(n): a random permutation of 0..n-1, int64 unless told."""
    return jax.random.permutation(_random_key(rngs), jnp.arange(n, dtype=_index_dtype(dtype)))


def torch_multinomial(input, num_samples, replacement=False, *, generator=None, rngs=None):
    """torch.multinomial / Tensor.multinomial: indices drawn with probabilities proportional to
    the non-negative weights of each row (1-D or 2-D input). Without replacement the draws are
    the top `num_samples` of Gumbel-perturbed log-weights (distinct, never a zero weight while
    a non-zero one is left); with replacement, independent categorical draws."""
    key = _random_key(rngs)
    logits = jnp.log(jnp.asarray(input, jnp.float32))
    if replacement:
        shape = (*logits.shape[:-1], num_samples)
        drawn = jax.random.categorical(key, logits[..., None, :], axis=-1, shape=shape)
    else:
        perturbed = logits + jax.random.gumbel(key, logits.shape)
        drawn = jax.lax.top_k(perturbed, num_samples)[1]
    return drawn.astype(_index_dtype(None))


def torch_bernoulli(input, p=None, *, generator=None, rngs=None):
    """torch.bernoulli(probs) / Tensor.bernoulli(p): 1 with probability `probs` (or the scalar
    `p`) and 0 otherwise, in the input's shape and dtype."""
    probs = input if p is None else jnp.broadcast_to(jnp.asarray(p, jnp.float32), jnp.shape(input))
    drawn = jax.random.bernoulli(_random_key(rngs), probs, jnp.shape(input))
    return drawn.astype(jnp.result_type(input))


def torch_normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, layout=None, device=None, rngs=None):
    """torch.normal(mean, std) with tensors or numbers broadcast together, or
    torch.normal(mean, std, size) with numbers: mean + std * standard-normal samples."""
    if size is not None:
        shape = _size((size,))
        out_dtype = _float_dtype(dtype)
    else:
        shape = jnp.broadcast_shapes(jnp.shape(mean), jnp.shape(std))
        out_dtype = jnp.result_type(mean, std, jnp.float32) if dtype is None else dtype
    return mean + std * jax.random.normal(_random_key(rngs), shape, out_dtype)


def tensor_normal_(tensor, mean=0.0, std=1.0, *, generator=None, rngs=None):
    """torch's in-place `t.normal_(mean, std)` as a value: normal samples of t's shape and dtype."""
    return mean + std * jax.random.normal(_random_key(rngs), tensor.shape, tensor.dtype)


def tensor_uniform_(tensor, a=0.0, b=1.0, *, generator=None, rngs=None):
    """torch's in-place `t.uniform_(from, to)` as a value."""
    return jax.random.uniform(_random_key(rngs), tensor.shape, tensor.dtype, a, b)


def tensor_bernoulli_(tensor, p=0.5, *, generator=None, rngs=None):
    """torch's in-place `t.bernoulli_(p)` as a value: 1 with probability p (a number or a
    tensor), in t's shape and dtype (`x.new_empty(shape).bernoulli_(keep)`: a drop mask)."""
    return jax.random.bernoulli(_random_key(rngs), p, tensor.shape).astype(tensor.dtype)


def tensor_exponential_(tensor, lambd=1.0, *, generator=None, rngs=None):
    """torch's in-place `t.exponential_(lambd)` as a value: exponential samples with rate lambd."""
    return jax.random.exponential(_random_key(rngs), tensor.shape, tensor.dtype) / lambd
