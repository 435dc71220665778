"""torch's small layers in Flax NNX with torch's signatures and semantics: `Identity`, `Flatten`,
`Dropout`, `Linear`, `Embedding`, and `TorchLayer`, the base of the runtime's layers (an
`nnx.Module` whose constructor signature is torch's).

torch passes layer classes around (`norm_layer=nn.LayerNorm`); Flax NNX has other constructor
signatures. These classes keep the torch spelling and semantics, so converted code keeps its
structure. The activation modules are in activations.py, the containers in containers.py, torch's
Module behaviour (`TorchModule`) in modules.py. The Keras counterpart is runtime/keras/layers.py.
"""

import inspect
import math

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import TorchInit
from precision_transpiler.runtime.flax.module_api import TorchInternals
from precision_transpiler.runtime.flax.rng import default_rngs


def _constructor_signature(cls):
    """`inspect.signature(cls)` as Python gives it for a class without a metaclass `__call__`:
    its `__init__`'s parameters after `self` (None where they cannot be read)."""
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return None
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def _or_empty(init, key, shape, dtype):
    """`init`'s draw, or the empty array of a shape with no elements: torch builds such a weight
    (`nn.Linear(c, c // 16)` for c < 16, pytorchcv's squeeze-excitation; its init skips it), while
    JAX's variance-scaling initializers divide by the fan, 0 there."""
    if math.prod(shape) == 0:
        return jnp.zeros(shape, dtype)
    return init(key, shape, dtype)


def linear_kernel_init(key, shape, dtype=jnp.float32):
    """nnx.Linear's default kernel initializer (lecun_normal), which also builds torch's weight of
    no elements (`nn.Linear(16, 0)`)."""
    return _or_empty(nnx.initializers.lecun_normal(), key, shape, dtype)


def embed_init(key, shape, dtype=jnp.float32):
    """nnx.Embed's default table initializer, which also builds torch's table of no elements
    (`nn.Embedding(n, 0)`)."""
    return _or_empty(nnx.initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0), key, shape, dtype)


class TorchLayer(TorchInternals, TorchInit, nnx.Module):
    """Base of the runtime's torch layers and of converted module classes: torch code asks a
    layer class for its constructor's parameters (monai's `has_option(norm_type,
    "num_features")` reads `inspect.signature(norm_type)`), which nnx's metaclass hides behind
    `(*args, **kwargs)`. Each subclass states its own (`__signature__`)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__signature__ = _constructor_signature(cls)

    def __setattr__(self, name, value):
        held = vars(self).get(name)
        if isinstance(held, nnx.Variable) and not isinstance(held, nnx.Param) and isinstance(value, jax.Array):
            # a buffer set to a new tensor stays a buffer, as torch keeps it in `_buffers`
            # (torch-uncertainty's MCBatchNorm: `self.running_mean = torch.zeros_like(...)`)
            held.value = jnp.asarray(value)
            return
        super().__setattr__(name, value)
        order = vars(self).get("_torch_order", ())
        if not name.startswith("_") and name not in order and "_pytree__state" in vars(self):
            # torch's registration order, which the walks follow (`for m in self._modules.values()`
            # in pytorchcv's MultiOutputSequential): nnx rebuilds a module under nnx.jit or
            # nnx.merge with its attributes sorted by name; a tuple of names is static, and kept
            super().__setattr__("_torch_order", (*order, name))


class Identity(TorchLayer):
    """torch.nn.Identity: returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, x):
        return x


class FloatFunctional(TorchLayer):
    """torch.nn.quantized.FloatFunctional: the float arithmetic a model marks for quantization
    (`self.skip_add.add(x, y)`, pytorchvideo's blocks), plain arithmetic here (a converted model
    runs in floating point; quantizing is the target's business)."""

    def __init__(self, *, rngs=None):
        pass

    def add(self, x, y):
        return x + y

    def add_scalar(self, x, y):
        return x + y

    def mul(self, x, y):
        return x * y

    def mul_scalar(self, x, y):
        return x * y

    def add_relu(self, x, y):
        return jnp.maximum(x + y, 0)

    def matmul(self, x, y):
        return jnp.matmul(x, y)

    def cat(self, x, dim=0):
        return jnp.concatenate(x, axis=dim)


class Flatten(TorchLayer):
    """torch.nn.Flatten(start_dim=1, end_dim=-1): flattens a range of dims (not the batch)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1, *, rngs=None):
        self.start_dim = start_dim
        self.end_dim = end_dim

    def __call__(self, x):
        start = self.start_dim % x.ndim
        end = self.end_dim % x.ndim
        return x.reshape((*x.shape[:start], -1, *x.shape[end + 1 :]))


class Linear(TorchInit, nnx.Linear):
    """torch.nn.Linear's signature on nnx.Linear, for code that passes the class around
    (`layer=nn.Linear`); direct calls are converted to nnx.Linear itself."""

    def __init__(
        self,
        in_features,
        out_features,
        bias=True,
        device=None,
        dtype=None,
        *,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs | None = None,
    ):
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        super().__init__(
            in_features,
            out_features,
            use_bias=bias,
            dtype=dtype,
            param_dtype=param_dtype,
            kernel_init=linear_kernel_init,
            rngs=rngs,
        )


class Embedding(TorchInit, nnx.Embed):
    """torch.nn.Embedding's signature on nnx.Embed (padding_idx only matters for training)."""

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        padding_idx=None,
        *args,
        dtype=None,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs | None = None,
        **kwargs,
    ):
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        super().__init__(
            num_embeddings, embedding_dim, dtype=dtype, param_dtype=param_dtype, embedding_init=embed_init, rngs=rngs
        )
        # torch's attributes, for code that reads them (rtdl's `embeddings[0].embedding_dim`)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        # the rest of torch's signature, which subclasses hand to F.embedding (fair-esm's
        # LearnedPositionalEmbedding): max_norm, norm_type, scale_grad_by_freq, sparse
        names = ("max_norm", "norm_type", "scale_grad_by_freq", "sparse")
        defaults = dict(zip(names, (None, 2.0, False, False), strict=True))
        for name, value in zip(names, args, strict=False):
            defaults[name] = value
        for name in names:
            setattr(self, name, kwargs.get(name, defaults[name]))

    @property
    def weight(self):
        """torch's name for the table (subclasses such as Bart's positional embedding read it;
        tying code assigns it)."""
        return self.embedding

    @weight.setter
    def weight(self, value):
        self.embedding = value


class Dropout(nnx.Dropout):
    """torch.nn.Dropout(p=0.5)'s signature on nnx.Dropout (deterministic after `model.eval()`)."""

    def __init__(self, p: float = 0.5, inplace: bool = False, *, rngs: nnx.Rngs | None = None):
        rngs = default_rngs() if rngs is None else rngs  # built without one (`layer=nn.Linear` passed around)
        super().__init__(rate=p, rngs=rngs)
        self.p = p  # torch's attributes, for code that reads them
        self.inplace = inplace
