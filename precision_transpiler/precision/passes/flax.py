"""Apply a precision policy to Flax NNX code (jax -> jax).

Flax expresses precision per layer: `dtype` is the compute dtype, `param_dtype` the storage
dtype, and Linear/Conv take `preferred_element_type` for the accumulator. On this project's CPU
an XLA bf16 matmul with bf16 output is 1.2x *slower* than fp32, with fp32 accumulation 0.53x
(docs/precision-reference.md#measured-bfloat16-speed), so low-precision linear/conv layers get
fp32 accumulation. Keep-fp32
classes (LayerNorm, RMSNorm, embeddings) get `dtype=float32`; keep-fp32 functions
(`jax.nn.softmax(x)`) get float32 inputs; `__call__` of every nnx.Module subclass is wrapped so
that the outermost call returns the policy's output dtype. `path:` overrides with
`compute: float32` cannot be decided statically (paths exist only at run time), so the wrapper's
outermost call sets `dtype=float32` (and drops `preferred_element_type`) on the submodules whose
NNX path matches, once per module; that code is emitted only for such policies. All inserted
names start with `_ptranspile_`/`_PTRANSPILE_`, so `precision.strip` removes them exactly.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.precision.passes.base import (
    PolicyPass,
    append_keywords,
    chooses_dtype,
    device_dtype_exprs,
    helper_statements,
    island,
    with_device_helpers,
)
from precision_transpiler.precision.policy import Policy
from precision_transpiler.runtime import PACKAGE

_ACCUMULATING = frozenset({"linear", "conv", "attention"})
_ACCUM_LAYERS = frozenset(
    {"flax.nnx.Linear", "flax.nnx.Conv", "flax.nnx.ConvTranspose", "flax.nnx.LinearGeneral", "flax.nnx.Einsum"}
)

HELPERS = '''
# ptranspile: begin precision policy "{name}" (generated; `ptranspile --policy fp32` removes it)
_PTRANSPILE_COMPUTE = {compute}
_PTRANSPILE_PARAM = {param}
_PTRANSPILE_FLOAT32 = jnp.float32
_PTRANSPILE_OUTPUT = jnp.{output}
_PTRANSPILE_DEPTH = [0]
_PTRANSPILE_NAN_FALLBACK = {nan_fallback}


def _ptranspile_fp32(x):
    """fp32 island for an op the policy keeps in float32 (Python numbers pass as they are)."""
    return x.astype(jnp.float32) if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating) else x


def _ptranspile_output(t):
    if hasattr(t, "dtype") and jnp.issubdtype(t.dtype, jnp.floating):
        return t.astype(_PTRANSPILE_OUTPUT)
    return t


def _ptranspile_output_class(t):
    """A dict subclass jax.tree does not know: a model's output class (diffusers' `BaseOutput`,
    transformers' `ModelOutput`), walked item by item instead of passed whole as one leaf."""
    import collections

    return isinstance(t, dict) and type(t) not in (dict, collections.OrderedDict, collections.defaultdict)


def _ptranspile_map(f, out):
    """jax.tree.map(f, out), also into output classes (a copy with every item mapped)."""
    def one(t):
        if not _ptranspile_output_class(t):
            return f(t)
        import copy

        new = copy.copy(t)
        for key, value in t.items():
            new[key] = _ptranspile_map(f, value)
        return new
    return jax.tree.map(one, out, is_leaf=_ptranspile_output_class)


def _ptranspile_finite(out):
    """True unless a concrete floating output holds inf/nan (under jax.jit nothing is checked)."""
    leaves = []
    _ptranspile_map(leaves.append, out)
    leaves = [t for t in leaves if hasattr(t, "dtype") and jnp.issubdtype(t.dtype, jnp.floating)]
    if any(isinstance(t, jax.core.Tracer) for t in leaves):
        return True
    return all(bool(jnp.isfinite(t).all()) for t in leaves)


def _ptranspile_recompute_fp32(call, module, args, kwargs):
    """Run `call` again with every layer computing in float32, then restore the layers."""
    import logging

    from flax import nnx

    logging.getLogger("ptranspile").warning(
        "%s: non-finite output under policy {name}; recomputing in float32", type(module).__name__
    )
    saved = []
    for _, sub in nnx.iter_graph(module):
        for attr in ("dtype", "preferred_element_type"):
            if isinstance(sub, nnx.Module) and getattr(sub, attr, None) is not None:
                saved.append((sub, attr, getattr(sub, attr)))
                object.__setattr__(sub, attr, jnp.float32)
    _PTRANSPILE_DEPTH[0] += 1
    try:
        args, kwargs = jax.tree.map(_ptranspile_fp32, (args, kwargs))
        return call(module, *args, **kwargs)
    finally:
        _PTRANSPILE_DEPTH[0] -= 1
        for sub, attr, value in saved:
            object.__setattr__(sub, attr, value)


