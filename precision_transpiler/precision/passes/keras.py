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
    PolicyPass,
    append_keywords,
    auto_device,
    chooses_dtype,
    helper_statements,
    island,
    with_device_helpers,
)
from precision_transpiler.precision.policy import Policy, Precision

HELPERS = '''
# ptranspile: begin precision policy "{name}" (generated; `ptranspile --policy fp32` removes it)
_PTRANSPILE_LOW = {low}
_PTRANSPILE_FP32 = "float32"


def _ptranspile_fp32(x):
    """fp32 island for a functional op the policy keeps in float32."""
    return keras.ops.cast(x, "float32")


def _ptranspile_output(outputs):
    """Model outputs in {output} (a linear Activation in {output}, as the Keras guide does)."""
    return keras.tree.map_structure(lambda t: keras.layers.Activation("linear", dtype="{output}")(t), outputs)
{runtime_helpers}{paths_helpers}'''

# Emitted only when the file has subclassed layers or models, or with --nan-fallback, so that the
# generated code of purely functional models stays as it was.
RUNTIME_HELPERS = '''

_PTRANSPILE_OUTPUT = "{output}"
_PTRANSPILE_DEPTH = [0]  # > 0 while the outermost model call runs
_PTRANSPILE_INIT = set()  # ids of the layers whose outermost __init__ is running


def _ptranspile_floating(t):
    return hasattr(t, "dtype") and keras.backend.is_float_dtype(keras.backend.standardize_dtype(t.dtype))


def _ptranspile_cast(value, dtype):
    """Cast the floating tensors in a (nested) value to `dtype`."""
    def cast(t):
        if _ptranspile_floating(t) and keras.backend.standardize_dtype(t.dtype) != dtype:
            return keras.ops.cast(t, dtype)
        return t
    return keras.tree.map_structure(cast, value)


def _ptranspile_compute(value, layer):
    """A float32 island's result inside a subclassed layer, in the layer's compute dtype:
    TensorFlow refuses `bfloat16 + float32` where Keras' functional graph would promote."""
    return _ptranspile_cast(value, layer.compute_dtype)


def _ptranspile_set_policy(layer, dtype, explicit):
    """After the outermost `__init__` of a subclassed layer: the dtype policy `dtype`, unless the
    caller passed `dtype=` or the layer chose a policy itself. A layer left computing in float32
    (explicitly or by a class override) computes everything inside it in float32 too."""
    if not explicit and layer.dtype_policy.name == keras.config.dtype_policy().name:
        policy = keras.dtype_policies.get(dtype)
        own = [*getattr(layer, "_trainable_variables", []), *getattr(layer, "_non_trainable_variables", [])]
        if policy.compute_dtype != "float32" and any(v.dtype != policy.variable_dtype for v in own):
            dtype = "mixed_" + policy.compute_dtype  # weights made in __init__ stay float32: autocast them
        layer.dtype_policy = dtype
    if layer.compute_dtype == "float32":
        for sub in layer._flatten_layers(include_self=False):
            sub.dtype_policy = "float32"


def _ptranspile_outermost(call, model, args, kwargs, output):
    """The outermost model call: floating outputs in `output` (None: as computed); with
    --nan-fallback, a non-finite result (eager only) is computed again in float32."""
    if _PTRANSPILE_DEPTH[0]:
        return call(*args, **kwargs)
    _PTRANSPILE_DEPTH[0] += 1
    try:
        out = call(*args, **kwargs)
    finally:
        _PTRANSPILE_DEPTH[0] -= 1
    if output is not None:
        out = _ptranspile_cast(out, output){nan_check}
    return out


def _ptranspile_layer(dtype):
    """Class decorator for a subclassed Layer or Model: the dtype policy `dtype` after its
    `__init__` (see _ptranspile_set_policy); a Model's outermost call returns its floating
    outputs in the policy's output dtype."""
    import functools
    import inspect

    def decorate(cls):
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            if id(self) in _PTRANSPILE_INIT:  # a base class's __init__ (super().__init__)
                return init(self, *args, **kwargs)
            _PTRANSPILE_INIT.add(id(self))
            try:
                init(self, *args, **kwargs)
            finally:
                _PTRANSPILE_INIT.discard(id(self))
            _ptranspile_set_policy(self, dtype, "dtype" in kwargs)

        # Keras reads the constructor's arguments with inspect.getfullargspec (auto get_config),
        # which does not follow __wrapped__ but does read __signature__.
        __init__.__signature__ = inspect.signature(init)
        cls.__init__ = __init__
        call = cls.__call__
        if issubclass(cls, keras.Model):

            @functools.wraps(call)
            def __call__(self, *args, **kwargs):
                return _ptranspile_outermost(functools.partial(call, self), self, args, kwargs, _PTRANSPILE_OUTPUT)

            cls.__call__ = __call__
        elif keras.dtype_policies.get(dtype).compute_dtype == "float32":

            @functools.wraps(call)
            def __call__(self, *args, **kwargs):
                # a float32 island (class override): results in the dtype it was given, so that
                # the caller's own arithmetic (`x + self.block(x)`) sees one dtype
                first = next((t for t in keras.tree.flatten((args, kwargs)) if _ptranspile_floating(t)), None)
                out = call(self, *args, **kwargs)
                return out if first is None else _ptranspile_cast(out, keras.backend.standardize_dtype(first.dtype))

            cls.__call__ = __call__
        return cls
    return decorate
{nan_helpers}'''

# With --nan-fallback only: the check in `_ptranspile_outermost` and what it needs.
NAN_CHECK = """
    if not _ptranspile_finite(out):
        return _ptranspile_recompute_fp32(call, model, args, kwargs)"""

