"""Apply a precision policy to torch model code converted to Keras 3 (torch -> tf).

Why a pass of its own (passes/keras.py handles Keras code people wrote): a converted torch
model keeps torch's arithmetic in its `call` methods (`x + self.attn(self.norm(x))`), and torch
promotes `float32 + bfloat16` to float32 where TensorFlow refuses mixed dtypes. So the policy is
expressed the way torch itself runs mixed precision, `model.to(param)` plus `torch.autocast`:

- the model outside its layers (converted classes, containers, activations, pooling) stays in
  the policy's *param* dtype (`_PTRANSPILE_BASE`: float32 for `mixed`);
- layers of the policy's low-precision classes (Linear, Conv, MultiheadAttention, BatchNorm ...)
  get a Keras dtype policy computing in the *compute* dtype (`dtype=_PTRANSPILE_LOW`, e.g.
  "mixed_bfloat16": float32 variables, bfloat16 compute); keep-fp32 classes (LayerNorm,
  GroupNorm, Embedding, Softmax) get "float32";
- every such layer hands its floating results back in the dtype of its input (an autocast
  region's boundary), so the code around it sees one dtype and TensorFlow never meets
  `bfloat16 + float32`; the values are those torch's autocast produces;
- functional ops of low-precision classes (`keras.ops.matmul`, `linear`, `conv2d`,
  `scaled_dot_product_attention`) run through `_ptranspile_autocast(op, ...)` (the same
  boundary for one op); keep-fp32 functional ops (`softmax`, `layer_norm`, `sum`) get float32
  inputs (`_ptranspile_fp32(x)`), and where the base dtype is not float32 their result goes back
  to it (`_ptranspile_base(...)`);
- the outermost call of a converted model returns its floating outputs in the policy's output
  dtype (and with --nan-fallback computes a non-finite result again in float32).

Layers the converter sees being built (`Linear(d, d)`) get `dtype=` in the code, and a report
line; layers built through factories (`norm_layer(dim)`, `partial(nn.Conv2d, ...)`, a class
passed as an argument) are found at run time: after the outermost `__init__` of a converted class
(`@_ptranspile_module`) every layer of the model whose class (or a base class) is in
`_PTRANSPILE_LAYER_DTYPES` gets that dtype policy. `path:` overrides with `compute: float32` are
applied in the same walk, over the torch module paths (`layer1.0.conv1`, what
`ptranspile verify` and torch's `named_modules()` print), so a policy written for the torch model
holds for the converted one. Everything inserted is named `_ptranspile_*`/`_PTRANSPILE_*`, so
`precision.strip` removes it exactly.
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
)
from precision_transpiler.precision.passes.keras import (
    fp32_path_overrides,
    keras_device_helpers,
    low_policy_expr,
)
from precision_transpiler.precision.policy import Policy
from precision_transpiler.runtime import PACKAGE, runtime_module, runtime_name

_SHIMS = PACKAGE + "."
# Bases whose subclasses in the converted file are the model's own classes (get @_ptranspile_module):
# TorchModule, and the torch-semantics layers and library counterparts (`class Stage(nn.Sequential)`).
_MODULE_BASES = runtime_name("tf", "modules", "TorchModule")
_LAYER_SHIMS = (
    *(
        runtime_module("tf", subject) + "."
        for subject in (
            "conv",
            "pool",
            "norm",
            "attention",
            "activations",
            "containers",
            "layers",
            "modules",
            "transformers",
        )
    ),
    *(runtime_name(None, "common", name) for name in ("Cache", "GenerationMixin", "EncoderDecoderCache")),
)
# Low-precision op classes that run in the compute dtype (torch autocast's lower-precision list).
_AUTOCAST_CLASSES = frozenset({"linear", "conv", "matmul", "attention"})

HELPERS = '''
# ptranspile: begin precision policy "{name}" (generated; `ptranspile --policy fp32` removes it)
# As torch runs it: the model in {param_text} (model.to), low-precision layers in an autocast region
# computing in {compute_text}; float32 islands for norms, softmax and reductions; outputs in {output}.
_PTRANSPILE_LOW = {low}
_PTRANSPILE_FP32 = "float32"
_PTRANSPILE_BASE = {param}
_PTRANSPILE_COMPUTE = {compute}
_PTRANSPILE_OUTPUT = "{output}"
_PTRANSPILE_NAN_FALLBACK = {nan_fallback}
# Layer classes (or their bases) -> dtype policy, for layers the converter did not see being built.
_PTRANSPILE_LAYER_DTYPES = {layer_dtypes}
_PTRANSPILE_FP32_PATHS = {fp32_paths}
_PTRANSPILE_DEPTH = [0]  # > 0 while the outermost model call runs
_PTRANSPILE_INIT = [0]  # > 0 while the __init__ of a converted module runs


def _ptranspile_floating(t):
    return hasattr(t, "dtype") and keras.backend.is_float_dtype(keras.backend.standardize_dtype(t.dtype))


def _ptranspile_map(f, value):
    """keras.tree.map_structure(f, value), also into the dict subclasses it takes for one leaf (a
    model's output class: diffusers' `BaseOutput`), item by item in a copy."""
    import collections

    def one(t):
        if not isinstance(t, dict) or type(t) in (dict, collections.OrderedDict, collections.defaultdict):
            return f(t)
        import copy

        new = copy.copy(t)
        for key, item in t.items():
            new[key] = _ptranspile_map(f, item)
        return new
    return keras.tree.map_structure(one, value)


def _ptranspile_cast(value, dtype):
    """Cast the floating tensors in a (nested) value to `dtype`."""
    def cast(t):
        if _ptranspile_floating(t) and keras.backend.standardize_dtype(t.dtype) != dtype:
            return keras.ops.cast(t, dtype)
        return t
    return _ptranspile_map(cast, value)


def _ptranspile_first_dtype(args, kwargs):
    """The dtype of the first floating tensor among a call's arguments (None: there is none)."""
    first = next((t for t in keras.tree.flatten((args, kwargs)) if _ptranspile_floating(t)), None)
    return None if first is None else keras.backend.standardize_dtype(first.dtype)


