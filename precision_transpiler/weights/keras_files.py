"""Weight files for torch models converted to Keras 3 (`--to tf`).

Two files, as for Flax (weights/files.py), because a checkpoint is wanted at two moments:

- the torch-named `.safetensors` file (`ptranspile weights CKPT --to tf -o OUT.safetensors`):
  NumPy arrays under torch's `state_dict` names, loaded into any converted Keras model by
  `load_checkpoint_keras` (which runs `load_torch_state_dict_keras`: each array is assigned to
  the same-named variable, cast to its dtype), whatever precision policy the model was converted
  with;
- the Keras `.weights.h5` file (`--model CONVERTED.py --entry EXPR -o OUT.weights.h5`): the
  model's own variables as Keras saves them (`keras.saving` `save_weights_only`, keyed by the
  layers' attribute structure, not by the global layer names Keras numbers per process), loaded
  with `load_keras_weights` or, for a `keras.Model`, `model.load_weights`. No torch names left:
  the file to ship with the converted code.

Keras' weights-only save/load functions live in `keras.src.saving.saving_lib` (Keras 3.0-3.15):
`keras.Model.save_weights` calls them, but converted torch modules are `keras.layers.Layer`s,
which have no such method.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from precision_transpiler.weights.files import FLAX_LAYOUT, LAYOUT_KEY, CheckpointError, read_tensors

KERAS_SUFFIX = ".weights.h5"


def load_checkpoint_keras(model: Any, path: str | os.PathLike[str], *, strict: bool = True) -> list[str]:
    """Load a torch-named weight file (`.safetensors` or `.npz`) into a converted Keras model, in
    place; returns the Keras weights left unassigned (empty when strict). Names that do not match
    raise one `CheckpointError` line before anything is assigned."""
    from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras

    tensors, metadata = read_tensors(path)
    if metadata.get(LAYOUT_KEY) == FLAX_LAYOUT:
        raise CheckpointError(f"{path}: holds Flax nnx state paths, not torch names; it is for the Flax model")
    try:
        return load_torch_state_dict_keras(model, tensors, strict=strict)
    except ValueError as exc:
        raise CheckpointError(f"{path}: {' '.join(str(exc).split())}") from None


def save_keras_weights(model: Any, path: str | os.PathLike[str]) -> int:
    """Write a Keras model's (or layer's) variables to `OUT.weights.h5`; return the bytes written.
    Written next to OUT first and renamed, so a failure leaves no half-written file."""
    from keras.src.saving import saving_lib

    out = Path(path)
    if not out.name.endswith(KERAS_SUFFIX):
        raise CheckpointError(f"{out}: a Keras weights file is named *{KERAS_SUFFIX}")
    partial = out.with_name(out.name[: -len(KERAS_SUFFIX)] + ".partial" + KERAS_SUFFIX)
    try:
        saving_lib.save_weights_only(model, str(partial))
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out.stat().st_size


def load_keras_weights(model: Any, path: str | os.PathLike[str]) -> None:
    """Restore a converted Keras model from the `.weights.h5` file `save_keras_weights` (or
    `ptranspile weights --to tf --model ...`) wrote, in place. The model must be built the same
    way (same `--entry`); a file that does not fit raises one `CheckpointError` line."""
    from keras.src.saving import saving_lib

    if not Path(path).is_file():
        raise CheckpointError(f"{path}: no such file")
    try:
        saving_lib.load_weights_only(model, str(path))
    except (ValueError, KeyError) as exc:
        raise CheckpointError(
            f"{path} does not fit {type(model).__name__}: {' '.join(str(exc).split())[:300]}"
        ) from None
