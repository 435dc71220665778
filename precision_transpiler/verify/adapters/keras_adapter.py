"""Keras 3 side of verification: calls with `training=False`, seeded perturbation of every
variable, BatchNormalization calibration, `get_weights`/`set_weights` copies, per-layer capture,
and a Keras dtype policy (`mixed_bfloat16`, ...) as the low-precision reference.

Conventions (shared with the other adapters, so that the verifier pairs things by name):

* Layer paths. Keras' own layer names are no use for pairing: auto-generated names (`conv2d_3`)
  count up through the process, so the original and the converted model, built one after the
  other, name the same layer differently. Paths are therefore structural:
  - functional and Sequential models: `layers.<i>`, the index in `model.layers` (for a
    functional model index 0 is the InputLayer, which is never called);
  - subclassed models and layers: attribute names as written (`blocks.0.attn`, `head`), public
    attributes first, then private ones (`attn._query_dense` inside a Keras MultiHeadAttention);
  - the torch-semantics containers of converted torch models (runtime/keras/containers.py's Sequential,
    ModuleList, ModuleDict): their children by torch's names (`layer1.0.conv1`), as torch spells
    the same path;
  - nested: `layers.3.dense`, `backbone.layers.12`.
  The generated Keras policy code walks the same way, so a path the verifier reports is a path a
  policy file's `overrides:` can name.
* Outputs are flattened to `out`, `out[0]`, `out['logits']` (nested as needed); bfloat16/float16
  come back as float32 NumPy arrays with the dtype reported as "bfloat16"/"float16".

Layer capture sets an instance attribute `call` on every sublayer: `Layer.__call__` (through
`Operation.__call__`) invokes `self.call`, so the instance attribute wins; it is removed again in
a `finally`. Everything runs eagerly (no `tf.function`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from precision_transpiler.errors import VerifyError
from precision_transpiler.verify.adapters.base import Capture, flatten_outputs
from precision_transpiler.verify.sources import layer_source

_NOISE = 0.05  # relative size of the perturbation (absolute for constant tensors)

# Keras/TensorFlow bookkeeping attributes that hold sublayers under another name.
_INTERNAL = frozenset({"_layers", "_functional", "_operations", "_tracker"})

# (param, compute) -> the Keras dtype policy that stores variables in `param` and computes in `compute`.
_KERAS_POLICIES = {
    ("float32", "bfloat16"): "mixed_bfloat16",
    ("float32", "float16"): "mixed_float16",
    ("bfloat16", "bfloat16"): "bfloat16",
    ("float16", "float16"): "float16",
    ("float32", "float32"): "float32",
}

_MISSING = object()


def _keras() -> Any:
    import keras

    return keras


def _dtype_name(dtype: Any) -> str:
    return str(_keras().backend.standardize_dtype(dtype))


def _is_floating(dtype: Any) -> bool:
    return "float" in _dtype_name(dtype)


def _numpy_dtype(name: str) -> Any:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(name)


def to_numpy(tensor: Any) -> np.ndarray:
    """A NumPy copy; 16-bit floats widened to float32. TensorFlow's own `.numpy()` first:
    `np.array()` on a bfloat16 EagerTensor (what `keras.ops.convert_to_numpy` does) warns."""
    numpy = getattr(tensor, "numpy", None)
    out = np.asarray(numpy() if callable(numpy) else _keras().ops.convert_to_numpy(tensor))
    if _is_floating(out.dtype) and out.dtype.itemsize < 4:
        return out.astype(np.float32)
    return np.array(out, copy=True)


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "dtype") and hasattr(value, "shape") and not isinstance(value, np.generic | type)


def flatten(value: Any, name: str = "out") -> list[tuple[str, Any]]:
    """(name, tensor) for every tensor in a (nested) Keras output (see `flatten_outputs`)."""
    return flatten_outputs(value, _is_tensor, name)


def _first_float(value: Any) -> Any | None:
    for _, tensor in flatten(value):
        if _is_floating(tensor.dtype):
            return tensor
    return None


def _is_graph_model(layer: Any) -> bool:
    """Functional or Sequential: layers are named by their index in `model.layers`."""
    keras = _keras()
    return isinstance(layer, keras.Sequential) or hasattr(layer, "_nodes_by_depth")


def sublayers(layer: Any) -> list[tuple[str, Any]]:
    """The direct sublayers of `layer` with their path step (see the module docstring)."""
    keras = _keras()
    if _is_graph_model(layer):
        return [(f"layers.{i}", sub) for i, sub in enumerate(layer.layers)]
    found: list[tuple[str, Any]] = []
    containers = getattr(layer, "_torch_modules", None)
    if isinstance(containers, list | dict):  # torch-semantics Sequential/ModuleList/ModuleDict: torch's names
        named = enumerate(containers) if isinstance(containers, list) else containers.items()
        found += [(str(key), v) for key, v in named if isinstance(v, keras.layers.Layer)]
    items = list(vars(layer).items())
    for private in (False, True):
        for name, value in items:
            if name.startswith("_") != private or name in _INTERNAL or name.startswith("_self_"):
                continue
            if name == "_torch_modules" and isinstance(containers, list | dict):
                continue
            if isinstance(value, keras.layers.Layer):
                found.append((name, value))
            elif isinstance(value, list | tuple):
                found += [(f"{name}.{i}", v) for i, v in enumerate(value) if isinstance(v, keras.layers.Layer)]
            elif isinstance(value, dict):
                found += [(f"{name}.{k}", v) for k, v in value.items() if isinstance(v, keras.layers.Layer)]
    return found


def walk(model: Any) -> Iterator[tuple[str, Any]]:
    """(path, layer) for every layer under `model` (not `model` itself), each instance once,
    parents before children."""
    seen = {id(model)}
    stack: list[tuple[str, Any]] = [("", model)]
    while stack:
        prefix, layer = stack.pop(0)
        children = []
        for step, sub in sublayers(layer):
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            path = f"{prefix}.{step}" if prefix else step
            yield path, sub
            children.append((path, sub))
        stack[0:0] = children


class KerasAdapter:
    """The `Adapter` for Keras 3 models and layers (framework name "tf")."""

    name = "tf"

    def __init__(self) -> None:
        # The inputs seen last: a subclassed model only has weights after its first call, and
        # `copy_weights` (which gets no inputs) may have to build the converted model first.
        self._inputs: list[np.ndarray] | None = None

    def is_model(self, obj: Any) -> bool:
        if "keras" not in sys.modules:  # nothing can be a Keras layer before keras is imported
            return False
        return isinstance(obj, _keras().layers.Layer)

    # -- calling ----------------------------------------------------------------------------------

    def _tensors(self, inputs: list[np.ndarray]) -> list[Any]:
        keras = _keras()
        return [keras.ops.convert_to_tensor(np.ascontiguousarray(a)) for a in inputs]

    def timed_forward(self, model: Any, inputs: list[np.ndarray], *, compute: str | None = None) -> Callable[[], Any]:
        """The model called through `tf.function` (a graph, as `model.predict` runs it) on the
        TensorFlow backend; eagerly on others."""
        keras = _keras()
        tensors = self._tensors(inputs)
        call = lambda *args: self._forward(model, list(args))  # noqa: E731
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            call = tf.function(call)

        def forward() -> Any:
            out = call(*tensors)
            return [np.asarray(t) for t in keras.tree.flatten(out) if hasattr(t, "dtype")]

        return forward

    def param_bytes(self, model: Any) -> int:
        """Bytes of the model's variables (parameters and buffers) as it holds them now, each
        shared variable once (GPT-2's tied head)."""
        unique = {id(v): v for v in model.weights}
        return sum(int(np.asarray(v.numpy()).nbytes) for v in unique.values())

    def _forward(self, model: Any, tensors: list[Any], *, training: bool = False) -> Any:
        """A functional model with several inputs takes them as one list; anything else as
        positional arguments. Keras always accepts `training=` in `__call__`."""
        if len(tensors) > 1 and _is_graph_model(model):
            return model(tensors, training=training)
        return model(*tensors, training=training)

    def _ensure_built(self, model: Any, inputs: list[np.ndarray] | None) -> None:
        """Subclassed models create their variables on the first call; weights can only be
        perturbed, copied or captured after it."""
        if model.built and (model.weights or not sublayers(model)):
            return
        if inputs is None:
            raise VerifyError(f"{type(model).__name__} has no weights yet and no inputs were given to build it")
        self._forward(model, self._tensors(inputs))

    # -- preparation ------------------------------------------------------------------------------

    def prepare(self, model: Any, inputs: list[np.ndarray], *, seed: int, perturb: bool, calibrate_bn: bool) -> None:
        """Keras has no eval mode (every call here passes `training=False`): build, perturb,
        then calibrate, so that the moving statistics describe the perturbed network."""
        self._inputs = inputs
        self._ensure_built(model, inputs)
        if perturb:
            self._perturb(model, seed)
        if calibrate_bn:
            self._calibrate(model, inputs)

    def _perturb(self, model: Any, seed: int) -> None:
        """Seeded noise on every floating variable: 5% of its standard deviation, or 0.05
        absolute when it is constant (gamma=1, beta=0, zero-init kernels must change too);
        variances are scaled by 1 + 0.05|noise| so that they stay positive."""
        rng = np.random.default_rng(seed)
        seen: set[int] = set()
        for var in model.weights:
            if id(var) in seen or not _is_floating(var.dtype):
                continue
            seen.add(id(var))
            value = np.asarray(var.numpy()).astype(np.float64)
            noise = rng.standard_normal(value.shape)
            if var.name.endswith("variance"):
                new = value * (1 + _NOISE * np.abs(noise))
            else:
                spread = float(value.std()) if value.size > 1 else 0.0
                new = value + noise * _NOISE * (spread if spread > 0 and np.isfinite(spread) else 1.0)
            var.assign(new.astype(_numpy_dtype(_dtype_name(var.dtype))))

    def _calibrate(self, model: Any, inputs: list[np.ndarray]) -> None:
        """Moving statistics := this batch's statistics. Only the BatchNormalization layers run
        in training mode (their `call` gets `training=True`; Dropout stays off, so the
        statistics are reproducible), with momentum 0.0: Keras updates
        `moving = moving * momentum + batch * (1 - momentum)`."""
        keras = _keras()
        norms = [layer for _, layer in walk(model) if isinstance(layer, keras.layers.BatchNormalization)]
        if not norms:
            return
        saved = [(layer, layer.momentum, layer.__dict__.get("call", _MISSING)) for layer in norms]
        try:
            for layer in norms:
                layer.momentum = 0.0
                object.__setattr__(layer, "call", _training_call(layer.call))
            self._forward(model, self._tensors(inputs))
        finally:
            for layer, momentum, call in saved:
                layer.momentum = momentum
                _restore_call(layer, call)

    def copy_weights(self, source: Any, target: Any) -> None:
        """`target.set_weights(source.get_weights())`, each array cast to the dtype of the
        target's variable (a `bf16` policy stores variables in bfloat16). Weights pair by
        creation order, which two builds of the same code share."""
        self._ensure_built(target, self._inputs)
        values = source.get_weights()
        variables = target.weights
        if len(values) != len(variables):
            raise VerifyError(
                f"the converted model has {len(variables)} weights, the original {len(values)}: "
                "the two models are not built the same way"
            )
        cast = []
        for value, var in zip(values, variables, strict=True):
            value = np.asarray(value)
            if tuple(value.shape) != tuple(var.shape):
                raise VerifyError(f"weight {var.path}: shape {value.shape} in the original, {tuple(var.shape)} here")
            cast.append(value.astype(_numpy_dtype(_dtype_name(var.dtype))) if _is_floating(var.dtype) else value)
        target.set_weights(cast)

    # -- running ----------------------------------------------------------------------------------

    def run(self, model: Any, inputs: list[np.ndarray], *, capture: bool, compiled: bool = False) -> Capture:
        # eager TensorFlow and torch run prebuilt kernels: nothing to gain from compiling one forward
        self._inputs = inputs
        tensors = self._tensors(inputs)
        result = Capture(outputs=[])
        saved: list[tuple[Any, Any]] = []
        try:
            if capture:
                self._ensure_built(model, inputs)  # sublayers created in build() must exist
                for path, layer in walk(model):
                    result.kinds[path] = type(layer).__name__
                    saved.append((layer, layer.__dict__.get("call", _MISSING)))
                    object.__setattr__(layer, "call", _recording_call(layer.call, path, result))
            out = self._forward(model, tensors)
        finally:
            for layer, call in saved:
                _restore_call(layer, call)
        result.outputs = [(name, to_numpy(t), _dtype_name(t.dtype)) for name, t in flatten(out)]
        return result

    def run_reference(
        self,
        model: Any,
        rebuild: Callable[[], Any],
        inputs: list[np.ndarray],
        *,
        compute: str,
        param: str,
        capture: bool,
    ) -> Capture:
        """Keras' own mixed precision: the model rebuilt under the global dtype policy
        (`mixed_bfloat16`, `mixed_float16`, or `bfloat16`/`float16` when variables are 16-bit
        too), the global policy restored, `model`'s weights copied in, run."""
        keras = _keras()
        policy = _KERAS_POLICIES.get((param, compute))
        if policy is None:
            raise VerifyError(f"Keras has no dtype policy with {param} variables and {compute} compute")
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy(policy)
        try:
            reference = rebuild()
        finally:
            keras.config.set_dtype_policy(previous)
        self._ensure_built(reference, inputs)
        self.copy_weights(model, reference)
        return self.run(reference, inputs, capture=capture)

    def give_attribute(self, model: Any, path: str, name: str, array: np.ndarray) -> bool:
        """Set attribute `name` of the sublayer at `path` to `array` where it holds a tensor (a
        draw of the original's build: verify/build_draws.py); False where it holds none."""
        layer = model
        for part in path.split(".") if path else ():
            layer = _child(layer, part)
        held = getattr(layer, name, None) if layer is not None else None
        if not _is_tensor(held):
            return False
        if isinstance(held, _keras().Variable):
            if tuple(held.shape) != array.shape:
                return False
            held.assign(array)
        else:
            setattr(layer, name, self._tensors([array])[0])
        return True

    def layer_source(self, model: Any, path: str) -> str | None:
        """The `self.x = ...` line for layers of subclassed models; None inside functional and
        Sequential models (their layers are created by calls whose position Keras does not keep)."""
        chain: list[tuple[str, object]] = [("", model)]
        current = model
        for part in path.split("."):
            current = _child(current, part)
            if current is None:
                return None
            chain.append((part, current))
        return layer_source(chain)


def _child(node: Any, part: str) -> Any:
    containers = getattr(node, "_torch_modules", None)
    if isinstance(containers, dict) and part in containers:
        return containers[part]
    if isinstance(containers, list) and part.isdigit():
        return containers[int(part)] if int(part) < len(containers) else None
    if part.isdigit() and isinstance(node, list | tuple):
        index = int(part)
        return node[index] if index < len(node) else None
    if isinstance(node, dict):
        return node.get(part)
    return getattr(node, part, None)


def _recording_call(call: Callable[..., Any], path: str, capture: Capture) -> Callable[..., Any]:
    def recording(*args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        tensor = _first_float(out)
        if tensor is None:
            return out
        try:
            array = to_numpy(tensor).astype(np.float32, copy=False)
        except Exception:  # a symbolic tensor (a layer run inside a tf.while_loop): nothing to record
            return out
        if path not in capture.layers:
            capture.layers[path] = []
            capture.order.append(path)
        capture.layers[path].append(array)
        return out

    return recording


def _training_call(call: Callable[..., Any]) -> Callable[..., Any]:
    def training(*args: Any, **kwargs: Any) -> Any:
        kwargs["training"] = True
        return call(*args, **kwargs)

    return training


def _restore_call(layer: Any, saved: Any) -> None:
    if saved is _MISSING:
        layer.__dict__.pop("call", None)
    else:
        object.__setattr__(layer, "call", saved)
