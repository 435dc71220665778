"""Weight transfer between frameworks: a torch `state_dict` into a converted Flax NNX or Keras model,
and the weight files `ptranspile weights` writes (torch-named `.safetensors`, nnx-path-named
`.safetensors` for Flax, `.weights.h5` for Keras)."""

from precision_transpiler.weights.files import (
    CheckpointError,
    flax_state_arrays,
    load_checkpoint,
    load_flax_safetensors,
    read_tensors,
    read_torch_checkpoint,
    save_flax_safetensors,
    write_safetensors,
)
from precision_transpiler.weights.keras_files import load_checkpoint_keras, load_keras_weights, save_keras_weights
from precision_transpiler.weights.torch_to_flax import (
    TORCH_PARAM_RULES,
    flax_state_to_torch_keys,
    load_torch_state_dict,
    state_dict_mismatch,
    torch_keys_to_flax_paths,
)
from precision_transpiler.weights.torch_to_keras import load_torch_state_dict_keras

__all__ = [
    "TORCH_PARAM_RULES",
    "CheckpointError",
    "flax_state_arrays",
    "flax_state_to_torch_keys",
    "load_checkpoint",
    "load_checkpoint_keras",
    "load_flax_safetensors",
    "load_keras_weights",
    "load_torch_state_dict",
    "load_torch_state_dict_keras",
    "read_tensors",
    "read_torch_checkpoint",
    "save_flax_safetensors",
    "save_keras_weights",
    "state_dict_mismatch",
    "torch_keys_to_flax_paths",
    "write_safetensors",
]
