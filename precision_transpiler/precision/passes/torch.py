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
* One helper block after the imports, marked `# ptranspile: begin precision policy`.

All of it is named `_ptranspile_*`, so `precision.strip` can remove it exactly; the pass strips
first, which makes applying a policy twice give the same file.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.precision.passes.base import (
    PolicyPass,
    auto_device,
    device_dtype_exprs,
    helper_statements,
    island,
    with_device_helpers,
)
from precision_transpiler.precision.policy import Policy
from precision_transpiler.syntax import dotted_name

ISLAND = "_ptranspile_fp32"
DECORATOR = "_ptranspile_policy"


HELPERS = '''
# ptranspile: begin precision policy "{name}" (generated; `ptranspile --policy fp32` removes it)
_PTRANSPILE_POLICY = {{
    "name": "{name}",
    "device": {device_type},
    "param": {param},
    "compute": {compute},
    "output": {output},
    "nan_fallback": {nan_fallback},
    "fp32_paths": {fp32_paths},
    "fp32_classes": {fp32_classes},
    "fp32_modules": ({fp32_modules}),
}}
_PTRANSPILE_STATE = {{"depth": 0}}  # > 0 while a module under the policy runs


def _ptranspile_cast(value, dtype):
    """Cast the floating tensors in a (nested) output to `dtype`."""
    def cast(t):
        return t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t
    from torch.utils import _pytree

    return _pytree.tree_map_only(torch.Tensor, cast, value)


def _ptranspile_fp32(x):
    """fp32 island: run the op that consumes `x` in float32 (autocast on CPU would not)."""
    if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float32:
        return x.float()
    return x


def _ptranspile_fp32_module(module, policy):
    """Whether an override keeps this module in float32 (by class name or module path glob)."""
    if type(module).__name__ in policy["fp32_classes"]:
        return True
    path = getattr(module, "_ptranspile_path", None)
    if path is None or not policy["fp32_paths"]:
        return False
    import fnmatch

    return any(fnmatch.fnmatchcase(path, pattern) for pattern in policy["fp32_paths"])


def _ptranspile_fp32_forward(forward, device):
    """A layer an override keeps in float32 (e.g. `path: layer1.0.conv1`): autocast off,
    float32 inputs. Set on the instance, so library layers such as nn.Conv2d work too."""
    def run(*args, **kwargs):
        with torch.autocast(device_type=device, enabled=False):
            args, kwargs = _ptranspile_cast((args, kwargs), torch.float32)
            return forward(*args, **kwargs)
    return run


def _ptranspile_finite(value):
    from torch.utils import _pytree

    leaves = _pytree.tree_leaves(value)
    return all(torch.isfinite(t).all() for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point())


def _ptranspile_policy(forward):
    """Run `forward` under the precision policy above. Only the outermost module casts."""
    def run(self, *args, **kwargs):
        policy = _PTRANSPILE_POLICY
        device = policy["device"]
        state = _PTRANSPILE_STATE
        if policy["compute"] == policy["param"] == torch.float32 and not policy["nan_fallback"]:
            # nothing computes in low precision here (--device auto chose float32): outputs only
            if state["depth"]:
                return forward(self, *args, **kwargs)
            state["depth"] += 1
            try:
                return _ptranspile_cast(forward(self, *args, **kwargs), policy["output"])
            finally:
                state["depth"] -= 1
        if state["depth"]:  # inside a module that already applies the policy
            if _ptranspile_fp32_module(self, policy):
                state["depth"] += 1
                try:
                    with torch.autocast(device_type=device, enabled=False):
                        args, kwargs = _ptranspile_cast((args, kwargs), torch.float32)
                        return forward(self, *args, **kwargs)
                finally:
                    state["depth"] -= 1
            return forward(self, *args, **kwargs)
        if policy["fp32_paths"] and not getattr(self, "_ptranspile_paths", False):
            for name, module in self.named_modules():
                module._ptranspile_path = name
                forward_fn = getattr(type(module).forward, "__wrapped__", None)
                if name and forward_fn is None and _ptranspile_fp32_module(module, policy):
                    module.forward = _ptranspile_fp32_forward(module.forward, device)
            self._ptranspile_paths = True
        if policy["param"] != torch.float32 and not getattr(self, "_ptranspile_params", False):
            self.to(policy["param"])
            for module in self.modules():
                if isinstance(module, policy["fp32_modules"]) or _ptranspile_fp32_module(module, policy):
                    module.float()
            self._ptranspile_params = True
        if policy["param"] != torch.float32:
            args, kwargs = _ptranspile_cast((args, kwargs), policy["compute"])
        state["depth"] += 1
        try:
            low = policy["compute"] != torch.float32 and not _ptranspile_fp32_module(self, policy)
            with torch.autocast(device_type=device, dtype=policy["compute"], enabled=low):
                if not low:
                    args, kwargs = _ptranspile_cast((args, kwargs), torch.float32)
                out = forward(self, *args, **kwargs)
            cast = _ptranspile_cast(out, policy["output"])
            if policy["nan_fallback"] and not _ptranspile_finite(cast):
                import logging

                logging.getLogger("ptranspile").warning(
                    "%s: non-finite output under policy %s; recomputing in float32",
                    type(self).__name__, policy["name"],
                )
                if policy["param"] != torch.float32:
                    self.float()
                    self._ptranspile_params = False
                with torch.autocast(device_type=device, enabled=False):
                    args32, kwargs32 = _ptranspile_cast((args, kwargs), torch.float32)
                    out = forward(self, *args32, **kwargs32)
                return _ptranspile_cast(out, torch.float32)
        finally:
            state["depth"] -= 1
        return cast
    run.__name__ = forward.__name__
    run.__doc__ = forward.__doc__
    run.__wrapped__ = forward
    return run
'''


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
        decorator = cst.Decorator(decorator=cst.Name(DECORATOR))
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
            new = updated_node.with_changes(func=func.with_changes(value=island(func.value)))
        elif updated_node.args and updated_node.args[0].keyword is None and not updated_node.args[0].star:
            first = updated_node.args[0]
            new = updated_node.with_changes(
                args=[first.with_changes(value=island(first.value)), *updated_node.args[1:]]
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


def helper_block(policy: Policy, mappings: MappingSet, nan_fallback: bool) -> list[cst.BaseStatement]:
    """The generated helper statements for `policy`."""
    keep_modules = [
        s
        for cls in policy.keep_fp32
        for s in mappings.precision_classes.get(cls, {}).get("torch", [])
        if mappings.frameworks["torch"].is_layer_class(s)
    ]
    fp32_paths = tuple(o.path for o in policy.overrides if o.path and o.values.get("compute") == "float32")
    fp32_classes = {o.class_name for o in policy.overrides if o.class_name and o.values.get("compute") == "float32"}
    compute, param = device_dtype_exprs(
        policy, _torch_dtype(mappings, policy.compute), _torch_dtype(mappings, policy.param), "_PTRANSPILE_DEVICE[1]"
    )
    device_type = '"cuda"' if policy.device == "gpu" else '"cpu"'
    if auto_device(policy):  # decided where the code runs: (device type, compute dtype)
        device_type = "_PTRANSPILE_DEVICE[0]"
    code = HELPERS.format(
        name=policy.name,
        device_type=device_type,
        param=param,
        compute=compute,
        output=_torch_dtype(mappings, policy.classes.get("output", {}).get("output", policy.output)),
        nan_fallback=nan_fallback,
        fp32_paths=repr(fp32_paths),
        fp32_classes=repr(tuple(sorted(fp32_classes))),
        fp32_modules="".join(f"{m}, " for m in keep_modules),
    )
    code = with_device_helpers(code, policy, "torch.device", "_ptranspile_torch_device", "_PTRANSPILE_DEVICE")
    return helper_statements(code)
