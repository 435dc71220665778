"""Precision policies on Flax NNX code at run time: what a policy's generated block binds.

The flax policy pass (precision/passes/flax.py) gives layers `dtype`/`param_dtype` through
`_PTRANSPILE_*` constants and decorates `__call__` of every module class with
`@_ptranspile_policy`; the file's generated block holds only what is the file's own:

    _PTRANSPILE_COMPUTE = jnp.bfloat16
    ...
    _ptranspile_fp32 = fp32_island
    _ptranspile_policy = FlaxPolicy("mixed", output=jnp.float32)

(`prepare=(LayerDtypes(...), Fp32Paths(...))` too where the file needs them: those definitions
are copied only then).

The definitions here reach the file as every runtime definition does (copied in, or imported from
the runtime module beside it). They import what they use inside the functions, so copying them adds
no import line that `--policy fp32` (which strips the block) would leave behind.
"""

from precision_transpiler.runtime.device import pick_compute_dtype
from precision_transpiler.runtime.policy import (
    call_nested,
    is_output_class,
    map_output_class,
    path_matches,
    warn_recompute,
)


def device_compute_dtype(requested):
    """`--device auto`: the compute dtype for a policy asking for `requested`, on JAX's default
    backend: a GPU has bfloat16 from compute capability 8.0; a CPU is asked about its bf16
    instructions (runtime/device.py)."""
    import jax
    import jax.numpy as jnp

    where = jax.default_backend()
    where = where if where in ("gpu", "tpu") else "cpu"
    if where == "cpu" and jax.devices()[0].platform in ("cuda", "rocm"):
        where = "gpu"
    capability = str(getattr(jax.devices()[0], "compute_capability", "0") or "0")
    gpu_bf16 = where == "gpu" and float(capability.split(".")[0] or 0) >= 8
    return jnp.dtype(pick_compute_dtype("jax", requested, where, gpu_bf16))


def fp32_island(x):
    """fp32 island for an op the policy keeps in float32 (Python numbers pass as they are)."""
    import jax.numpy as jnp

    return x.astype(jnp.float32) if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) else x


def map_outputs(f, out):
    """jax.tree.map(f, out), also into output classes (a copy with every item mapped)."""
    import jax

    def one(t):
        return map_output_class(map_outputs, f, t) if is_output_class(t) else f(t)

    return jax.tree.map(one, out, is_leaf=is_output_class)


def all_finite(out):
    """True unless a concrete floating output holds inf/nan (under jax.jit nothing is checked)."""
    import jax
    import jax.numpy as jnp

    leaves = []
    map_outputs(leaves.append, out)
    leaves = [t for t in leaves if hasattr(t, "dtype") and jnp.issubdtype(t.dtype, jnp.floating)]
    if any(isinstance(t, jax.core.Tracer) for t in leaves):
        return True
    return all(bool(jnp.isfinite(t).all()) for t in leaves)


def _first_call(done, module):
    """Whether `module` is met for the first time (`done`: weak references to those met)."""
    import weakref

    done[:] = [ref for ref in done if ref() is not None]
    if any(ref() is module for ref in done):
        return False
    done.append(weakref.ref(module))
    return True


class FlaxPolicy:
    """One file's policy: decorating `__call__` (`@_ptranspile_policy`) makes the outermost
    module call return its floating outputs in `output`; nested calls run as they are.

    `nan_fallback`: a non-finite output of the outermost call is computed again with every layer
    in float32. `prepare`: what runs on the module before an outermost call (`LayerDtypes`,
    `Fp32Paths`), for what only exists at run time."""

    def __init__(self, name, output, nan_fallback=False, prepare=()):
        self.name = name
        self.output = output
        self.nan_fallback = nan_fallback
        self.prepare = tuple(prepare)
        self.depth = 0  # > 0 while a decorated call runs

    def __call__(self, call):
        policy = self

        def run(module, *args, **kwargs):
            if not policy.depth:
                for step in policy.prepare:
                    step(module)
            out = call_nested(policy, call, module, *args, **kwargs)
            if policy.depth:
                return out
            cast = map_outputs(policy.cast_output, out)
            if policy.nan_fallback and not all_finite(cast):
                out = policy.recompute_fp32(call, module, args, kwargs)
                return map_outputs(fp32_island, out)
            return cast

        run.__name__ = call.__name__
        run.__wrapped__ = call
        return run

    def cast_output(self, t):
        import jax.numpy as jnp

        if hasattr(t, "dtype") and jnp.issubdtype(t.dtype, jnp.floating):
            return t.astype(self.output)
        return t

    def recompute_fp32(self, call, module, args, kwargs):
        """Run `call` again with every layer computing in float32, then restore the layers."""
        import jax
        import jax.numpy as jnp
        from flax import nnx

        warn_recompute(self.name, module)
        saved = []
        for _, sub in nnx.iter_graph(module):
            for attr in ("dtype", "preferred_element_type"):
                if isinstance(sub, nnx.Module) and getattr(sub, attr, None) is not None:
                    saved.append((sub, attr, getattr(sub, attr)))
                    object.__setattr__(sub, attr, jnp.float32)
        self.depth += 1
        try:
            args, kwargs = jax.tree.map(fp32_island, (args, kwargs))
            return call(module, *args, **kwargs)
        finally:
            self.depth -= 1
            for sub, attr, value in saved:
                object.__setattr__(sub, attr, value)


class LayerDtypes:
    """Layers built through factories the pass could not see into (`norm_layer(dim)`) got no
    dtype from the converter: each takes its class's policy dtype from `table` (layer class name
    -> dtype), where none was set, once per outermost module (a `FlaxPolicy` prepare step)."""

    def __init__(self, table):
        self.table = table
        self.done = []

    def __call__(self, module):
        from flax import nnx

        if not _first_call(self.done, module):
            return
        for _, sub in nnx.iter_modules(module):
            dtype = self.table.get(type(sub).__name__)
            if dtype is not None and "dtype" in vars(sub) and sub.dtype is None:
                object.__setattr__(sub, "dtype", dtype)


class Fp32Paths:
    """`path:` overrides with compute float32 (which exist only at run time): the submodules
    whose NNX path (`convs.1`, `block.attn`, relative to the outermost module called) matches one
    of `patterns`, and everything inside them, compute in float32; once per outermost module (a
    `FlaxPolicy` prepare step)."""

    def __init__(self, patterns):
        self.patterns = tuple(patterns)
        self.done = []

    def __call__(self, module):
        import jax.numpy as jnp
        from flax import nnx

        if not _first_call(self.done, module):
            return
        for path, sub in nnx.iter_modules(module):
            names = [".".join(str(p) for p in path[:k]) for k in range(1, len(path) + 1)]
            if not any(path_matches(n, self.patterns) for n in names):
                continue
            if hasattr(sub, "dtype"):
                object.__setattr__(sub, "dtype", jnp.float32)
            if getattr(sub, "preferred_element_type", None) is not None:
                object.__setattr__(sub, "preferred_element_type", None)
