"""torch's `nn.Module` behaviour for torch model classes converted to Keras 3 (`--to tf`).

Why this module exists: a converted `class Net(nn.Module)` becomes `class Net(TorchModule)`, a
`keras.layers.Layer` that also behaves as torch code expects of a module: `forward` is renamed
`call` by the converter (Keras calls `call`; `TorchModule.forward` calls it, so `model.forward(x)`
still works), `self.training` and `train()`/`eval()`, `register_buffer`/`register_parameter`,
`modules()`/`named_modules()`/`children()`/`parameters()`/`buffers()`, `add_module`, `apply`.
`nn.Parameter(t)` becomes `Parameter(t)`, a trainable `keras.Variable` that the layer it is
assigned to tracks (Keras tracks variables, layers, and lists/dicts of them set as attributes).
The module walks, `add_module`, `requires_grad_`, copies and the `Parameter`/`Buffer` variables
are in module_api.py (which `TorchModule`'s methods call); the small layers (`Linear`, `Embedding`,
`Dropout`, `Identity`, `Flatten`) in layers.py, the activation layers in activations.py, the
containers (`Sequential`, `ModuleList`, `ModuleDict`) in containers.py.

Train and eval mode. torch modules start in training mode; converted models start in inference
mode (`training` is False), as Keras layers and the torch-semantics layers of this runtime do: the
converted model is for inference, and `model(x)` must not update BatchNorm statistics unless
asked. `model.train()` / `model.eval()` set the mode on every converted module under the model.
The mode of a call: an explicit Keras `training=` argument wins (`model(x, training=True)`);
otherwise the `training` of an enclosing Keras call (`model.fit`); otherwise the mode of the
outermost converted module being called. It reaches every layer of the call through Keras' call
context (BatchNorm2d and Dropout follow it), and `self.training` inside `call` reads it. One
simplification: a sub-module's own mode set apart from its parent's (`model.train();
model.bn.eval()`) is not honoured; the whole call runs in one mode.

Buffers. `self.register_buffer(name, tensor, persistent=True)` stores a non-trainable Keras
variable under `name` (the weight loader, precision_transpiler.weights.torch_to_keras, fills it
from the torch state_dict); `persistent=False` buffers are not in torch's state_dict, so the
loader does not expect them (their names are kept in `_torch_non_persistent`). A buffer read in
`call` is the variable, which Keras ops take as a tensor.

Rules this source keeps, because the converter copies the definitions a converted file needs into
that file (precision_transpiler/convert/vendor.py): only keras, numpy and typing imports at module level (Keras'
private call-context state is imported inside the one function that reads it), and every
top-level definition is copyable alone with the top-level helpers it names.
"""

import collections
import inspect
from typing import Any

import keras
import numpy as np
from keras import ops

from precision_transpiler.runtime.common import (
    _TORCH_AUTOCAST_STACK,
    register_load_state_dict_pre_hook,
    run_load_state_dict_pre_hooks,
)
from precision_transpiler.runtime.keras.module_api import (
    Buffer,
    Parameter,
    TorchInternals,
    _child_items,
    _own_variables,
    _untrack_replaced_variable,
    children,
    modules,
    named_buffers,
    named_children,
    named_modules,
    named_parameters,
)


def _call_training() -> Any:
    """`training` of the Keras layer call in progress (None outside calls, or when unset).

    Keras keeps it on its call context (`keras.src.backend.common.global_state`, private in
    Keras 3.0-3.15); without it, every converted module falls back to its own mode."""
    try:
        from keras.src.backend.common import global_state
    except ImportError:  # pragma: no cover - a Keras without that module
        return None
    context = global_state.get_global_attribute("current_call_ctx")
    return None if context is None else getattr(context, "training", None)


