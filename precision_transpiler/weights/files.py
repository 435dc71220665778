"""Weight files: read torch checkpoints, write and read `.safetensors`/`.npz` for converted models.

Two layouts are written (`ptranspile weights`), told apart by the safetensors header metadata
key `ptranspile.layout`:

- `torch`: NumPy arrays keyed by torch `state_dict` names, in torch's layouts. Any converted Flax
  model loads it with `load_checkpoint` (which runs `load_torch_state_dict`), so one file serves a
  model whatever its precision policy: the transposes and casts happen at load time. A safetensors
  file written by torch (`safetensors.torch.save_file(model.state_dict(), ...)`, the Hugging Face
  hub format) is the same layout, so `load_checkpoint` reads those too.
- `flax-nnx`: arrays keyed by the model's nnx state paths (`layer1.0.conv1.kernel`), in Flax
  layouts and the model's own dtypes, restored with `load_flax_safetensors` (`nnx.update`). It is
  what the Flax model itself holds, with no torch names left: the file to ship with the converted code.

safetensors stores raw little-endian buffers and a JSON header and never unpickles anything,
which is why it is the exchange format here; bfloat16 (and float8) arrays are stored as such via
`ml_dtypes`. NumPy's `.npz` is read too (with `allow_pickle=False`), for arrays saved by hand.
Only `read_torch_checkpoint` imports torch; the rest needs NumPy and `safetensors` (plus JAX/Flax
for the functions that take a model).
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from precision_transpiler.errors import PtranspileError
from precision_transpiler.files import write_atomic

LAYOUT_KEY = "ptranspile.layout"
"""Header metadata key saying which layout a `.safetensors` file holds: `torch` or `flax-nnx`."""
TORCH_LAYOUT, FLAX_LAYOUT = "torch", "flax-nnx"
STATE_DICT_KEYS = ("state_dict", "model_state_dict", "model")
"""Entries of a training checkpoint that may hold the state_dict, tried in this order."""


class CheckpointError(PtranspileError):
    """A weight file that cannot be read or does not fit: missing, not a checkpoint, holding
    Python objects besides tensors, no state_dict found, or names that do not match the model.
    One line, naming the file."""


def _safetensors_numpy() -> Any:
    try:
        import safetensors.numpy
    except ImportError:  # not a dependency of the transpiler itself (static conversion needs none)
        raise CheckpointError("weight files need the safetensors package: pip install safetensors") from None
    return safetensors.numpy


def _is_safetensors(path: Path) -> bool:
    """By suffix, or by content: an 8-byte little-endian header length, then a JSON object."""
    if path.suffix == ".safetensors":
        return True
    try:
        with path.open("rb") as fh:
            head = fh.read(9)
    except OSError:
        return False
    return len(head) == 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < 100_000_000


def _check_file(path: Path) -> None:
    if not path.exists():
        raise CheckpointError(f"{path}: no such file")
    if path.is_dir():
        raise CheckpointError(f"{path}: is a directory, not a checkpoint")


def read_tensors(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(arrays by name, header metadata) of a `.safetensors` or `.npz` file; no torch needed.

    safetensors arrays come back with their stored dtype (bfloat16 as `ml_dtypes.bfloat16`);
    `.npz` files are read with `allow_pickle=False` and have no metadata.
    """
    path = Path(path)
    _check_file(path)
    if path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as data:
                return {name: data[name] for name in data.files}, {}
        except Exception as exc:  # ValueError (pickled objects), zipfile.BadZipFile, OSError
            raise CheckpointError(f"{path}: not a readable .npz file ({_first_line(exc)})") from None
    if not _is_safetensors(path):
        raise CheckpointError(f"{path}: not a .safetensors or .npz file")
    st = _safetensors_numpy()
    from safetensors import safe_open

    with contextlib.suppress(ImportError):
        import ml_dtypes  # noqa: F401  (registers bfloat16/float8 with NumPy, which the reader asks for by name)
    try:
        # safe_open (Rust) maps BF16/F8 to ml_dtypes; safetensors.numpy.load(bytes) cannot.
        with safe_open(str(path), framework="np") as fh:
            metadata = dict(fh.metadata() or {})
        return dict(st.load_file(str(path))), metadata
    except Exception as exc:  # the Rust reader raises its own SafetensorError for corrupt headers
        raise CheckpointError(f"{path}: not a readable .safetensors file ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def write_safetensors(
    path: str | os.PathLike[str], tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None
) -> int:
    """Write arrays as one `.safetensors` file, atomically; return the number of bytes written.

    The file is serialised in memory and renamed into place like `files.write_atomic` (which
    writes text only), so an interrupted run leaves no partial weight file behind.
    """
    st = _safetensors_numpy()
    # np.require, not np.ascontiguousarray, which makes 0-d arrays (num_batches_tracked) 1-d
    arrays = {name: np.require(value, requirements="C") for name, value in tensors.items()}
    try:
        data = st.save(arrays, metadata=dict(metadata) if metadata else None)
    except Exception as exc:  # a dtype safetensors has no code for (object arrays, ...)
        raise CheckpointError(f"{path}: cannot store these arrays as safetensors ({_first_line(exc)})") from None
    write_atomic(Path(path), data)
    return len(data)


