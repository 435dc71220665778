"""Copy a torch `state_dict` into a converted Flax NNX model.

Converted models keep torch's module tree: attribute names are torch's, Sequential/ModuleList
children sit at paths "0", "1", ... (see precision_transpiler/runtime/flax/containers.py), so the module path of
a torch key (`layer1.0.conv1` in `layer1.0.conv1.weight`) is the nnx path of the converted module.
Only the parameter names and layouts differ, per layer type; `TORCH_PARAM_RULES` holds them.

Resolution of a torch key `<module path>.<name>` (all variables of the model are enumerated once,
without deduplicating shared modules, as torch's `state_dict()` lists a shared module under every
name):

1. A variable attribute called `<name>` on that module (a converted `nn.Parameter` or buffer, or a
   shim that keeps torch's names such as MultiheadAttention): copied as is (same layout).
2. Otherwise the rule for the module's class (looked up by class name along the MRO, so both nnx
   layers and runtime classes copied into converted files match): `TORCH_PARAM_RULES[cls][name]`
   is `(flax_attribute, transform)`, or None for a torch entry that has no Flax counterpart and
   is accepted and dropped. The rules come from the `params:` of the layer tables
   (mappings/layers/torch_nn.yaml: `torch.nn.Linear`'s weight is the Flax kernel, transposed).

Values are torch tensors (converted without importing torch: `.detach().cpu().numpy()`, bf16 via
float32) or anything `numpy.asarray` accepts; they are cast to each target variable's dtype.
RNG state variables (`nnx.RngState`) are never torch keys, nor are variables created with
`persistent=False` metadata (`nnx.Variable(x, persistent=False)`: torch's non-persistent buffers,
which `state_dict()` leaves out).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Transform = Callable[[np.ndarray, Any], np.ndarray]
"""(torch value, the Flax module) -> value in the Flax layout."""


def _same(value: np.ndarray, module: Any) -> np.ndarray:
    return value


def _transposed(value: np.ndarray, module: Any) -> np.ndarray:
    """Axes reversed: torch Linear weight (out, in) -> Flax kernel (in, out)."""
    return value.T


def _conv_kernel(value: np.ndarray, module: Any) -> np.ndarray:
    """torch conv weight (out, in/groups, *k) -> Flax kernel (*k, in/groups, out) (OIHW -> HWIO)."""
    return np.transpose(value, (*range(2, value.ndim), 1, 0))


def _conv_transpose_kernel(value: np.ndarray, module: Any) -> np.ndarray:
    """torch transposed-conv weight (in, out/groups, *k) -> runtime kernel (*k, in, out/groups)."""
    return np.transpose(value, (*range(2, value.ndim), 0, 1))


#: the layouts a layer table's `params:` may name (precision_transpiler.mappings.layers.LAYOUTS)
LAYOUT_TRANSFORMS: dict[str, Transform] = {
    "same": _same,
    "transposed": _transposed,
    "conv_kernel": _conv_kernel,
    "conv_transpose_kernel": _conv_transpose_kernel,
}

Rule = tuple[str, Transform] | None


def _param_rules() -> dict[str, dict[str, Rule]]:
    """Per Flax class name: torch parameter/buffer name -> (Flax attribute, transform), or None
    to accept and drop the torch entry. Built from the layer tables' `params:` section
    (mappings/layers/torch_nn.yaml), where a new layer's weight layout is one line."""
    from precision_transpiler.mappings.registry import load_mappings

    rules: dict[str, dict[str, Rule]] = {}
    for cls, params in load_mappings().layer_params.items():
        rules.setdefault(cls.rsplit(".", 1)[-1], {}).update(
            {
                torch_name: None if p.name is None else (p.name, LAYOUT_TRANSFORMS[p.layout])
                for torch_name, p in params.items()
            }
        )
    return rules


#: Flax class name (matched along the MRO, so that converted subclasses match) -> rules; names a
#: class keeps from torch need no entry (rule 1 in the module docstring).
TORCH_PARAM_RULES: dict[str, dict[str, Rule]] = _param_rules()


@dataclass(frozen=True)
class _Target:
    torch_key: str
    flax_path: str
    variable: Any
    module: Any
    transform: Transform


