"""The policy passes: one LibCST transformer per target framework, each applying a `Policy` to
one module of its framework and recording a `PrecisionDecision` per layer or op it touches.

- `torch` (torch -> torch): `@_ptranspile_policy` on every `forward` of an nn.Module subclass
  (the forward runs under `torch.autocast`, the outermost module's outputs are cast to the
  output dtype), `_ptranspile_fp32(x)` around the inputs of keep-fp32 ops, one generated block.
- `keras` (tf -> tf, Keras code people wrote): `dtype=` on `keras.layers.*` constructors
  through generated constants, `@_ptranspile_layer(...)` on the file's Layer/Model subclasses,
  a float32 output Activation on functional models, float32 inputs for keep-fp32 ops.
- `keras_torch` (torch -> tf): the policy as torch runs it, `model.to(param)` plus autocast:
  Keras dtype policies per layer, layers as autocast regions that hand results back in their
  input's dtype, `_ptranspile_autocast(op, ...)` for functional matmuls, fp32 islands.
- `flax` (jax -> jax and torch -> jax): `dtype`/`param_dtype` on Flax NNX layers, fp32
  accumulation (`preferred_element_type`) for low-precision linear/conv, float32 inputs for
  keep-fp32 functions, a `__call__` wrapper that casts the outermost call's outputs.
- `base`: what every pass shares (traversal path, name resolution, positions, decisions, the
  nodes of the generated block).

The generated block keeps only what is the file's own (the `_PTRANSPILE_*` constants and short
bindings of the `_ptranspile_*` names to runtime definitions); what runs is real code in
`precision_transpiler/runtime/<framework>/policy.py`, which the pipeline's VendorRuntime stage
copies in or imports like every runtime definition.

Everything inserted is named `_ptranspile_*`/`_PTRANSPILE_*`, so `precision.strip` removes it
exactly. `precision.apply` chooses and runs the pass.
"""