# ---------------------------------------------------------------------------------------------
# torch checkpoints


def _torch_to_numpy(name: str, tensor: Any, notes: list[str]) -> np.ndarray:
    """A CPU torch tensor as a NumPy array with the same dtype and bits.

    NumPy has no bfloat16/float8: those are reinterpreted as `ml_dtypes` arrays through an integer
    view (exact), or, without ml_dtypes, upcast to float32 (exact as well, twice the bytes) with a note.
    """
    import torch

    if tensor.is_sparse or tensor.is_quantized or tensor.layout != torch.strided:
        raise CheckpointError(f"entry {name!r} is a {tensor.layout}/quantized tensor; only dense tensors are supported")
    tensor = tensor.detach().cpu().contiguous()
    exotic = {
        torch.bfloat16: ("bfloat16", torch.int16),
        torch.float8_e4m3fn: ("float8_e4m3fn", torch.uint8),
        torch.float8_e5m2: ("float8_e5m2", torch.uint8),
        torch.float8_e4m3fnuz: ("float8_e4m3fnuz", torch.uint8),
        torch.float8_e5m2fnuz: ("float8_e5m2fnuz", torch.uint8),
    }
    if tensor.dtype in exotic:
        ml_name, carrier = exotic[tensor.dtype]
        try:
            import ml_dtypes
        except ImportError:
            notes.append(f"{tensor.dtype} stored as float32 (install ml_dtypes to keep it)")
            return tensor.float().numpy()
        return tensor.view(carrier).numpy().view(getattr(ml_dtypes, ml_name))
    try:
        return tensor.numpy()
    except (TypeError, RuntimeError) as exc:
        raise CheckpointError(f"entry {name!r}: {tensor.dtype} has no NumPy equivalent ({_first_line(exc)})") from None


def _is_tensor_dict(value: Any) -> bool:
    import torch

    return isinstance(value, Mapping) and bool(value) and all(isinstance(v, torch.Tensor) for v in value.values())


def preview(keys: list[str], limit: int = 6) -> str:
    shown = ", ".join(repr(k) for k in keys[:limit])
    return shown + (f", ... (+{len(keys) - limit})" if len(keys) > limit else "")


def _torch_load(path: Path) -> Any:
    """`torch.load(weights_only=True)`: tensors, containers and primitives only, never a class a
    file names (unpickling arbitrary objects runs code from the file)."""
    with path.open("rb") as fh:
        head = fh.read(4)
    # torch.save writes a zip archive (PK..), or with the legacy format a pickle (protocol 2+: 0x80)
    if head != b"PK\x03\x04" and not head.startswith(b"\x80"):
        raise CheckpointError(f"{path}: not a torch checkpoint (neither a torch.save archive nor a pickle)")
    import torch

    try:
        with warnings.catch_warnings():  # e.g. "pickle protocol 4": errors are reported in one line below
            warnings.simplefilter("ignore")
            return torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        text = str(exc)
        if "Weights only load failed" not in text:
            raise CheckpointError(f"{path}: not a torch checkpoint ({_first_line(exc)})") from None
        found = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        if found:
            raise CheckpointError(
                f"{path}: torch.load(weights_only=True) refused it: it pickles the Python object "
                f"{found.group(1)} (a whole model?); ptranspile does not unpickle arbitrary objects: "
                "save model.state_dict() instead"
            ) from None
        reason = re.search(r"WeightsUnpickler error:\s*(.+)", text)
        detail = reason.group(1).strip() if reason else "it holds more than tensors and containers"
        raise CheckpointError(
            f"{path}: torch.load(weights_only=True) refused it ({detail}); is it a torch.save file of a state_dict?"
        ) from None


