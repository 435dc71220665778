"""torch.nn.utils' weight reparametrisations on Keras layers: `weight_norm` and `spectral_norm`,
in both of torch's forms (the hook-based `torch.nn.utils.weight_norm` / `spectral_norm`, and
`torch.nn.utils.parametrizations.weight_norm` / `spectral_norm`).

Why a class swap: torch keeps the layer and computes its `weight` from new parameters on every
call (a forward pre-hook, or parametrize's injected class). Here the layer keeps its class name
and gets a subclass whose `weight` (the runtime's layers hold torch's name and layout) is a
property computed from the new variables, held under torch's state-dict names, so the torch
checkpoint loads as it is: `weight_g`/`weight_v`, `weight_orig`/`weight_u`/`weight_v`,
`parametrizations.weight.original0`/`original1`, `parametrizations.weight.original` with the
power iteration's `parametrizations.weight.0._u`/`_v`. Spectral norm runs torch's power
iteration in a training call and uses the stored vectors otherwise. The Flax counterpart is
runtime/flax/parametrize.py.
"""

from typing import Any

import keras
from keras import ops

from precision_transpiler.runtime.common import _spectral_dim
from precision_transpiler.runtime.keras.module_api import Buffer, Parameter, _untrack_replaced_variable
from precision_transpiler.runtime.keras.modules import _call_training

# (layer class, kind, torch name, dim) -> the layer's parametrized class
_PARAMETRIZED_CLASSES: dict[tuple[Any, ...], type] = {}


def _norm_except_dim(v: Any, dim: int) -> Any:
    """torch's `norm_except_dim(v, 2, dim)`: the 2-norm over every axis but `dim`, kept as size-1
    axes; dim -1 (torch's `dim=None`) is the norm of the whole tensor."""
    if dim == -1:
        return ops.sqrt(ops.sum(v * v))
    axes = tuple(i for i in range(len(v.shape)) if i != dim % len(v.shape))
    return ops.sqrt(ops.sum(v * v, axis=axes, keepdims=True))


def _normalize(x: Any, eps: float) -> Any:
    """torch's `F.normalize(x, dim=0, eps=eps)` of a vector."""
    return x / ops.maximum(ops.sqrt(ops.sum(x * x)), eps)


def _matrix(weight: Any, dim: int) -> Any:
    """The weight as torch's spectral norm sees it: `dim` first, the rest flattened."""
    return ops.reshape(ops.moveaxis(weight, dim, 0), (weight.shape[dim], -1))


def _power_step(matrix: Any, u: Any, v: Any, eps: float, v_first: bool = False) -> tuple[Any, Any]:
    """One step of torch's power iteration: u from v, then v from the new u (the hook-based
    `spectral_norm`: v first, then u)."""
    if v_first:
        v = _normalize(ops.matmul(ops.transpose(matrix), u), eps)
        return _normalize(ops.matmul(matrix, v), eps), v
    u = _normalize(ops.matmul(matrix, v), eps)
    return u, _normalize(ops.matmul(ops.transpose(matrix), u), eps)


def _sigma(
    u_variable: Any, v_variable: Any, weight: Any, dim: int, n_power_iterations: int, eps: float, v_first: bool = False
) -> Any:
    """The largest singular value's estimate `u . W v`; in a training call the vectors first take
    `n_power_iterations` steps and are stored, as torch does."""
    matrix = _matrix(weight, dim)
    if _call_training():
        u, v = u_variable.value, v_variable.value
        for _ in range(n_power_iterations):
            u, v = _power_step(ops.stop_gradient(matrix), u, v, eps, v_first)
        u_variable.assign(u)
        v_variable.assign(v)
    return ops.sum(u_variable.value * ops.matmul(matrix, v_variable.value))


def _start_vectors(weight: Any, dim: int, eps: float) -> tuple[Any, Any]:
    """The power iteration's first vectors (torch's start: 15 steps from its random vectors)."""
    matrix = _matrix(ops.convert_to_tensor(weight), dim)
    u = _normalize(ops.ones((matrix.shape[0],), matrix.dtype), eps)
    v = _normalize(ops.ones((matrix.shape[1],), matrix.dtype), eps)
    for _ in range(15):
        u, v = _power_step(matrix, u, v, eps)
    return u, v


class SpectralNormState(keras.layers.Layer):
    """The power iteration's state of one spectral norm (torch's `_SpectralNorm` module: the
    buffers `_u`, `_v`)."""

    _torch_variable_names = ("_u", "_v")

    def __init__(self, weight: Any, dim: int, n_power_iterations: int, eps: float) -> None:
        super().__init__()
        self.dim, self.n_power_iterations, self.eps = dim, n_power_iterations, eps
        u, v = _start_vectors(weight, dim, eps)
        self._u, self._v = Buffer(u), Buffer(v)
        self.built = True

    def call(self, weight: Any) -> Any:
        if len(weight.shape) == 1:
            return weight / ops.maximum(ops.sqrt(ops.sum(weight * weight)), self.eps)
        return weight / _sigma(self._u, self._v, weight, self.dim, self.n_power_iterations, self.eps)


