"""Weight transfer between frameworks: a torch `state_dict` into a converted Flax NNX model."""

from precision_transpiler.weights.torch_to_flax import (
    TORCH_PARAM_RULES,
    flax_state_to_torch_keys,
    load_torch_state_dict,
    torch_keys_to_flax_paths,
)

__all__ = ["TORCH_PARAM_RULES", "flax_state_to_torch_keys", "load_torch_state_dict", "torch_keys_to_flax_paths"]
