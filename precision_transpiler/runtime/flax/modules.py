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


def _child_items(module):
    """torch's `named_children()` of an nnx module: modules held in attributes, in assignment order
    (torch's registration order; nnx's own graph order sorts names, "10" before "2"), and modules
    in lists, tuples and dicts held in attributes (`name.0`, `name.key`)."""
    found = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if isinstance(value, nnx.Module):
            found.append((name, value))
        elif isinstance(value, list | tuple):
            found += [(f"{name}.{i}", v) for i, v in enumerate(value) if isinstance(v, nnx.Module)]
        elif isinstance(value, dict):
            found += [(f"{name}.{k}", v) for k, v in value.items() if isinstance(v, nnx.Module)]
    return found


def named_children(module):
    """torch's `Module.named_children()`: the direct submodules with their names, each once."""
    seen = set()
    out = []
    for name, child in _child_items(module):
        if id(child) not in seen:
            seen.add(id(child))
            out.append((name, child))
    return out


def children(module):
    """torch's `Module.children()`: the direct submodules."""
    return [child for _, child in named_children(module)]


def named_modules(module, prefix: str = "", _seen=None):
    """torch's `Module.named_modules()`: (dotted path, module) pairs, parents first, each once."""
    seen = set() if _seen is None else _seen
    if id(module) in seen:
        return []
    seen.add(id(module))
    out = [(prefix, module)]
    for name, child in named_children(module):
        out += named_modules(child, f"{prefix}.{name}" if prefix else name, seen)
    return out


def modules(module):
    """torch's `Module.modules()`: the module and all submodules, parents before children."""
    return [m for _, m in named_modules(module)]


def _own_variables(module, parameters: bool):
    """Variables held directly in attributes of one module: its parameters (nnx.Param) or its
    buffers (every other nnx.Variable: BatchNorm statistics, registered buffers), in order."""
    return [
        (name, value)
        for name, value in vars(module).items()
        if isinstance(value, nnx.Variable) and isinstance(value, nnx.Param) == parameters and not name.startswith("_")
    ]


def named_parameters(module, prefix: str = "", recurse: bool = True):
    """torch's `Module.named_parameters()`: each parameter once, by dotted path. The names are the
    converted layers' (Flax's `kernel`, `scale`, ...), in torch's order: module by module, each
    module's parameters in assignment order."""
    seen = set()
    out = []
    walk = named_modules(module, prefix) if recurse else [(prefix, module)]
    for path, sub in walk:
        for name, variable in _own_variables(sub, True):
            if id(variable) not in seen:
                seen.add(id(variable))
                out.append((f"{path}.{name}" if path else name, variable))
    return out


def named_buffers(module, prefix: str = "", recurse: bool = True):
    """torch's `Module.named_buffers()`: non-parameter variables by dotted path."""
    walk = named_modules(module, prefix) if recurse else [(prefix, module)]
    return [(f"{path}.{n}" if path else n, v) for path, sub in walk for n, v in _own_variables(sub, False)]


def _apply_fn(module, fn):
    """torch's `Module.apply(fn)`: `fn` on every submodule, children before parents."""
    for child in children(module):
        _apply_fn(child, fn)
    fn(module)
    return module


def _cast_floating(module, dtype):
    """Cast every floating parameter and buffer under `module` to `dtype` (torch's `.half()`,
    `.to(dtype)`); integer buffers keep their dtype, as in torch."""
    for _, variable in [*named_parameters(module), *named_buffers(module)]:
        value = variable.get_value()
        if hasattr(value, "dtype") and jnp.issubdtype(value.dtype, jnp.floating):
            variable.set_value(value.astype(dtype))
    return module


class Buffer(nnx.Variable):
    """A torch buffer (`self.register_buffer(name, tensor, persistent=...)`): module state that
    is not trained. `persistent=False` buffers are not part of torch's state_dict, so weight
    loading does not expect them."""


