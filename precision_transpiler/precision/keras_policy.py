"""Apply a precision policy to Keras 3 code (tf -> tf).

Keras expresses precision per layer: `dtype=` takes a dtype policy name ("mixed_bfloat16" =
fp32 variables, bf16 compute). The pass gives every `keras.layers.*` constructor the policy's
per-class choice through a generated constant (`dtype=_PTRANSPILE_LOW`, `dtype=_PTRANSPILE_FP32`
for keep-fp32 classes such as LayerNormalization and Softmax), wraps the outputs handed to
`keras.Model(...)`/`Functional(...)` in a float32 linear Activation (the Keras mixed-precision
guide's recipe for model outputs), and puts keep-fp32 functional ops (`keras.ops.softmax(x)`)
on float32 inputs. A `dtype=` the user wrote is kept. For `path:` overrides with
`compute: float32` (only then) the model built by `keras.Model(...)` or `keras.Sequential(...)`
goes through `_ptranspile_paths(...)` and `call` of subclassed layers gets
`@_ptranspile_paths_call`: when the model is built or first called, the layers whose path
(`layers.3`, `blocks.0.attn`: the scheme `ptranspile verify` reports) or name matches get
`dtype_policy = "float32"`, which Keras reads at every call. Everything inserted is named
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
_SEQUENTIAL_CALLS = frozenset({"keras.Sequential", "keras.models.Sequential", "keras.src.models.Sequential"})

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
{paths_helpers}'''

# Emitted only when the policy has `path:` overrides with `compute: float32`, so that every other
# policy's generated code stays as it was. The walk is the one `ptranspile verify` names layers
# by (precision_transpiler/verify/adapters/keras_adapter.py), so a path from its report can be
# put into `overrides:` as is.
PATHS_HELPERS = '''

_PTRANSPILE_FP32_PATHS = {fp32_paths}


def _ptranspile_sublayers(layer):
    """(path step, sublayer): `layers.<i>` in functional and Sequential models, attribute names
    (public ones first) elsewhere."""
    if isinstance(layer, keras.Sequential) or hasattr(layer, "_nodes_by_depth"):
        return [(f"layers.{{i}}", sub) for i, sub in enumerate(layer.layers)]
    found = []
    internal = ("_layers", "_functional", "_operations", "_tracker")
    for private in (False, True):
        for name, value in list(vars(layer).items()):
            if name.startswith("_") != private or name in internal or name.startswith("_self_"):
                continue
            if isinstance(value, keras.layers.Layer):
                found.append((name, value))
            elif isinstance(value, (list, tuple, dict)):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                found += [(f"{{name}}.{{k}}", v) for k, v in items if isinstance(v, keras.layers.Layer)]
    return found


def _ptranspile_paths(model):
    """Path overrides with compute float32: the layers whose path (`layers.3`, `blocks.0.attn`,
    relative to `model`) or name matches a glob, and their sublayers, get the float32 dtype
    policy. Applied once, from the outermost model; its sublayers are marked as done too."""
    import fnmatch

    if not isinstance(model, keras.layers.Layer) or getattr(model, "_ptranspile_paths_done", False):
        return model
    object.__setattr__(model, "_ptranspile_paths_done", True)
    seen = {{id(model)}}
    stack = [("", model, False)]
    while stack:
        prefix, layer, inside = stack.pop(0)
        children = []
        for step, sub in _ptranspile_sublayers(layer):
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            path = f"{{prefix}}.{{step}}" if prefix else step
            fp32 = inside or any(
                fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(sub.name, pattern)
                for pattern in _PTRANSPILE_FP32_PATHS
            )
            if fp32:
                sub.dtype_policy = "float32"
            object.__setattr__(sub, "_ptranspile_paths_done", True)
            children.append((path, sub, fp32))
        stack[0:0] = children
    return model


def _ptranspile_paths_call(call):
    """Apply the path overrides when a subclassed model is first called."""
    import functools

    @functools.wraps(call)
    def run(self, *args, **kwargs):
        _ptranspile_paths(self)
        return call(self, *args, **kwargs)
    return run
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
        self.fp32_paths = fp32_path_overrides(policy)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        """`call` of a subclassed layer/model applies the runtime path overrides (if any)."""
        if not self.fp32_paths or original_node.name.value != "call" or len(self.stack) < 3:
            return updated_node
        cls = self.stack[-3]
        if not isinstance(cls, cst.ClassDef) or not cls.bases:
            return updated_node
        decision = self.policy.precision_for(None, class_name=cls.name.value)
        self.decide(original_node, cls.name.value, "module", decision, "fp32 path overrides (at run time)")
        decorator = cst.Decorator(decorator=cst.Name("_ptranspile_paths_call"))
        return updated_node.with_changes(decorators=[decorator, *updated_node.decorators])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        qualified = self.qualified(original_node.func)
        if qualified is None:
            return updated_node
        name = normalise(qualified)
        if name in _MODEL_CALLS:
            wrapped = self._wrap_outputs(original_node, updated_node)
            if not self.fp32_paths:
                return wrapped
            return cst.Call(func=cst.Name("_ptranspile_paths"), args=[cst.Arg(value=wrapped)])
        if name in _SEQUENTIAL_CALLS and self.fp32_paths:
            return cst.Call(func=cst.Name("_ptranspile_paths"), args=[cst.Arg(value=updated_node)])
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


def fp32_path_overrides(policy: Policy) -> tuple[str, ...]:
    """The globs of `path:` overrides that keep a layer in float32 (applied at run time)."""
    return tuple(o.path for o in policy.overrides if o.path and o.values.get("compute") == "float32")


def helper_block(policy: Policy, mappings: MappingSet) -> list[cst.BaseStatement]:
    output = policy.classes.get("output", {}).get("output", policy.output)
    fp32_paths = fp32_path_overrides(policy)
    paths_helpers = PATHS_HELPERS.format(fp32_paths=repr(fp32_paths)) if fp32_paths else ""
    return helper_statements(
        HELPERS.format(
            name=policy.name, low=keras_policy_name(policy, mappings), output=output, paths_helpers=paths_helpers
        )
    )
