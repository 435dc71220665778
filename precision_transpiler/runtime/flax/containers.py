"""torch's containers for converted Flax NNX code: `Sequential`, `ModuleList`, `ModuleDict`,
`ParameterList`, `ParameterDict`.

Their children sit at torch's paths ("0", "1", ... or the given keys) in the nnx graph, so torch's
`named_modules()` names are the nnx paths that weight transfer (precision_transpiler.weights) and
per-layer verification pair on; indexing, slicing, iteration and the list/dict methods behave as
torch's.
"""

from typing import Any

import jax.numpy as jnp
from flax import nnx

from precision_transpiler.runtime.flax.layers import TorchLayer
from precision_transpiler.runtime.flax.module_api import TorchInternals


class Sequential(TorchLayer):
    """torch.nn.Sequential: children under the names "0", "1", ... (or an OrderedDict's keys).

    Children are attributes named by their torch names, so their nnx graph paths are
    ('0', 'kernel'), ... directly under the Sequential: torch's `named_modules()` names, which
    weight transfer and per-layer verification pair on. Indexing, slicing (a Sequential), iteration,
    len, append/extend/insert/pop and deletion (which renumbers, as torch does) are supported.
    Children may be modules or plain callables.
    """

    def __init__(self, *args: Any, rngs: Any = None) -> None:
        if len(args) == 1 and isinstance(args[0], dict):
            items = [(str(k), m) for k, m in args[0].items()]
        else:
            items = [(str(i), m) for i, m in enumerate(args)]
        self._names: tuple[str, ...] = ()
        for name, module in items:
            self._add(name, module)

    def _add(self, name: str, module: Any) -> None:
        setattr(self, name, module)
        if name not in self._names:
            self._names = (*self._names, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # torch registers a module assigned as an attribute (`self.norm = BatchNorm2d(c)` in a
        # Sequential subclass such as torchvision's _Transition) as the next child
        super().__setattr__(name, value)
        if isinstance(value, nnx.Module) and not name.startswith("_") and name not in self._names:
            super().__setattr__("_names", (*self._names, name))

    def _reset(self, modules: list[Any]) -> None:
        for name in self._names:
            delattr(self, name)
        self._names = ()
        for i, module in enumerate(modules):
            self._add(str(i), module)

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Any:
        return iter([getattr(self, name) for name in self._names])

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            names = self._names[index]
            return Sequential(dict(zip(names, [getattr(self, name) for name in names], strict=True)))
        return getattr(self, self._names[index])

    def __setitem__(self, index: int, module: Any) -> None:
        setattr(self, self._names[index], module)

    def __delitem__(self, index: int | slice) -> None:
        doomed = set(self._names[index]) if isinstance(index, slice) else {self._names[index]}
        self._reset([getattr(self, name) for name in self._names if name not in doomed])

    def append(self, module: Any) -> "Sequential":
        self._add(str(len(self)), module)
        return self

    def add_module(self, name: str, module: Any) -> None:
        self._add(str(name), module)

    def extend(self, modules: Any) -> "Sequential":
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Any) -> "Sequential":
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        modules = list(self)
        modules.insert(index if index >= 0 else index + n, module)
        self._reset(modules)
        return self

    def pop(self, index: int = -1) -> Any:
        module = self[index]
        del self[index]
        return module

    def __call__(self, x: Any) -> Any:
        for module in self:
            x = module(x)
        return x


class ModuleList(TorchInternals, nnx.List):
    """torch.nn.ModuleList on nnx.List (flax 0.12 requires nnx.List for lists of modules).

    nnx graph paths of the children are the integers 0, 1, ... directly under the list, so
    `'.'.join(map(str, path))` gives torch's names. Slicing returns a ModuleList, append/extend return
    self, like torch.
    """

    def __init__(self, modules: Any = None, *, rngs: Any = None) -> None:
        super().__init__(modules)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ModuleList(super().__getitem__(index))
        return super().__getitem__(index)

    def append(self, module: Any) -> "ModuleList":
        super().append(module)
        return self

    def extend(self, modules: Any) -> "ModuleList":
        for module in modules:
            super().append(module)
        return self

    def __add__(self, other: Any) -> "ModuleList":
        return ModuleList([*self, *other])


