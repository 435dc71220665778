"""The contract between the framework-neutral verifier and one framework.

The verifier (`verify.runner`) never touches torch/JAX/Keras itself: it builds both models
through the user's entry expression, then asks an adapter to put them in inference mode, make
their weights identical, run them on the same inputs and hand back NumPy arrays. One adapter
per framework, one file each (`torch_adapter.py`, `flax_adapter.py`, `keras_adapter.py`),
registered by framework name in `adapters/__init__.py`.

Layer captures are keyed by *module path* as the framework spells attribute paths
(`layer1.0.conv1`, `blocks.3.attn`): converted code keeps the user's attribute names, so the same
path names the same layer on both sides and across frameworks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass
class Capture:
    """What one forward run produced.

    `outputs`: the model's flattened outputs, in a stable order, as `(name, array, dtype)` where
    `name` is a path into the output structure ("out", "out[0]", "out.logits"), `array` a NumPy
    array (floating outputs as float32 or float64, integer ones as they are) and `dtype` the
    framework dtype's name ("float32", "bfloat16", "int64").
    `layers`: module path -> the floating output of every call of that submodule, in call order
    (the first floating array of a tuple/dict output), as float32 NumPy arrays. Empty unless
    capture was requested. The root module is not a layer.
    `order`: module paths in the order of their first call.
    `kinds`: module path -> class name.
    """

    outputs: list[tuple[str, np.ndarray, str]]
    layers: dict[str, list[np.ndarray]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)


class Adapter(Protocol):
    """One framework's side of verification. All methods run real framework code."""

    name: str  # "torch", "jax" or "tf" (the CLI's framework names)

    def is_model(self, obj: Any) -> bool:
        """Whether `obj` (what the entry expression returned) is a model of this framework."""

    def prepare(self, model: Any, inputs: list[np.ndarray], *, seed: int, perturb: bool, calibrate_bn: bool) -> None:
        """Put `model` (the original) in inference mode and make its weights informative.

        `perturb`: add seeded noise to every floating parameter and buffer, constant-initialised
        ones included (zero-init residual scales and heads hide whole branches otherwise,
        docs/precision-reference.md#verification-with-random-weights). `calibrate_bn`: recompute
        BatchNorm running statistics on
        `inputs` first (random-init deep CNNs vanish or explode otherwise).
        """

    def copy_weights(self, source: Any, target: Any) -> None:
        """Make `target`'s parameters and buffers equal to `source`'s (same framework, same
        structure), cast to the dtypes `target` stores them in; put `target` in inference mode."""

    def run(self, model: Any, inputs: list[np.ndarray], *, capture: bool, compiled: bool = False) -> Capture:
        """One inference-mode forward on `inputs` (converted to this framework's arrays with
        the given dtypes), optionally capturing every named submodule's output. `compiled`
        (asked for full-precision runs only): the adapter may run the forward through its
        framework's compiler where that changes nothing but speed, falling back to running it
        eagerly when the model cannot be compiled."""

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
        """The framework's *own* low-precision run of the original model, the yardstick for a
        policy's tolerance: torch.autocast for torch, a Keras dtype policy (the model rebuilt
        under it with `rebuild()`, weights copied), Flax layers with dtype=`compute`.
        `param` != "float32" means parameters are stored in low precision too (pure bf16/fp16).
        `model` must be left as it was."""

    def timed_forward(self, model: Any, inputs: list[np.ndarray], *, compute: str | None = None) -> Callable[[], Any]:
        """A zero-argument function running one inference forward the way the framework is
        deployed (torch eager under no_grad, `jax.jit`, `tf.function`) and waiting for its result:
        what `--time` measures. `compute` (torch): under autocast to that dtype."""
        raise NotImplementedError

    def layer_source(self, model: Any, path: str) -> str | None:
        """`file:line` where the layer at `path` is created (the `self.x = ...` line), if known."""


def flatten_outputs(
    value: Any, is_tensor: Callable[[Any], bool], name: str = "out", depth: int = 0
) -> list[tuple[str, Any]]:
    """(name, tensor) for every tensor in a (nested) model output, named the same way in every
    framework so outputs pair across frameworks: tuples/lists by index (`out[0]`), namedtuples
    by field (`out.logits`), dataclasses by field too, dicts (and transformers' ModelOutput) by key
    (`out['logits']`), an object that is the whole output, or a distribution anywhere, by its
    public attributes (`out.q_values`, `out.base_dist.loc`)."""
    if is_tensor(value):
        return [(name, value)]
    if isinstance(value, dict):
        return [pair for key, item in value.items() for pair in flatten_outputs(item, is_tensor, f"{name}[{key!r}]")]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [
            pair for key in value._fields for pair in flatten_outputs(getattr(value, key), is_tensor, f"{name}.{key}")
        ]
    if isinstance(value, list | tuple):
        return [pair for i, item in enumerate(value) for pair in flatten_outputs(item, is_tensor, f"{name}[{i}]")]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # kornia's DISKFeatures
        return [
            pair
            for entry in dataclasses.fields(value)
            for pair in flatten_outputs(getattr(value, entry.name), is_tensor, f"{name}.{entry.name}")
        ]
    attributes = getattr(value, "__dict__", None)
    walked = name == "out" or depth > 0 or callable(getattr(value, "log_prob", None))
    if walked and isinstance(attributes, dict) and not isinstance(value, type) and not callable(value):
        # the whole output an object (pfrl's `DiscreteActionValue`), or a distribution anywhere
        # (`Independent(Normal(loc, scale))`): its public attributes, by name, which the converted
        # class and the runtime's distributions keep. Other objects inside an output (a cache of
        # past keys and values) stay out, as before
        return (
            [
                pair
                for key in sorted(k for k in attributes if not k.startswith("_"))
                for pair in flatten_outputs(attributes[key], is_tensor, f"{name}.{key}", depth + 1)
            ]
            if depth < 4
            else []
        )
    return []
