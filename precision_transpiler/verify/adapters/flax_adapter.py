"""Flax NNX side of verification: `model.eval()`, seeded perturbation of every Param and
BatchStat, BatchNorm calibration, `nnx.state`/`nnx.update` weight copies, per-layer capture by
NNX graph path, and Flax's own per-layer `dtype=` as the low-precision reference.

Conventions (shared with the other adapters, so that the verifier pairs things by name):

* Layer paths are NNX graph paths joined with "." (`convs.0`, `block.attn.query`), exactly what
  `nnx.iter_modules` yields and what a policy file's `overrides: [{path: ...}]` matches in the
  generated Flax policy code. The root module is not a layer; containers (`nnx.List`) are never
  called, so they never appear.
* Outputs are flattened to `out` (a single array), `out[0]` (tuple/list items), `out['logits']`
  (dict keys) and `out.name` (dataclass-like fields), nested as needed: `out[1]['h']`.
* bfloat16/float16 arrays come back as float32 NumPy arrays, their dtype reported as the
  framework's name ("bfloat16"); integer outputs keep their dtype.

Everything runs eagerly (no `jax.jit`): layer capture swaps each submodule's class for a
recording subclass, which only works while Python runs the model's code.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from precision_transpiler.errors import VerifyError
from precision_transpiler.verify.adapters.base import Capture, flatten_outputs
from precision_transpiler.verify.sources import layer_source

# Relative size of the perturbation (of the tensor's spread, or absolute for constant tensors).
_NOISE = 0.05


def _nnx() -> Any:
    from flax import nnx

    return nnx


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


def _is_floating(dtype: Any) -> bool:
    jnp = _jnp()
    try:
        return bool(jnp.issubdtype(dtype, jnp.floating))
    except TypeError:  # PRNG key dtypes and other extended dtypes
        return False


def to_numpy(array: Any) -> np.ndarray:
    """A NumPy copy; 16-bit floats widened to float32 (NumPy has no arithmetic for bfloat16)."""
    out = np.asarray(array)
    if _is_floating(out.dtype) and out.dtype.itemsize < 4:
        return out.astype(np.float32)
    return np.array(out, copy=True)


def dtype_name(array: Any) -> str:
    return str(np.dtype(array.dtype))


def _key_name(key: Any) -> str:
    """One step of a `jax.tree_util` key path, in the verifier's output naming."""
    import jax

    tu = jax.tree_util
    if isinstance(key, tu.SequenceKey):
        return f"[{key.idx}]"
    if isinstance(key, tu.DictKey):
        return f"[{key.key!r}]"
    if isinstance(key, tu.GetAttrKey):
        return f".{key.name}"
    if isinstance(key, tu.FlattenedIndexKey):
        return f"[{key.key}]"
    return f"[{key!s}]"


def flatten(value: Any, name: str = "out") -> list[tuple[str, Any]]:
    """(name, array) for every array leaf of a (nested) output, in pytree order. Dicts, lists
    and tuples are walked here, so a dict class no one registered with JAX (diffusers'
    `BaseOutput`, an OrderedDict) is named by key as torch's side is, not taken for one leaf."""
    import jax

    if isinstance(value, dict):  # in JAX's order for dicts: sorted keys
        keys = sorted(value, key=repr) if type(value) is dict else list(value)
        return [pair for key in keys for pair in flatten(value[key], f"{name}[{key!r}]")]
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return [pair for i, item in enumerate(value) for pair in flatten(item, f"{name}[{i}]")]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a leaf to JAX: by field
        return [
            pair
            for entry in dataclasses.fields(value)
            for pair in flatten(getattr(value, entry.name), f"{name}.{entry.name}")
        ]
    leaves = jax.tree_util.tree_flatten_with_path(value)[0]
    if len(leaves) == 1 and leaves[0][0] == () and leaves[0][1] is value and not hasattr(value, "dtype"):
        # an object JAX takes for one leaf (a runtime distribution, the model's own result
        # class): by its public attributes, as `flatten_outputs` names torch's
        return flatten_outputs(value, lambda leaf: isinstance(leaf, jax.Array), name)
    return [(name + "".join(_key_name(k) for k in path), leaf) for path, leaf in leaves if hasattr(leaf, "dtype")]


def _first_float(value: Any) -> Any | None:
    import jax

    for leaf in jax.tree_util.tree_leaves(value):
        if hasattr(leaf, "dtype") and _is_floating(leaf.dtype):
            if isinstance(leaf, jax.core.Tracer):
                return None  # inside a transform the model applies itself: nothing concrete to record
            return leaf
    return None


def _path_name(path: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in path)