class ModuleDict(TorchInternals, nnx.Dict):
    """torch.nn.ModuleDict on nnx.Dict: the keys are the children's nnx path names (torch's names).

    Keys are stored as attributes, so a key equal to a method name (e.g. 'keys', 'items') would
    shadow that method; torch stores children apart and has no such limit.
    """

    def __init__(self, modules: Any = None, *, rngs: Any = None) -> None:
        super().__init__(dict(modules or {}))

    def _has(self, key: Any) -> bool:
        return isinstance(key, str) and not key.startswith("_pytree__") and key in vars(self)

    def __getitem__(self, key: str) -> Any:
        if not self._has(key):
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return self._has(key) and isinstance(vars(self)[key], self._entries)

    def add_module(self, name: str, module: Any) -> None:
        setattr(self, str(name), module)

    # torch's ModuleDict holds modules only (ParameterDict parameters): a subclass's own
    # attributes (geffnet's MixedConv2d sets `self.splits`, `self.in_channels`) are not entries,
    # as nnx.Dict would take them
    _entries: Any = nnx.Module

    def _module_keys(self) -> list[str]:
        return [k for k, v in vars(self).items() if not k.startswith("_pytree__") and isinstance(v, self._entries)]

    def keys(self) -> Any:
        return self._module_keys()

    def values(self) -> Any:
        return [getattr(self, k) for k in self._module_keys()]

    def items(self) -> Any:
        return [(k, getattr(self, k)) for k in self._module_keys()]

    def __iter__(self) -> Any:
        return iter(self._module_keys())

    def __len__(self) -> int:
        return len(self._module_keys())


def _as_param(value: Any) -> Any:
    """An entry of a ParameterList/ParameterDict: an nnx Variable or a module (a ParameterList of
    ParameterLists, titans' per-layer weights: torch registers a Module entry as a submodule) as
    it is, anything else wrapped in an nnx.Param (torch wraps plain tensors in a Parameter)."""
    return value if isinstance(value, nnx.Variable | nnx.Module) else nnx.Param(jnp.asarray(value))


class ParameterList(nnx.List):
    """torch.nn.ParameterList on nnx.List: nnx.Params at the paths 0, 1, ... (torch's names `w.0`,
    `w.1`, so weight transfer pairs them). Indexing gives the Param (it computes as its array),
    slicing a ParameterList; iteration, len, append/extend as torch's."""

    def __init__(self, values: Any = None, *, rngs: Any = None) -> None:
        super().__init__([_as_param(v) for v in values or []])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ParameterList(super().__getitem__(index))
        return super().__getitem__(index)

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, _as_param(value))

    def append(self, value: Any) -> "ParameterList":
        super().append(_as_param(value))
        return self

    def extend(self, values: Any) -> "ParameterList":
        for value in values:
            self.append(value)
        return self


class ParameterDict(ModuleDict):
    """torch.nn.ParameterDict: nnx.Params under their keys (torch's names `w.key`), looked up as
    ModuleDict's entries are. `pd[key]`, `key in pd`, len, iteration over keys, keys/values/items,
    update as torch's."""

    _entries = nnx.Variable

    def __init__(self, parameters: Any = None, *, rngs: Any = None) -> None:
        super().__init__({str(k): _as_param(v) for k, v in dict(parameters or {}).items()})

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, str(key), _as_param(value))

    def update(self, parameters: Any) -> None:
        for key, value in dict(parameters).items():
            self[key] = value


def torch_tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """torch.utils._pytree.tree_flatten: (leaves, spec), the spec JAX's treedef."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return leaves, treedef


def torch_tree_unflatten(leaves: Any, spec: Any) -> Any:
    """torch.utils._pytree.tree_unflatten(leaves, spec): torch's argument order (JAX's is the
    other way round)."""
    import jax

    return jax.tree_util.tree_unflatten(spec, list(leaves))


def torch_tree_map(fn: Any, tree: Any, *rest: Any) -> Any:
    """torch.utils._pytree.tree_map."""
    import jax

    return jax.tree_util.tree_map(fn, tree, *rest)
