"""torch's module walks and registrations as calls of the runtime's functions.

`m.modules()`, `m.named_modules()`, `m.named_children()`, `m.parameters()`, `m.named_parameters()`,
`m.buffers()`, `m.named_buffers()` (anywhere, without arguments: the names are torch's own),
`self.children()` and `self.add_module(name, m)` / `register_module` (on `self` and its
attributes, inside a class: `children` is a common method name), and `m.reset_parameters()`
(a receiver other than `self`) become `modules(m)`, ... of runtime/{flax,keras}/module_api.py
(`reset_parameters`: runtime/common.py); `m.register_forward_hook(hook)` and
`register_forward_pre_hook` on any receiver become `register_forward_hook(m, hook)` of
runtime/common.py, which gives the module a class whose calls run the hooks. Converted module
classes have the methods too (their `TorchModule` base), but the receiver may be a layer the
runtime or the target library defines (a Flax `nnx.Linear`, a Keras layer), which has none:
RRDBNet's `for m in net.modules()` on a convolution. The functions take any module of the target.
`m.forward(x)` (any receiver but `self`: a submodule, torch-uncertainty's
`self.core_model.forward(x)`) becomes `torch_forward(m, x)` of runtime/common.py: the object's
own `forward` where it has one, else its call (a Flax or Keras layer has no `forward`).
Likewise `m.eval()` (any receiver but `self`) and `self.m.train(mode)` become `torch_eval(m)` and
`torch_train(m, mode)` of runtime/{flax,keras}/modules.py: a Keras layer has no such methods, and
nnx's return None where torch's return the module.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.runtime import runtime_name
from precision_transpiler.syntax import dotted_name

#: torch-only names: rewritten on any receiver that is not an imported module
ANYWHERE = ("modules", "named_modules", "named_children", "named_parameters", "named_buffers", "parameters", "buffers")
#: common names too (`tree.children()`): only on `self` and its attributes in a class
ON_SELF = ("children",)
REGISTERS = ("add_module", "register_module")
#: on any receiver but `self` (a converted class's own call stays a method call)
RESETS = ("reset_parameters",)
#: on any receiver, `self` included, with their arguments: runtime/common.py's functions
HOOKS = ("register_forward_hook", "register_forward_pre_hook")
#: mode switches: `eval()` on any receiver but `self`, `train(mode)` (a common method name) on
#: attributes of `self` only: runtime/{flax,keras}/modules.py's `torch_eval`, `torch_train`
MODES = {"eval": "torch_eval", "train": "torch_train"}


def module_walk(ctx: RuleContext, original: cst.Call, updated: cst.Call, runtime: str) -> cst.Call | None:
    """The runtime call for a walk or registration (`runtime`: the target's runtime modules
    module, dotted), or None."""
    func = updated.func
    if not isinstance(func, cst.Attribute) or not isinstance(original.func, cst.Attribute):
        return None
    if ctx.qualified_name(original.func.value) is not None:
        return None
    receiver = dotted_name(func.value)
    if receiver is None:  # `nn.Sequential(...).eval()`: only a mode switch reads a built module
        receiver = "" if func.attr.value == "eval" and not updated.args else None
    if receiver is None:
        return None
    key = ctx.enclosing_function()
    on_self = key is not None and "." in key and (receiver == "self" or receiver.startswith("self."))
    method = func.attr.value
    resets = method in RESETS and receiver != "self"
    if not updated.args and (method in ANYWHERE or (method in ON_SELF and on_self) or resets):
        args = [cst.Arg(func.value)]
    elif method in HOOKS and updated.args:
        args = [cst.Arg(func.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), *updated.args]
    elif _mode_switch(method, receiver, on_self, updated):
        args = [cst.Arg(func.value), *[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args]]
        if len(args) == 2:
            args[0] = args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return cst.Call(func=ctx.expr_for(f"{runtime.rsplit('.', 1)[0]}.modules.{MODES[method]}"), args=args)
    elif method == "forward" and receiver not in ("", "self", "cls") and not _unbound_call(updated):
        args = [cst.Arg(func.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), *updated.args]
        if not updated.args:
            args = [cst.Arg(func.value)]
        return cst.Call(func=ctx.expr_for(runtime_name(None, "common", "torch_forward")), args=args)
    elif on_self and method in REGISTERS and len(updated.args) == 2 and all(not a.star for a in updated.args):
        args = [cst.Arg(func.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), *updated.args]
        method = "add_module"
    else:
        return None
    if method in RESETS or method in HOOKS:
        return cst.Call(func=ctx.expr_for(runtime_name(None, "common", method)), args=args)
    return cst.Call(func=ctx.expr_for(f"{runtime}.{method}"), args=args)


def _unbound_call(call: cst.Call) -> bool:
    """`Base.forward(self, x)`: a class's method called with the instance (the class rules name
    it `__call__`/`call`), not a held module's forward."""
    first = call.args[0].value if call.args and not call.args[0].star else None
    return isinstance(first, cst.Name) and first.value == "self"


def _mode_switch(method: str, receiver: str, on_self: bool, call: cst.Call) -> bool:
    """`m.eval()` (any receiver but `self`, whose class has the method) or `self.m.train(mode)`."""
    if method == "eval":
        return not call.args and receiver != "self"
    if method == "train":
        plain = all(not a.star and (a.keyword is None or a.keyword.value == "mode") for a in call.args)
        return on_self and receiver != "self" and len(call.args) <= 1 and plain
    return False
