"""torch's Module vocabulary for converted Flax NNX code: the small modules (`Identity`,
`Flatten`, `Dropout`, `Linear`, `Embedding`), module walks (`modules`, `named_children`,
`add_module`), buffers, training mode, `no_grad`, in-place initialisers and `torch.autocast`
regions. The activation modules are in activations.py, the containers (`Sequential`, `ModuleList`,
`ModuleDict`) in containers.py.

torch passes layer classes around (`norm_layer=nn.LayerNorm`); Flax NNX has other constructor
signatures. These classes keep the torch spelling and semantics, so converted code keeps its
structure.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import _TORCH_AUTOCAST_STACK
from precision_transpiler.runtime.flax.tensor import _init_key


class Identity(nnx.Module):
    """torch.nn.Identity: returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, x):
        return x


class Flatten(nnx.Module):
    """torch.nn.Flatten(start_dim=1, end_dim=-1): flattens a range of dims (not the batch)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1, *, rngs=None):
        self.start_dim = start_dim
        self.end_dim = end_dim

    def __call__(self, x):
        start = self.start_dim % x.ndim
        end = self.end_dim % x.ndim
        return x.reshape((*x.shape[:start], -1, *x.shape[end + 1 :]))


class Linear(nnx.Linear):
    """torch.nn.Linear's signature on nnx.Linear, for code that passes the class around
    (`layer=nn.Linear`); direct calls are converted to nnx.Linear itself."""

    def __init__(
        self, in_features, out_features, bias=True, device=None, dtype=None, *, param_dtype=jnp.float32, rngs: nnx.Rngs
    ):
        super().__init__(in_features, out_features, use_bias=bias, dtype=dtype, param_dtype=param_dtype, rngs=rngs)


class Embedding(nnx.Embed):
    """torch.nn.Embedding's signature on nnx.Embed (padding_idx only matters for training)."""

    def __init__(
        self,
        num_embeddings,
        embedding_dim,
        padding_idx=None,
        *args,
        dtype=None,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
        **kwargs,
    ):
        super().__init__(num_embeddings, embedding_dim, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

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

    def __init__(self, p: float = 0.5, inplace: bool = False, *, rngs: nnx.Rngs):
        super().__init__(rate=p, rngs=rngs)


def modules(module):
    """torch's `Module.modules()`: the module and all submodules, parents before children."""
    out = [module]
    for _, child in nnx.iter_children(module):
        if isinstance(child, nnx.Module):
            out.extend(modules(child))
    return out


def named_modules(module, prefix: str = ""):
    """torch's `Module.named_modules()`: (dotted path, module) pairs, parents first."""
    out = [(prefix, module)]
    for name, child in nnx.iter_children(module):
        if isinstance(child, nnx.Module):
            out.extend(named_modules(child, f"{prefix}.{name}" if prefix else str(name)))
    return out


def children(module):
    """torch's `Module.children()`: the direct submodules."""
    return [child for _, child in nnx.iter_children(module) if isinstance(child, nnx.Module)]


def named_children(module):
    """torch's `Module.named_children()`."""
    return [(str(name), child) for name, child in nnx.iter_children(module) if isinstance(child, nnx.Module)]


class Buffer(nnx.Variable):
    """A torch buffer (`self.register_buffer(name, tensor, persistent=...)`): module state that
    is not trained. `persistent=False` buffers are not part of torch's state_dict, so weight
    loading does not expect them."""


def torch_assert(condition, message=""):
    """torch._assert: raise AssertionError when `condition` is false (eagerly; under jax.jit a
    traced condition cannot be checked, as with torch.jit's asserts on symbolic shapes)."""
    if not isinstance(condition, jax.core.Tracer) and not bool(condition):
        raise AssertionError(message)


def tensor_normal_(tensor, mean=0.0, std=1.0, *, rngs=None):
    """torch's in-place `t.normal_(mean, std)` as a value: normal samples of t's shape."""
    return mean + std * jax.random.normal(_init_key(rngs), tensor.shape, tensor.dtype)


def tensor_uniform_(tensor, a=0.0, b=1.0, *, rngs=None):
    """torch's in-place `t.uniform_(a, b)` as a value."""
    return jax.random.uniform(_init_key(rngs), tensor.shape, tensor.dtype, a, b)


def tensor_zero_(tensor):
    """torch's in-place `t.zero_()` as a value."""
    return jnp.zeros_like(tensor)


def tensor_fill_(tensor, value):
    """torch's in-place `t.fill_(value)` as a value."""
    return jnp.full_like(tensor, value)


def autocast_disabled():
    """`torch.autocast(..., enabled=False)`: JAX has no autocast, so the region runs as written."""
    import contextlib

    return contextlib.nullcontext()


# torch autocast's lower-precision layer classes, matched by class name through the MRO: the
# torch-signature layers of this runtime and the flax.nnx layers they correspond to.
_TORCH_AUTOCAST_LAYERS = frozenset(
    {
        "Linear",
        "Bilinear",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "ConvTranspose1d",
        "ConvTranspose2d",
        "ConvTranspose3d",
        "MultiheadAttention",
        "LinearGeneral",
        "Einsum",
        "Conv",
        "ConvTranspose",
        "MultiHeadAttention",
    }
)


class torch_autocast:
    """`with torch.autocast(device_type, dtype=..., enabled=...)` (also torch.amp.autocast,
    torch.cpu.amp.autocast, torch.cuda.amp.autocast) in converted code: a context manager.

    `module` is the converted module whose method opened the region (None in plain functions).
    On entry, every layer under `module` whose class (or a base class) is one of torch autocast's
    lower-precision classes (Linear, Conv*, ConvTranspose*, MultiheadAttention, Bilinear, and
    nnx's Linear/LinearGeneral/Einsum/Conv/ConvTranspose/MultiHeadAttention) computes in `dtype`
    (its `dtype` attribute, the compute dtype; parameters stay float32), so its results are in
    `dtype` as torch's are (jnp promotes `bfloat16 + float32` to float32 as torch does); on exit
    (exceptions included) each layer's `dtype` is restored exactly. An `enabled=False` region
    inside an enabled one puts the layers under `module` back to float32 for its body, as torch
    does. The attributes are set with `object.__setattr__`, so this also works while `jax.jit`
    traces (the change happens at trace time; nnx refuses ordinary assignment to a module made
    outside the trace). Matmul-class functional ops written inside the region run through
    `torch_autocast_call`."""

    def __init__(self, module, dtype="bfloat16", enabled=True):
        self.module = module
        self.dtype = jnp.dtype(dtype if dtype is not None else "bfloat16")
        self.enabled = enabled
        self._saved = []

    def __enter__(self):
        enabled = bool(self.enabled)
        inside_enabled = any(d is not None for d in _TORCH_AUTOCAST_STACK)
        saved = []
        self._saved.append(saved)
        _TORCH_AUTOCAST_STACK.append(self.dtype if enabled else None)
        if isinstance(self.module, nnx.Module) and (enabled or inside_enabled):
            compute = self.dtype if enabled else jnp.dtype(jnp.float32)
            try:
                for _, layer in nnx.iter_graph(self.module):
                    if not isinstance(layer, nnx.Module) or "dtype" not in vars(layer):
                        continue
                    if any(c.__name__ in _TORCH_AUTOCAST_LAYERS for c in type(layer).__mro__):
                        saved.append((layer, vars(layer)["dtype"]))
                        object.__setattr__(layer, "dtype", compute)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc):
        _TORCH_AUTOCAST_STACK.pop()
        for layer, dtype in reversed(self._saved.pop()):
            object.__setattr__(layer, "dtype", dtype)
        return False


