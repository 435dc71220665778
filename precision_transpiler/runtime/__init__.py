"""The runtime that converted code carries with it: torch's semantics written for the target.

A converted file calls definitions from here (rules and the mapping tables emit qualified names
such as `precision_transpiler.runtime.flax.conv.Conv2d`), and the converter copies the definitions
it uses, with everything they need, into the output (convert/vendor.py), so an output stands
alone. Layout:

- `common.py`: framework-free arithmetic both targets share across subjects (`_tuple`,
  interpolation indices, im2col's, ...) and torch stand-ins that need no framework; standard
  library and numpy only.
- `checkpoint.py`: `torch.load` without torch (checkpoints read into NumPy arrays).
- `pool.py`, `padding.py`, `losses.py`, `margin_losses.py`, `distributions.py`: the framework-free halves of those
  subjects (torch's output sizes, padding rules, loss formulas), written once; where they need
  array operations they take the target's as an argument (`ops`: the `_ArrayOps` of each
  `functional.py`, the same names over jax.numpy or keras.ops).
- `flax/` and `keras/`: the same subjects under the same file names (`SUBJECTS` below: `conv`,
  `pool`, `norm`, `attention`, `functional`, `tensor`, `tensor_math`, `losses`, `layers`,
  `modules`, `module_api`, ...), and the same names for the same torch behaviour on both sides.
- `torch/`: what torch code under a precision policy needs (`policy.py`).
- `flax/policy.py`, `keras/policy.py`, `torch/policy.py`: the precision policies at run time,
  which a policy's generated block binds (not torch semantics: `POLICY_MODULES` below); they
  import inside their functions, so their copies bring no import line `--policy fp32` would leave.
- `policy.py` and `device.py`: their framework-free halves (output classes, override globs, the
  `--device auto` decision), kept apart from `common.py` for the same reason.

Rules every runtime module keeps, because its definitions are copied as text: module-level code
is imports, constants and definitions; a definition that needs another runtime module's names
imports them unaliased at module level (`from precision_transpiler.runtime.common import _tuple`),
which the copying follows; nothing here imports a framework the target does not have; and no
module has `from __future__ import annotations`, which copied definitions do not take along
(annotations are evaluated as in the output: a class names itself in quotes).

This module names the runtime modules (`runtime_module`), so the code that emits or recognises
them does not spell the paths itself; it imports nothing, so naming costs no framework import.
"""

from __future__ import annotations

PACKAGE = "precision_transpiler.runtime"
#: The runtime package of each target framework (the `to` of a conversion).
TARGET_PACKAGES = {"jax": "flax", "tf": "keras", "torch": "torch"}
#: The runtime modules of the precision policies (a policy's generated block names their
#: definitions; nothing else does): `--policy fp32` leaves none of them behind (precision/strip.py).
POLICY_MODULES = frozenset({"policy", "device", "flax.policy", "keras.policy", "torch.policy"})
#: The files of `flax/` and `keras/` (the same on both sides; tests/runtime/test_layout.py).
SUBJECTS = (
    "autograd",
    "conv",
    "pool",
    "norm",
    "attention",
    "functional",
    "tensor",
    "tensor_math",
    "losses",
    "activations",
    "containers",
    "modules",
    "layers",
    "module_api",
    "transformers",
    "einops",
    "device",
    "distance",
    "distributions",
    "dropout",
    "embedding",
    "margin_losses",
    "padding",
    "parametrize",
    "recurrent",
    "reshape",
    "rng",
    "transformer",
    "unpool",
    "upsampling",
    "policy",
)


#: The framework-free modules beside `flax/` and `keras/`, which both take definitions from
#: (`SHARED` and nothing else: tests/runtime/test_layout.py): the twins' shared arithmetic and the
#: framework-free halves of their subjects.
SHARED = (
    "common",
    "device",
    "policy",
    "pool",
    "padding",
    "losses",
    "margin_losses",
    "upsampling",
    "distributions",
    "checkpoint",
    "factories",
    "dtypes",
)


def imports_torch_semantics(code: str) -> bool:
    """`code` imports runtime definitions other than the precision policies' (POLICY_MODULES), as a
    model converted from torch reads when its copies or its runtime module's import were read back
    (a file of Keras or Flax code people wrote imports only its policy's)."""
    import re

    found = re.findall(r"from " + re.escape(PACKAGE) + r"\.([\w.]+) import", code)
    return any(module not in POLICY_MODULES for module in found)


def runtime_module(target: str | None, subject: str) -> str:
    """The dotted name of a runtime module: `runtime_module("jax", "conv")` is
    'precision_transpiler.runtime.flax.conv'; `target=None` names a framework-free module
    (`runtime_module(None, "common")`)."""
    if target is None:
        return f"{PACKAGE}.{subject}"
    return f"{PACKAGE}.{TARGET_PACKAGES[target]}.{subject}"


def runtime_name(target: str | None, subject: str, name: str) -> str:
    """The qualified name of a runtime definition, as rules emit it."""
    return f"{runtime_module(target, subject)}.{name}"


def runtime_package_dir(target: str) -> str:
    """The folder of a target's runtime modules, found without importing them (their package
    imports the framework)."""
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), TARGET_PACKAGES[target])
