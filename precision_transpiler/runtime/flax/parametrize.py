"""torch.nn.utils' weight reparametrisations on Flax NNX layers: `weight_norm` and
`spectral_norm`, in both of torch's forms (the hook-based `torch.nn.utils.weight_norm` /
`spectral_norm`, and `torch.nn.utils.parametrizations.weight_norm` / `spectral_norm`).

Why a class swap: torch keeps the layer and computes its `weight` from new parameters on every
call (a forward pre-hook, or parametrize's injected class). Here the layer keeps its class name
and gets a subclass whose weight attribute (nnx.Linear's `kernel`, in Flax's layout) is a
property computed from the new parameters, held under torch's state-dict names, so the torch
checkpoint loads as it is: `weight_g`/`weight_v`, `weight_orig`/`weight_u`/`weight_v`,
`parametrizations.weight.original0`/`original1`, `parametrizations.weight.original` with the
power iteration's `parametrizations.weight.0._u`/`_v`. Spectral norm runs torch's power
iteration in training mode (nnx's `train()`) and uses the stored vectors in inference mode. The
Keras counterpart is runtime/keras/parametrize.py.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.common import _spectral_dim
from precision_transpiler.runtime.flax.module_api import Buffer, _to_flax_layout, _to_torch_layout, _torch_slot

# (layer class, attribute, layout, kind, torch name, dim) -> the layer's parametrized class
_PARAMETRIZED_CLASSES = {}


def _norm_except_dim(v, dim):
    """torch's `norm_except_dim(v, 2, dim)`: the 2-norm over every axis but `dim`, kept as size-1
    axes; dim -1 (torch's `dim=None`) is the norm of the whole tensor."""
    if dim == -1:
        return jnp.sqrt(jnp.sum(v * v))
    axes = tuple(i for i in range(v.ndim) if i != dim % v.ndim)
    return jnp.sqrt(jnp.sum(v * v, axis=axes, keepdims=True))


def _normalize(x, eps):
    """torch's `F.normalize(x, dim=0, eps=eps)` of a vector."""
    return x / jnp.maximum(jnp.sqrt(jnp.sum(x * x)), eps)


def _matrix(weight, dim):
    """The weight as torch's spectral norm sees it: `dim` first, the rest flattened."""
    return jnp.moveaxis(weight, dim, 0).reshape(weight.shape[dim], -1)


def _start_vectors(weight, dim, eps):
    """The power iteration's first vectors (torch's start: 15 steps from its random vectors)."""
    matrix = _matrix(weight, dim)
    u = _normalize(jnp.ones((matrix.shape[0],), weight.dtype), eps)
    v = _normalize(jnp.ones((matrix.shape[1],), weight.dtype), eps)
    for _ in range(15):
        u, v = _power_step(matrix, u, v, eps)
    return u, v


class SpectralNormState(nnx.Module):
    """The power iteration's state of one spectral norm (torch's `_SpectralNorm` module: the
    buffers `_u`, `_v`); `deterministic` follows nnx's train() / eval()."""

    _torch_variable_names = ("_u", "_v")

    def __init__(self, weight, dim, n_power_iterations, eps):
        self.dim, self.n_power_iterations, self.eps = dim, n_power_iterations, eps
        self.deterministic = True
        u, v = _start_vectors(weight, dim, eps)
        self._u, self._v = Buffer(u), Buffer(v)

    def __call__(self, weight):
        if weight.ndim == 1:
            return weight / jnp.maximum(jnp.sqrt(jnp.sum(weight * weight)), self.eps)
        training = not self.deterministic
        return weight / _sigma(self._u, self._v, weight, self.dim, training, self.n_power_iterations, self.eps)


def _power_step(matrix, u, v, eps, v_first=False):
    """One step of torch's power iteration: u from v, then v from the new u (the hook-based
    `spectral_norm`: v first, then u)."""
    if v_first:
        v = _normalize(matrix.T @ u, eps)
        return _normalize(matrix @ v, eps), v
    u = _normalize(matrix @ v, eps)
    return u, _normalize(matrix.T @ u, eps)


def _sigma(u_variable, v_variable, weight, dim, training, n_power_iterations, eps, v_first=False):
    """The largest singular value's estimate `u . W v`; in training mode the vectors first take
    `n_power_iterations` steps and are stored, as torch does."""
    matrix = _matrix(weight, dim)
    if training:
        u, v = u_variable[...], v_variable[...]
        for _ in range(n_power_iterations):
            u, v = _power_step(jax.lax.stop_gradient(matrix), u, v, eps, v_first)
        u_variable[...], v_variable[...] = u, v
    return jnp.vdot(u_variable[...], matrix @ v_variable[...])


class ParametrizationList(nnx.Module):
    """torch's `ParametrizationList` of one parametrized tensor: `original` (or `original0`,
    `original1` for weight norm's two) and the parametrization modules as children "0", ..."""


class ModuleParametrizations(nnx.Module):
    """A layer's `parametrizations`: one `ParametrizationList` per parametrized tensor name."""


def _compute(module, kind, name, dim):
    """The torch-layout weight of a parametrized layer."""
    if kind == "weight_norm":
        g, v = getattr(module, f"{name}_g")[...], getattr(module, f"{name}_v")[...]
        return v * (g / _norm_except_dim(v, dim))
    if kind == "parametrized_weight_norm":
        entry = getattr(module.parametrizations, name)
        g, v = entry.original0[...], entry.original1[...]
        return v * (g / _norm_except_dim(v, dim))
    if kind == "spectral_norm":
        weight = getattr(module, f"{name}_orig")[...]
        n_power_iterations, eps = module.__dict__["_torch_spectral_norm"]
        u, v = getattr(module, f"{name}_u"), getattr(module, f"{name}_v")
        return weight / _sigma(u, v, weight, dim, not module.deterministic, n_power_iterations, eps, True)
    entry = getattr(module.parametrizations, name)
    return getattr(entry, "0")(entry.original[...])


def _parametrize(module, name, kind, dim):
    """Replace the layer's attribute holding torch's `name` by a property computing it (the
    layer's class becomes a subclass of the same name); returns the torch-layout weight."""
    attribute, layout = _torch_slot(module, name)
    weight = _to_torch_layout(getattr(module, attribute)[...], layout)
    cls = type(module)
    key = (cls, attribute, layout, kind, name, dim)
    if key not in _PARAMETRIZED_CLASSES:

        def read(self):
            return _to_flax_layout(_compute(self, kind, name, dim), layout)

        namespace = {attribute: property(read), "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        _PARAMETRIZED_CLASSES[key] = type(cls.__name__, (cls,), namespace)
    delattr(module, attribute)
    object.__setattr__(module, "__class__", _PARAMETRIZED_CLASSES[key])
    return weight


def _list(module, name):
    """The layer's `parametrizations.<name>` list, made on first use."""
    if not isinstance(vars(module).get("parametrizations"), ModuleParametrizations):
        module.parametrizations = ModuleParametrizations()
    entry = ParametrizationList()
    setattr(module.parametrizations, name, entry)
    return entry


def weight_norm(module, name="weight", dim=0):
    """torch.nn.utils.weight_norm: `name` = g * v / ||v|| (the norm over every axis but `dim`),
    g and v the parameters `<name>_g`, `<name>_v`; returns the module."""
    dim = -1 if dim is None else dim
    weight = _parametrize(module, name, "weight_norm", dim)
    setattr(module, f"{name}_g", nnx.Param(_norm_except_dim(weight, dim)))
    setattr(module, f"{name}_v", nnx.Param(weight))
    return module


def parametrizations_weight_norm(module, name="weight", dim=0):
    """torch.nn.utils.parametrizations.weight_norm: as `weight_norm`, the parameters held as
    `parametrizations.<name>.original0` (g) and `original1` (v)."""
    dim = -1 if dim is None else dim
    weight = _parametrize(module, name, "parametrized_weight_norm", dim)
    entry = _list(module, name)
    entry.original0 = nnx.Param(_norm_except_dim(weight, dim))
    entry.original1 = nnx.Param(weight)
    return module


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """torch.nn.utils.spectral_norm: `name` = W / sigma(W), W the parameter `<name>_orig`, the
    power iteration's vectors the buffers `<name>_u`, `<name>_v`; returns the module."""
    dim = _spectral_dim(module, dim)
    weight = _parametrize(module, name, "spectral_norm", dim)
    u, v = _start_vectors(weight, dim, eps)
    setattr(module, f"{name}_orig", nnx.Param(weight))
    setattr(module, f"{name}_u", Buffer(u))
    setattr(module, f"{name}_v", Buffer(v))
    object.__setattr__(module, "_torch_spectral_norm", (n_power_iterations, eps))
    if not hasattr(module, "deterministic"):  # the mode nnx's train() / eval() set
        module.deterministic = True
    return module


def parametrizations_spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """torch.nn.utils.parametrizations.spectral_norm: `parametrizations.<name>.original` and the
    power iteration's buffers `parametrizations.<name>.0._u`, `._v`."""
    dim = _spectral_dim(module, dim)
    weight = _parametrize(module, name, "parametrized_spectral_norm", dim)
    entry = _list(module, name)
    entry.original = nnx.Param(weight)
    setattr(entry, "0", SpectralNormState(weight, dim, n_power_iterations, eps))
    return module
