"""torch's module walks, parameters and buffers for converted Keras 3 code: `modules`,
`named_modules`, `children`, `named_children`, `parameters`, `named_parameters`, `buffers`,
`named_buffers`, `add_module`, `requires_grad_`, `copy.copy`/`copy.deepcopy` of a layer, and the
`Parameter`/`Buffer` variables.

The walks take any Keras layer (a converted `TorchModule`, a runtime layer, a Keras layer) and
name its children and variables as torch does ("0", "1", ... in containers, attribute names
elsewhere); `TorchModule` (modules.py) has them as methods too. The converter rewrites
`m.named_parameters()` on any receiver to `named_parameters(m)` (rules/module_walks.py): the
receiver may be a layer without the methods. The Flax counterpart is runtime/flax/module_api.py.
"""

import copy
import inspect
from typing import Any

import keras
import numpy as np

from precision_transpiler.runtime.common import _torch_visible
from precision_transpiler.runtime.keras.tensor import torch_at


def _untrack_replaced_variable(layer: Any, name: str, value: Any) -> None:
    """Before `layer.<name> = value`: a variable or sublayer the attribute held and `value`
    replaces leaves Keras' tracking. torch forgets a replaced Parameter (weight tying, `wte.weight =
    lm_head.weight`, after which both layers use one Parameter; a parameter set again); Keras
    would keep the old one among the layer's weights, with no torch key and no gradient."""
    old = layer.__dict__.get(name)
    tracker = getattr(layer, "_tracker", None)
    if value is old or tracker is None:
        return
    if isinstance(old, keras.Variable):
        layer._untrack_variable(old)
    elif isinstance(old, keras.layers.Layer) and not any(
        held is old for key, held in layer.__dict__.items() if key != name
    ):
        # a submodule set again (lightly's MAEBackbone replaces the encoder its torchvision base
        # built): torch's `_modules` forgets the old one, Keras would keep its weights as
        # nameless ones; one still held by another attribute stays
        tracker.untrack(old)


