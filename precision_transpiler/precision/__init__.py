"""Precision policies: what a policy is, and how one is applied to source code.

Where things are:

- `policy` (precision/policy.py): the policy model. `resolve_policy` accepts a built-in name
  (`fp32`, `mixed`, `mixed-bf16`, `mixed-fp16`, `bf16`, `fp16`), a jmp-style string
  (`params=float32,compute=bfloat16,output=float32`) or a path to a policy YAML file (which may
  `extends:` a built-in); a `Policy` says, per op class, which dtype parameters are stored in,
  which dtype the op computes in and which dtype it returns. The built-ins live in
  mappings/policies/builtin.yaml.
- `passes/` (precision/passes/): the rewriting, one LibCST pass per target framework (`torch`,
  `keras`, `keras_torch` for torch models converted to Keras, `flax`), on shared helpers in
  `passes/base.py`.
- `strip` (precision/strip.py): removes everything an earlier run inserted, which makes every
  pass idempotent and `--policy fp32` an exact undo.
- `apply` (precision/apply.py): what the pipeline calls: strip, run the framework's pass, put
  the helper block after the leading imports.

The public policy API is re-exported here: `from precision_transpiler.precision import
resolve_policy`.
"""

from __future__ import annotations

from precision_transpiler.precision.policy import (
    BUILTIN_POLICIES,
    DEVICES,
    DTYPES,
    OP_CLASSES,
    Override,
    Policy,
    Precision,
    resolve_policy,
)

__all__ = [
    "BUILTIN_POLICIES",
    "DEVICES",
    "DTYPES",
    "OP_CLASSES",
    "Override",
    "Policy",
    "Precision",
    "resolve_policy",
]