def _ptranspile_fp32(x):
    """fp32 island for a functional op the policy keeps in float32."""
    return _ptranspile_cast(x, "float32")


def _ptranspile_base(x):
    """A float32 island's result back in the model's dtype."""
    return _ptranspile_cast(x, _PTRANSPILE_BASE)


def _ptranspile_autocast(op, *args, **kwargs):
    """torch.autocast for one functional op: floating inputs in the compute dtype, floating
    results back in the dtype of the first floating input."""
    dtype = _ptranspile_first_dtype(args, kwargs)
    out = op(*_ptranspile_cast(args, _PTRANSPILE_COMPUTE), **_ptranspile_cast(kwargs, _PTRANSPILE_COMPUTE))
    return out if dtype is None else _ptranspile_cast(out, dtype)


def _ptranspile_matmul(a, b):
    """`a @ b` of the converted code, as an op an autocast region calls."""
    return keras.ops.matmul(a, b)


def _ptranspile_region(layer):
    """Make `layer` an autocast region: its floating inputs in its compute dtype, its floating
    results back in the dtype of its first floating input. Keras would cast the inputs itself
    (and lose the input's dtype), so that is turned off for this layer."""
    import functools

    if getattr(layer, "_ptranspile_region", False):
        return
    call = layer.call

    @functools.wraps(call)
    def run(*args, **kwargs):
        dtype = _ptranspile_first_dtype(args, kwargs)
        compute = layer.compute_dtype
        out = call(*_ptranspile_cast(args, compute), **_ptranspile_cast(kwargs, compute))
        return out if dtype is None else _ptranspile_cast(out, dtype)

    object.__setattr__(layer, "call", run)
    object.__setattr__(layer, "_convert_input_args", False)
    object.__setattr__(layer, "_ptranspile_region", True)


def _ptranspile_dtype_policy(layer, name):
    """`name`, or its "mixed_" form where the layer's variables were already made in float32 (a
    layer built before the policy reached it): Keras then casts them when the layer reads them."""
    policy = keras.dtype_policies.get(name)
    own = [*getattr(layer, "_trainable_variables", []), *getattr(layer, "_non_trainable_variables", [])]
    if policy.compute_dtype != "float32" and any(v.dtype != policy.compute_dtype for v in own):
        return "mixed_" + policy.compute_dtype
    return name


def _ptranspile_named_layers(model):
    """(torch module path, layer) for the model and everything in it."""
    walk = getattr(model, "named_modules", None)
    named = list(walk()) if callable(walk) else [("", model)]
    seen = {{id(layer) for _, layer in named}}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if id(layer) not in seen:  # a layer the torch-style walk does not name (Keras bookkeeping)
            seen.add(id(layer))
            named.append((layer.name, layer))
    return named