def torch_autocast_call(op, *args, **kwargs):
    """A matmul-class op (matmul, einsum, linear, conv, scaled_dot_product_attention) written in a
    torch.autocast region: inside an enabled region its floating array inputs are cast to the
    region's dtype and its result stays in that dtype, as torch's does (jnp promotes it with
    float32 as torch does); elsewhere it runs as written."""
    dtype = _TORCH_AUTOCAST_STACK[-1] if _TORCH_AUTOCAST_STACK else None
    if dtype is None:
        return op(*args, **kwargs)

    def cast(t):
        floating = hasattr(t, "astype") and hasattr(t, "dtype") and jnp.issubdtype(t.dtype, jnp.floating)
        return jnp.asarray(t).astype(dtype) if floating and t.dtype != dtype else t  # arrays and NumPy arrays

    return op(*jax.tree.map(cast, args), **jax.tree.map(cast, kwargs))


class no_grad:
    """torch.no_grad() / torch.inference_mode(). As a decorator the function's array outputs are
    cut from differentiation (jax.lax.stop_gradient), as torch records no graph for them. As a
    context manager it does nothing: JAX differentiates only what jax.grad asks for (wrap values
    in jax.lax.stop_gradient where gradients must not flow)."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            return jax.tree.map(lambda t: jax.lax.stop_gradient(t) if isinstance(t, jax.Array) else t, out)

        return wrapper

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def add_module(parent, name, module):
    """torch's `Module.add_module(name, module)` / `register_module`: an attribute, or the
    container's own `add_module` (Sequential keeps the order, ModuleDict the key)."""
    own = getattr(type(parent), "add_module", None)
    if own is not None:
        own(parent, name, module)
    else:
        setattr(parent, name, module)


def is_training(module):
    """torch's `module.training` on a converted module: nnx's eval()/train() flip `deterministic`
    on modules that read their mode; one without that flag has no mode of its own: False."""
    return not getattr(module, "deterministic", True)
