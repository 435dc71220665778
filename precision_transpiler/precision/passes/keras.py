"""Apply a precision policy to Keras 3 code (tf -> tf).

Keras expresses precision per layer: `dtype=` takes a dtype policy name ("mixed_bfloat16" =
fp32 variables, bf16 compute). The pass gives every `keras.layers.*` constructor the policy's
per-class choice through a generated constant (`dtype=_PTRANSPILE_LOW`, `dtype=_PTRANSPILE_FP32`
for keep-fp32 classes such as LayerNormalization and Softmax), wraps the outputs handed to
`keras.Model(...)`/`Functional(...)` in a float32 linear Activation (the Keras mixed-precision
guide's recipe for model outputs), and puts keep-fp32 functional ops (`keras.ops.softmax(x)`)
on float32 inputs. A `dtype=` the user wrote is kept.

Classes of the file that subclass `keras.Layer`/`keras.Model` (directly or through another such
class of the file) get `@_ptranspile_layer(...)`: a user's layer has no `dtype=` the pass could
add, and left at float32 it would add its own float32 tensors to its bfloat16 sublayers' outputs,
which TensorFlow refuses (`x + self.dense(x)`: AddV2 float vs bfloat16). The decorator sets the
layer's dtype policy after its `__init__` (Keras reads it at every call and autocasts the
layer's floating inputs to its compute dtype); for `keras.Model` subclasses the outermost call
also casts floating outputs to the policy's output dtype (and, with `--nan-fallback`, computes a
non-finite result again in float32). Inside the methods of those classes the results of float32
islands (keep-fp32 sublayers assigned to `self.<name>`, keep-fp32 functional ops) go through
`_ptranspile_compute(..., self)`, back to the layer's compute dtype, for the same reason:
TensorFlow does not promote `bfloat16 + float32` as Keras' functional graph, torch and JAX do.

For `path:` overrides with `compute: float32` (only then) the model built by `keras.Model(...)`
or `keras.Sequential(...)` goes through `_ptranspile_paths(...)` and `call` of subclassed layers
gets `@_ptranspile_paths_call`: when the model is built or first called, the layers whose path
(`layers.3`, `blocks.0.attn`: the scheme `ptranspile verify` reports) or name matches get
`dtype_policy = "float32"`, which Keras reads at every call. With `--nan-fallback` the model
built by `keras.Model(...)`/`keras.Sequential(...)` goes through `_ptranspile_model(...)`.
Everything inserted is named `_ptranspile_*`/`_PTRANSPILE_*`, so `precision.strip` removes it
exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import libcst as cst

from precision_transpiler.errors import PolicyError
from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.precision.passes.base import (
    Code,
    PolicyPass,
    append_keywords,
    assign,
    auto_device,
    bindings,
    call,
    chooses_dtype,
    device_statements,
    policy_block,
    policy_ref,
)
from precision_transpiler.precision.policy import Policy, Precision


def normalise(qualified: str) -> str:
    """`tensorflow.keras.layers.Dense` and `keras.src.layers.Dense` are `keras.layers.Dense`."""
    for prefix in ("tensorflow.keras.", "tf_keras.", "keras.src."):
        if qualified.startswith(prefix):
            rest = qualified[len(prefix) :]
            if rest.startswith("layers.") and rest.count(".") > 1:  # keras.src.layers.core.dense.Dense
                rest = "layers." + rest.rsplit(".", 1)[1]
            return "keras." + rest
    return qualified


@dataclass
class _LayerClass:
    """A class of the file that subclasses a Keras layer or model (collected while visiting it)."""

    name: str
    is_model: bool
    fp32_attrs: dict[str, Precision] = field(default_factory=dict)  # `self.<name> = <float32 layer>(...)`


class KerasPolicyPass(PolicyPass):
    def __init__(
        self, policy: Policy, mappings: MappingSet, module: cst.Module, source: str, nan_fallback: bool = False
    ) -> None:
        super().__init__(policy, module, source)
        self.symbols = {normalise(k): v for k, v in mappings.symbol_to_precision_class.get("tf", {}).items()}
        # Keras' layer and model classes and model-building calls: mappings/frameworks.yaml
        self.keras = mappings.frameworks["tf"]
        self.fp32_paths = fp32_path_overrides(policy)
        self.nan_fallback = nan_fallback
        self.layer_classes: dict[str, _LayerClass] = {}  # every Layer/Model subclass of the file so far
        self._classes: list[_LayerClass | None] = []  # the enclosing ClassDefs, innermost last

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        info = None
        for base in node.bases:
            if base.keyword is not None:
                continue
            local = base.value.value if isinstance(base.value, cst.Name) else None
            inherited = self.layer_classes.get(local) if local is not None else None
            qualified = self.qualified(base.value)
            name = normalise(qualified) if qualified else None
            if inherited is not None or self.keras.is_module_base(name):
                if info is None:
                    info = _LayerClass(node.name.value, False)
                info.is_model |= name in self.keras.model_bases or (inherited is not None and inherited.is_model)
                if inherited is not None:
                    info.fp32_attrs.update(inherited.fp32_attrs)
        self._classes.append(info)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        """A subclassed layer/model gets `@_ptranspile_layer(...)`; its methods hand the results
        of its keep-fp32 sublayers back in its compute dtype."""
        info = self._classes.pop()
        if info is None:
            return updated_node
        self.layer_classes[info.name] = info
        decision = self.policy.precision_for(None, class_name=info.name)
        constant = "_PTRANSPILE_FP32" if decision.compute == "float32" else "_PTRANSPILE_LOW"
        action = f"dtype policy {constant} after __init__"
        if info.is_model:
            decision = replace(decision, output=self.policy.precision_for("output").output)
            action += ", output cast (outermost call)"
        self.decide(original_node, info.name, "model" if info.is_model else "layer", decision, action)
        if info.fp32_attrs:
            for attr, fp32 in sorted(info.fp32_attrs.items()):
                action = "float32 result back in the compute dtype (in methods)"
                self.decide(original_node, f"self.{attr}", "layer", fp32, action)
            updated_node = updated_node.visit(_BackCast(set(info.fp32_attrs)))  # type: ignore[assignment]
            self.used.add("_ptranspile_compute")
        decorator = cst.Decorator(
            decorator=cst.Call(func=self.helper("_ptranspile_layer"), args=[cst.Arg(value=cst.Name(constant))])
        )
        return updated_node.with_changes(decorators=[decorator, *updated_node.decorators])

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        """`call` of a subclassed layer/model applies the runtime path overrides (if any)."""
        if not self.fp32_paths or original_node.name.value != "call" or len(self.stack) < 3:
            return updated_node
        cls = self.stack[-3]
        if not isinstance(cls, cst.ClassDef) or not cls.bases:
            return updated_node
        decision = self.policy.precision_for(None, class_name=cls.name.value)
        self.decide(original_node, cls.name.value, "module", decision, "fp32 path overrides (at run time)")
        decorator = cst.Decorator(decorator=self.helper("_ptranspile_paths_call"))
        return updated_node.with_changes(decorators=[decorator, *updated_node.decorators])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        qualified = self.qualified(original_node.func)
        if qualified is None:
            return updated_node
        name = normalise(qualified)
        model_call = name in self.keras.model_calls
        if model_call or name in self.keras.sequential_calls:
            wrapped = self._wrap_outputs(original_node, updated_node) if model_call else updated_node
            if self.nan_fallback:
                wrapped = cst.Call(func=self.helper("_ptranspile_model"), args=[cst.Arg(value=wrapped)])
            if self.fp32_paths:
                wrapped = cst.Call(func=self.helper("_ptranspile_paths"), args=[cst.Arg(value=wrapped)])
            return wrapped
        if name.startswith("keras.layers.") and self.keras.is_layer_class(name):
            return self._layer(original_node, updated_node, name)
        op_class = self.symbols.get(name)
        if op_class in self.policy.keep_fp32 and updated_node.args and updated_node.args[0].keyword is None:
            decision = self.policy.precision_for(op_class)
            if decision.compute == "float32":
                owner = self._method_self()
                action = "fp32 island" if owner is None else "fp32 island, result back in the compute dtype"
                self.decide(original_node, name, op_class, decision, action)
                first = updated_node.args[0]
                islanded = updated_node.with_changes(
                    args=[first.with_changes(value=self.island(first.value)), *updated_node.args[1:]]
                )
                if owner is None:
                    return islanded
                self.used.add("_ptranspile_compute")
                return back_cast(islanded, owner)
        return updated_node

    def _method_self(self, allow_init: bool = False) -> str | None:
        """Inside a method of a subclassed layer (or in a function nested in one): the name of
        the method's instance parameter. None elsewhere, and in `__init__` unless allowed."""
        if not self._classes or self._classes[-1] is None:
            return None
        index = max(i for i, n in enumerate(self.stack) if isinstance(n, cst.ClassDef))
        method = self.stack[index + 2] if index + 2 < len(self.stack) else None
        if not isinstance(method, cst.FunctionDef):
            return None
        return _self_name(method, allow_init)

    def _layer(self, original: cst.Call, updated: cst.Call, name: str) -> cst.Call:
        layer = name.rsplit(".", 1)[1]
        if chooses_dtype(updated.args):
            return updated  # the user chose this layer's dtype (or passes `**kwargs` that may)
        op_class = self.symbols.get(name)
        decision = self.policy.precision_for(op_class, class_name=layer)
        constant = "_PTRANSPILE_FP32" if decision.compute == "float32" else "_PTRANSPILE_LOW"
        self.decide(original, name, op_class or "layer", decision, f"dtype={constant}")
        if constant == "_PTRANSPILE_FP32":
            self._note_fp32_attribute(original, decision)
        args = append_keywords(list(updated.args), [("dtype", constant)])
        return updated.with_changes(args=args)

    def _note_fp32_attribute(self, call: cst.Call, decision: Precision) -> None:
        """`self.norm = layers.LayerNormalization(...)` in a subclassed layer: remember `norm`."""
        owner = self._method_self(allow_init=True)
        info = self._classes[-1] if self._classes else None
        if owner is None or info is None or len(self.stack) < 2:
            return
        parent = self.stack[-2]
        targets: list[cst.BaseExpression] = []
        if isinstance(parent, cst.Assign) and parent.value is call:
            targets = [t.target for t in parent.targets]
        elif isinstance(parent, cst.AnnAssign) and parent.value is call:
            targets = [parent.target]
        for target in targets:
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == owner:
                info.fp32_attrs[target.attr.value] = decision

    def _wrap_outputs(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        args = list(updated.args)
        index = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == "outputs"), None)
        if index is None and len(args) >= 2 and all(a.keyword is None for a in args[:2]):
            index = 1
        if index is None:
            return updated
        decision = self.policy.precision_for("output")
        self.decide(original, "model outputs", "output", decision, "float32 output activation")
        wrapped = cst.Call(func=self.helper("_ptranspile_output"), args=[cst.Arg(value=args[index].value)])
        args[index] = args[index].with_changes(value=wrapped)
        return updated.with_changes(args=args)


