"""Flax NNX definitions with torch's signatures and torch's exact semantics, for converted code.

Why this package exists: a torch model converted to Flax NNX keeps its torch layouts (NCHW images,
NCL sequences, sequence-first attention) and its torch defaults, but the plain Flax/JAX API differs
silently in exactly those places (docs/precision-reference.md#framework-defaults-that-differ): Flax
convolutions are NHWC with 'SAME' padding, JAX's SAME padding and pooling strides differ from
torch's, Flax BatchNorm's momentum is the decay of the old statistics and its running variance is
biased, Flax attention masks use the opposite polarity, `jax.nn.gelu` is the tanh approximation,
... Layers with identical semantics are mapped to nnx directly by the converter (nnx.Linear,
nnx.Embed, nnx.LayerNorm with `epsilon`); everything else is mapped to the definitions here. Its
files match those of the Keras twin (`precision_transpiler.runtime.keras`) one for one.

Rules these modules keep (tests/runtime/test_flax_runtime.py and tests/runtime guard them), because the
converter copies the definitions a converted file needs into that file: they import jax, numpy,
flax.nnx and the standard library (einops.py also einops, which code using einops' layers
imports anyway), never torch; every top-level definition is copyable with the
top-level names it references (transitively, across runtime modules); module-level state is
limited to constants and helper functions.

Conventions:

- Inputs and outputs use torch layouts (channels at axis 1). Unbatched inputs are accepted where
  torch accepts them.
- Parameters use Flax names and layouts: `kernel` (spatial..., in/groups, out), `bias`, `scale`,
  BatchNorm statistics `mean`/`var`/`num_batches_tracked` (`nnx.BatchStat`). MultiheadAttention
  keeps torch's names (`in_proj_weight` (3E, E), `in_proj_bias`, `out_proj` an `nnx.Linear`).
  `precision_transpiler.weights.load_torch_state_dict` maps a torch `state_dict` onto them.
- `dtype` / `param_dtype` have Flax's meaning: `dtype` is the compute/output dtype (None: the
  promotion of inputs and parameters), `param_dtype` the storage dtype (torch's `dtype=` argument).
  Normalisation statistics and pooling sums are computed in at least float32.
- Train/eval: modules start in training mode like torch; `nnx.Module.eval()` / `.train()` toggle
  `use_running_average` (BatchNorm) and `deterministic` (MultiheadAttention), the attribute names
  nnx's own BatchNorm and Dropout use. Dropout in training mode needs `rngs` (a 'dropout' stream).
- On GPU/TPU, JAX's default float32 matmul/convolution precision may use TF32/bf16 passes; pass
  `precision=` to the layers or set `jax_default_matmul_precision` when comparing against torch.
"""
