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


def module_walk(ctx: RuleContext, original: cst.Call, updated: cst.Call, runtime: str) -> cst.Call | None:
    """The runtime call for a walk or registration (`runtime`: the target's runtime modules
    module, dotted), or None."""
    func = updated.func
    if not isinstance(func, cst.Attribute) or not isinstance(original.func, cst.Attribute):
        return None
    receiver = dotted_name(func.value)
    if receiver is None or ctx.qualified_name(original.func.value) is not None:
        return None
    key = ctx.enclosing_function()
    on_self = key is not None and "." in key and (receiver == "self" or receiver.startswith("self."))
    method = func.attr.value
    resets = method in RESETS and receiver != "self"
    if not updated.args and (method in ANYWHERE or (method in ON_SELF and on_self) or resets):
        args = [cst.Arg(func.value)]
    elif method in HOOKS and updated.args:
        args = [cst.Arg(func.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), *updated.args]
    elif on_self and method in REGISTERS and len(updated.args) == 2 and all(not a.star for a in updated.args):
        args = [cst.Arg(func.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), *updated.args]
        method = "add_module"
    else:
        return None
    if method in RESETS or method in HOOKS:
        return cst.Call(func=ctx.expr_for(runtime_name(None, "common", method)), args=args)
    return cst.Call(func=ctx.expr_for(f"{runtime}.{method}"), args=args)
