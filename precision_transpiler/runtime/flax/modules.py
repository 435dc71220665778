"""torch's Module behaviour for converted Flax NNX code: `TorchModule` (the base of converted
module classes: training mode, `state_dict`/`load_state_dict`, `apply`, `to`, tuple attributes),
`is_training`, `no_grad`, in-place initialisers and `torch.autocast` regions.

The module walks (`modules`, `named_children`, `add_module`), buffers and the torch names of
parameters are in module_api.py (which `TorchModule`'s methods call); the small layers
(`Identity`, `Flatten`, `Dropout`, `Linear`, `Embedding`) and `TorchLayer` in layers.py, the
activation modules in activations.py, the containers (`Sequential`, `ModuleList`, `ModuleDict`)
in containers.py.
"""

import collections
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from precision_transpiler.runtime.common import (
    _TORCH_AUTOCAST_STACK,
    register_load_state_dict_pre_hook,
    run_load_state_dict_pre_hooks,
)
from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.flax.module_api import (
    Buffer,
    _as_numpy,
    _to_flax_layout,
    _to_torch_layout,
    _torch_state_entries,
    apply_post_order,
    children,
    modules,
    named_buffers,
    named_children,
    named_modules,
    named_parameters,
)


def _cast_floating(module, dtype):
    """Cast every floating parameter and buffer under `module` to `dtype` (torch's `.half()`,
    `.to(dtype)`); integer buffers keep their dtype, as in torch."""
    for _, variable in [*named_parameters(module), *named_buffers(module)]:
        value = variable.get_value()
        if hasattr(value, "dtype") and jnp.issubdtype(value.dtype, jnp.floating):
            variable.set_value(value.astype(dtype))
    return module


_IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
"""torch's result of `load_state_dict`: the keys it did not find and those it did not take."""


def _holds_nnx_state(value):
    """Whether a plain list, tuple or dict holds an nnx module, variable or array (nested too):
    a JAX array, or a NumPy one (nflows' `self.lower_indices = np.tril_indices(n, k=-1)`), which
    nnx counts as data too."""
    items = value.values() if isinstance(value, dict) else value
    return any(
        isinstance(item, nnx.Module | nnx.Variable | jax.Array | np.ndarray)
        or (type(item) in (list, tuple, dict) and _holds_nnx_state(item))
        for item in items
    )


#: tuple subclasses registered as JAX pytrees by `_register_tuple_types`
_TUPLE_TYPES = set()  # type: ignore[var-annotated]


