"""Code generated and run at run time is refused, not run unconverted (`exec(src)`, `exec_module`).

Some libraries render source text at run time and execute it: torch-geometric fills Jinja
templates with a layer's signature and loads the result with
`importlib.util.spec_from_file_location(...)` / `spec.loader.exec_module(module)` to speed up
message passing. That source is torch code the converter never sees, so converted code running it
would hand the target's arrays to torch (or fail deep inside it, unexplained). Here `exec(...)`
and `<loader>.exec_module(...)` calls in converted code become calls of the runtime's
`torch_generated_code`, which raises NotImplementedError saying why, and the conversion warns at
the call. Libraries that treat the generated code as an optimisation catch the error and take
their plain path, which is converted.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_name


@register
class TorchGeneratedCode(Rule):
    name = "torch-generated-code"
    summary = "exec(...) / loader.exec_module(...) of run-time generated torch code raise instead of running it."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef load(spec, module):\n    spec.loader.exec_module(module)\n    return module\n",
            "import precision_transpiler\n\n\ndef load(spec, module):\n"
            "    precision_transpiler.runtime.common.torch_generated_code(module)\n    return module\n",
            to="jax",
            vendored=False,
            diagnostics=("runs source generated at run time",),
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        func = original.func
        if isinstance(func, cst.Name) and func.value == "exec" and ctx.qualified_name(func) is None:
            what = "exec(...)"
        elif isinstance(func, cst.Attribute) and func.attr.value == "exec_module":
            what = f"{ctx.code(func)}(...)"
        else:
            return None
        ctx.diagnose(
            original,
            "warning",
            "generated-code",
            f"{what} runs source generated at run time, which is not converted: the converted code "
            "raises NotImplementedError here (code that falls back on an error takes its plain path)",
        )
        new = updated.with_changes(func=ctx.expr_for(runtime_name(None, "common", "torch_generated_code")))
        ctx.record(self.name, original, new)
        return new