NAN_HELPERS = '''

def _ptranspile_finite(value):
    """False only for a concrete floating output holding inf/nan: symbolic tensors (functional
    construction, tf.function, jax.jit) are not checked."""
    leaves = [t for t in keras.tree.flatten(value) if _ptranspile_floating(t)]
    if any(isinstance(t, keras.KerasTensor) for t in leaves):
        return True
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if not tf.executing_eagerly():
            return True
    try:
        return all(bool(keras.ops.all(keras.ops.isfinite(t))) for t in leaves)
    except TypeError:  # a tracer that cannot be read (jax.jit)
        return True


def _ptranspile_recompute_fp32(call, model, args, kwargs):
    """Run `call` again with every layer of `model` computing in float32, then restore them."""
    import logging

    logging.getLogger("ptranspile").warning(
        "%s: non-finite output under policy {name}; recomputing in float32", type(model).__name__
    )
    saved = [(layer, layer._dtype_policy) for layer in model._flatten_layers()]
    fp32 = keras.dtype_policies.get("float32")
    _PTRANSPILE_DEPTH[0] += 1
    try:
        for layer, _ in saved:
            object.__setattr__(layer, "_dtype_policy", fp32)
        args, kwargs = _ptranspile_cast((args, kwargs), "float32")
        return _ptranspile_cast(call(*args, **kwargs), "float32")
    finally:
        _PTRANSPILE_DEPTH[0] -= 1
        for layer, policy in saved:
            object.__setattr__(layer, "_dtype_policy", policy)


def _ptranspile_model(model):
    """NaN fallback for a functional or Sequential model: its outermost call is checked."""
    import functools

    call = model.call

    @functools.wraps(call)
    def run(*args, **kwargs):
        return _ptranspile_outermost(call, model, args, kwargs, None)
    object.__setattr__(model, "call", run)
    return model
'''

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
        self.models_wrapped = 0  # keras.Model(...)/Sequential(...) calls given _ptranspile_model
        self._classes: list[_LayerClass | None] = []  # the enclosing ClassDefs, innermost last

    @property
    def needs_runtime(self) -> bool:
        """Whether the generated code uses the runtime helpers (subclassed layers, NaN fallback)."""
        return bool(self.layer_classes) or self.models_wrapped > 0

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
        decorator = cst.Decorator(
            decorator=cst.Call(func=cst.Name("_ptranspile_layer"), args=[cst.Arg(value=cst.Name(constant))])
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
        decorator = cst.Decorator(decorator=cst.Name("_ptranspile_paths_call"))
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
                self.models_wrapped += 1
                wrapped = cst.Call(func=cst.Name("_ptranspile_model"), args=[cst.Arg(value=wrapped)])
            if self.fp32_paths:
                wrapped = cst.Call(func=cst.Name("_ptranspile_paths"), args=[cst.Arg(value=wrapped)])
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
                    args=[first.with_changes(value=island(first.value)), *updated_node.args[1:]]
                )
                return islanded if owner is None else back_cast(islanded, owner)
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
        wrapped = cst.Call(func=cst.Name("_ptranspile_output"), args=[cst.Arg(value=args[index].value)])
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


def low_policy_expr(policy: Policy, mappings: MappingSet) -> str:
    """The generated expression for the Keras dtype policy of low-precision layers: a literal
    (`"mixed_bfloat16"`), or under `--device auto` one built from the compute dtype decided where
    the code runs (`_PTRANSPILE_DEVICE_DTYPE`; "float32" when it is float32)."""
    if not auto_device(policy):
        return f'"{keras_policy_name(policy, mappings)}"'
    if policy.param != "float32":  # 16-bit variables too: the policy is named by the dtype
        return "_PTRANSPILE_DEVICE_DTYPE"
    return '"float32" if _PTRANSPILE_DEVICE_DTYPE == "float32" else "mixed_" + _PTRANSPILE_DEVICE_DTYPE'


def keras_device_helpers(code: str, policy: Policy) -> str:
    """`code` with the `--device auto` decision (`_PTRANSPILE_DEVICE_DTYPE`) made first."""
    return with_device_helpers(code, policy, "keras.device", "_ptranspile_keras_device", "_PTRANSPILE_DEVICE_DTYPE")


def fp32_path_overrides(policy: Policy) -> tuple[str, ...]:
    """The globs of `path:` overrides that keep a layer in float32 (applied at run time)."""
    return tuple(o.path for o in policy.overrides if o.path and o.values.get("compute") == "float32")


def helper_block(
    policy: Policy, mappings: MappingSet, nan_fallback: bool = False, runtime: bool = False
) -> list[cst.BaseStatement]:
    """The generated helpers; `runtime` (the pass's `needs_runtime`) adds those of subclassed
    layers and the NaN fallback, which other files do not need."""
    output = policy.classes.get("output", {}).get("output", policy.output)
    fp32_paths = fp32_path_overrides(policy)
    paths_helpers = PATHS_HELPERS.format(fp32_paths=repr(fp32_paths)) if fp32_paths else ""
    runtime_helpers = ""
    if runtime:
        runtime_helpers = RUNTIME_HELPERS.format(
            output=output,
            nan_check=NAN_CHECK if nan_fallback else "",
            nan_helpers=NAN_HELPERS.format(name=policy.name) if nan_fallback else "",
        )
    code = HELPERS.format(
        name=policy.name,
        low=low_policy_expr(policy, mappings),
        output=output,
        runtime_helpers=runtime_helpers,
        paths_helpers=paths_helpers,
    )
    return helper_statements(keras_device_helpers(code, policy))