def _rules_for(module: Any) -> dict[str, Rule]:
    """The torch-name rules of a layer, by class name along the MRO; a converted module class
    keeps torch's names whatever it is called (a user's `RMSNorm(TorchModule)`)."""
    for cls in type(module).__mro__:
        if any(base.__name__ == "TorchModule" for base in cls.__mro__):
            continue
        rules = TORCH_PARAM_RULES.get(cls.__name__)
        if rules is not None:
            return rules
    return {}


def _children(node: Any) -> Iterator[tuple[str, Any]]:
    """(name, value) of a module's attributes, or of a plain list/tuple/dict held as data."""
    if isinstance(node, list | tuple):
        yield from ((str(i), v) for i, v in enumerate(node))
    elif isinstance(node, dict):
        yield from ((str(k), v) for k, v in node.items())
    else:
        for name, value in vars(node).items():
            if not name.startswith("_pytree__"):
                yield name, value


def _holds_none(variable: Any) -> bool:
    try:
        return variable.get_value() is None
    except Exception:  # an abstract variable (nnx.eval_shape) holds a shape, never None
        return False


def _walk(model: Any) -> tuple[list[_Target], set[str]]:
    """Every torch key the model can take, and the torch keys its rules accept and drop."""
    from flax import nnx

    targets: list[_Target] = []
    dropped: set[str] = set()

    def visit(node: Any, prefix: str, module: Any, stack: tuple[int, ...]) -> None:
        if id(node) in stack:
            return
        stack = (*stack, id(node))
        is_module = isinstance(node, nnx.Module)
        owner = node if is_module else module
        rules = _rules_for(node) if is_module else {}
        reverse = {rule[0]: (torch_name, rule[1]) for torch_name, rule in rules.items() if rule is not None}
        if is_module:
            dropped.update(prefix + torch_name for torch_name, rule in rules.items() if rule is None)
        for name, value in _children(node):
            if isinstance(value, nnx.Variable):
                if isinstance(value, nnx.RngState) or value.get_metadata().get("persistent", True) is False:
                    continue
                if _holds_none(value):
                    continue  # a buffer registered as None (Swin's unshifted `attn_mask`): not in torch's state_dict
                torch_name, transform = reverse.get(name, (name, _same))
                targets.append(_Target(prefix + torch_name, prefix + name, value, owner, transform))
            elif isinstance(value, nnx.Module | list | tuple | dict):
                visit(value, f"{prefix}{name}.", owner, stack)

    visit(model, "", model, ())
    # A buffer of a child read into a parent attribute (`self.degrees = linear.degrees`) is not
    # registered by torch there (only Parameters are): it is a key once, under its deepest name.
    # A module shared under two names (performer's `proj_updater.instance` is its `net`) has its
    # buffers under both in torch's state_dict: every name of the deepest owner stays.
    deepest: dict[int, _Target] = {}
    for target in targets:
        if _is_buffer(target.variable):
            known = deepest.get(id(target.variable))
            if known is None or target.torch_key.count(".") > known.torch_key.count("."):
                deepest[id(target.variable)] = target
    targets = [t for t in targets if not _is_buffer(t.variable) or deepest[id(t.variable)].module is t.module]
    # Rule 1 (a variable already named as in torch) wins over a renaming rule for the same key.
    by_key: dict[str, _Target] = {}
    for target in targets:
        current = by_key.get(target.torch_key)
        if current is None or (target.flax_path == target.torch_key and current.flax_path != current.torch_key):
            by_key[target.torch_key] = target
    return list(by_key.values()), dropped


def _is_buffer(variable: Any) -> bool:
    """A converted torch buffer: the runtime's Buffer class (copied into converted files, so
    matched by name)."""
    return any(cls.__name__ == "Buffer" for cls in type(variable).__mro__)


def flax_state_to_torch_keys(model: Any) -> dict[str, str]:
    """Flax variable path ('layer1.0.conv1.kernel') -> torch state_dict key ('layer1.0.conv1.weight').

    Paths join nnx path entries with '.', so ModuleList's integer keys and Sequential's string keys
    give the same names as torch. Used for error messages and to pair layers in verification.
    """
    targets, _ = _walk(model)
    return {t.flax_path: t.torch_key for t in targets}


