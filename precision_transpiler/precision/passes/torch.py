"""Apply a precision policy to PyTorch code (torch -> torch).

What the pass inserts, and why:

* `@_ptranspile_policy` on every `forward` of an nn.Module subclass. The decorator runs the
  forward inside `torch.autocast(device_type=..., dtype=<compute>)` (linear, conv, matmul,
  attention in low precision), casts parameters once when the policy stores them in low
  precision, and casts the *outermost* module's floating outputs to the policy's output dtype
  (a nested module sees autocast already enabled and just runs).
* `_ptranspile_fp32(x)` around the input of ops whose class the policy keeps in fp32 (norms,
  softmax, losses, reductions, exp/log/pow): CPU autocast leaves layer_norm and softmax in
  bf16 (measured; docs/precision-reference.md#pytorch-autocast-op-lists), so these islands must be explicit.
* One generated block after the imports, marked `# ptranspile: begin precision policy`, which
  binds those two names to the file's `TorchPolicy` and `fp32_island` of runtime/torch/policy.py
  (copied into the file by the pipeline's VendorRuntime stage).

All of it is named `_ptranspile_*`, so `precision.strip` can remove it exactly; the pass strips
first, which makes applying a policy twice give the same file.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.precision.passes.base import (
    Code,
    PolicyPass,
    assign,
    auto_device,
    bindings,
    call,
    device_dtype_exprs,
    device_statements,
    item,
    policy_block,
    policy_ref,
)
from precision_transpiler.precision.policy import Policy
from precision_transpiler.syntax import dotted_name

ISLAND = "_ptranspile_fp32"
DECORATOR = "_ptranspile_policy"


def _module_classes(module: cst.Module) -> list[cst.ClassDef]:
    """Classes that define `forward(self, ...)` and derive from something: nn.Module subclasses
    in practice (including ones deriving from a model base class defined elsewhere)."""
    found: list[cst.ClassDef] = []

    class _V(cst.CSTVisitor):
        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            if node.bases and any(isinstance(s, cst.FunctionDef) and s.name.value == "forward" for s in _body(node)):
                found.append(node)

    module.visit(_V())
    return found


def _body(node: cst.ClassDef) -> list[cst.BaseStatement]:
    body = node.body
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


class TorchPolicyPass(PolicyPass):
    """Insert the policy into module classes (classes that define `forward`)."""

    def __init__(self, policy: Policy, mappings: MappingSet, module: cst.Module, source: str, nan_fallback: bool):
        super().__init__(policy, module, source)
        self.mappings = mappings
        self.nan_fallback = nan_fallback
        self.classes = {id(c) for c in _module_classes(module)}
        self.symbols = mappings.symbol_to_precision_class.get("torch", {})
        self._class: cst.ClassDef | None = None
        self._method: str | None = None
        self._function: str | None = None  # a module-level function (model helpers such as attention)
        self._attr_class: dict[str, str] = {}  # self.<attr> -> op class, per module class
        self._attr_symbol: dict[str, str] = {}

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        if id(node) in self.classes:
            self._class = node
            self._attr_class, self._attr_symbol = self._attribute_classes(node)
        return True

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        if original_node is self._class:
            self._class = None
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        # stack: ..., ClassDef, IndentedBlock, FunctionDef: a method of the class being visited
        if self._class is not None and len(self.stack) >= 3 and self.stack[-3] is self._class:
            self._method = node.name.value
        elif len(self.stack) == 2 and self.classes:  # Module, FunctionDef: a helper of a model file
            self._function = node.name.value
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if len(self.stack) == 2:
            self._function = None
        cls = self._class
        if cls is None or len(self.stack) < 3 or self.stack[-3] is not cls:
            return updated_node
        self._method = None
        if original_node.name.value != "forward":
            return updated_node
        decision = self.policy.precision_for(None, class_name=cls.name.value)
        # the wrapper casts the outermost call's floating outputs to the policy's output dtype
        output = self.policy.classes.get("output", {}).get("output", self.policy.output)
        decision = dataclasses.replace(decision, output=output)
        self.decide(original_node, cls.name.value, "module", decision, "autocast region", f"{cls.name.value}.forward")
        decorator = cst.Decorator(decorator=self.helper(DECORATOR))
        return updated_node.with_changes(decorators=[decorator, *updated_node.decorators])

    # -- islands -------------------------------------------------------------------------------

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        in_method = self._class is not None and self._method is not None and self._method != "__init__"
        if not in_method and self._function is None:
            return updated_node
        op_class, label = self._op_class(original_node)
        if op_class is None or op_class not in self.policy.keep_fp32:
            return updated_node
        owner = self._class.name.value if in_method and self._class is not None else None
        decision = self.policy.precision_for(op_class, class_name=owner)
        if decision.compute != "float32":
            return updated_node
        func = updated_node.func
        if label.startswith("Tensor.") and isinstance(func, cst.Attribute):
            new = updated_node.with_changes(func=func.with_changes(value=self.island(func.value)))
        elif updated_node.args and updated_node.args[0].keyword is None and not updated_node.args[0].star:
            first = updated_node.args[0]
            new = updated_node.with_changes(
                args=[first.with_changes(value=self.island(first.value)), *updated_node.args[1:]]
            )
        else:
            return updated_node
        where = f"{owner}.{self._method}" if owner is not None else str(self._function)
        self.decide(original_node, label, op_class, decision, "fp32 island", where)
        return new

    def _op_class(self, call: cst.Call) -> tuple[str | None, str]:
        func = call.func
        dotted = dotted_name(func)
        if self._class is not None and dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1:
            attr = dotted.split(".", 1)[1]
            if attr in self._attr_class:
                return self._attr_class[attr], dotted
        qualified = self.names.qualified_name(func, [*self.stack, func]) if dotted is not None else None
        if qualified is not None:
            return self.symbols.get(qualified), qualified
        if isinstance(func, cst.Attribute):
            label = f"Tensor.{func.attr.value}"
            return self.symbols.get(label), label
        return None, ""

    def _attribute_classes(self, cls: cst.ClassDef) -> tuple[dict[str, str], dict[str, str]]:
        """self.<attr> = <torch layer>(...) in __init__ -> op class, following local aliases
        (`norm_layer = nn.LayerNorm`) and parameter defaults."""
        classes: dict[str, str] = {}
        symbols: dict[str, str] = {}
        init = next((s for s in _body(cls) if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None:
            return classes, symbols
        local: dict[str, str] = {}
        stack = [*self.stack, cls.body, init]  # self.stack ends with cls
        for param in init.params.params:
            if param.default is not None:
                q = (
                    self.names.qualified_name(param.default, [*stack, param.default])
                    if dotted_name(param.default)
                    else None
                )
                if q:
                    local[param.name.value] = q

        resolver = self

        class _V(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                value = node.value
                for target in node.targets:
                    t = dotted_name(target.target)
                    if t is None:
                        continue
                    if isinstance(value, cst.Call):
                        func_name = dotted_name(value.func)
                        q = (
                            local.get(func_name)
                            if func_name in local
                            else (
                                resolver.names.qualified_name(value.func, [*stack, value.func]) if func_name else None
                            )
                        )
                        if q and t.startswith("self.") and t.count(".") == 1:
                            cls_name = resolver.symbols.get(q)
                            if cls_name:
                                classes[t[5:]] = cls_name
                                symbols[t[5:]] = q
                    elif dotted_name(value) is not None and "." not in t:
                        q = resolver.names.qualified_name(value, [*stack, value])
                        if q:
                            local[t] = q

        init.visit(_V())
        return classes, symbols


def _torch_dtype(mappings: MappingSet, canon: str) -> str:
    """`torch.bfloat16` for "bfloat16", from mappings/dtypes.yaml (the helpers use `torch.`)."""
    symbol = mappings.dtype_symbol("torch", canon)
    assert symbol is not None, canon
    return symbol


#: the imports the generated block uses (added, marked, where the file lacks them)
HELPER_IMPORTS = [("torch", "torch"), ("precision_transpiler", "precision_transpiler")]


def helper_block(
    policy: Policy, mappings: MappingSet, nan_fallback: bool, done: TorchPolicyPass
) -> list[cst.BaseStatement]:
    """The generated block: the file's `TorchPolicy` (runtime/torch/policy.py) as
    `_ptranspile_policy`, and `_ptranspile_fp32` where the pass `done` made fp32 islands."""
    keep_modules = tuple(
        Code(s)
        for cls in policy.keep_fp32
        for s in mappings.precision_classes.get(cls, {}).get("torch", [])
        if mappings.frameworks["torch"].is_layer_class(s)
    )
    fp32_paths = tuple(o.path for o in policy.overrides if o.path and o.values.get("compute") == "float32")
    fp32_classes = {o.class_name for o in policy.overrides if o.class_name and o.values.get("compute") == "float32"}
    decided = item("_PTRANSPILE_DEVICE", 1)
    compute, param = device_dtype_exprs(
        policy, Code(_torch_dtype(mappings, policy.compute)), Code(_torch_dtype(mappings, policy.param)), decided
    )
    device_type: object = "cuda" if policy.device == "gpu" else "cpu"
    if auto_device(policy):  # decided where the code runs: (device type, compute dtype)
        device_type = item("_PTRANSPILE_DEVICE", 0)
    output = _torch_dtype(mappings, policy.classes.get("output", {}).get("output", policy.output))
    options: dict[str, object] = {"device": device_type, "param": param, "compute": compute, "output": Code(output)}
    if nan_fallback:
        options["nan_fallback"] = True
    if fp32_paths:
        options["fp32_paths"] = fp32_paths
    if fp32_classes:
        options["fp32_classes"] = tuple(sorted(fp32_classes))
    if keep_modules:
        options["fp32_modules"] = keep_modules
    statements = [
        *device_statements(policy, "torch", "_PTRANSPILE_DEVICE"),
        assign("_ptranspile_policy", call(policy_ref("torch", "TorchPolicy"), policy.name, **options)),
        *bindings("torch", {ISLAND: "fp32_island"}, done.used),
    ]
    return policy_block(policy.name, statements)
