"""Keras 3 layers and functions with torch's signatures and torch's exact semantics (channels-first).

Why this package exists: a torch model converted to Keras keeps its torch layouts (NCHW images, NCL
sequences, sequence-first attention) and torch's defaults, but Keras' own layers differ silently in
exactly those places (docs/precision-reference.md#framework-defaults-that-differ): Conv2D is channels-last with 'valid'
padding and an HWIO kernel, BatchNormalization has momentum 0.99 (decay of the old statistics),
eps 1e-3 and a biased moving variance, LayerNormalization has eps 1e-3, `ops.gelu` is the tanh
approximation, MultiHeadAttention masks are True = attend, pooling and padding modes differ, and
TensorFlow on CPU has no channels-first convolution or pooling kernels at all. Each class here
takes torch's constructor arguments (same names, order and defaults) and computes what torch
computes (relative error <= 1e-5 in float32, tests/runtime/test_keras_runtime.py).

Rules these modules keep, because the converter copies the definitions a converted file needs into
that file (precision_transpiler/convert/vendor.py): they import keras, keras.ops, numpy and the
standard library (TensorFlow only where a torch behaviour needs it; einops.py also einops), never torch; helpers shared
between modules are imported unaliased at module level (`from precision_transpiler.runtime.keras.
functional import _stats_dtype`), which the converter follows; every top-level definition is
copyable with the top-level names it references. The files match those of the Flax twin
(`precision_transpiler.runtime.flax`) one for one.

Conventions:

- Inputs and outputs use torch layouts (channels at axis 1); unbatched inputs are accepted where
  torch accepts them. Channels-first data are transposed to channels-last around `ops.conv` /
  `ops.max_pool` / `ops.average_pool` inside `call`. Channel and spatial sizes must be static; the
  batch axis may be dynamic (None).
- Weights keep torch's names AND layouts, so loading a torch `state_dict` is a name-for-name copy
  (`precision_transpiler.weights.torch_to_keras.load_torch_state_dict_keras`): `weight` (out, in)
  for Linear; `weight` (out, in/groups, *k) for convolutions (OIHW), (in, out/groups, *k) for
  transposed ones; `weight`/`bias` for the norms (no gamma/beta); BatchNorm buffers
  `running_mean`/`running_var`/`num_batches_tracked` as non-trainable variables; MultiheadAttention's
  packed `in_proj_weight` (3E, E), `in_proj_bias`, and `out_proj` a `Linear`. Kernels are transposed
  to Keras' layouts inside `call` (a cheap op next to the convolution). All weights are created in
  `__init__` (torch knows every shape from its constructor), so `layer.weights` is complete before
  the first call; layers are marked built.
- dtype: torch's `dtype=` argument and Keras' `dtype=` (the dtype policy) are the same keyword here.
  None means Keras' global policy; a Keras policy or policy name ("float32", "bfloat16",
  "mixed_bfloat16") is passed to `keras.layers.Layer`; a torch or numpy dtype object is mapped to
  its name (torch.bfloat16 -> "bfloat16": variables and computation in bf16, as in torch). `device`
  is accepted and ignored. Other Keras keywords (`name`, `trainable`, ...) pass through `**kwargs`.
  Layers compute in `self.compute_dtype` (inputs and weights cast to it), so mixed policies work;
  normalisation statistics, pooling sums and attention softmax run in at least float32, and the
  BatchNorm running statistics stay in the variable dtype (they are not autocast).
- Train/eval: Keras' `training` call argument replaces torch's `.train()`/`.eval()` (BatchNorm
  batch statistics and running-stat updates, Dropout, attention dropout). As everywhere in Keras,
  `training=None` resolves to the outer call's value and finally to False (inference): torch modules
  start in training mode, Keras layers do not.
- Containers (Sequential, ModuleList, ModuleDict) hold their children under torch's names ("0",
  "1", ... or the given keys); Keras tracks them, so their variables appear in `weights`.
"""