def _register_tuple_types(value):
    """Register the tuple subclasses in `value` (e3nn's `Irreps` of `Irrep`s) as JAX pytrees of
    their items. nnx walks every tuple as a pytree node, while JAX flattens a tuple subclass it
    does not know (not a namedtuple) as one leaf, and nnx then fails on the module
    (`IndexError` in `eval()`, `nnx.split`). Rebuilt with `tuple.__new__` and the instance's
    attributes, so the class's own constructor (which parses strings) is not called again."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
            continue
        if not isinstance(item, tuple | list):
            continue
        kind = type(item)
        known = kind is tuple or hasattr(kind, "_fields") or kind in _TUPLE_TYPES  # namedtuples are pytrees
        if isinstance(item, tuple) and not known:
            _TUPLE_TYPES.add(kind)
            try:  # noqa: SIM105 (the runtime imports no contextlib: it is copied into outputs)
                jax.tree_util.register_pytree_node(kind, _flatten_tuple, functools.partial(_unflatten_tuple, kind))
            except ValueError:
                pass  # registered already (by the class's library, or another converted module)
        stack.extend(iter(item))


def _flatten_tuple(value):
    # through tuple's iterator: e3nn's Irrep raises in its own `__len__`
    return tuple(iter(value)), tuple(sorted(getattr(value, "__dict__", {}).items()))


def _unflatten_tuple(kind, aux, items):
    value = tuple.__new__(kind, items)
    for name, attribute in aux:
        object.__setattr__(value, name, attribute)
    return value


class TorchModule(TorchLayer):
    """torch.nn.Module for converted classes: an nnx.Module with torch's module methods, so code
    that calls them (`self.apply(self._init_weights)`, `model.eval()`, `model.parameters()`)
    runs as written. The names the walks give are the converted layers' (Flax's `kernel` where
    torch says `weight`); `state_dict()`/`load_state_dict()` speak torch's names and layouts
    (the table above), so a torch checkpoint loads as in torch.

    Its constructor takes and ignores any arguments (`rngs` too), as a class with nn.Module's
    constructor is called with none; `train()`/`eval()` return the module, as torch's do (nnx's
    return None), and set nnx's `deterministic`/`use_running_average` flags below it."""

    def __init__(self, *args, rngs=None, **kwargs):
        pass

    def __new__(cls, *args, **kwargs):
        node = super().__new__(cls)
        if getattr(type(cls), "_torch_combined_metaclass", False):
            # a metaclass of the source's whose `__call__` makes the object with
            # `type.__call__` (kornia's post-init injection) skips nnx's: the object gets nnx's
            # state here, and again, fresh, when nnx's `__call__` does run
            object.__setattr__(node, "_pytree__state", nnx.pytreelib.PytreeState())
            object.__setattr__(node, "_pytree__nodes", cls._pytree__nodes)
        return node

    def __setattr__(self, name, value):
        """nnx sets an object up after `__new__`: an attribute a mixin's `__new__` sets before
        (huggingface_hub's ModelHubMixin records the constructor's arguments there) is set as
        on a plain object, and nnx takes it in once the object is made."""
        if "_pytree__state" not in vars(self):
            object.__setattr__(self, name, value)
            if type(value) in (list, tuple, dict) and _holds_nnx_state(value):
                # neuraloperator's `instance._init_kwargs = kwargs` (the layers it was given):
                # data to nnx, which would find it static; set again once nnx has the object
                vars(self).setdefault("_torch_pending_data", []).append(name)
            return
        pending = vars(self).pop("_torch_pending_data", None)
        for held in pending or ():
            if held in vars(self):
                super().__setattr__(held, nnx.data(vars(self).pop(held)))
        if isinstance(value, tuple | list | dict) and type(value) is not tuple:
            _register_tuple_types(value)
        if type(value) in (list, tuple, dict) and _holds_nnx_state(value):
            # `self.heads = [Layer(...) for _ in range(n)]` (then `add_module(f"head_{i}", head)`):
            # a plain container of modules or arrays is data to nnx, which refuses it as static
            value = nnx.data(value)
        try:
            super().__setattr__(name, value)
        except ValueError as error:
            # `self.downsample = downsample` (a class: static to nnx), then the layer built from
            # it (`self.downsample = downsample(dim=dim)`, monai's Swin stages): torch lets an
            # attribute change kind, nnx refuses a module on an attribute it holds as static
            if not str(error).startswith("Cannot assign data value"):
                raise
            super().__setattr__(name, nnx.data(value))

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
        """torch's `register_buffer`: a Buffer variable (not trained); `None` stays None (no state
        entry, `self.scale is None` holds), as torch keeps it out of the state dict."""
        setattr(self, name, Buffer(tensor, persistent=persistent) if tensor is not None else nnx.data(None))

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
        """An iterator, as torch's generator (`next(self.parameters()).dtype`)."""
        return iter([v for _, v in named_parameters(self, recurse=recurse)])

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return named_parameters(self, prefix, recurse)

    def get_parameter(self, target: str):
        found = dict(named_parameters(self)).get(target)
        if found is None:
            raise AttributeError(f"{type(self).__name__} has no parameter {target!r}")
        return found

    def buffers(self, recurse: bool = True):
        return iter([v for _, v in named_buffers(self, recurse=recurse)])

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return named_buffers(self, prefix, recurse)

    def get_buffer(self, target: str):
        found = dict(named_buffers(self)).get(target)
        if found is None:
            raise AttributeError(f"{type(self).__name__} has no buffer {target!r}")
        return found

    def apply(self, fn):
        """torch's `apply(fn)`: `fn` on every submodule (children first), then on this module."""
        return apply_post_order(self, fn)

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """torch's `state_dict()`: the parameters and persistent buffers under the torch model's
        keys, in its order and layouts (`fc.weight` (out, in) for nnx.Linear's `fc.kernel`
        (in, out), conv weights OIHW), as arrays, so a converted model's weights go back to torch
        or to torch-named checkpoints. A shared module or parameter is listed under each of its
        names, as torch lists it. `keep_vars=True` gives the nnx variables themselves (in their
        Flax layout). `flax_state_dict()` gives the Flax names and layouts."""
        out = {} if destination is None else destination
        for key, variable, layout in _torch_state_entries(self, prefix):
            if variable is None:  # a torch counter the layer does not keep (nnx.BatchNorm's)
                out[key] = jnp.zeros((), jnp.int32)
            else:
                out[key] = variable if keep_vars else _to_torch_layout(variable.get_value(), layout)
        return out

    def _register_load_state_dict_pre_hook(self, hook, with_module: bool = False):
        register_load_state_dict_pre_hook(self, hook, with_module)

    def register_load_state_dict_pre_hook(self, hook):
        register_load_state_dict_pre_hook(self, hook, True)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """torch's `load_state_dict()`: set parameters and buffers from a torch-named, torch-layout
        `state_dict` (NumPy or JAX arrays, or torch tensors), cast to each variable's dtype.
        Returns torch's `(missing_keys, unexpected_keys)` named tuple. As torch, raises a
        RuntimeError before changing anything when a shape differs, or (`strict`) when keys are
        missing or unexpected; torch entries a layer has no counterpart of (nnx.BatchNorm's
        `num_batches_tracked`) are accepted and dropped. The modules' load-state-dict pre-hooks
        run first, as torch runs them."""
        state_dict = run_load_state_dict_pre_hooks(named_modules(self), state_dict, strict)
        targets = {key: (variable, layout) for key, variable, layout in _torch_state_entries(self)}
        unexpected = [k for k in state_dict if k not in targets]
        missing = [k for k, (variable, _) in targets.items() if variable is not None and k not in state_dict]
        errors = []
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        updates = []
        for key, raw in state_dict.items():
            variable, layout = targets.get(key, (None, "same"))
            if variable is None:
                continue
            value = _to_flax_layout(_as_numpy(raw), layout)
            current = variable.get_value()
            if tuple(value.shape) != tuple(current.shape):
                shape = tuple(getattr(raw, "shape", ()))
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {shape} from checkpoint, "
                    f"the shape in current model is {tuple(_to_torch_layout(current, layout).shape)}."
                )
                continue
            # a copy, never a view of the caller's buffer (a torch tensor's `.numpy()` shares it)
            updates.append((variable, jnp.array(value, copy=True, dtype=current.dtype)))
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        for variable, array in updates:
            variable.set_value(array)
        return _IncompatibleKeys(missing, unexpected)

    def flax_state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers under the converted layers' own names and layouts
        (`fc.kernel` (in, out)), as `named_parameters()`/`named_buffers()` give them."""
        out = {} if destination is None else destination
        for name, variable in [*named_parameters(self, prefix), *named_buffers(self, prefix)]:
            if getattr(variable, "persistent", True) is not False:
                out[name] = variable if keep_vars else variable.get_value()
        return out

    def load_flax_state_dict(self, state_dict, strict: bool = True):
        """Set parameters and buffers from `state_dict` under `flax_state_dict()`'s names and
        layouts; strict: every key known and every entry given, else a KeyError naming them.
        Returns (missing, unexpected)."""
        own = {**dict(named_parameters(self)), **dict(named_buffers(self))}
        unexpected = [k for k in state_dict if k not in own]
        missing = [k for k in own if k not in state_dict and getattr(own[k], "persistent", True) is not False]
        if strict and (unexpected or missing):
            raise KeyError(f"load_flax_state_dict: missing keys {missing}, unexpected keys {unexpected}")
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


def torch_train(module, mode=True):
    """torch's `m.train(mode)` on a module the code holds but did not define (a layer handed to a
    constructor, `self.base_model.eval()`): nnx's train()/eval() return None where torch's return
    the module, and converted modules below keep their own flag (`deterministic`)."""
    if isinstance(module, TorchModule):
        return module.train(mode)
    if isinstance(module, nnx.Module):
        nnx.Module.train(module) if mode else nnx.Module.eval(module)
        for layer in modules(module):
            if isinstance(layer, TorchModule):
                object.__setattr__(layer, "deterministic", not mode)
    return module


def torch_eval(module):
    """torch's `m.eval()` on any module (`torch_train(m, False)`); returns it, as torch's does."""
    return torch_train(module, False)


def module_metaclass(metaclass, *bases):
    """`class Guide(PyroModule, metaclass=_GuideMeta)`: torch's Module has no metaclass of its own,
    so any `type` subclass goes with it, while nnx's Module has one, which Python finds in
    conflict with the source's. The class gets a metaclass derived from both (from the source's
    first, so its `__call__` and `__getitem__` run as written), made once per pair."""
    metaclasses = [metaclass, *(type(base) for base in bases)]
    winners = []
    for candidate in metaclasses:
        if candidate in winners or any(o is not candidate and issubclass(o, candidate) for o in metaclasses):
            continue
        winners.append(candidate)
    return _combined_metaclass(tuple(winners))


@functools.cache
def _combined_metaclass(metaclasses):
    if len(metaclasses) == 1:
        return metaclasses[0]
    name = "_".join(m.__name__ for m in metaclasses)
    return type(name, metaclasses, {"_torch_combined_metaclass": True})


def torch_assert(condition, message=""):
    """torch._assert: raise AssertionError when `condition` is false (eagerly; under jax.jit a
    traced condition cannot be checked, as with torch.jit's asserts on symbolic shapes)."""
    if not isinstance(condition, jax.core.Tracer) and not bool(condition):
        raise AssertionError(message)


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


def autocast(device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
    """`torch.autocast` (`torch.amp.autocast`) passed around as a value rather than written in a
    `with` item or a decorator (`no_amp = partial(autocast, "cuda", enabled=False)`): calling it
    makes the region, a `torch_autocast` for no module (so a disabled region runs the ops
    written in it as written, and an enabled one casts them); torch's default dtype for the
    device type when none is given. `cache_enabled` has no meaning outside torch."""
    if dtype is None:
        dtype = "bfloat16" if device_type == "cpu" else "float16"
    return torch_autocast(None, dtype, enabled)


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


def is_training(module):
    """torch's `module.training` on a converted module: nnx's eval()/train() flip `deterministic`
    on modules that read their mode; one without that flag has no mode of its own: False."""
    return not getattr(module, "deterministic", True)