def read_torch_checkpoint(
    path: str | os.PathLike[str], *, key: str | None = None
) -> tuple[dict[str, np.ndarray], str | None, list[str]]:
    """The state_dict in a torch checkpoint as NumPy arrays: (arrays, entry used, notes).

    `path` is a `torch.save` file, loaded with `weights_only=True`, or a `.safetensors`/`.npz`
    file (read without torch). The state_dict is the entry `key` when given, else the file itself
    when every value is a tensor, else the first of `STATE_DICT_KEYS` (`state_dict`,
    `model_state_dict`, `model`) that holds one; the entry used is returned (None for the file
    itself) so callers can say which. Training checkpoints (`{"epoch": 3, "model": ..., "optimizer": ...}`) need no
    unpacking by hand that way. `notes` says what was changed (bfloat16 upcast without ml_dtypes).
    """
    path = Path(path)
    _check_file(path)
    if path.suffix == ".npz" or _is_safetensors(path):
        if key is not None:
            raise CheckpointError(f"{path}: --key applies to torch.save checkpoints; this file holds tensors only")
        arrays, metadata = read_tensors(path)
        if metadata.get(LAYOUT_KEY) == FLAX_LAYOUT:
            raise CheckpointError(f"{path}: holds Flax nnx state paths (written with --model), not torch names")
        if not arrays:
            raise CheckpointError(f"{path}: holds no tensors")
        return arrays, None, []
    loaded = _torch_load(path)
    if not isinstance(loaded, Mapping):
        raise CheckpointError(f"{path}: holds a {type(loaded).__name__}, not a state_dict (a dict of tensors)")
    used: str | None
    if key is not None:
        if key not in loaded:
            raise CheckpointError(f"{path}: no entry {key!r} (top-level keys: {preview([str(k) for k in loaded])})")
        state, used = loaded[key], key
        if not _is_tensor_dict(state):
            raise CheckpointError(f"{path}: entry {key!r} is not a state_dict (a dict of tensors)")
    elif _is_tensor_dict(loaded):
        state, used = loaded, None
    else:
        used = next((k for k in STATE_DICT_KEYS if _is_tensor_dict(loaded.get(k))), None)
        if used is None:
            raise CheckpointError(
                f"{path}: not a state_dict, and no entry {', '.join(map(repr, STATE_DICT_KEYS))} holds one "
                f"(top-level keys: {preview([str(k) for k in loaded])}); pass --key KEY"
            )
        state = loaded[used]
    notes: list[str] = []
    arrays = {str(name): _torch_to_numpy(str(name), value, notes) for name, value in state.items()}
    return arrays, used, sorted(set(notes))


# ---------------------------------------------------------------------------------------------
# converted Flax models


def load_checkpoint(model: Any, path: str | os.PathLike[str], *, strict: bool = True) -> None:
    """Load a torch-named weight file into a converted Flax NNX model, in place.

    `path` is a `.safetensors` file written by `ptranspile weights CKPT --to jax -o OUT` (or by
    `safetensors.torch.save_file(model.state_dict(), ...)`), or an `.npz` of arrays keyed by torch
    names; it is read without torch and passed to `load_torch_state_dict`, which transposes and
    casts each array to the model's layout and dtype. With `strict`, names that do not match raise
    one `CheckpointError` line before anything is copied. A file in the Flax layout (written with
    `--model`) is refused with a pointer to `load_flax_safetensors`.
    """
    from precision_transpiler.weights.torch_to_flax import load_torch_state_dict

    tensors, metadata = read_tensors(path)
    if metadata.get(LAYOUT_KEY) == FLAX_LAYOUT:
        raise CheckpointError(f"{path}: holds Flax nnx state paths (written with --model); use load_flax_safetensors")
    try:
        load_torch_state_dict(model, tensors, strict=strict)
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def _flax_variables(model: Any) -> dict[str, tuple[tuple[Any, ...], Any]]:
    """'a.0.kernel' -> (nnx path, Variable) for every variable worth saving.

    RNG state is left out (keys are regenerated from `rngs=`, and typed key arrays have no file
    format), and so are `persistent=False` variables, which the constructor recomputes, as torch
    leaves non-persistent buffers out of `state_dict()`. Shared variables appear once, under the
    first path `nnx.state` gives them.
    """
    from flax import nnx

    found: dict[str, tuple[tuple[Any, ...], Any]] = {}
    for nnx_path, variable in nnx.to_flat_state(nnx.state(model)):
        if isinstance(variable, nnx.RngState) or variable.get_metadata().get("persistent", True) is False:
            continue
        name = ".".join(str(part) for part in nnx_path)
        if name in found:
            raise CheckpointError(f"two variables of {type(model).__name__} are both named {name!r}")
        found[name] = (tuple(nnx_path), variable)
    return found