# -- layer capture -------------------------------------------------------------------------------
#
# Python looks special methods up on the type, so an instance attribute `__call__` is ignored.
# Capture therefore swaps each submodule's `__class__` for a subclass (made once per class and
# cached) whose `__call__` records the output of the original `__call__`; the classes are restored
# in a `finally`. A module-level stack of active recorders says which instances to record where.

_RECORDING: dict[type, type] = {}  # original class -> recording subclass (a subclass keeps its base alive)
_ACTIVE: list[tuple[dict[int, str], Capture]] = []


def _recording_class(cls: type) -> type:
    sub = _RECORDING.get(cls)
    if sub is not None:
        return sub

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = cls.__call__(self, *args, **kwargs)
        if _ACTIVE:
            paths, capture = _ACTIVE[-1]
            path = paths.get(id(self))
            if path is not None and isinstance(capture, list):  # under _compiled_run's trace
                capture.append((path, out))
            elif path is not None:
                _record(capture, path, out)
        return out

    namespace = {"__call__": __call__, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    sub = type(cls)(cls.__name__, (cls,), namespace)
    _RECORDING[cls] = sub
    return sub


def _record(capture: Capture, path: str, out: Any) -> None:
    leaf = _first_float(out)
    if leaf is None:
        return
    if path not in capture.layers:
        capture.layers[path] = []
        capture.order.append(path)
    capture.layers[path].append(to_numpy(leaf).astype(np.float32, copy=False))


def _compiled_run(adapter: FlaxAdapter, model: Any, arrays: list[Any], capture: bool) -> Capture | None:
    """The forward (and its layer capture) under `jax.jit`, or None where it cannot run there.

    Run op by op, JAX compiles one XLA program per operation and shape: a small CNN's eager
    forward spends seconds compiling what one traced program does at once. The model runs as
    an `nnx.merge` copy of its split state, so a trace that fails (Python control flow on values,
    `.item()`, outputs that are not arrays, a forward that adds attributes) leaves it untouched
    and the caller runs it eagerly; state the forward updates (counters, random streams) is
    written back as an eager run would leave it."""
    import jax

    nnx = _nnx()
    graphdef, state = nnx.split(model)
    names: list[str] = []
    order: list[str] = []
    kinds: dict[str, str] = {}
    unchanged: list[bool] = []

    def forward(state: Any, *args: Any) -> Any:
        copy = nnx.merge(graphdef, state)
        records: list[tuple[str, Any]] = []
        if capture:
            shell = Capture(outputs=[])
            out = adapter._captured(copy, list(args), shell, traced=records)
            kinds.update(shell.kinds)
        else:
            out = copy(*args)
        pairs = flatten(out)
        names.extend(name for name, _ in pairs)
        layers = [(path, _first_traced_float(value)) for path, value in records]
        order.extend(path for path, leaf in layers if leaf is not None)
        after_def, after_state = nnx.split(copy)
        unchanged.append(after_def == graphdef)
        return [a for _, a in pairs], [leaf for _, leaf in layers if leaf is not None], after_state

    try:
        outputs, recorded, after = jax.jit(forward)(state, *arrays)
    except Exception:  # anything the trace cannot take: the caller runs the model eagerly
        return None
    if not all(unchanged):
        return None
    # the variables (a BatchNorm's statistics) the run changed, as nnx.jit hands them back: plain
    # arrays the module holds as data (nflows' `lower_indices`, a tuple of index arrays) are
    # constants, and a tuple holding them cannot be updated in place
    nnx.update(model, nnx.filter_state(after, nnx.Variable))
    pairs = zip(names, outputs, strict=True)
    result = Capture(outputs=[(name, to_numpy(a), dtype_name(a)) for name, a in pairs], kinds=kinds)
    for path, leaf in zip(order, recorded, strict=True):
        if path not in result.layers:
            result.layers[path] = []
            result.order.append(path)
        result.layers[path].append(to_numpy(leaf).astype(np.float32, copy=False))
    return result


def _first_traced_float(value: Any) -> Any | None:
    """The first floating array of a layer's output, traced or not (see `_first_float`)."""
    import jax

    for leaf in jax.tree_util.tree_leaves(value):
        if hasattr(leaf, "dtype") and _is_floating(leaf.dtype):
            return leaf
    return None


def _submodules(model: Any) -> Iterator[tuple[str, Any]]:
    """(path, module) for every submodule (not the root), each instance once."""
    nnx = _nnx()
    for path, module in nnx.iter_modules(model):
        if path:
            yield _path_name(path), module


class FlaxAdapter:
    """The `Adapter` for `flax.nnx.Module` models (framework name "jax")."""

    name = "jax"

    def is_model(self, obj: Any) -> bool:
        if "flax.nnx" not in sys.modules:  # nothing can be an nnx.Module before flax is imported
            return False
        return isinstance(obj, _nnx().Module)

    # -- preparation ------------------------------------------------------------------------------

    def prepare(self, model: Any, inputs: list[np.ndarray], *, seed: int, perturb: bool, calibrate_bn: bool) -> None:
        """eval() (Dropout deterministic, BatchNorm on running averages), then perturb, then
        calibrate, so that the running statistics describe the perturbed network."""
        model.eval()
        if perturb:
            self._perturb(model, seed)
        if calibrate_bn:
            self._calibrate(model, inputs)

    def _perturb(self, model: Any, seed: int) -> None:
        """Add seeded noise to every floating Param and BatchStat: 5% of the tensor's standard
        deviation, or 0.05 absolute for a constant tensor (BatchNorm scale=1/bias=0, zero-init
        heads and residual scales must change too). Variances are scaled by 1 + 0.05|noise| so
        that they stay positive."""
        nnx = _nnx()
        jnp = _jnp()
        rng = np.random.default_rng(seed)
        for path, var in nnx.iter_graph(model):
            if not isinstance(var, nnx.Param | nnx.BatchStat) or not _is_floating(var.dtype):
                continue
            value = np.asarray(var[...], dtype=np.float64)
            noise = rng.standard_normal(value.shape)
            if isinstance(var, nnx.BatchStat) and path and path[-1] == "var":
                new = value * (1 + _NOISE * np.abs(noise))
            else:
                spread = float(value.std()) if value.size > 1 else 0.0
                new = value + noise * _NOISE * (spread if spread > 0 and np.isfinite(spread) else 1.0)
            var[...] = jnp.asarray(new, dtype=var.dtype)

    def _calibrate(self, model: Any, inputs: list[np.ndarray]) -> None:
        """Running statistics := this batch's statistics: BatchNorm layers (only they: Dropout stays
        deterministic, so the statistics are reproducible) run once on batch statistics with
        momentum 0, which makes `ra = momentum * ra + (1 - momentum) * batch` the batch value."""
        nnx = _nnx()
        norms = [m for _, m in nnx.iter_modules(model) if isinstance(m, nnx.BatchNorm)]
        if not norms:
            return
        saved = [(m, m.momentum) for m in norms]
        try:
            for module in norms:
                module.momentum = 0.0
                module.use_running_average = False
            model(*self._inputs(inputs))
        finally:
            for module, momentum in saved:
                module.momentum = momentum
            model.eval()

    def copy_weights(self, source: Any, target: Any) -> None:
        """`nnx.update(target, nnx.state(source))`, each leaf cast to the dtype the target's
        variable has (a `bf16` policy stores parameters in bfloat16)."""
        nnx = _nnx()
        jnp = _jnp()
        src = dict(nnx.to_flat_state(nnx.state(source)))
        dst = dict(nnx.to_flat_state(nnx.state(target)))
        weights = (nnx.Param, nnx.BatchStat)
        missing = sorted(_path_name(p) for p, v in src.items() if isinstance(v, weights) and p not in dst)
        extra = sorted(_path_name(p) for p, v in dst.items() if isinstance(v, weights) and p not in src)
        if missing or extra:
            raise VerifyError(
                "the converted model's variables differ from the original's: "
                f"missing {missing[:5] or '[]'}, unexpected {extra[:5] or '[]'}"
            )
        new = []
        for path, var in dst.items():
            if path not in src:
                continue
            value = src[path][...]
            if getattr(value, "shape", None) != getattr(var[...], "shape", None):
                raise VerifyError(
                    f"variable {_path_name(path)}: shape {value.shape} in the original, "
                    f"{var[...].shape} in the converted"
                )
            if _is_floating(var.dtype):
                value = jnp.asarray(value).astype(var.dtype)
            new.append((path, var.replace(value)))
        nnx.update(target, nnx.from_flat_state(new))
        target.eval()

    # -- running ----------------------------------------------------------------------------------

    def _inputs(self, inputs: list[np.ndarray]) -> list[Any]:
        """JAX arrays with the given dtypes; 64-bit ones narrowed as JAX does without x64 (NumPy's
        default int64 becomes int32, which is what a JAX model expects)."""
        import jax

        jnp = _jnp()
        x64 = bool(jax.config.read("jax_enable_x64"))
        narrow = {np.dtype(np.int64): np.int32, np.dtype(np.uint64): np.uint32, np.dtype(np.float64): np.float32}
        arrays = []
        for array in inputs:
            array = np.asarray(array)
            if not x64 and array.dtype in narrow:
                array = array.astype(narrow[array.dtype])
            arrays.append(jnp.asarray(array))
        return arrays

    def run(self, model: Any, inputs: list[np.ndarray], *, capture: bool, compiled: bool = False) -> Capture:
        model.eval()
        arrays = self._inputs(inputs)
        if compiled:
            result = _compiled_run(self, model, arrays, capture)
            if result is not None:
                return result
        result = Capture(outputs=[])
        out = self._captured(model, arrays, result) if capture else model(*arrays)
        result.outputs = [(name, to_numpy(a), dtype_name(a)) for name, a in flatten(out)]
        return result

    def timed_forward(self, model: Any, inputs: list[np.ndarray], *, compute: str | None = None) -> Callable[[], Any]:
        """The model under `jax.jit` (its graph and state split, as deployed code runs it)."""
        import jax
        from flax import nnx

        model.eval()
        graphdef, state = nnx.split(model)
        arrays = self._inputs(inputs)

        @jax.jit
        def run(state: Any, *args: Any) -> Any:
            return nnx.merge(graphdef, state)(*args)

        def forward() -> Any:
            return jax.block_until_ready(run(state, *arrays))

        return forward

    def param_bytes(self, model: Any) -> int:
        """Bytes of the model's variables (parameters, batch statistics, buffers) as it holds them
        now, and of arrays it holds as plain attributes (`self.original_inv_freq =
        self.inv_freq[...]` in transformers' rotary embeddings: nnx's state lists the array
        itself); random-number state is not counted (torch has none in its state_dict)."""
        from flax import nnx

        total = 0
        for _, variable in nnx.to_flat_state(nnx.state(model)):
            if isinstance(variable, nnx.RngState):
                continue
            value = variable.get_raw_value() if isinstance(variable, nnx.Variable) else variable
            total += int(np.asarray(value).nbytes)
        return total

    def _captured(self, model: Any, arrays: list[Any], result: Capture, traced: list[Any] | None = None) -> Any:
        """The forward with every submodule's output recorded into `result`; under a trace
        (`traced` given) the traced outputs are collected there instead, to leave the trace as
        its results."""
        paths: dict[int, str] = {}
        swapped: list[tuple[Any, type]] = []
        try:
            for path, module in _submodules(model):
                cls = type(module)
                paths[id(module)] = path
                result.kinds[path] = cls.__name__
                object.__setattr__(module, "__class__", _recording_class(cls))
                swapped.append((module, cls))
            _ACTIVE.append((paths, result if traced is None else traced))
            try:
                return model(*arrays)
            finally:
                _ACTIVE.pop()
        finally:
            for module, cls in swapped:
                object.__setattr__(module, "__class__", cls)

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
        """Flax's own low precision on a clone of `model`: every layer with a `dtype` attribute
        computes in `compute` (LayerNorm/BatchNorm still take their statistics in float32, as
        Flax does), parameters stored in `param` when that is not float32."""
        nnx = _nnx()
        jnp = _jnp()
        low = jnp.dtype(compute)
        clone = nnx.clone(model)
        for _, module in nnx.iter_modules(clone):
            current = getattr(module, "dtype", _MISSING)
            if current is not _MISSING and (current is None or _is_floating(current)):
                module.dtype = low
        if param != "float32":
            stored = jnp.dtype(param)
            for _, module in nnx.iter_modules(clone):
                if hasattr(module, "param_dtype"):
                    module.param_dtype = stored
            for _, var in nnx.iter_graph(clone):
                if isinstance(var, nnx.Param) and _is_floating(var.dtype):
                    var[...] = var[...].astype(stored)
        return self.run(clone, inputs, capture=capture)

    def give_attribute(self, model: Any, path: str, name: str, array: np.ndarray) -> bool:
        """Set attribute `name` of the submodule at `path` to `array` where it holds an array (a
        draw of the original's build: verify/build_draws.py); False where it holds none."""
        nnx = _nnx()
        module = model
        for part in path.split(".") if path else ():
            module = _child(module, part)
        held = getattr(module, name, None) if module is not None else None
        if not hasattr(held, "shape") or isinstance(held, nnx.Param):
            return False
        value = self._inputs([array])[0]
        if isinstance(held, nnx.Variable):
            held.value = value
        else:
            setattr(module, name, value)
        return True

    def layer_source(self, model: Any, path: str) -> str | None:
        chain: list[tuple[str, object]] = [("", model)]
        current = model
        for part in path.split("."):
            current = _child(current, part)
            if current is None:
                return None
            chain.append((part, current))
        return layer_source(chain)


_MISSING = object()


def _child(node: Any, part: str) -> Any:
    if part.isdigit():
        try:
            return node[int(part)]
        except (TypeError, IndexError, KeyError):
            pass
    return getattr(node, part, None)