class ReplacesVariables:
    """A layer whose variables may be replaced by assignment, as torch's parameters are
    (`bn.bias = None` drops the parameter, `conv.weight = other` shares one): the replaced
    variable leaves Keras' tracking (`_untrack_replaced_variable`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        held = self.__dict__.get(name)
        if isinstance(held, keras.Variable) and not held.trainable and _is_tensor(value):
            if tuple(held.shape) == tuple(value.shape):
                # a buffer set to a new tensor stays a buffer, as torch keeps it in `_buffers`
                # (torch-uncertainty's MCBatchNorm: `self.running_mean = torch.zeros_like(...)`)
                held.assign(keras.ops.cast(value, held.dtype))
                return
            tensor = keras.ops.convert_to_tensor(value)
            value = Buffer(tensor, dtype=keras.backend.standardize_dtype(tensor.dtype), trainable=False, name=name)
        _untrack_replaced_variable(self, name, value)
        super().__setattr__(name, value)


def _is_tensor(value: Any) -> bool:
    return keras.ops.is_tensor(value) or isinstance(value, np.ndarray)


# Attributes of Keras layers that hold sublayers or variables under another name (Keras' own
# bookkeeping): a module walk skips them.
_KERAS_INTERNAL = frozenset(
    {"_layers", "_tracker", "_functional", "_operations", "_trainable_variables", "_non_trainable_variables"}
)


def _torch_name(layer: Any, name: str) -> str:
    """The torch name of an attribute the converter renamed because Keras owns its name
    (`self.name_`: the class's `_torch_renamed`)."""
    return getattr(type(layer), "_torch_renamed", {}).get(name, name)


def _child_items(layer: Any) -> list[tuple[str, Any]]:
    """torch's `named_children()` of a Keras layer: the torch containers' children by their torch
    names ("0", "1", ... or keys), else layers held in attributes (and in lists/dicts Keras tracks),
    in assignment order."""
    found: list[tuple[str, Any]] = []
    containers = getattr(layer, "_torch_modules", None)  # the runtime's containers (containers.py)
    if containers is not None:
        items = enumerate(containers) if isinstance(containers, list) else containers.items()
        found += [(str(name), child) for name, child in items if isinstance(child, keras.layers.Layer)]
    for name, value in vars(layer).items():
        if name in _KERAS_INTERNAL or name.startswith("_self_") or name == "_torch_modules":
            continue
        name = _torch_name(layer, name)
        if isinstance(value, keras.layers.Layer):
            found.append((name, value))
        elif isinstance(value, list | tuple):
            found += [(f"{name}.{i}", v) for i, v in enumerate(value) if isinstance(v, keras.layers.Layer)]
        elif isinstance(value, dict):
            found += [(f"{name}.{k}", v) for k, v in value.items() if isinstance(v, keras.layers.Layer)]
    return found


def named_children(module: Any) -> list[tuple[str, Any]]:
    """torch's `Module.named_children()`: the direct sublayers with their names, each once."""
    seen: set[int] = set()
    out = []
    for name, child in _child_items(module):
        if id(child) not in seen:
            seen.add(id(child))
            out.append((name, child))
    return out


def children(module: Any) -> list[Any]:
    """torch's `Module.children()`: the direct sublayers."""
    return [child for _, child in named_children(module)]


def named_modules(module: Any, prefix: str = "", _seen: Any = None) -> list[tuple[str, Any]]:
    """torch's `Module.named_modules()`: (dotted path, layer) pairs, parents first, each layer once."""
    seen = set() if _seen is None else _seen
    if id(module) in seen:
        return []
    seen.add(id(module))
    out = [(prefix, module)]
    for name, child in named_children(module):
        out += named_modules(child, f"{prefix}.{name}" if prefix else name, seen)
    return out


def modules(module: Any) -> list[Any]:
    """torch's `Module.modules()`: the layer and all its sublayers, parents first."""
    return [layer for _, layer in named_modules(module)]


def _own_variables(module: Any, trainable: bool) -> list[tuple[str, Any]]:
    """Variables held directly in attributes of one layer (torch's parameters or buffers of it)."""
    return [
        (_torch_name(module, name), value)
        for name, value in vars(module).items()
        if isinstance(value, keras.Variable) and bool(value.trainable) == trainable and _torch_visible(module, name)
    ]


class TorchInternals:
    """torch's Module internals that model code reads directly (`self._modules.values()` in
    pytorchcv's containers, `self._parameters`, `self._buffers`): the children and the layer's own
    parameters and buffers by torch name, as fresh dicts (read-only views: registering goes
    through `add_module`, `register_parameter`, `register_buffer` or attribute assignment)."""

    @property
    def _modules(self) -> dict[str, Any]:
        return dict(named_children(self))

    @property
    def _parameters(self) -> dict[str, Any]:
        return dict(_own_variables(self, True))

    @property
    def _buffers(self) -> dict[str, Any]:
        return dict(_own_variables(self, False))

    def apply(self, fn: Any) -> Any:
        """torch's `apply(fn)` on a container (`nn.ModuleList`, `nn.ModuleDict`: pfrl's
        `self.mlp.apply(init)`): `fn` on every submodule, children first, then on the container."""
        return apply_post_order(self, fn)


def named_parameters(module: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """torch's `Module.named_parameters()`: trainable variables by torch key, each once."""
    seen: set[int] = set()
    out = []
    for path, layer in named_modules(module, prefix):
        for name, variable in _own_variables(layer, True):
            if id(variable) not in seen:
                seen.add(id(variable))
                out.append((f"{path}.{name}" if path else name, variable))
    return out


def named_buffers(module: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """torch's `Module.named_buffers()`: non-trainable variables (BatchNorm statistics, registered
    buffers) by torch key."""
    out = []
    for path, layer in named_modules(module, prefix):
        for name, variable in _own_variables(layer, False):
            out.append((f"{path}.{name}" if path else name, variable))
    return out


def parameters(module: Any) -> Any:
    """torch's `Module.parameters()`: an iterator over `named_parameters`' values."""
    return iter([v for _, v in named_parameters(module)])


def buffers(module: Any) -> Any:
    """torch's `Module.buffers()`: an iterator over `named_buffers`' values."""
    return iter([v for _, v in named_buffers(module)])


def torch_requires_grad_(value: Any, requires_grad: bool = True) -> Any:
    """torch's `p.requires_grad = flag` / `p.requires_grad_(flag)` on something that may be a module or a
    parameter (`for p in backbone.parameters(): p.requires_grad = False`): a converted module's
    own `requires_grad_`, else Keras' `trainable` flag of a layer or variable (what Keras
    trains by); anything else is returned as it is."""
    method = getattr(value, "requires_grad_", None)
    if callable(method):
        return method(requires_grad)
    if isinstance(value, keras.layers.Layer | keras.Variable):
        value.trainable = bool(requires_grad)
    return value


def add_module(parent: Any, name: str, module: Any) -> None:
    """torch's `Module.add_module(name, module)` / `register_module`: the container's own
    `add_module` (Sequential keeps the order) or item (ModuleDict), else an attribute."""
    own = getattr(type(parent), "add_module", None)
    if own is not None:
        own(parent, name, module)
    elif hasattr(type(parent), "__setitem__") and getattr(parent, "_torch_modules", None) is not None:
        parent[name] = module
    else:
        setattr(parent, name, module)


def _reachable(value: Any) -> list[Any]:
    """The objects `copy.deepcopy(value)` would reach: through Python containers, instance
    attributes and bound methods' owners, stopping at modules, classes, functions and objects that
    copy themselves (`__deepcopy__`)."""
    found, seen, stack = [], set(), [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        found.append(item)
        if isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif inspect.ismethod(item):
            stack.append(item.__self__)
        elif isinstance(item, keras.layers.Layer) or not (
            inspect.ismodule(item)
            or inspect.isroutine(item)
            or isinstance(item, type)
            or hasattr(type(item), "__deepcopy__")
        ):
            attrs = getattr(item, "__dict__", None)
            stack.extend(attrs.values() if isinstance(attrs, dict) else ())
    return found


def _copy_seed_generator(generator: Any) -> Any:
    """A deep copy of a `keras.random.SeedGenerator` (Dropout's; `copy.deepcopy` cannot pickle
    the backend module it holds). torch's dropout draws from torch's one global generator in every
    copy of a module, so no two copies repeat each other's masks: an unseeded generator's copy
    gets a fresh seed (Keras' global seed decides it when `keras.utils.set_random_seed` set one);
    an explicitly seeded one's copy continues from the same state."""
    seed = generator._initial_seed
    copied = keras.random.SeedGenerator(seed=seed, backend=generator.backend)
    if seed is not None:
        copied.state.assign(generator.state.value)
    return copied


def torch_deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """`copy.deepcopy` in converted code. A torch module deep-copies its attributes (the usual
    way to stack N identical blocks: `[copy.deepcopy(layer) for _ in range(n)]`); a Keras layer
    pickles itself through the Keras saving library instead, which only works for registered
    serializable classes and saves and loads every weight. Here each layer reachable from `value`
    is copied attribute by attribute (its variables, sub-layers and Keras' tracking state), each
    seed generator by `_copy_seed_generator`, the rest by `copy.deepcopy`, with one memo so shared
    objects stay shared; Python modules (which do not pickle) are shared, not copied."""
    memo = {} if memo is None else memo
    shells = []
    for item in _reachable(value):
        if id(item) in memo:
            continue
        if inspect.ismodule(item):
            memo[id(item)] = item
        elif type(item) is keras.random.SeedGenerator:
            memo[id(item)] = _copy_seed_generator(item)
        elif isinstance(item, keras.layers.Layer):
            shell = object.__new__(type(item))
            memo[id(item)] = shell
            shells.append((item, shell))
    for layer, shell in shells:
        vars(shell).update(copy.deepcopy(vars(layer), memo))
    return copy.deepcopy(value, memo)


def torch_copy(value: Any) -> Any:
    """`copy.copy` in converted code: a Keras layer gets a new object sharing its attributes (as
    a shallow copy of a torch module shares its parameters and sub-modules), not a pickled and
    reloaded one (see `torch_deepcopy`); anything else is `copy.copy`."""
    if not isinstance(value, keras.layers.Layer):
        return copy.copy(value)
    shell = object.__new__(type(value))
    vars(shell).update(vars(value))
    return shell


class _Sized:
    """`len(v)` and iteration over the first axis, as a torch tensor has (`len(in_degrees)` of
    a buffer read through another module); keras.Variable has neither."""

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])

    def __iter__(self) -> Any:
        return iter([self.value[i] for i in range(len(self))])

    def __setitem__(self, index: Any, value: Any) -> None:
        """`buf[:n] = v` / `param[i] += v`, as on a torch tensor (rotary-embedding-torch fills a
        slice of its cache buffer in forward): the variable takes its value with `index` set."""
        self.assign(torch_at(self.value)[index].set(value))

    def assign(self, value: Any) -> Any:
        """torch lets a buffer or a parameter's `.data` take a tensor of another shape (fastervit's
        `self.relative_bias = self.pos_emb`, a cache grown in forward); a Keras variable keeps
        the shape it was made with, so one of another shape is made again, in place, eagerly
        (a traced function cannot change a variable's shape: Keras' own error then)."""
        shape = tuple(value.shape)
        if shape != tuple(self.shape) and None not in shape:
            tensor = self._convert_to_tensor(value, dtype=self._dtype)
            try:
                self._initialize(tensor)
            except (TypeError, ValueError, RuntimeError):
                return super().assign(value)
            self._shape = self._validate_shape(tensor.shape)
            self._ndim = len(self._shape)
            return tensor
        return super().assign(value)


class Parameter(_Sized, keras.Variable):
    """torch.nn.Parameter(data, requires_grad=True): a trainable Keras variable holding `data` (its
    dtype kept). Assigned to a layer attribute, the layer tracks it (`layer.trainable_weights`)."""

    def __init__(self, data: Any = None, requires_grad: bool = True, **kwargs: Any) -> None:
        if data is None:
            data = np.zeros((0,), "float32")
        if isinstance(data, keras.Variable):
            data = data.value
        dtype = kwargs.pop("dtype", None) or keras.backend.standardize_dtype(data.dtype)
        super().__init__(initializer=data, dtype=dtype, trainable=requires_grad, **kwargs)


class Buffer(_Sized, keras.Variable):
    """A torch buffer (`register_buffer`): a non-trainable Keras variable, sized as a tensor."""


def optional_array(value: Any) -> Any:
    """A layer's bias (or weight) handed to a function as a tensor: None when the layer has none
    (`nn.Conv2d(..., bias=False)`: torch's `conv.bias` is None, kornia's deform_conv2d takes it)."""
    return None if value is None else keras.ops.convert_to_tensor(value)


def apply_post_order(module: Any, fn: Any) -> Any:
    """torch's `Module.apply(fn)` on any layer: `fn` on each child's subtree, then on `module`."""
    for child in children(module):
        apply_post_order(child, fn)
    fn(module)
    return module