def _ptranspile_policy(call):
    """Cast the outermost module's floating outputs to the policy's output dtype."""
    def run(self, *args, **kwargs):{layers_call}{paths_call}
        _PTRANSPILE_DEPTH[0] += 1
        try:
            out = call(self, *args, **kwargs)
        finally:
            _PTRANSPILE_DEPTH[0] -= 1
        if _PTRANSPILE_DEPTH[0]:
            return out
        cast = _ptranspile_map(_ptranspile_output, out)
        if _PTRANSPILE_NAN_FALLBACK and not _ptranspile_finite(cast):
            out = _ptranspile_recompute_fp32(call, self, args, kwargs)
            return _ptranspile_map(_ptranspile_fp32, out)
        return cast
    run.__name__ = call.__name__
    run.__wrapped__ = call
    return run
{layers_helpers}{paths_helpers}'''

# Emitted only when the file builds layers through factories the static pass cannot see into
# (`norm_layer(dim)`, `partial(nn.Conv2d, ...)`, a `layer=nn.Linear` parameter), so that other
# generated code stays as it was.
LAYERS_CALL = """
        if not _PTRANSPILE_DEPTH[0]:
            _ptranspile_apply_layer_dtypes(self)"""

LAYERS_HELPERS = '''

_PTRANSPILE_LAYER_DTYPES = {layer_dtypes}
_PTRANSPILE_LAYERS_DONE = []  # weak references to the modules the layer dtypes were applied to


def _ptranspile_apply_layer_dtypes(module):
    """Layers built through factories got no dtype from the converter: each takes its class's
    policy dtype (only where none was set), once per outermost module."""
    import weakref

    from flax import nnx

    _PTRANSPILE_LAYERS_DONE[:] = [ref for ref in _PTRANSPILE_LAYERS_DONE if ref() is not None]
    if any(ref() is module for ref in _PTRANSPILE_LAYERS_DONE):
        return
    _PTRANSPILE_LAYERS_DONE.append(weakref.ref(module))
    for _, sub in nnx.iter_modules(module):
        dtype = _PTRANSPILE_LAYER_DTYPES.get(type(sub).__name__)
        if dtype is not None and "dtype" in vars(sub) and sub.dtype is None:
            object.__setattr__(sub, "dtype", dtype)
'''

# Emitted only when the policy has `path:` overrides with `compute: float32`, so that every other
# policy's generated code stays as it was.
PATHS_CALL = """
        if not _PTRANSPILE_DEPTH[0]:
            _ptranspile_apply_paths(self)"""

PATHS_HELPERS = '''

_PTRANSPILE_FP32_PATHS = {fp32_paths}
_PTRANSPILE_PATHS_DONE = []  # weak references to the modules the path overrides were applied to


def _ptranspile_apply_paths(module):
    """Path overrides with compute float32: the submodules whose NNX path (`convs.1`,
    `block.attn`, relative to the outermost module called) matches a glob, and everything inside
    them, compute in float32. Applied once per outermost module."""
    import fnmatch
    import weakref

    from flax import nnx

    _PTRANSPILE_PATHS_DONE[:] = [ref for ref in _PTRANSPILE_PATHS_DONE if ref() is not None]
    if any(ref() is module for ref in _PTRANSPILE_PATHS_DONE):
        return
    _PTRANSPILE_PATHS_DONE.append(weakref.ref(module))
    for path, sub in nnx.iter_modules(module):
        names = [".".join(str(p) for p in path[:k]) for k in range(1, len(path) + 1)]
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names for pattern in _PTRANSPILE_FP32_PATHS):
            continue
        if hasattr(sub, "dtype"):
            object.__setattr__(sub, "dtype", jnp.float32)
        if getattr(sub, "preferred_element_type", None) is not None:
            object.__setattr__(sub, "preferred_element_type", None)