def torch_keys_to_flax_paths(model: Any) -> dict[str, str]:
    """The inverse of `flax_state_to_torch_keys`: torch key -> Flax variable path."""
    targets, _ = _walk(model)
    return {t.torch_key: t.flax_path for t in targets}


def state_dict_mismatch(model: Any, keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """(missing, unexpected): model variables that torch keys `keys` leave unfilled, and keys the
    model does not take, as `load_torch_state_dict(strict=True)` would report them. Lets a
    non-strict caller say what it skipped."""
    targets, dropped = _walk(model)
    given = list(keys)
    taken = {t.torch_key for t in targets}
    present = set(given)
    return [t.torch_key for t in targets if t.torch_key not in present], [
        k for k in given if k not in taken and k not in dropped
    ]


def _to_numpy(value: Any) -> np.ndarray:
    """A torch tensor (duck-typed: torch is not imported), JAX or NumPy array as a NumPy array."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":  # NumPy has no bf16: go through float32 (exact)
            tensor = tensor.float()
        return tensor.numpy()
    return np.asarray(value)


def preview(keys: list[str], limit: int = 5) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f", ... (+{len(keys) - limit})" if len(keys) > limit else "")


def load_torch_state_dict(model: Any, state_dict: Mapping[str, Any], *, strict: bool = True) -> None:
    """Copy a torch `state_dict` into the nnx variables of a converted Flax model, in place.

    Keys resolve as described in the module docstring; each value is transformed to the Flax layout
    (Linear/conv weights transposed) and cast to the target variable's dtype. A shape mismatch always
    raises. With `strict`, keys the model does not take and model variables the state_dict does not
    fill raise one `ValueError` (one line, first few keys of each) before anything is copied;
    otherwise they are skipped.

    The model may be abstract (`nnx.eval_shape(lambda: Model(..., rngs=nnx.Rngs(0)))`): random
    initialisation is then skipped entirely (on CPU it compiles one kernel per parameter shape), and
    every variable the state_dict fills becomes concrete. Variables it does not fill stay abstract:
    RNG streams (Dropout/MultiheadAttention with dropout > 0) must then be set afresh, e.g. by
    building such a model concretely instead.
    """
    import jax.numpy as jnp

    targets, dropped = _walk(model)
    by_key = {t.torch_key: t for t in targets}
    unexpected = [k for k in state_dict if k not in by_key and k not in dropped]
    # a variable reached under several names (a module held in a plain list and registered with
    # `add_module`: torch's state_dict names only the registered one) is filled through any of them
    filled = {id(by_key[k].variable) for k in by_key if k in state_dict}
    missing = [k for k in by_key if k not in state_dict and id(by_key[k].variable) not in filled]
    if strict and (unexpected or missing):
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing key(s): {preview(missing)}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected key(s): {preview(unexpected)}")
        raise ValueError(f"load_torch_state_dict({type(model).__name__}): " + "; ".join(parts))
    updates = []
    for key, raw in state_dict.items():
        target = by_key.get(key)
        if target is None:
            continue
        value = _to_numpy(raw)
        converted = target.transform(value, target.module)
        current = target.variable.get_raw_value()  # an array, or a ShapeDtypeStruct when abstract
        if tuple(converted.shape) != tuple(current.shape):
            raise ValueError(
                f"load_torch_state_dict: {key} has shape {tuple(value.shape)} "
                f"(-> {tuple(converted.shape)}), but {target.flax_path} has shape {tuple(current.shape)}"
            )
        # A copy, never a view: `tensor.numpy()` shares the torch buffer, jnp.asarray can be
        # zero-copy on CPU, and XLA may then write outputs into that memory, so the torch model
        # and the converted one would update each other's BatchNorm statistics.
        updates.append((target.variable, jnp.array(np.array(converted, copy=True), dtype=current.dtype)))
    for variable, array in updates:
        variable.set_value(array)  # replaces abstract values too (models built under nnx.eval_shape)