class TorchModule(nnx.Module):
    """torch.nn.Module for converted classes: an nnx.Module with torch's module methods, so code
    that calls them (`self.apply(self._init_weights)`, `model.eval()`, `model.parameters()`)
    runs as written. The names the walks give are the converted layers' (Flax's `kernel` where
    torch says `weight`); a torch checkpoint loads through precision_transpiler.weights.

    Its constructor takes and ignores any arguments (`rngs` too), as a class with nn.Module's
    constructor is called with none; `train()`/`eval()` return the module, as torch's do (nnx's
    return None), and set nnx's `deterministic`/`use_running_average` flags below it."""

    def __init__(self, *args, rngs=None, **kwargs):
        pass

    def forward(self, *args, **kwargs):
        """`module.forward(x)`: the converted forward (`__call__`)."""
        return self(*args, **kwargs)

    # -- mode ----------------------------------------------------------------------------------

    @property
    def training(self):
        """torch's `module.training`: whether nnx's train() was called on it (its `deterministic`
        flag, which modules that read their mode set in `__init__`)."""
        return is_training(self)

    @training.setter
    def training(self, mode):
        object.__setattr__(self, "deterministic", not mode)

    def train(self, mode: bool = True):
        """torch's `train(mode)`: nnx's train() or eval() on everything below (Dropout, BatchNorm),
        and the mode of every converted module below (`training`); returns the module."""
        if mode:
            nnx.Module.train(self)
        else:
            nnx.Module.eval(self)
        for module in modules(self):
            if isinstance(module, TorchModule):
                object.__setattr__(module, "deterministic", not mode)
        return self

    def eval(self):
        """torch's `eval()`: `train(False)`."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        """JAX differentiates what `jax.grad` is asked to (`nnx.grad` with a filter): nothing to set."""
        return self

    def zero_grad(self, set_to_none: bool = True):
        """JAX keeps no gradients on the module: nothing to clear."""
        return None

    # -- structure -----------------------------------------------------------------------------

    def add_module(self, name, module):
        """torch's `add_module`: the submodule as an attribute."""
        setattr(self, name, module)

    def register_module(self, name, module):
        self.add_module(name, module)

    def register_buffer(self, name, tensor, persistent: bool = True):
        """torch's `register_buffer`: a Buffer variable (not trained)."""
        setattr(self, name, Buffer(tensor, persistent=persistent))

    def register_parameter(self, name, param):
        """torch's `register_parameter`: an nnx.Param (an array is wrapped), or None."""
        if param is not None and not isinstance(param, nnx.Variable):
            param = nnx.Param(jnp.asarray(param))
        setattr(self, name, param if param is not None else nnx.data(None))

    def modules(self):
        return modules(self)

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        return named_modules(self, prefix)

    def children(self):
        return children(self)

    def named_children(self):
        return named_children(self)

    def get_submodule(self, target: str):
        """torch's `get_submodule("blocks.0.attn")`."""
        if not target:
            return self
        found = dict(named_modules(self)).get(target)
        if found is None:
            raise AttributeError(f"{type(self).__name__} has no submodule {target!r}")
        return found

    def parameters(self, recurse: bool = True):
        return [v for _, v in named_parameters(self, recurse=recurse)]

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return named_parameters(self, prefix, recurse)

    def get_parameter(self, target: str):
        found = dict(named_parameters(self)).get(target)
        if found is None:
            raise AttributeError(f"{type(self).__name__} has no parameter {target!r}")
        return found

    def buffers(self, recurse: bool = True):
        return [v for _, v in named_buffers(self, recurse=recurse)]

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return named_buffers(self, prefix, recurse)

    def get_buffer(self, target: str):
        found = dict(named_buffers(self)).get(target)
        if found is None:
            raise AttributeError(f"{type(self).__name__} has no buffer {target!r}")
        return found

    def apply(self, fn):
        """torch's `apply(fn)`: `fn` on every submodule (children first), then on this module."""
        return _apply_fn(self, fn)

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by dotted path (the converted layers' names), as arrays."""
        out = {} if destination is None else destination
        for name, variable in [*named_parameters(self, prefix), *named_buffers(self, prefix)]:
            if getattr(variable, "persistent", True) is not False:
                out[name] = variable if keep_vars else variable.get_value()
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Set parameters and buffers from `state_dict` (names as `state_dict()` gives them);
        strict: every key known and every entry given, else a KeyError naming them."""
        own = {**dict(named_parameters(self)), **dict(named_buffers(self))}
        unexpected = [k for k in state_dict if k not in own]
        missing = [k for k in own if k not in state_dict and getattr(own[k], "persistent", True) is not False]
        if strict and (unexpected or missing):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for name, value in state_dict.items():
            if name in own:
                own[name].set_value(jnp.asarray(value, dtype=own[name].get_value().dtype))
        return missing, unexpected

    def extra_repr(self):
        return ""

    # -- casts and devices ---------------------------------------------------------------------

    def to(self, *args, **kwargs):
        """torch's `to(device)`, `to(dtype)`, `to(device, dtype)`: a dtype casts the floating
        parameters and buffers; devices are JAX's placement, not the module's."""
        dtype = kwargs.get("dtype")
        for arg in args:
            if dtype is None and not isinstance(arg, str):
                try:
                    dtype = jnp.dtype(arg)
                except TypeError:
                    continue
        return _cast_floating(self, dtype) if dtype is not None else self

    def float(self):
        return _cast_floating(self, jnp.float32)

    def half(self):
        return _cast_floating(self, jnp.float16)

    def bfloat16(self):
        return _cast_floating(self, jnp.bfloat16)

    def double(self):
        return _cast_floating(self, jnp.float64)

    def type(self, dst_type):
        return _cast_floating(self, dst_type)

    def cpu(self):
        return self

    def cuda(self, device=None):
        return self


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