'''


def normalise(qualified: str) -> str:
    if qualified.startswith("flax.nnx.") and qualified.count(".") > 2:
        return "flax.nnx." + qualified.rsplit(".", 1)[1]
    return qualified


class FlaxPolicyPass(PolicyPass):
    def __init__(self, policy: Policy, mappings: MappingSet, module: cst.Module, source: str) -> None:
        super().__init__(policy, module, source)
        self.symbols = {normalise(k): v for k, v in mappings.symbol_to_precision_class.get("jax", {}).items()}
        self.is_layer = mappings.frameworks["jax"].is_layer_class
        self.factory_calls = False
        self.module_code = source

    def _qualified(self, node: cst.BaseExpression) -> str | None:
        q = self.qualified(node)
        return normalise(q) if q else None

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if original_node.name.value != "__call__" or len(self.stack) < 3:
            return updated_node
        cls = self.stack[-3]
        if not isinstance(cls, cst.ClassDef) or not cls.bases:
            return updated_node
        decision = self.policy.precision_for("output")
        self.decide(original_node, cls.name.value, "output", decision, "output cast (outermost call)")
        decorator = cst.Decorator(decorator=cst.Name("_ptranspile_policy"))
        return updated_node.with_changes(decorators=[decorator, *updated_node.decorators])

    def layer_dtypes(self) -> dict[str, str]:
        """Class name -> dtype constant for the layer classes this file names, when it builds
        layers through factories (empty otherwise)."""
        if not self.factory_calls:
            return {}
        from precision_transpiler.rewrite.import_editor import used_names

        mentioned = used_names(self.module_code) | {
            n.rsplit(".", 1)[1]
            for n in self.symbols
            if n.startswith(PACKAGE + ".") and n.rsplit(".", 1)[1] in self.module_code
        }
        table: dict[str, str] = {}
        for name, op_class in self.symbols.items():
            layer = name.rsplit(".", 1)[1]
            if not self.is_layer(name) or layer not in mentioned:
                continue
            decision = self.policy.precision_for(op_class, class_name=layer)
            table[layer] = "_PTRANSPILE_FLOAT32" if decision.compute == "float32" else "_PTRANSPILE_COMPUTE"
        return table

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self._qualified(original_node.func)
        op_class = self.symbols.get(name) if name is not None else None
        if op_class is None:
            if any(a.keyword is not None and a.keyword.value == "rngs" for a in original_node.args):
                self.factory_calls = True  # `layer(8, 4, rngs=rngs)`: a layer of unknown class
            return updated_node
        assert name is not None
        layer = name.rsplit(".", 1)[1]
        is_layer = self.is_layer(name)
        decision = self.policy.precision_for(op_class, class_name=layer)
        if not is_layer:
            if (
                op_class in self.policy.keep_fp32
                and decision.compute == "float32"
                and updated_node.args
                and updated_node.args[0].keyword is None
            ):
                self.decide(original_node, name, op_class, decision, "fp32 island")
                first = updated_node.args[0]
                return updated_node.with_changes(
                    args=[first.with_changes(value=island(first.value)), *updated_node.args[1:]]
                )
            return updated_node
        if chooses_dtype(updated_node.args, ("dtype", "param_dtype")):
            return updated_node  # the user chose this layer's dtypes (or passes `**kwargs` that may)
        if decision.compute == "float32":
            extra = [("dtype", "_PTRANSPILE_FLOAT32")]
            action = "dtype=float32"
        else:
            extra = [("dtype", "_PTRANSPILE_COMPUTE"), ("param_dtype", "_PTRANSPILE_PARAM")]
            action = "dtype/param_dtype"
            if op_class in _ACCUMULATING and name in _ACCUM_LAYERS:
                extra.append(("preferred_element_type", "_PTRANSPILE_FLOAT32"))
                action += " + fp32 accumulation"
        self.decide(original_node, name, op_class, decision, action)
        return updated_node.with_changes(args=append_keywords(list(updated_node.args), extra))


def helper_block(
    policy: Policy, nan_fallback: bool = False, layer_dtypes: dict[str, str] | None = None
) -> list[cst.BaseStatement]:
    """The generated helpers; `layer_dtypes` (class name -> dtype constant) adds the run-time
    dtype assignment for factory-built layers."""
    output = policy.classes.get("output", {}).get("output", policy.output)
    fp32_paths = fp32_path_overrides(policy)
    paths_helpers = PATHS_HELPERS.format(fp32_paths=repr(fp32_paths)) if fp32_paths else ""
    table = "{" + ", ".join(f"{k!r}: {v}" for k, v in sorted((layer_dtypes or {}).items())) + "}"
    layers_helpers = LAYERS_HELPERS.format(layer_dtypes=table) if layer_dtypes else ""
    compute, param = device_dtype_exprs(
        policy, f"jnp.{policy.compute}", f"jnp.{policy.param}", "_PTRANSPILE_DEVICE_DTYPE"
    )
    code = HELPERS.format(
        name=policy.name,
        compute=compute,
        param=param,
        output=output,
        nan_fallback=nan_fallback,
        paths_call=PATHS_CALL if fp32_paths else "",
        paths_helpers=paths_helpers,
        layers_call=LAYERS_CALL if layer_dtypes else "",
        layers_helpers=layers_helpers,
    )
    code = with_device_helpers(code, policy, "flax.device", "_ptranspile_flax_device", "_PTRANSPILE_DEVICE_DTYPE")
    return helper_statements(code)


def fp32_path_overrides(policy: Policy) -> tuple[str, ...]:
    """The globs of `path:` overrides that keep a module in float32 (applied at run time)."""
    return tuple(o.path for o in policy.overrides if o.path and o.values.get("compute") == "float32")
