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
NNX path matches, once per module. What runs is `FlaxPolicy` and `fp32_island` of
runtime/flax/policy.py; the generated block binds them with the file's constants (helper_block).
All inserted names start with `_ptranspile_`/`_PTRANSPILE_`, so `precision.strip` removes them
exactly.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.precision.passes.base import (
    Code,
    PolicyPass,
    append_keywords,
    assign,
    bindings,
    call,
    chooses_dtype,
    device_dtype_exprs,
    device_statements,
    policy_block,
    policy_ref,
)
from precision_transpiler.precision.policy import Policy
from precision_transpiler.runtime import PACKAGE

_ACCUMULATING = frozenset({"linear", "conv", "attention"})
_ACCUM_LAYERS = frozenset(
    {"flax.nnx.Linear", "flax.nnx.Conv", "flax.nnx.ConvTranspose", "flax.nnx.LinearGeneral", "flax.nnx.Einsum"}
)


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
        decorator = cst.Decorator(decorator=self.helper("_ptranspile_policy"))
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
                    args=[first.with_changes(value=self.island(first.value)), *updated_node.args[1:]]
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


#: the imports the generated block uses (added, marked, where the file lacks them)
HELPER_IMPORTS = [("jax.numpy", "jnp"), ("precision_transpiler", "precision_transpiler")]


def helper_block(policy: Policy, nan_fallback: bool, done: FlaxPolicyPass) -> list[cst.BaseStatement]:
    """The generated block for what the pass `done` inserted: the dtype constants its layer calls
    name (with `layer_dtypes`, the table for factory-built layers), `_ptranspile_fp32` where it
    made fp32 islands, `_ptranspile_policy` where it decorated `__call__`
    (runtime/flax/policy.py)."""
    output = policy.classes.get("output", {}).get("output", policy.output)
    decided = Code("_PTRANSPILE_DEVICE_DTYPE")
    compute, param = device_dtype_exprs(policy, Code(f"jnp.{policy.compute}"), Code(f"jnp.{policy.param}"), decided)
    statements = [
        *device_statements(policy, "jax", decided.dotted),
        assign("_PTRANSPILE_COMPUTE", compute),
        assign("_PTRANSPILE_PARAM", param),
        assign("_PTRANSPILE_FLOAT32", Code("jnp.float32")),
    ]
    layer_dtypes = done.layer_dtypes()
    fp32_paths = fp32_path_overrides(policy)
    statements += bindings("jax", {"_ptranspile_fp32": "fp32_island"}, done.used)
    if "_ptranspile_policy" in done.used:
        options: dict[str, object] = {"output": Code(f"jnp.{output}")}
        if nan_fallback:
            options["nan_fallback"] = True
        prepare = []
        if layer_dtypes:
            table = {k: Code(v) for k, v in sorted(layer_dtypes.items())}
            statements.append(assign("_PTRANSPILE_LAYER_DTYPES", table))
            prepare.append(call(policy_ref("jax", "LayerDtypes"), Code("_PTRANSPILE_LAYER_DTYPES")))
        if fp32_paths:
            statements.append(assign("_PTRANSPILE_FP32_PATHS", fp32_paths))
            prepare.append(call(policy_ref("jax", "Fp32Paths"), Code("_PTRANSPILE_FP32_PATHS")))
        if prepare:
            options["prepare"] = tuple(prepare)
        statements.append(assign("_ptranspile_policy", call(policy_ref("jax", "FlaxPolicy"), policy.name, **options)))
    return policy_block(policy.name, statements)


def fp32_path_overrides(policy: Policy) -> tuple[str, ...]:
    """The globs of `path:` overrides that keep a module in float32 (applied at run time)."""
    return tuple(o.path for o in policy.overrides if o.path and o.values.get("compute") == "float32")
