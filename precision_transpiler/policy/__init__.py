"""Precision policies: which dtype parameters, computation and outputs get.

`resolve_policy` accepts a built-in name (`fp32`, `mixed`, `mixed-bf16`, `mixed-fp16`, `bf16`,
`fp16`), a jmp-style string (`params=float32,compute=bfloat16,output=float32`) or a path to a
policy YAML file. The rewriting that applies a policy inside a framework builds on this model.
"""

from __future__ import annotations

from precision_transpiler.policy.model import BUILTIN_POLICIES, Policy, resolve_policy

__all__ = ["BUILTIN_POLICIES", "Policy", "resolve_policy"]