def flax_state_arrays(model: Any) -> dict[str, np.ndarray]:
    """The model's variables as NumPy arrays keyed by nnx path ('layer1.0.conv1.kernel'), in the
    model's own layouts and dtypes (bfloat16 stays `ml_dtypes.bfloat16`)."""
    import jax

    arrays = {}
    for name, (_, variable) in _flax_variables(model).items():
        value = variable.get_raw_value()
        if isinstance(value, jax.ShapeDtypeStruct):
            raise CheckpointError(
                f"{name} of {type(model).__name__} has no value (an abstract model); load weights first"
            )
        arrays[name] = np.asarray(value)
    return arrays


def save_flax_safetensors(model: Any, path: str | os.PathLike[str], metadata: Mapping[str, str] | None = None) -> int:
    """Write a Flax NNX model's variables to `.safetensors` keyed by nnx path (layout `flax-nnx`),
    atomically; return the bytes written. `load_flax_safetensors` restores it."""
    from precision_transpiler.version import __version__

    header = {LAYOUT_KEY: FLAX_LAYOUT, "ptranspile.version": __version__, **(metadata or {})}
    return write_safetensors(path, flax_state_arrays(model), header)


def load_flax_safetensors(model: Any, path: str | os.PathLike[str], *, strict: bool = True) -> None:
    """Restore a Flax NNX model from a `.safetensors` file keyed by nnx path, in place (`nnx.update`).

    The file is what `ptranspile weights CKPT --to jax --model CONVERTED.py --entry EXPR -o OUT`
    (or `save_flax_safetensors`) writes: values already in Flax layouts, so nothing is transposed,
    only cast to each variable's dtype. The model may be abstract (built under `nnx.eval_shape`),
    which skips random initialisation. With `strict`, missing and unexpected names raise one
    `CheckpointError` line before anything changes; a shape mismatch always does. A torch-named
    file is refused with a pointer to `load_checkpoint`.
    """
    import jax.numpy as jnp
    from flax import nnx

    tensors, metadata = read_tensors(path)
    if metadata.get(LAYOUT_KEY) == TORCH_LAYOUT:
        raise CheckpointError(f"{path}: holds torch state_dict names; use load_checkpoint")
    variables = _flax_variables(model)
    if strict:
        missing = [name for name in variables if name not in tensors]
        unexpected = [name for name in tensors if name not in variables]
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"{len(missing)} missing key(s): {preview(missing, 5)}")
            if unexpected:
                parts.append(f"{len(unexpected)} unexpected key(s): {preview(unexpected, 5)}")
            raise CheckpointError(f"{path}: load_flax_safetensors({type(model).__name__}): " + "; ".join(parts))
    updates = []
    for name, (nnx_path, variable) in variables.items():
        if name not in tensors:
            continue
        value, current = tensors[name], variable.get_raw_value()  # an array or a ShapeDtypeStruct
        if tuple(value.shape) != tuple(current.shape):
            raise CheckpointError(f"{path}: {name} has shape {tuple(value.shape)}, the model's {tuple(current.shape)}")
        updates.append((nnx_path, jnp.asarray(value, dtype=current.dtype)))
    nnx.update(model, nnx.from_flat_state(updates))
