"""Copy a torch `state_dict` into a Keras model built from the torch-semantics shims.

The Keras shims (precision_transpiler/runtime/keras/) keep torch's weight names and layouts
(`weight` OIHW, `running_var`, `in_proj_weight`, ...) and converted models keep torch's attribute
names, so a torch key `<module path>.<name>` names a Keras variable directly: walk the module path
from the model (attributes; children of Sequential/ModuleList/ModuleDict by their torch names
"0", "1", ... or keys; elements of plain lists/dicts Keras tracks), then take the attribute
`<name>`, and copy the value as is (same shape, cast to the variable's dtype). No layout
transforms: layers whose names or layouts differ from torch's (native `keras.layers.Dense`, ...)
are not covered.

Values are torch tensors (converted without importing torch: `.detach().cpu()`, bf16 via float32)
or anything `numpy.asarray` accepts. Keys of shared modules (torch lists a shared module under
every name) assign the same variable twice, which is harmless.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def _to_numpy(value: Any) -> np.ndarray:
    """A torch tensor (without importing torch) or array-like as a numpy array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    return np.asarray(value)


def _child(obj: Any, part: str) -> Any:
    """One step of a torch module path: a container child by torch name, else an attribute."""
    containers = getattr(obj, "_torch_modules", None)  # the shims' Sequential/ModuleList/ModuleDict
    if containers is not None and (not isinstance(containers, list) or part.lstrip("-").isdigit()):
        return containers[int(part)] if isinstance(containers, list) else containers[part]
    renamed = {torch: own for own, torch in getattr(type(obj), "_torch_renamed", {}).items()}
    if part in renamed:  # an attribute renamed because Keras owns its name (`self.name_`)
        return getattr(obj, renamed[part])
    if hasattr(obj, part):
        return getattr(obj, part)
    if isinstance(obj, list | tuple) and part.lstrip("-").isdigit():
        return obj[int(part)]
    if isinstance(obj, Mapping) and part in obj:
        return obj[part]
    raise KeyError(part)


def resolve_torch_key(model: Any, key: str) -> Any:
    """The Keras variable that torch key `key` (e.g. "layer1.0.bn1.running_var") names in `model`."""
    import keras

    obj = model
    parts = key.split(".")
    for i, part in enumerate(parts):
        try:
            obj = _child(obj, part)
        except (KeyError, IndexError, ValueError) as error:
            raise KeyError(f"{key}: no {'.'.join(parts[: i + 1])!r} in the Keras model") from error
    if not isinstance(obj, keras.Variable):
        raise KeyError(f"{key}: names a {type(obj).__name__}, not a Keras variable")
    return obj


def _non_persistent_buffers(model: Any) -> set[int]:
    """Variables of `register_buffer(..., persistent=False)` in converted modules (TorchModule
    keeps their names in `_torch_non_persistent`): torch's state_dict leaves them out."""
    flatten = getattr(model, "_flatten_layers", None)
    layers = list(flatten(include_self=True, recursive=True)) if callable(flatten) else [model]
    out: set[int] = set()
    for layer in layers:
        for name in getattr(layer, "_torch_non_persistent", ()):
            variable = getattr(layer, name, None)
            if variable is not None:
                out.add(id(variable))
    return out


def load_torch_state_dict_keras(model: Any, state_dict: Mapping[str, Any], *, strict: bool = True) -> list[str]:
    """Assign every entry of a torch `state_dict` to the same-named variable of a Keras model.

    Shape mismatches always raise; with `strict` (torch's default) so do keys without a Keras
    variable and Keras weights (`model.weights`: parameters and non-trainable buffers, not
    seed-generator state; not the non-persistent buffers of converted modules) that no key
    assigned. The ValueError lists every problem, and is raised before anything is assigned.
    Returns the paths of the Keras weights left unassigned (empty when strict).
    """
    from keras import ops

    problems: list[str] = []
    pending: list[tuple[Any, np.ndarray]] = []
    for key, value in state_dict.items():
        try:
            variable = resolve_torch_key(model, key)
        except KeyError as error:
            if strict:
                problems.append(str(error.args[0]))
            continue
        array = _to_numpy(value)
        if tuple(array.shape) != tuple(variable.shape):
            problems.append(f"{key}: torch shape {tuple(array.shape)} != Keras shape {tuple(variable.shape)}")
            continue
        pending.append((variable, array))
    assigned = {id(v) for v, _ in pending} | _non_persistent_buffers(model)
    missing = [w.path for w in model.weights if id(w) not in assigned]
    if strict and missing:
        problems += [f"Keras weight {path!r} has no torch key" for path in missing]
    if problems:
        raise ValueError("state_dict does not match the Keras model:\n  " + "\n  ".join(problems))
    for variable, array in pending:
        variable.assign(ops.cast(array, variable.dtype))
    return missing