def _self_name(method: cst.FunctionDef, allow_init: bool = False) -> str | None:
    """The instance parameter of a method (None for `__init__` unless allowed, static and class
    methods, and methods without parameters)."""
    if method.name.value == "__init__" and not allow_init:
        return None
    for decorator in method.decorators:
        if isinstance(decorator.decorator, cst.Name) and decorator.decorator.value in ("staticmethod", "classmethod"):
            return None
    params = [*method.params.posonly_params, *method.params.params]
    return params[0].name.value if params else None


def back_cast(expr: cst.BaseExpression, owner: str) -> cst.Call:
    """`_ptranspile_compute(expr, self)`: a float32 result back in the layer's compute dtype."""
    return cst.Call(
        func=cst.Name("_ptranspile_compute"),
        args=[
            cst.Arg(value=expr, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(value=cst.Name(owner)),
        ],
    )


class _BackCast(cst.CSTTransformer):
    """In the methods of one subclassed layer (not `__init__`), wrap calls of its keep-fp32
    sublayers (`self.norm(x)`) in `_ptranspile_compute(..., self)`. Nested classes are left to
    their own pass over them."""

    def __init__(self, attrs: set[str]) -> None:
        super().__init__()
        self.attrs = attrs
        self.owner: list[str | None] = []  # the instance parameter of the enclosing method
        self.classes = 0

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.classes += 1
        return self.classes == 1  # only the class this transformer was started on

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        self.classes -= 1
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.owner.append(_self_name(node) if not self.owner else self.owner[-1])
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self.owner.pop()
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        owner = self.owner[-1] if self.owner else None
        func = original_node.func
        if (
            owner is not None
            and isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == owner
            and func.attr.value in self.attrs
        ):
            return back_cast(updated_node, owner)
        return updated_node


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


def low_policy_expr(policy: Policy, mappings: MappingSet) -> object:
    """The generated value of the Keras dtype policy of low-precision layers: a name
    (`"mixed_bfloat16"`), or under `--device auto` one made from the compute dtype decided where
    the code runs (`_PTRANSPILE_DEVICE_DTYPE`; "float32" when it is float32)."""
    if not auto_device(policy):
        return keras_policy_name(policy, mappings)
    if policy.param != "float32":  # 16-bit variables too: the policy is named by the dtype
        return Code("_PTRANSPILE_DEVICE_DTYPE")
    return call(policy_ref("tf", "mixed_policy_name"), Code("_PTRANSPILE_DEVICE_DTYPE"))


def fp32_path_overrides(policy: Policy) -> tuple[str, ...]:
    """The globs of `path:` overrides that keep a layer in float32 (applied at run time)."""
    return tuple(o.path for o in policy.overrides if o.path and o.values.get("compute") == "float32")


#: the imports the generated block uses (added, marked, where the file lacks them)
HELPER_IMPORTS = [("precision_transpiler", "precision_transpiler")]
_BINDINGS = {  # generated name -> what the block binds it to (base.bindings)
    "_ptranspile_fp32": "fp32_cast",
    "_ptranspile_output": "_ptranspile_policy.output_activation",
    "_ptranspile_layer": "_ptranspile_policy.layer",
    "_ptranspile_compute": "_ptranspile_policy.compute",
    "_ptranspile_model": "_ptranspile_policy.model",
    "_ptranspile_paths_call": "_ptranspile_paths.on_call",
}


def helper_block(
    policy: Policy, mappings: MappingSet, nan_fallback: bool, done: KerasPolicyPass
) -> list[cst.BaseStatement]:
    """The generated block: the dtype-policy names the layer calls pass, the file's
    `KerasPolicy` (runtime/keras/policy.py) where the pass `done` used one of its methods, the
    path overrides' `Fp32Paths` where it used them, and the generated names it used."""
    output = policy.classes.get("output", {}).get("output", policy.output)
    statements = [
        *device_statements(policy, "tf", "_PTRANSPILE_DEVICE_DTYPE"),
        assign("_PTRANSPILE_LOW", low_policy_expr(policy, mappings)),
        assign("_PTRANSPILE_FP32", "float32"),
    ]
    if any(name in done.used for name, bound in _BINDINGS.items() if bound.startswith("_ptranspile_policy.")):
        options: dict[str, object] = {"output": output, **({"nan_fallback": True} if nan_fallback else {})}
        statements.append(assign("_ptranspile_policy", call(policy_ref("tf", "KerasPolicy"), policy.name, **options)))
    if done.used & {"_ptranspile_paths", "_ptranspile_paths_call"}:
        statements.append(assign("_PTRANSPILE_FP32_PATHS", fp32_path_overrides(policy)))
        paths = call(policy_ref("tf", "Fp32Paths"), Code("_PTRANSPILE_FP32_PATHS"))
        statements.append(assign("_ptranspile_paths", paths))
    statements += bindings("tf", _BINDINGS, done.used)
    return policy_block(policy.name, statements)