def _ptranspile_apply(model):
    """Give every layer of `model` its dtype policy: the table's for layers of its classes (unless
    the code gave one), float32 under fp32 path overrides (paths relative to `model`), the base
    dtype elsewhere; layers computing in another dtype than the model become autocast regions."""
    import fnmatch

    global_policy = keras.config.dtype_policy().name
    fp32_inside = []
    for path, layer in _ptranspile_named_layers(model):
        fp32 = any(path == p or path.startswith(p + ".") for p in fp32_inside) or any(
            fnmatch.fnmatchcase(path, pattern) for pattern in _PTRANSPILE_FP32_PATHS
        )
        if fp32:
            fp32_inside.append(path)
            name = _PTRANSPILE_FP32
        else:
            table = _PTRANSPILE_LAYER_DTYPES
            name = next((table[c.__name__] for c in type(layer).__mro__ if c.__name__ in table), None)
            if name is None:
                name = _PTRANSPILE_BASE
            elif layer.dtype_policy.name not in (global_policy, _PTRANSPILE_FP32):
                name = layer.dtype_policy.name  # the code gave this layer its dtype
        if layer.dtype_policy.name != name:
            layer.dtype_policy = _ptranspile_dtype_policy(layer, name)
        if keras.dtype_policies.get(name).compute_dtype != _PTRANSPILE_BASE:
            _ptranspile_region(layer)


def _ptranspile_module(cls):
    """Class decorator for a converted torch module: when the outermost `__init__` of converted
    modules ends (not those of submodules it builds, nor super().__init__) the policy reaches
    every layer of the module; its first outermost call applies it again (layers set since:
    `model.fc = ...`, a module built apart and passed in); its outermost calls return floating
    outputs in the policy's output dtype."""
    import functools
    import inspect

    if not issubclass(cls, keras.layers.Layer):  # a class deriving from a library counterpart (ModelOutput)
        return cls
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        _PTRANSPILE_INIT[0] += 1
        try:
            init(self, *args, **kwargs)
        finally:
            _PTRANSPILE_INIT[0] -= 1
        if not _PTRANSPILE_INIT[0]:
            _ptranspile_apply(self)

    # Keras reads the constructor's arguments with inspect.getfullargspec (auto get_config),
    # which does not follow __wrapped__ but does read __signature__.
    __init__.__signature__ = inspect.signature(init)
    cls.__init__ = __init__
    call = cls.__call__

    @functools.wraps(call)
    def __call__(self, *args, **kwargs):
        if _PTRANSPILE_DEPTH[0]:
            return call(self, *args, **kwargs)
        if not getattr(self, "_ptranspile_called", False):  # layers set after __init__ (`model.fc = ...`)
            object.__setattr__(self, "_ptranspile_called", True)
            _ptranspile_apply(self)
        _PTRANSPILE_DEPTH[0] += 1
        try:
            out = call(self, *args, **kwargs)
        finally:
            _PTRANSPILE_DEPTH[0] -= 1
        out = _ptranspile_cast(out, _PTRANSPILE_OUTPUT)
        if _PTRANSPILE_NAN_FALLBACK and not _ptranspile_finite(out):
            return _ptranspile_recompute_fp32(call, self, args, kwargs)
        return out

    cls.__call__ = __call__
    return cls


def _ptranspile_finite(value):
    """False only for a concrete floating output holding inf/nan (symbolic tensors and traced
    functions are not checked)."""
    leaves = []
    _ptranspile_map(leaves.append, value)
    leaves = [t for t in leaves if _ptranspile_floating(t)]
    if any(isinstance(t, keras.KerasTensor) for t in leaves):
        return True
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if not tf.executing_eagerly():
            return True
    return all(bool(keras.ops.all(keras.ops.isfinite(t))) for t in leaves)


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
        return _ptranspile_cast(call(model, *_ptranspile_fp32(args), **_ptranspile_fp32(kwargs)), "float32")
    finally:
        _PTRANSPILE_DEPTH[0] -= 1
        for layer, policy in saved:
            object.__setattr__(layer, "_dtype_policy", policy)
