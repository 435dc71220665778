"""`copy.deepcopy(module)` / `copy.copy(module)` -> the Keras runtime's copies of layers.

torch code stacks identical blocks by deep-copying one (`nn.ModuleList([copy.deepcopy(layer) for
_ in range(n)])`: transformers' `_get_clones`, torch-geometric's normalisation layers). A torch
module deep-copies its attributes; a Keras layer instead pickles itself through the Keras saving
library, which fails for any class not registered as serializable ("Could not locate class
'Block'") and would save and reload every weight. On Keras, `copy.deepcopy` and `copy.copy`
(however imported, called or bound to a name: `c = copy.deepcopy`) become `torch_deepcopy` /
`torch_copy` of runtime/keras/module_api.py, which copy layers attribute by attribute and hand
everything else to the `copy` module. Flax needs nothing: nnx modules deep-copy as Python objects.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_name

#: the `copy` functions taken over, and the runtime function each becomes
_COPIES = {"copy.deepcopy": "torch_deepcopy", "copy.copy": "torch_copy"}


@register
class TorchCopyKeras(Rule):
    name = "torch-copy-tf"
    summary = "copy.deepcopy / copy.copy of layers on Keras copy attributes instead of pickling through Keras saving."
    EXAMPLES = (
        Example(
            "import copy\nimport torch\n\n\ndef clones(layer, n):\n"
            "    c = copy.deepcopy\n    return [c(layer) for _ in range(n)]\n",
            # `import copy` goes with its last use (convert/cleanup.py)
            "import precision_transpiler\n\n\ndef clones(layer, n):\n"
            "    c = precision_transpiler.runtime.keras.module_api.torch_deepcopy\n"
            "    return [c(layer) for _ in range(n)]\n",
            to="tf",
            vendored=False,
        ),
        Example(
            "from copy import deepcopy\nimport torch\n\n\ndef clones(layer, n):\n"
            "    return [deepcopy(layer) for _ in range(n)]\n",
            None,
            to="jax",
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target == "tf"

    def leave_Name(self, ctx: RuleContext, original: cst.Name, updated: cst.Name) -> cst.BaseExpression | None:
        return self._copy_function(ctx, original)

    def leave_Attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        return self._copy_function(ctx, original)

    def _copy_function(self, ctx: RuleContext, original: cst.Name | cst.Attribute) -> cst.BaseExpression | None:
        """The function itself, called or not (`c = copy.deepcopy`, then `c(layer)`: the Annotated
        Transformer's `make_model`)."""
        if not ctx.is_outermost_name(original) or isinstance(ctx.parent(original), cst.ImportAlias):
            return None
        function = _COPIES.get(ctx.qualified_name(original) or "")
        if function is None:
            return None
        new = ctx.expr_for(runtime_name("tf", "module_api", function)).with_changes(
            lpar=original.lpar, rpar=original.rpar
        )
        ctx.record(self.name, original, new)
        return new
