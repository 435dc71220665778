"""Weight transfer between frameworks: a torch `state_dict` into a converted Flax NNX model, and the
weight files `ptranspile weights` writes (torch-named or nnx-path-named `.safetensors`)."""

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
from precision_transpiler.weights.torch_to_flax import (
    TORCH_PARAM_RULES,
    flax_state_to_torch_keys,
    load_torch_state_dict,
    state_dict_mismatch,
    torch_keys_to_flax_paths,
)

__all__ = [
    "TORCH_PARAM_RULES",
    "CheckpointError",
    "flax_state_arrays",
    "flax_state_to_torch_keys",
    "load_checkpoint",
    "load_flax_safetensors",
    "load_torch_state_dict",
    "read_tensors",
    "read_torch_checkpoint",
    "save_flax_safetensors",
    "state_dict_mismatch",
    "torch_keys_to_flax_paths",
    "write_safetensors",
]