def _var_keyword_extras(layer: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Pop and return the keyword arguments Keras' argument checks refuse, which then reach
    `call` around them: those only `call`'s `**kwargs` takes that are not tensors (None stays:
    Keras accepts it anywhere), and any whose value nests tensors with other values
    (x-transformers' `rotary_pos_emb=(freqs, 1.0)`)."""
    parameters = layer._call_signature.parameters
    var_keyword = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
    named = {name for name, p in parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    extras = {}
    for name in list(kwargs):
        value = kwargs[name]
        if name in layer._call_context_args or value is None:
            continue
        tensor = ops.is_tensor(value) or isinstance(value, keras.KerasTensor)
        only_var_keyword = var_keyword and name not in named
        if _mixes_tensors(value) or (only_var_keyword and not tensor):
            extras[name] = kwargs.pop(name)
    return extras


def _masks_by_keyword(layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Keras fills a `mask` (or `<input>_mask`) argument of `call` that is None with the inputs'
    Keras mask, passed as a keyword: one given positionally as None (x-clip's `attn(x, mask,
    rotary_pos_emb)` with no mask) then reaches `call` twice. So positional arguments from the
    first such parameter on go by keyword (moved into `kwargs`); the rest are returned."""
    parameters = list(layer._call_signature.parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return args
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    first = next(
        (i for i, name in enumerate(positional[: len(args)]) if name == "mask" or name.endswith("_mask")), None
    )
    if first is None or first == 0:
        return args
    for name, value in zip(positional[first:], args[first:], strict=False):
        kwargs.setdefault(name, value)
    return args[:first]


def _mixes_tensors(value: Any) -> bool:
    """A tuple, list or dict whose leaves are tensors and other values (None aside)."""
    if not isinstance(value, tuple | list | dict):
        return False
    leaves = [leaf for leaf in keras.tree.flatten(value) if leaf is not None]
    tensors = [ops.is_tensor(leaf) or isinstance(leaf, keras.KerasTensor) for leaf in leaves]
    return any(tensors) and not all(tensors)


def _holds_own_type(value: Any, plain: tuple[type, ...]) -> bool:
    """Whether a container holds a container of a class of its own (e3nn's list of Irreps)."""
    items = value.values() if isinstance(value, dict) else value
    return any(
        isinstance(item, dict | list | tuple) and (type(item) not in plain or _holds_own_type(item, plain))
        for item in items
    )


def _holds_state(value: Any) -> bool:
    """Whether a container holds a layer or a variable (one level deep and in nested containers)."""
    items = value.values() if isinstance(value, dict) else value
    return any(
        isinstance(item, keras.layers.Layer | keras.Variable)
        or (isinstance(item, dict | list | tuple) and _holds_state(item))
        for item in items
    )


class TorchModule(TorchInternals, keras.layers.Layer):
    """torch.nn.Module for converted classes (see the module docstring): a Keras layer whose
    `call` is the torch `forward`, with torch's module methods, mode and buffers."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__new__(cls, *args, **kwargs)
        except KeyError:
            # Keras records constructor arguments from two signatures that disagree for an
            # `__init__` under a `functools.wraps` decorator (diffusers' `@register_to_config`):
            # `inspect.signature` follows `__wrapped__`, `getfullargspec` does not. The wrapper
            # is given its own signature, which both then read.
            init = cls.__init__
            init.__signature__ = inspect.signature(init, follow_wrapped=False)
            return super().__new__(cls, *args, **kwargs)
        except IndexError:
            # the same for a wrapper taking `(*args, **kwargs)` only (st-moe-pytorch's
            # `@beartype` on `__init__`): Keras reads its first positional name, which it lacks;
            # the wrapper is given the signature of what it wraps, `self` first
            init = cls.__init__
            init.__signature__ = inspect.signature(init)
            return super().__new__(cls, *args, **kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # torch passes anything positionally (ints, None, lists, tensors); Keras refuses
        # non-tensor positional arguments unless told.
        self._allow_non_tensor_positional_args = True
        self._torch_training = False
        self._torch_non_persistent: list[str] = []
        # torch modules know their shapes from the constructor: nothing to build on first call.
        self.built = True

    def __setattr__(self, name: str, value: Any) -> None:
        plain = (dict, list, tuple, collections.OrderedDict)
        own_type = type(value) not in plain or _holds_own_type(value, plain)
        if own_type and isinstance(value, dict | list | tuple) and not _holds_state(value):
            # Keras would wrap a container of its own type (diffusers' FrozenDict config, read
            # as `self.config.center_input_sample`; e3nn's Irreps, a tuple of tuple subclasses)
            # in a plain tracked dict, list or tuple, losing its class; one holding no layer or
            # variable has nothing to track
            object.__setattr__(self, name, value)
            return
        # a parameter set again (timm's VisionTransformerDistilled replaces the `pos_embed` its
        # base built): torch replaces it, Keras would keep the old one as a nameless weight
        _untrack_replaced_variable(self, name, value)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        """`del self.fc` (segmentation_models_pytorch's ResNet encoder drops the classifier it
        inherits): torch forgets the submodule and its parameters; Keras untracks a deleted
        variable but would keep a deleted layer's weights as nameless ones."""
        old = self.__dict__.get(name)
        tracker = getattr(self, "_tracker", None)
        if isinstance(old, keras.layers.Layer) and tracker is not None:
            tracker.untrack(old)
        super().__delattr__(name)

    # -- mode ----------------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:
            # a module called with no input (block-recurrent-transformer's rotary embedding,
            # `self.rotary_pos_emb()`): Keras' __call__ reads a first argument, so `call` runs as
            # torch's `forward` would
            return self.call()
        if kwargs.get("training") is None and _call_training() is None:
            kwargs["training"] = self._torch_training  # the outermost call: this module's mode
        args = _masks_by_keyword(self, args, kwargs)
        hidden = _var_keyword_extras(self, kwargs)
        if not hidden:
            return super().__call__(*args, **kwargs)
        # Keras refuses a `**kwargs` bundle mixing tensors and other values (`position_ids=t,
        # use_cache=False` into transformers' `**kwargs`): those values reach `call` around
        # Keras' argument checks, through an instance `call` (which Keras' __call__ invokes)
        # that adds them; the previous one is restored after.
        saved = self.__dict__.get("call")
        inner = self.call

        def call_with_extras(*call_args: Any, **call_kwargs: Any) -> Any:
            return inner(*call_args, **call_kwargs, **hidden)

        object.__setattr__(self, "call", call_with_extras)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            if saved is None:
                self.__dict__.pop("call", None)
            else:
                object.__setattr__(self, "call", saved)

    @property
    def training(self) -> bool:
        """torch's `self.training`: the mode of the call in progress, else this module's mode."""
        current = _call_training()
        return bool(self._torch_training if current is None else current)

    @training.setter
    def training(self, mode: bool) -> None:
        self._torch_training = bool(mode)

    def train(self, mode: bool = True) -> "TorchModule":
        """torch's `train(mode)`: set the mode of this module and every converted module under it."""
        for layer in modules(self):
            if isinstance(layer, TorchModule):
                layer._torch_training = bool(mode)
        return self

    def eval(self) -> "TorchModule":
        """torch's `eval()`: inference mode (BatchNorm running statistics, no Dropout)."""
        return self.train(False)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """torch's `module.forward(x)`: the converted forward (`call`), without Keras' `__call__`."""
        return self.call(*args, **kwargs)

    def compute_mask(self, inputs: Any, previous_mask: Any) -> None:
        """No Keras mask metadata on outputs: a torch `mask` argument is the module's own input
        (DistilBERT's attention mask), which Keras would otherwise warn it "destroys"."""
        return None

    # -- attribute names torch code uses and Keras defines only for functional models ----------

    @property
    def input(self) -> Any:
        """`self.input = ...` (a sublayer, ...) as torch code writes it; else Keras' `input`."""
        return self.__dict__["input"] if "input" in self.__dict__ else keras.layers.Layer.input.fget(self)

    @input.setter
    def input(self, value: Any) -> None:
        self.__dict__["input"] = value

    @input.deleter
    def input(self) -> None:
        self.__dict__.pop("input", None)

    @property
    def output(self) -> Any:
        """`self.output = BertOutput(config)` as torch code writes it; else Keras' `output`."""
        return self.__dict__["output"] if "output" in self.__dict__ else keras.layers.Layer.output.fget(self)

    @output.setter
    def output(self, value: Any) -> None:
        self.__dict__["output"] = value

    @output.deleter
    def output(self) -> None:
        self.__dict__.pop("output", None)

    # -- structure -----------------------------------------------------------------------------

    def add_module(self, name: str, module: Any) -> None:
        """torch's `add_module`: the sublayer as an attribute (Keras tracks it)."""
        setattr(self, name, module)

    def register_module(self, name: str, module: Any) -> None:
        self.add_module(name, module)

    def register_buffer(self, name: str, tensor: Any, persistent: bool = True) -> None:
        """torch's `register_buffer`: a non-trainable Keras variable (None stays None)."""
        if name in self.__dict__:
            delattr(self, name)  # untracks a variable registered before under the same name
        if name in self._torch_non_persistent:
            self._torch_non_persistent.remove(name)
        if not persistent:
            self._torch_non_persistent.append(name)
        if tensor is None:
            setattr(self, name, None)
            return
        if isinstance(tensor, keras.Variable):
            tensor = tensor.value
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        setattr(self, name, Buffer(tensor, dtype=dtype, trainable=False, name=name))

    def register_parameter(self, name: str, param: Any) -> None:
        """torch's `register_parameter`: a trainable variable (a tensor is wrapped), or None."""
        if name in self.__dict__:
            delattr(self, name)
        if param is not None and not isinstance(param, keras.Variable):
            param = Parameter(param)
        setattr(self, name, param)

    def modules(self) -> list[Any]:
        return modules(self)

    def named_modules(self, memo: Any = None, prefix: str = "") -> list[tuple[str, Any]]:
        return named_modules(self, prefix)

    def children(self) -> list[Any]:
        return children(self)

    def named_children(self) -> list[tuple[str, Any]]:
        return named_children(self)

    def parameters(self, recurse: bool = True) -> Any:
        """An iterator, as torch's generator (`next(self.parameters()).dtype`)."""
        return iter([v for _, v in self.named_parameters(recurse=recurse)])

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> list[tuple[str, Any]]:
        if not recurse:
            return [(f"{prefix}.{n}" if prefix else n, v) for n, v in _own_variables(self, True)]
        return named_parameters(self, prefix)

    def buffers(self, recurse: bool = True) -> Any:
        return iter([v for _, v in self.named_buffers(recurse=recurse)])

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> list[tuple[str, Any]]:
        if not recurse:
            return [(f"{prefix}.{n}" if prefix else n, v) for n, v in _own_variables(self, False)]
        return named_buffers(self, prefix)

    def apply(self, fn: Any) -> "TorchModule":
        """torch's `apply(fn)`: `fn` on every sublayer (children first), then on this module."""
        for child in children(self):
            if isinstance(child, TorchModule):
                child.apply(fn)
            else:
                for layer in reversed(modules(child)):
                    fn(layer)
        fn(self)
        return self

    def get_submodule(self, target: str) -> Any:
        """torch's `get_submodule("blocks.0.attn")`."""
        if not target:
            return self
        found = dict(named_modules(self)).get(target)
        if found is None:
            raise AttributeError(f"{type(self).__name__} has no submodule {target!r}")
        return found

    def get_parameter(self, target: str) -> Any:
        found = dict(named_parameters(self)).get(target)
        if found is None:
            raise AttributeError(f"{type(self).__name__} has no parameter {target!r}")
        return found

    def get_buffer(self, target: str) -> Any:
        found = dict(named_buffers(self)).get(target)
        if found is None:
            raise AttributeError(f"{type(self).__name__} has no buffer {target!r}")
        return found

    def requires_grad_(self, requires_grad: bool = True) -> "TorchModule":
        """torch's `requires_grad_`: Keras' `trainable` flag of this layer and those below it."""
        self.trainable = bool(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Keras keeps no gradients on the layer: nothing to clear."""
        return None

    _IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

    @staticmethod
    def _torch_state_entries(layer: Any, prefix: str = "", _stack: tuple = ()) -> list[tuple[str, Any]]:
        """(torch key, variable) of every entry of the torch original's `state_dict()`, in its
        order: layer by layer, parents first, each layer's parameters then its persistent buffers
        (assignment order), then its children; a shared layer under each of its names, as torch
        lists it (`named_parameters()` gives a shared variable once)."""
        if id(layer) in _stack:
            return []
        stack = (*_stack, id(layer))
        path = f"{prefix}." if prefix else ""
        skipped = set(getattr(layer, "_torch_non_persistent", ()))
        out = [
            (path + name, variable)
            for trainable in (True, False)
            for name, variable in _own_variables(layer, trainable)
            if name not in skipped
        ]
        for name, child in _child_items(layer):
            out += TorchModule._torch_state_entries(child, path + name, stack)
        return out

    def state_dict(self, destination: Any = None, prefix: str = "", keep_vars: bool = False) -> dict[str, Any]:
        """torch's `state_dict()`: parameters and persistent buffers under the torch model's keys,
        in its order (the runtime keeps torch's names and layouts), as tensors; a shared layer or
        parameter under each of its names, as torch lists it."""
        out = {} if destination is None else destination
        for key, variable in TorchModule._torch_state_entries(self, prefix):
            out[key] = variable if keep_vars else variable.value
        return out

    def _register_load_state_dict_pre_hook(self, hook: Any, with_module: bool = False) -> None:
        register_load_state_dict_pre_hook(self, hook, with_module)

    def register_load_state_dict_pre_hook(self, hook: Any) -> None:
        register_load_state_dict_pre_hook(self, hook, True)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """torch's `load_state_dict()`: assign parameters and buffers from a torch-keyed
        `state_dict` (NumPy arrays, tensors, torch tensors), cast to each variable's dtype.
        Returns torch's `(missing_keys, unexpected_keys)` named tuple; as torch, raises a
        RuntimeError before assigning anything when a shape differs, or (`strict`) when keys are
        missing or unexpected. Non-persistent buffers are neither expected nor taken; the
        modules' load-state-dict pre-hooks run first, as torch runs them."""
        state_dict = run_load_state_dict_pre_hooks(named_modules(self), state_dict, strict)
        targets = dict(TorchModule._torch_state_entries(self))
        unexpected = [k for k in state_dict if k not in targets]
        missing = [k for k in targets if k not in state_dict]
        errors = []
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        updates = []
        for key, value in state_dict.items():
            if key not in targets:
                continue
            if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor (torch is not imported)
                value = value.detach().cpu()
                value = value.float() if str(value.dtype) == "torch.bfloat16" else value
            array = np.asarray(value)
            variable = targets[key]
            if tuple(array.shape) != tuple(variable.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {tuple(array.shape)} from checkpoint, "
                    f"the shape in current model is {tuple(variable.shape)}."
                )
                continue
            updates.append((variable, array))
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        for variable, array in updates:
            variable.assign(ops.cast(array, variable.dtype))
        return TorchModule._IncompatibleKeys(missing, unexpected)

    def extra_repr(self) -> str:
        return ""

    def to(self, *args: Any, **kwargs: Any) -> "TorchModule":
        """torch's `to(device)`: devices are TensorFlow's placement, not the layer's. A dtype
        other than the variables' own is refused: a Keras variable keeps the dtype it was made
        with (choose it with a dtype policy, `ptranspile --policy`)."""
        wanted = [a for a in (*args, kwargs.get("dtype")) if a is not None and not isinstance(a, str | int)]
        for dtype in wanted:
            self._check_dtype(dtype)
        return self

    def _check_dtype(self, dtype: Any) -> "TorchModule":
        name = keras.backend.standardize_dtype(getattr(dtype, "name", dtype))
        if any(v.dtype != name for v in self.weights if "float" in str(v.dtype)):
            raise NotImplementedError(
                f"casting a converted Keras module to {name}: its variables keep their dtype; "
                "convert with a policy (ptranspile --policy) instead"
            )
        return self

    def float(self) -> "TorchModule":
        return self._check_dtype("float32")

    def half(self) -> "TorchModule":
        return self._check_dtype("float16")

    def bfloat16(self) -> "TorchModule":
        return self._check_dtype("bfloat16")

    def double(self) -> "TorchModule":
        return self._check_dtype("float64")

    def type(self, dst_type: Any) -> "TorchModule":
        return self._check_dtype(dst_type)

    def cpu(self) -> "TorchModule":
        return self

    def cuda(self, device: Any = None) -> "TorchModule":
        return self


def torch_assert(condition: Any, message: str = "") -> None:
    """torch._assert: raise AssertionError when `condition` is false (eagerly; a symbolic
    condition inside tf.function cannot be checked in Python and is skipped)."""
    try:
        holds = bool(condition)
    except Exception:  # a symbolic tensor
        return
    if not holds:
        raise AssertionError(message)


def torch_train(module: Any, mode: bool = True) -> Any:
    """torch's `m.train(mode)` on a module the code holds but did not define (a layer handed to a
    constructor, `self.base_model.eval()`): a converted module sets its own mode and those under
    it; a Keras layer has no `train`, and takes the mode of the converted module calling it."""
    if isinstance(module, TorchModule):
        return module.train(mode)
    for layer in modules(module):
        if isinstance(layer, TorchModule):
            layer._torch_training = bool(mode)
    return module


def torch_eval(module: Any) -> Any:
    """torch's `m.eval()` on any module (`torch_train(m, False)`); returns it, as torch's does."""
    return torch_train(module, False)


class no_grad:
    """torch.no_grad() / torch.inference_mode(). As a decorator the function's tensor outputs are
    cut from differentiation (`ops.stop_gradient`), as torch records no graph for them. As a context
    manager it does nothing: TensorFlow differentiates only what a GradientTape records."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            return keras.tree.map_structure(lambda t: ops.stop_gradient(t) if ops.is_tensor(t) else t, out)

        return wrapper

    def __enter__(self) -> "no_grad":
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


def tensor_zero_(tensor: Any) -> Any:
    """torch's in-place `t.zero_()` used as a value."""
    return ops.zeros_like(tensor)


def tensor_fill_(tensor: Any, value: Any) -> Any:
    """torch's in-place `t.fill_(value)` used as a value."""
    return ops.full_like(tensor, value)


# torch autocast's lower-precision layer classes, matched by class name through the MRO: the
# torch-signature layers of this runtime and the Keras layers they correspond to.
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
        "Dense",
        "EinsumDense",
        "Conv1D",
        "Conv2D",
        "Conv3D",
        "Conv1DTranspose",
        "Conv2DTranspose",
        "Conv3DTranspose",
        "DepthwiseConv2D",
        "SeparableConv2D",
        "MultiHeadAttention",
    }
)


# What a region changes on each such layer, and restores.
_TORCH_AUTOCAST_ATTRS = ("_dtype_policy", "call", "_convert_input_args")


def _torch_autocast_cast(value: Any, dtype: str) -> Any:
    """The floating tensors of a (nested) value in `dtype`; everything else as it is."""

    def cast(t: Any) -> Any:
        if not hasattr(t, "dtype") or isinstance(t, str):
            return t
        have = keras.backend.standardize_dtype(t.dtype)
        return ops.cast(t, dtype) if keras.backend.is_float_dtype(have) and have != dtype else t

    return keras.tree.map_structure(cast, value)


def _torch_autocast_first_dtype(args: Any, kwargs: Any) -> Any:
    """The dtype of the first floating tensor among a call's arguments (None: there is none)."""
    for t in keras.tree.flatten((args, kwargs)):
        if hasattr(t, "dtype") and not isinstance(t, str):
            dtype = keras.backend.standardize_dtype(t.dtype)
            if keras.backend.is_float_dtype(dtype):
                return dtype
    return None


def _torch_autocast_layer_call(layer: Any, call: Any) -> Any:
    """`call` of `layer` as an autocast boundary: floating inputs in the layer's compute dtype,
    floating results back in the dtype of the first floating input. TensorFlow refuses
    `bfloat16 + float32`, which torch promotes, so the code around the layer must keep seeing its
    own dtype (the values are the low-precision ones, as torch's)."""
    import functools

    @functools.wraps(call)
    def run(*args: Any, **kwargs: Any) -> Any:
        dtype = _torch_autocast_first_dtype(args, kwargs)
        compute = layer.compute_dtype
        out = call(*_torch_autocast_cast(args, compute), **_torch_autocast_cast(kwargs, compute))
        return out if dtype is None else _torch_autocast_cast(out, dtype)

    return run


class torch_autocast:
    """`with torch.autocast(device_type, dtype=..., enabled=...)` (also torch.amp.autocast,
    torch.cpu.amp.autocast, torch.cuda.amp.autocast) in converted code: a context manager.

    `module` is the converted module whose method opened the region (None in plain functions).
    On entry, every layer under `module` whose class (or a base class) is one of torch autocast's
    lower-precision classes (Linear, Conv*, ConvTranspose*, MultiheadAttention, Bilinear and their
    Keras counterparts) computes in `dtype` ("mixed_<dtype>" dtype policy: variables stay float32)
    and hands its floating results back in its input's dtype; on exit (exceptions included) each
    layer's dtype policy and `call` are restored exactly. An `enabled=False` region inside an
    enabled one puts the layers under `module` back to float32 compute for its body, as torch does.
    Matmul-class functional ops written inside the region run through `torch_autocast_call`.
    Unlike torch, a layer's result comes back in its input's dtype (float32 for float32 inputs):
    TensorFlow refuses the `bfloat16 + float32` arithmetic torch would do next."""

    def __init__(self, module: Any, dtype: Any = "bfloat16", enabled: Any = True) -> None:
        self.module = module
        self.dtype = keras.backend.standardize_dtype(dtype if dtype is not None else "bfloat16")
        self.enabled = enabled
        self._saved: list[list[tuple[Any, dict[str, Any]]]] = []

    def __enter__(self) -> "torch_autocast":
        enabled = bool(self.enabled)
        saved: list[tuple[Any, dict[str, Any]]] = []
        inside_enabled = any(d is not None for d in _TORCH_AUTOCAST_STACK)
        self._saved.append(saved)
        _TORCH_AUTOCAST_STACK.append(self.dtype if enabled else None)
        if isinstance(self.module, keras.layers.Layer) and (enabled or inside_enabled):
            policy = keras.dtype_policies.get("mixed_" + self.dtype if enabled else "float32")
            try:
                for layer in self.module._flatten_layers(include_self=True, recursive=True):
                    if not any(c.__name__ in _TORCH_AUTOCAST_LAYERS for c in type(layer).__mro__):
                        continue
                    own = vars(layer)
                    saved.append((layer, {k: own[k] for k in _TORCH_AUTOCAST_ATTRS if k in own}))
                    object.__setattr__(layer, "_dtype_policy", policy)
                    object.__setattr__(layer, "call", _torch_autocast_layer_call(layer, layer.call))
                    # the boundary casts the inputs itself, keeping their dtype for the results
                    object.__setattr__(layer, "_convert_input_args", False)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc: Any) -> bool:
        _TORCH_AUTOCAST_STACK.pop()
        for layer, own in reversed(self._saved.pop()):
            for key in _TORCH_AUTOCAST_ATTRS:
                if key in own:
                    object.__setattr__(layer, key, own[key])
                elif key in vars(layer):
                    object.__delattr__(layer, key)
        return False


def autocast(device_type: Any = "cuda", dtype: Any = None, enabled: Any = True, cache_enabled: Any = None) -> Any:
    """`torch.autocast` (`torch.amp.autocast`) passed around as a value rather than written in a
    `with` item or a decorator (`no_amp = partial(autocast, "cuda", enabled=False)`): calling it
    makes the region, a `torch_autocast` for no module (so a disabled region runs the ops
    written in it as written, and an enabled one casts them); torch's default dtype for the
    device type when none is given. `cache_enabled` has no meaning outside torch."""
    if dtype is None:
        dtype = "bfloat16" if device_type == "cpu" else "float16"
    return torch_autocast(None, dtype, enabled)


def torch_autocast_call(op: Any, *args: Any, **kwargs: Any) -> Any:
    """A matmul-class op (matmul, einsum, linear, conv, scaled_dot_product_attention) written in a
    torch.autocast region: inside an enabled region its floating inputs are cast to the region's
    dtype, and its floating results come back in the first floating input's dtype (TensorFlow
    refuses the `bfloat16 + float32` arithmetic torch would do next); elsewhere it runs as written."""
    dtype = _TORCH_AUTOCAST_STACK[-1] if _TORCH_AUTOCAST_STACK else None
    if dtype is None:
        return op(*args, **kwargs)
    first = _torch_autocast_first_dtype(args, kwargs)
    out = op(*_torch_autocast_cast(args, dtype), **_torch_autocast_cast(kwargs, dtype))
    return out if first is None else _torch_autocast_cast(out, first)


class _TorchNoAutocast:
    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        return False


def autocast_disabled():
    """`torch.autocast(..., enabled=False)`: the region runs as written. Converted code has no
    autocast region to leave (Keras mixed precision is a per-layer dtype policy; precision comes
    from --policy)."""
    return _TorchNoAutocast()
