"""Apply a precision policy to Keras 3 code (tf -> tf).

Keras expresses precision per layer: `dtype=` takes a dtype policy name ("mixed_bfloat16" =
fp32 variables, bf16 compute). The pass gives every `keras.layers.*` constructor the policy's
per-class choice through a generated constant (`dtype=_PTRANSPILE_LOW`, `dtype=_PTRANSPILE_FP32`
for keep-fp32 classes such as LayerNormalization and Softmax), wraps the outputs handed to
`keras.Model(...)`/`Functional(...)` in a float32 linear Activation (the Keras mixed-precision
guide's recipe for model outputs), and puts keep-fp32 functional ops (`keras.ops.softmax(x)`)
on float32 inputs. A `dtype=` the user wrote is kept. Everything inserted is named
`_ptranspile_*`/`_PTRANSPILE_*`, so `precision.strip` removes it exactly.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.errors import PolicyError
from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.policy import Policy
from precision_transpiler.precision.base import PolicyPass, append_keywords, helper_statements, island

_NOT_LAYERS = frozenset({"Input", "InputLayer", "InputSpec"})
_MODEL_CALLS = frozenset(
    {
        "keras.Model",
        "keras.models.Model",
        "keras.models.Functional",
        "keras.src.models.Functional",
        "keras.src.models.Model",
        "keras.src.models.functional.Functional",
    }
)

HELPERS = '''
# ptranspile: begin precision policy "{name}" (generated; `ptranspile --policy fp32` removes it)
_PTRANSPILE_LOW = "{low}"
_PTRANSPILE_FP32 = "float32"


def _ptranspile_fp32(x):
    """fp32 island for a functional op the policy keeps in float32."""
    return keras.ops.cast(x, "float32")


def _ptranspile_output(outputs):
    """Model outputs in {output} (a linear Activation in {output}, as the Keras guide does)."""
    return keras.tree.map_structure(lambda t: keras.layers.Activation("linear", dtype="{output}")(t), outputs)
'''


def normalise(qualified: str) -> str:
    """`tensorflow.keras.layers.Dense` and `keras.src.layers.Dense` are `keras.layers.Dense`."""
    for prefix in ("tensorflow.keras.", "tf_keras.", "keras.src."):
        if qualified.startswith(prefix):
            rest = qualified[len(prefix) :]
            if rest.startswith("layers.") and rest.count(".") > 1:  # keras.src.layers.core.dense.Dense
                rest = "layers." + rest.rsplit(".", 1)[1]
            return "keras." + rest
    return qualified


class KerasPolicyPass(PolicyPass):
    def __init__(self, policy: Policy, mappings: MappingSet, module: cst.Module, source: str) -> None:
        super().__init__(policy, module, source)
        self.symbols = {normalise(k): v for k, v in mappings.symbol_to_precision_class.get("tf", {}).items()}

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        qualified = self.qualified(original_node.func)
        if qualified is None:
            return updated_node
        name = normalise(qualified)
        if name in _MODEL_CALLS:
            return self._wrap_outputs(original_node, updated_node)
        if name.startswith("keras.layers.") and name.rsplit(".", 1)[1] not in _NOT_LAYERS:
            return self._layer(original_node, updated_node, name)
        op_class = self.symbols.get(name)
        if op_class in self.policy.keep_fp32 and updated_node.args and updated_node.args[0].keyword is None:
            decision = self.policy.precision_for(op_class)
            if decision.compute == "float32":
                self.decide(original_node, name, op_class, decision, "fp32 island")
                first = updated_node.args[0]
                return updated_node.with_changes(
                    args=[first.with_changes(value=island(first.value)), *updated_node.args[1:]]
                )
        return updated_node

    def _layer(self, original: cst.Call, updated: cst.Call, name: str) -> cst.Call:
        layer = name.rsplit(".", 1)[1]
        if any(arg.keyword is not None and arg.keyword.value == "dtype" for arg in updated.args):
            return updated  # the user chose this layer's dtype
        op_class = self.symbols.get(name)
        decision = self.policy.precision_for(op_class, class_name=layer)
        constant = "_PTRANSPILE_FP32" if decision.compute == "float32" else "_PTRANSPILE_LOW"
        self.decide(original, name, op_class or "layer", decision, f"dtype={constant}")
        args = append_keywords(list(updated.args), [("dtype", constant)])
        return updated.with_changes(args=args)

    def _wrap_outputs(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        args = list(updated.args)
        index = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == "outputs"), None)
        if index is None and len(args) >= 2 and all(a.keyword is None for a in args[:2]):
            index = 1
        if index is None:
            return updated
        decision = self.policy.precision_for("output")
        self.decide(original, "model outputs", "output", decision, "float32 output activation")
        wrapped = cst.Call(func=cst.Name("_ptranspile_output"), args=[cst.Arg(value=args[index].value)])
        args[index] = args[index].with_changes(value=wrapped)
        return updated.with_changes(args=args)


def keras_policy_name(policy: Policy, mappings: MappingSet) -> str:
    """The Keras dtype policy (mappings/dtypes.yaml `keras_policies`) that stores variables in the
    policy's param dtype and computes in its compute dtype."""
    wanted = {"variable": policy.param, "compute": policy.compute}
    for name, spec in mappings.keras_policies.items():
        if spec == wanted:
            return name
    raise PolicyError(
        f"policy {policy.name!r}: Keras has no dtype policy with {policy.param} variables and {policy.compute} compute"
    )


def helper_block(policy: Policy, mappings: MappingSet) -> list[cst.BaseStatement]:
    output = policy.classes.get("output", {}).get("output", policy.output)
    return helper_statements(HELPERS.format(name=policy.name, low=keras_policy_name(policy, mappings), output=output))