class ParametrizationList(keras.layers.Layer):
    """torch's `ParametrizationList` of one parametrized tensor: `original` (or `original0`,
    `original1` for weight norm's two) and the parametrization layers as children "0", ..."""


class ModuleParametrizations(keras.layers.Layer):
    """A layer's `parametrizations`: one `ParametrizationList` per parametrized tensor name."""


def _compute(module: Any, kind: str, name: str, dim: int) -> Any:
    """The weight of a parametrized layer, from its new variables."""
    if kind == "weight_norm":
        g, v = getattr(module, f"{name}_g"), getattr(module, f"{name}_v")
        return v * (g / _norm_except_dim(v, dim))
    if kind == "parametrized_weight_norm":
        entry = getattr(module.parametrizations, name)
        return entry.original1 * (entry.original0 / _norm_except_dim(entry.original1, dim))
    if kind == "spectral_norm":
        weight = getattr(module, f"{name}_orig")
        n_power_iterations, eps = module.__dict__["_torch_spectral_norm"]
        u, v = getattr(module, f"{name}_u"), getattr(module, f"{name}_v")
        return weight / _sigma(u, v, weight, dim, n_power_iterations, eps, True)
    entry = getattr(module.parametrizations, name)
    return getattr(entry, "0")(entry.original)


def _parametrize(module: Any, name: str, kind: str, dim: int) -> Any:
    """Replace the layer's variable `name` by a property computing it (the layer's class becomes
    a subclass of the same name); returns the variable's value."""
    weight = ops.convert_to_tensor(getattr(module, name))
    cls = type(module)
    key = (cls, kind, name, dim)
    if key not in _PARAMETRIZED_CLASSES:

        def read(self: Any) -> Any:
            return _compute(self, kind, name, dim)

        namespace = {name: property(read), "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        _PARAMETRIZED_CLASSES[key] = type(cls.__name__, (cls,), namespace)
    _untrack_replaced_variable(module, name, None)
    delattr(module, name)
    object.__setattr__(module, "__class__", _PARAMETRIZED_CLASSES[key])
    return weight


def _list(module: Any, name: str) -> Any:
    """The layer's `parametrizations.<name>` list, made on first use."""
    if not isinstance(vars(module).get("parametrizations"), ModuleParametrizations):
        module.parametrizations = ModuleParametrizations()
    entry = ParametrizationList()
    setattr(module.parametrizations, name, entry)
    return entry


def weight_norm(module: Any, name: str = "weight", dim: int | None = 0) -> Any:
    """torch.nn.utils.weight_norm: `name` = g * v / ||v|| (the norm over every axis but `dim`),
    g and v the parameters `<name>_g`, `<name>_v`; returns the module."""
    dim = -1 if dim is None else dim
    weight = _parametrize(module, name, "weight_norm", dim)
    setattr(module, f"{name}_g", Parameter(_norm_except_dim(weight, dim)))
    setattr(module, f"{name}_v", Parameter(weight))
    return module


def parametrizations_weight_norm(module: Any, name: str = "weight", dim: int | None = 0) -> Any:
    """torch.nn.utils.parametrizations.weight_norm: as `weight_norm`, the parameters held as
    `parametrizations.<name>.original0` (g) and `original1` (v)."""
    dim = -1 if dim is None else dim
    weight = _parametrize(module, name, "parametrized_weight_norm", dim)
    entry = _list(module, name)
    entry.original0 = Parameter(_norm_except_dim(weight, dim))
    entry.original1 = Parameter(weight)
    return module


def spectral_norm(
    module: Any, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Any:
    """torch.nn.utils.spectral_norm: `name` = W / sigma(W), W the parameter `<name>_orig`, the
    power iteration's vectors the buffers `<name>_u`, `<name>_v`; returns the module."""
    dim = _spectral_dim(module, dim)
    weight = _parametrize(module, name, "spectral_norm", dim)
    u, v = _start_vectors(weight, dim, eps)
    setattr(module, f"{name}_orig", Parameter(weight))
    setattr(module, f"{name}_u", Buffer(u))
    setattr(module, f"{name}_v", Buffer(v))
    object.__setattr__(module, "_torch_spectral_norm", (n_power_iterations, eps))
    return module


def parametrizations_spectral_norm(
    module: Any, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Any:
    """torch.nn.utils.parametrizations.spectral_norm: `parametrizations.<name>.original` and the
    power iteration's buffers `parametrizations.<name>.0._u`, `._v`."""
    dim = _spectral_dim(module, dim)
    weight = _parametrize(module, name, "parametrized_spectral_norm", dim)
    entry = _list(module, name)
    entry.original = Parameter(weight)
    setattr(entry, "0", SpectralNormState(weight, dim, n_power_iterations, eps))
    return module
