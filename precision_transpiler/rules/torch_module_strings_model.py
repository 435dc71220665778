"""A torch module named in a string and imported at run time is reported, not left to load torch.

Model libraries import optional dependencies through helpers that take the module's name as a
string: monai's `Rearrange, _ = optional_import("einops.layers.torch", name="Rearrange")`,
`importlib.import_module("torch.nn.functional")`. The converter resolves imports statically, so
such a name is never converted: the converted code would load torch's module at run time and
hand the target's arrays to it (monai's UNETR failed at its first call with `'ArrayImpl' object
has no attribute 'permute'`). Here a string argument of an import-like call (its function's name
contains `import`) that names the source framework's modules (`torch`, `torch.*`, and the
framework's companions such as `einops.layers.torch`) is reported as unsupported at its line.
The helpers listed in mappings/frameworks.yaml (`import_helpers`: monai's `optional_import`,
`importlib.import_module`) are written as the imports they perform before the rules run
(convert/import_helpers.py), so what reaches this rule is what that could not do (a helper it
does not know, a call whose value is not bound as those are). The fix on the user's side is a
static import, which the tables convert.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register


@register
class TorchModuleStrings(Rule):
    name = "torch-module-strings"
    summary = "Report torch modules named in strings and imported at run time (optional_import, import_module)."
    EXAMPLES = (
        Example(
            "import torch\nimport importlib\n\n\ndef act():\n"
            '    return importlib.import_module("torch.nn.functional").gelu\n',
            None,
            to="jax",
            diagnostics=("imported at run time",),
        ),
        Example(  # another library's module: an optional dependency, not torch's
            "import torch\nfrom lib import optional_import\n\n\ndef norm():\n"
            '    return optional_import("apex.normalization")\n',
            None,
            to="jax",
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        func = original.func
        callee = ""
        if isinstance(func, cst.Name | cst.Attribute):
            callee = func.value if isinstance(func, cst.Name) else func.attr.value
        if "import" not in callee.lower():
            return None
        info = ctx.mappings.frameworks["torch"]
        for arg in original.args:
            value = arg.value.evaluated_value if isinstance(arg.value, cst.SimpleString) else None
            if not isinstance(value, str):
                continue
            if value.split(".")[0] in info.roots or value in info.companions:
                ctx.unsupported(
                    arg.value,
                    f"'{value}' names a {info.display} module imported at run time by {callee}(...): the "
                    "converted code would load the original; import what it uses statically instead",
                    "runtime-import",
                )
        return None