'''


class KerasTorchPolicyPass(PolicyPass):
    """The static half (see the module docstring): `dtype=` on layers built in the code,
    `@_ptranspile_module` on converted classes, autocast and float32 islands on functional ops."""

    def __init__(self, policy: Policy, mappings: MappingSet, module: cst.Module, source: str) -> None:
        super().__init__(policy, module, source)
        self.symbols = mappings.symbol_to_precision_class.get("tf", {})
        self.is_layer = mappings.frameworks["tf"].is_layer_class
        self.module_classes: set[str] = set()  # converted classes of the file seen so far
        self.base_is_fp32 = policy.param == "float32"
        self.autocast = policy.compute != policy.param
        self.source = source

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            if base.keyword is not None:
                continue
            local = base.value.value if isinstance(base.value, cst.Name) else None
            qualified = self.qualified(base.value) or ""
            if local in self.module_classes or qualified == _MODULE_BASES or qualified.startswith(_LAYER_SHIMS):
                self.module_classes.add(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        if original_node.name.value not in self.module_classes:
            return updated_node
        decision = self.policy.precision_for("output")
        self.decide(original_node, original_node.name.value, "module", decision, "policy after __init__, output cast")
        decorator = cst.Decorator(decorator=cst.Name("_ptranspile_module"))
        return updated_node.with_changes(decorators=[decorator, *updated_node.decorators])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self.qualified(original_node.func)
        op_class = self.symbols.get(name) if name is not None else None
        if op_class is None or name is None:
            return updated_node
        short = name.rsplit(".", 1)[1]
        decision = self.policy.precision_for(op_class, class_name=short)
        if self.is_layer(name):
            if not name.startswith(_SHIMS) or chooses_dtype(updated_node.args):
                return updated_node  # not a torch-semantics layer, or the code chose its dtype
            constant = "_PTRANSPILE_FP32" if decision.compute == "float32" else "_PTRANSPILE_LOW"
            self.decide(original_node, name, op_class, decision, f"dtype={constant}")
            return updated_node.with_changes(args=append_keywords(list(updated_node.args), [("dtype", constant)]))
        if not updated_node.args or updated_node.args[0].keyword is not None:
            return updated_node
        if op_class in self.policy.keep_fp32 and decision.compute == "float32":
            first = updated_node.args[0]
            islanded = updated_node.with_changes(
                args=[first.with_changes(value=island(first.value)), *updated_node.args[1:]]
            )
            if self.base_is_fp32:
                self.decide(original_node, name, op_class, decision, "fp32 island")
                return islanded
            self.decide(original_node, name, op_class, decision, "fp32 island, result in the base dtype")
            return cst.Call(func=cst.Name("_ptranspile_base"), args=[cst.Arg(value=islanded)])
        if op_class in _AUTOCAST_CLASSES and self.autocast and decision.compute != "float32":
            self.decide(original_node, name, op_class, decision, "autocast region (one op)")
            func = updated_node.func.with_changes()
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            return cst.Call(
                func=cst.Name("_ptranspile_autocast"),
                args=[cst.Arg(value=func, comma=comma), *updated_node.args],
            )
        return updated_node

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        """`a @ b` is a matmul as `torch.matmul(a, b)` is: one autocast region, whose inputs meet
        in the compute dtype (TensorFlow refuses `float32 @ bfloat16`, where a float32 island's
        result, rtdl's `softmax(logits) @ v`, meets a low-precision layer's)."""
        if not isinstance(original_node.operator, cst.MatrixMultiply) or not self.autocast:
            return updated_node
        decision = self.policy.precision_for("matmul", class_name="matmul")
        if decision.compute == "float32":
            return updated_node
        self.decide(original_node, "@", "matmul", decision, "autocast region (one op)")
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        args = [
            cst.Arg(cst.Name("_ptranspile_matmul"), comma=comma),
            cst.Arg(updated_node.left, comma=comma),
            cst.Arg(updated_node.right),
        ]
        call = cst.Call(func=cst.Name("_ptranspile_autocast"), args=args)
        return call.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)

    def layer_dtypes(self) -> dict[str, str]:
        """Shim class name -> dtype constant, for the layer classes the converted file names."""
        table: dict[str, str] = {}
        for name, op_class in self.symbols.items():
            layer = name.rsplit(".", 1)[1]
            if not name.startswith(_SHIMS) or not self.is_layer(name) or layer not in self.source:
                continue
            decision = self.policy.precision_for(op_class, class_name=layer)
            table[layer] = "_PTRANSPILE_FP32" if decision.compute == "float32" else "_PTRANSPILE_LOW"
        return table


def helper_block(
    policy: Policy, mappings: MappingSet, nan_fallback: bool = False, layer_dtypes: dict[str, str] | None = None
) -> list[cst.BaseStatement]:
    """The generated helpers (see the module docstring)."""
    output = policy.classes.get("output", {}).get("output", policy.output)
    table = "{" + ", ".join(f"{k!r}: {v}" for k, v in sorted((layer_dtypes or {}).items())) + "}"
    compute, param = device_dtype_exprs(policy, f'"{policy.compute}"', f'"{policy.param}"', "_PTRANSPILE_DEVICE_DTYPE")
    code = HELPERS.format(
        name=policy.name,
        low=low_policy_expr(policy, mappings),
        param=param,
        compute=compute,
        param_text=policy.param if param != "_PTRANSPILE_DEVICE_DTYPE" else "the compute dtype",
        compute_text=policy.compute if compute != "_PTRANSPILE_DEVICE_DTYPE" else "the dtype decided where it runs",
        output=output,
        nan_fallback=nan_fallback,
        layer_dtypes=table,
        fp32_paths=repr(fp32_path_overrides(policy)),
    )
    return helper_statements(keras_device_helpers(code, policy))
