"""Apply a precision policy to torch model code converted to Keras 3 (torch -> tf).

Why a pass of its own (passes/keras.py handles Keras code people wrote): a converted torch
model keeps torch's arithmetic in its `call` methods (`x + self.attn(self.norm(x))`), and torch
promotes `float32 + bfloat16` to float32 where TensorFlow refuses mixed dtypes. So the policy is
expressed the way torch itself runs mixed precision, `model.to(param)` plus `torch.autocast`:

- the model outside its layers (converted classes, containers, activations, pooling) stays in
  the policy's *param* dtype (its `base`: float32 for `mixed`);
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
holds for the converted one. What runs is `TorchAutocastPolicy` of runtime/keras/policy.py, which
the generated block (helper_block) binds with the file's constants. Everything inserted is named
`_ptranspile_*`/`_PTRANSPILE_*`, so `precision.strip` removes it exactly.
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
from precision_transpiler.precision.passes.keras import HELPER_IMPORTS as HELPER_IMPORTS  # the same block imports
from precision_transpiler.precision.passes.keras import fp32_path_overrides, low_policy_expr
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
        decorator = cst.Decorator(decorator=self.helper("_ptranspile_module"))
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
                args=[first.with_changes(value=self.island(first.value)), *updated_node.args[1:]]
            )
            if self.base_is_fp32:
                self.decide(original_node, name, op_class, decision, "fp32 island")
                return islanded
            self.decide(original_node, name, op_class, decision, "fp32 island, result in the base dtype")
            return cst.Call(func=self.helper("_ptranspile_base"), args=[cst.Arg(value=islanded)])
        if op_class in _AUTOCAST_CLASSES and self.autocast and decision.compute != "float32":
            self.decide(original_node, name, op_class, decision, "autocast region (one op)")
            func = updated_node.func.with_changes()
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            return cst.Call(
                func=self.helper("_ptranspile_autocast"),
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
            cst.Arg(self.helper("_ptranspile_matmul"), comma=comma),
            cst.Arg(updated_node.left, comma=comma),
            cst.Arg(updated_node.right),
        ]
        call = cst.Call(func=self.helper("_ptranspile_autocast"), args=args)
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


_BINDINGS = {  # generated name -> what the block binds it to (base.bindings)
    "_ptranspile_module": "_ptranspile_policy.module",
    "_ptranspile_fp32": "fp32_island",
    "_ptranspile_base": "_ptranspile_policy.base_cast",
    "_ptranspile_autocast": "_ptranspile_policy.autocast",
    "_ptranspile_matmul": "autocast_matmul",
}


def helper_block(
    policy: Policy, mappings: MappingSet, nan_fallback: bool, done: KerasTorchPolicyPass
) -> list[cst.BaseStatement]:
    """The generated block (see the module docstring): the dtype-policy names the layer calls
    pass, the table for layers built where the converter could not see, the file's
    `TorchAutocastPolicy` (runtime/keras/policy.py) and the generated names the pass `done` used."""
    output = policy.classes.get("output", {}).get("output", policy.output)
    decided = Code("_PTRANSPILE_DEVICE_DTYPE")
    compute, param = device_dtype_exprs(policy, policy.compute, policy.param, decided)
    statements = [
        *device_statements(policy, "tf", decided.dotted),
        assign("_PTRANSPILE_LOW", low_policy_expr(policy, mappings)),
        assign("_PTRANSPILE_FP32", "float32"),
    ]
    options: dict[str, object] = {"base": param, "compute": compute, "output": output}
    layer_dtypes = done.layer_dtypes()
    if layer_dtypes:
        statements.append(assign("_PTRANSPILE_LAYER_DTYPES", {k: Code(v) for k, v in sorted(layer_dtypes.items())}))
        options["layer_dtypes"] = Code("_PTRANSPILE_LAYER_DTYPES")
    fp32_paths = fp32_path_overrides(policy)
    if fp32_paths:
        statements.append(assign("_PTRANSPILE_FP32_PATHS", fp32_paths))
        options["fp32_paths"] = Code("_PTRANSPILE_FP32_PATHS")
    if nan_fallback:
        options["nan_fallback"] = True
    statements.append(
        assign("_ptranspile_policy", call(policy_ref("tf", "TorchAutocastPolicy"), policy.name, **options))
    )
    statements += bindings("tf", _BINDINGS, done.used)
    param_text = policy.param if param is not decided else "the compute dtype"
    compute_text = policy.compute if compute is not decided else "the dtype decided where it runs"
    comments = (
        f"# As torch runs it: the model in {param_text} (model.to), low-precision layers in an autocast region",
        f"# computing in {compute_text}; float32 islands for norms, softmax and reductions; outputs in {output}.",
    )
    return policy_block(policy.name, statements, comments)
