"""Applying precision policies to source code, one pass per target framework.

`torch_policy` rewrites PyTorch modules (autocast regions, fp32 islands, output casts);
`strip` removes what an earlier run inserted, which makes every pass idempotent and
`--policy fp32` an exact undo.
"""
