"""torch's containers for converted Keras 3 code: `Sequential`, `ModuleList`, `ModuleDict`,
`ParameterList`, `ParameterDict`.

Keras' own `keras.Sequential` is a Model (input layers, `.layers`, no torch names). These hold
their children under torch's names ("0", "1", ... or the given keys) in a list or dict Keras
tracks, so the children's variables appear in `weights` and the weight loader
(precision_transpiler.weights.torch_to_keras) and module walks (module_api.py) find them by torch's
paths; indexing, slicing, iteration and the list/dict methods behave as torch's.
"""

from typing import Any

import keras

from precision_transpiler.runtime.keras.module_api import TorchInternals


class Sequential(TorchInternals, keras.layers.Layer):
    """torch.nn.Sequential: children under the names "0", "1", ... (or an OrderedDict's keys).

    Keras' own `keras.Sequential` is a Model (input layers, `.layers`, no torch names). Here children
    live in a dict Keras tracks (their variables appear in `weights`); `seq[i]`, slicing (a new
    Sequential), iteration, len, append/extend/insert/pop, `add_module(name, module)` and deletion
    (which renumbers, as torch does) are supported. Children may be layers or plain callables.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._allow_non_tensor_positional_args = True
        self._torch_modules: dict[str, Any] = {}
        items = args[0].items() if len(args) == 1 and isinstance(args[0], dict) else enumerate(args)
        for name, module in items:
            self.add_module(str(name), module)
        self.built = True

    def add_module(self, name: str, module: Any) -> None:
        """torch's `add_module`: register the child called `name`, or replace it in place."""
        if name in self._torch_modules:  # rebuild: keeps the order, untracks the old child
            items = [(key, module if key == name else child) for key, child in self._torch_modules.items()]
            self._torch_modules.clear()
            self._torch_modules.update(dict(items))
        else:
            self._torch_modules[name] = module

    def _reset(self, modules: list[Any]) -> None:
        self._torch_modules.clear()
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def __setattr__(self, name: str, value: Any) -> None:
        """A layer assigned as an attribute of a Sequential (subclass: torchvision's DenseNet
        `_Transition` sets `self.norm = nn.BatchNorm2d(...)`) is a child, run in assignment
        order, as torch registers it."""
        if isinstance(value, keras.layers.Layer) and not name.startswith("_") and "_torch_modules" in self.__dict__:
            self.__dict__.pop(name, None)
            self.add_module(name, value)
            return
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        """torch reads named children as attributes (`self.heads.head` of an OrderedDict Sequential)."""
        modules = self.__dict__.get("_torch_modules")
        if modules is not None and name in modules:
            return modules[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __len__(self) -> int:
        return len(self._torch_modules)

    def __iter__(self) -> Any:
        return iter(list(self._torch_modules.values()))

    def __getitem__(self, index: int | slice) -> Any:
        names = list(self._torch_modules)
        if isinstance(index, slice):
            return Sequential(dict(zip(names[index], list(self)[index], strict=True)))
        return self._torch_modules[names[index]]

    def __setitem__(self, index: int, module: Any) -> None:
        self.add_module(list(self._torch_modules)[index], module)

    def __delitem__(self, index: int | slice) -> None:
        doomed = list(self._torch_modules)[index]
        doomed = set(doomed) if isinstance(index, slice) else {doomed}
        self._reset([m for name, m in self._torch_modules.items() if name not in doomed])

    def append(self, module: Any) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

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

    def call(self, input: Any, training: bool | None = None) -> Any:
        for module in self:
            input = module(input)
        return input


class ModuleList(TorchInternals, keras.layers.Layer):
    """torch.nn.ModuleList: an indexable list of layers Keras tracks (torch names "0", "1", ...).

    Indexing, slicing (a ModuleList), iteration, len, append/extend/insert/pop, `+` and deletion.
    Like torch, it has no forward of its own.
    """

    def __init__(self, modules: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._torch_modules: list[Any] = []
        self.extend(modules or [])
        self.built = True

    def __len__(self) -> int:
        return len(self._torch_modules)

    def __iter__(self) -> Any:
        return iter(list(self._torch_modules))

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return ModuleList(self._torch_modules[index])
        return self._torch_modules[index]

    def __setitem__(self, index: int, module: Any) -> None:
        self._torch_modules.pop(index)  # untracks the old child
        self._torch_modules.insert(index % (len(self) + 1), module)

    def __delitem__(self, index: int | slice) -> None:
        for i in sorted(range(len(self))[index] if isinstance(index, slice) else [index % len(self)], reverse=True):
            self._torch_modules.pop(i)

    def append(self, module: Any) -> "ModuleList":
        self._torch_modules.append(module)
        return self

    def extend(self, modules: Any) -> "ModuleList":
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Any) -> None:
        self._torch_modules.insert(index, module)

    def pop(self, index: int = -1) -> Any:
        return self._torch_modules.pop(index)

    def add_module(self, name: str, module: Any) -> None:
        """torch's `add_module` on a ModuleList: "3" is position 3 (appended at the end, replaced
        below it); another name is a named child read as an attribute (pretrainedmodels' NASNet
        builds `path_2 = nn.ModuleList()` then `path_2.add_module("pad", ...)`, read as `path_2.pad`)."""
        if str(name).isdigit() and int(name) <= len(self):
            if int(name) == len(self):
                self.append(module)
            else:
                self[int(name)] = module
            return
        setattr(self, str(name), module)

    def __add__(self, other: Any) -> "ModuleList":
        return ModuleList([*self, *other])

    def call(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList is not callable (torch: it has no forward); iterate over it")


class ModuleDict(TorchInternals, keras.layers.Layer):
    """torch.nn.ModuleDict: layers by string key, tracked by Keras, insertion-ordered.

    `md[key]`, `key in md`, len, iteration over keys, keys/values/items, update, pop, clear. Keys
    live in a dict (not as attributes), so keys such as 'name' or 'weights' do not clash with
    Keras' layer attributes. As on torch, a key is also read as an attribute (`md.wte`, nanoGPT's
    `self.transformer.wte`) unless the layer has an attribute of that name, and a layer assigned
    as a public attribute (`md.h = ModuleList(...)`) is an entry. Like torch, it has no forward of
    its own.
    """

    def __init__(self, modules: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._torch_modules: dict[str, Any] = {}
        self.update(modules or {})
        self.built = True

    def __getattr__(self, name: str) -> Any:
        """torch reads entries as attributes (Module.__getattr__ looks in `_modules`). Only runs for
        names the layer does not have; before `_torch_modules` exists (Keras reads attributes
        during `__init__`) and for names it does not hold, an AttributeError (copy and pickle probe
        attributes this way)."""
        modules = self.__dict__.get("_torch_modules")
        if modules is not None and name in modules:
            return modules[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        """A layer assigned as a public attribute after construction is an entry, as torch registers
        it in `_modules` (`self.transformer.h = nn.ModuleList(...)`)."""
        if isinstance(value, keras.layers.Layer) and not name.startswith("_") and "_torch_modules" in self.__dict__:
            self.__dict__.pop(name, None)
            self[name] = value
            return
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        """`del md.key` removes the entry, as torch's Module.__delattr__ does."""
        if name not in self.__dict__ and name in self.__dict__.get("_torch_modules", {}):
            del self[name]
            return
        super().__delattr__(name)

    def __getitem__(self, key: str) -> Any:
        return self._torch_modules[key]

    def __setitem__(self, key: str, module: Any) -> None:
        if key in self._torch_modules:  # rebuild: keeps the order, untracks the old child
            items = [(name, module if name == key else child) for name, child in self._torch_modules.items()]
            self._torch_modules.clear()
            self._torch_modules.update(dict(items))
        else:
            self._torch_modules[key] = module

    def add_module(self, name: str, module: Any) -> None:
        """torch's `add_module` on a ModuleDict (and classes deriving from it, DenseNet's
        `_DenseBlock`): the child is an entry, so `items()` and torch's key paths see it."""
        self[name] = module

    register_module = add_module

    def __delitem__(self, key: str) -> None:
        self._torch_modules.pop(key)

    def __contains__(self, key: object) -> bool:
        return key in self._torch_modules

    def __len__(self) -> int:
        return len(self._torch_modules)

    def __iter__(self) -> Any:
        return iter(list(self._torch_modules))

    def keys(self) -> Any:
        return list(self._torch_modules.keys())

    def values(self) -> Any:
        return list(self._torch_modules.values())

    def items(self) -> Any:
        return list(self._torch_modules.items())

    def update(self, modules: Any) -> None:
        for key, module in modules.items() if hasattr(modules, "items") else modules:
            self[str(key)] = module

    def pop(self, key: str) -> Any:
        return self._torch_modules.pop(key)

    def clear(self) -> None:
        self._torch_modules.clear()

    def call(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict is not callable (torch: it has no forward); index it")


def _as_parameter(value: Any) -> Any:
    """An entry of a ParameterList/ParameterDict: a Keras variable or a layer (a ParameterList of
    ParameterLists, titans' per-layer weights: torch registers a Module entry as a submodule) as
    it is, anything else a trainable variable holding it (torch wraps plain tensors in a
    Parameter)."""
    if isinstance(value, keras.Variable | keras.layers.Layer):
        return value
    value = keras.ops.convert_to_tensor(value)
    return keras.Variable(initializer=value, dtype=keras.backend.standardize_dtype(value.dtype), trainable=True)


class ParameterList(keras.layers.Layer):
    """torch.nn.ParameterList: trainable variables Keras tracks, held in attributes named "0",
    "1", ... (torch's names `w.0`, `w.1`, which the module walks and the weight loader read).
    Indexing (slicing gives a ParameterList), iteration, len, append/extend as torch's."""

    def __init__(self, values: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._torch_count = 0
        self.extend(values or [])
        self.built = True

    def __len__(self) -> int:
        return self._torch_count

    def __iter__(self) -> Any:
        return iter([getattr(self, str(i)) for i in range(len(self))])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ParameterList(list(self)[index])
        return getattr(self, str(range(len(self))[index]))

    def __setitem__(self, index: int, value: Any) -> None:
        setattr(self, str(range(len(self))[index]), _as_parameter(value))

    def append(self, value: Any) -> "ParameterList":
        setattr(self, str(self._torch_count), _as_parameter(value))
        self._torch_count += 1
        return self

    def extend(self, values: Any) -> "ParameterList":
        for value in values:
            self.append(value)
        return self


class ParameterDict(keras.layers.Layer):
    """torch.nn.ParameterDict: trainable variables by key, held in attributes named by the keys
    (torch's names `w.key`). `pd[key]`, `key in pd`, len, iteration over keys, keys/values/items,
    update as torch's; a key that is a Keras layer attribute (`name`, `weights`) is refused."""

    def __init__(self, parameters: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._torch_keys: list[str] = []
        self.update(parameters or {})
        self.built = True

    def __getitem__(self, key: str) -> Any:
        if key not in self._torch_keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        key = str(key)
        if key not in self._torch_keys:
            if hasattr(self, key):
                raise KeyError(f"ParameterDict key {key!r} is an attribute of Keras layers: rename it")
            self._torch_keys.append(key)
        setattr(self, key, _as_parameter(value))

    def __contains__(self, key: object) -> bool:
        return key in self._torch_keys

    def __len__(self) -> int:
        return len(self._torch_keys)

    def __iter__(self) -> Any:
        return iter(list(self._torch_keys))

    def keys(self) -> list[str]:
        return list(self._torch_keys)

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self._torch_keys]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self._torch_keys]

    def update(self, parameters: Any) -> None:
        for key, value in dict(parameters).items():
            self[key] = value


def torch_tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    """torch.utils._pytree.tree_flatten: (leaves, spec), the spec the structure itself (what
    `keras.tree.pack_sequence_as` refills)."""
    return keras.tree.flatten(tree), tree


def torch_tree_unflatten(leaves: Any, spec: Any) -> Any:
    """torch.utils._pytree.tree_unflatten(leaves, spec)."""
    return keras.tree.pack_sequence_as(spec, list(leaves))


def torch_tree_map(fn: Any, tree: Any, *rest: Any) -> Any:
    """torch.utils._pytree.tree_map."""
    return keras.tree.map_structure(fn, tree, *rest)
