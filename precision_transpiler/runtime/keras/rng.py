"""torch's random functions (`torch.randn`, `torch.randint`, `torch.multinomial`, ...) for Keras.

torch draws from one global generator; Keras draws from a SeedGenerator, by default its global
one (a variable on TensorFlow, so successive calls differ in eager code and in `tf.function` alike).
torch's generator is not shared: the values differ from torch's, the distributions do not. The
Keras counterpart of runtime/flax/rng.py, which says where each call draws from in JAX.

Each function takes torch's arguments (`generator`, `device`, `layout`, `requires_grad`,
`pin_memory` are accepted and ignored) and returns torch's dtypes: float32 unless told, int64
indices (TensorFlow refuses arithmetic that mixes int32 and int64, runtime/keras/tensor.py).
"""

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.common import _size


def _dtype(dtype, default):
    return default if dtype is None else keras.backend.standardize_dtype(dtype)


def _shape(input):
    return tuple(ops.shape(input))


def torch_randn(*args, size=None, dtype=None, **factory_kwargs):
    """torch.randn(*size): standard-normal samples (size as ints or one sequence; torch's
    generator, layout, device, requires_grad and pin_memory keywords have no meaning here)."""
    return keras.random.normal(_size(args if size is None else (size,)), dtype=_dtype(dtype, "float32"))


def torch_rand(*args, size=None, dtype=None, **factory_kwargs):
    """torch.rand(*size): uniform samples in [0, 1) (as torch_randn)."""
    return keras.random.uniform(_size(args if size is None else (size,)), dtype=_dtype(dtype, "float32"))


def torch_randint(*args, size=None, generator=None, dtype=None, layout=None, device=None, requires_grad=False):
    """torch.randint(high, size) / torch.randint(low, high, size): integers in [low, high), int64 unless told."""
    if size is None:
        *args, size = args
    low, high = (0, args[0]) if len(args) == 1 else args
    return keras.random.randint(_size((size,)), low, high, dtype=_dtype(dtype, "int64"))


def torch_randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """torch.randn_like(x): standard-normal samples of x's shape and dtype."""
    return keras.random.normal(_shape(input), dtype=_dtype(dtype, keras.backend.standardize_dtype(input.dtype)))


def torch_rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    """torch.rand_like(x): uniform [0, 1) samples of x's shape and dtype."""
    return keras.random.uniform(_shape(input), dtype=_dtype(dtype, keras.backend.standardize_dtype(input.dtype)))


def torch_randint_like(
    input, low=0, high=None, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None
):
    """torch.randint_like(x, high) / (x, low, high): integers in [low, high) of x's shape and dtype."""
    if high is None:
        low, high = 0, low
    result = keras.random.randint(_shape(input), low, high, dtype="int64")
    return ops.cast(result, _dtype(dtype, keras.backend.standardize_dtype(input.dtype)))


def torch_randperm(n, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """torch.randperm(n): a random permutation of 0..n-1, int64 unless told."""
    return keras.random.shuffle(ops.arange(n, dtype=_dtype(dtype, "int64")))


def _gumbel(shape):
    """Standard Gumbel samples, -log(-log(u)) with u in (0, 1)."""
    u = keras.random.uniform(shape, minval=1e-20, maxval=1.0, dtype="float32")
    return -ops.log(-ops.log(u))


def torch_multinomial(input, num_samples, replacement=False, *, generator=None):
    """torch.multinomial / Tensor.multinomial: indices drawn with probabilities proportional to
    the non-negative weights of each row (1-D or 2-D input). Without replacement the draws are
    the top `num_samples` of Gumbel-perturbed log-weights (distinct, never a zero weight while
    a non-zero one is left); with replacement, independent categorical draws."""
    logits = ops.log(ops.cast(input, "float32"))
    if replacement:
        rows = ops.reshape(logits, (-1, _shape(logits)[-1]))
        drawn = keras.random.categorical(rows, num_samples, dtype="int64")
        return ops.reshape(drawn, (*_shape(logits)[:-1], num_samples))
    drawn = ops.top_k(logits + _gumbel(_shape(logits)), num_samples)[1]
    return ops.cast(drawn, "int64")


def torch_bernoulli(input, p=None, *, generator=None):
    """torch.bernoulli(probs) / Tensor.bernoulli(p): 1 with probability `probs` (or the scalar
    `p`) and 0 otherwise, in the input's shape and dtype."""
    probs = input if p is None else p
    drawn = keras.random.uniform(_shape(input), dtype="float32") < ops.cast(probs, "float32")
    return ops.cast(drawn, input.dtype)


def torch_normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, layout=None, device=None):
    """torch.normal(mean, std) with tensors or numbers broadcast together, or
    torch.normal(mean, std, size) with numbers: mean + std * standard-normal samples."""
    if size is not None:
        return keras.random.normal(_size((size,)), mean=mean, stddev=std, dtype=_dtype(dtype, "float32"))
    shape = np.broadcast_shapes(_shape(ops.convert_to_tensor(mean)), _shape(ops.convert_to_tensor(std)))
    return mean + std * keras.random.normal(shape, dtype=_dtype(dtype, "float32"))


def tensor_normal_(tensor, mean=0.0, std=1.0, *, generator=None):
    """torch's in-place `t.normal_(mean, std)` used as a value: normal samples of t's shape and dtype."""
    return keras.random.normal(_shape(tensor), mean=mean, stddev=std, dtype=tensor.dtype)


def tensor_uniform_(tensor, a=0.0, b=1.0, *, generator=None):
    """torch's in-place `t.uniform_(from, to)` used as a value."""
    return keras.random.uniform(_shape(tensor), minval=a, maxval=b, dtype=tensor.dtype)


def tensor_bernoulli_(tensor, p=0.5, *, generator=None):
    """torch's in-place `t.bernoulli_(p)` as a value: 1 with probability p (a number or a
    tensor), in t's shape and dtype (`x.new_empty(shape).bernoulli_(keep)`: a drop mask)."""
    return torch_bernoulli(tensor, p)


def tensor_exponential_(tensor, lambd=1.0, *, generator=None):
    """torch's in-place `t.exponential_(lambd)` as a value: exponential samples with rate lambd."""
    u = keras.random.uniform(_shape(tensor), minval=1e-20, maxval=1.0, dtype="float32")
    return ops.cast(-ops.log(u) / lambd, tensor.dtype)
