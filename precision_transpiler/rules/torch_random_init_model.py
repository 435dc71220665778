"""Random tensors made while building layers (`nn.Parameter(torch.randn(1, 1, d))`), torch -> Flax, Keras.

torch draws them from its global generator; JAX has none, and Keras does not share torch's. Inside
a function that builds layers (a module `__init__`, a builder: convert/torch_analysis.py finds
them) the values are initial values, which the torch checkpoint replaces
(precision_transpiler.weights); shape and dtype are what matter. So the call becomes a shim of the
target's runtime tensor module: in Flax it draws from the module's streams
(`torch_randn(1, 1, d, rngs=rngs)`), in Keras from Keras' global seed generator
(`torch_randn(1, 1, d)`). Elsewhere (a forward pass drawing noise) there is no key to use, so the
call is left to the op table, which reports it as unsupported with the reason.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.convert.torch_analysis import analysis_for
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_module

_SHIMS = {"torch.randn": "torch_randn", "torch.rand": "torch_rand"}
_DROPPED = ("device", "requires_grad", "generator", "layout", "pin_memory", "out")


@register
class TorchRandomInit(Rule):
    name = "torch-random-init"
    summary = "Draw torch.randn/rand made while building layers from the module's rngs or Keras' seeds."
    EXAMPLES = (
        Example(
            "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self, d):\n"
            "        super().__init__()\n        self.token = nn.Parameter(torch.randn(1, 1, d))\n",
            "from flax import nnx\nimport precision_transpiler\n\n\n"
            "class Net(precision_transpiler.runtime.flax.modules.TorchModule):\n"
            "    def __init__(self, d, *, rngs: nnx.Rngs | None = None):\n        if rngs is None:\n"
            "            rngs = nnx.Rngs(0)\n        super().__init__()\n"
            "        self.token = nnx.Param(precision_transpiler.runtime.flax.tensor.torch_randn("
            "1, 1, d, rngs=rngs))\n",
            to="jax",
            vendored=False,
        ),
        Example(
            "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self, d):\n"
            "        super().__init__()\n        self.token = nn.Parameter(torch.randn(1, 1, d))\n",
            "import precision_transpiler\n\n\nclass Net(precision_transpiler.runtime.keras.modules.TorchModule):\n"
            "    def __init__(self, d):\n        super().__init__()\n        self.token = "
            "precision_transpiler.runtime.keras.modules.Parameter("
            "precision_transpiler.runtime.keras.tensor.torch_randn(1, 1, d))\n",
            to="tf",
            vendored=False,
        ),
        Example(
            "import torch\n\n\ndef noise(x):\n    return x + torch.randn(3)\n",
            None,
            to="tf",
            diagnostics=("unsupported",),
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        shim = _SHIMS.get(ctx.qualified_name(original.func) or "")
        if shim is None:
            return None
        key = ctx.enclosing_function()
        if key is None or key not in analysis_for(ctx).builders:
            return None
        args = [a for a in updated.args if not (a.keyword is not None and a.keyword.value in _DROPPED)]
        if ctx.target == "jax":
            args.append(cst.Arg(cst.Name("rngs"), keyword=cst.Name("rngs"), equal=_EQUAL))
        if args:
            last = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            args = [a.with_changes(comma=_COMMA) for a in args[:-1]] + [last]
        ctx.consume([original.func])
        new = updated.with_changes(func=ctx.expr_for(f"{runtime_module(ctx.target, 'tensor')}.{shim}"), args=args)
        ctx.record(self.name, original, new)
        return new


_EQUAL = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
