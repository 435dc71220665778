"""In-place initialisation methods (`t.normal_(std=0.02)`, `t.zero_()`), torch -> Flax NNX and Keras.

JAX and TensorFlow tensors are immutable. Used as a value
(`nn.Parameter(torch.empty(1, n, d).normal_(std=0.02))`), such a call becomes a function that
returns the drawn or filled array (`tensor_normal_(..., rngs=rngs)` for Flax, drawing from the
key source in reach as mappings/ops/random_ops.yaml describes; `tensor_normal_(...)` for Keras,
from Keras' global seed): `x.new_empty(shape).bernoulli_(keep)` in a forward pass is a drop mask. As a statement on an
existing parameter (an init loop), and `p.data.copy_(values)` as a statement, it is dropped with a
note: the converted model's weights come from the torch checkpoint. A random one as a statement on a
local tensor outside an initialiser (`h.normal_()` in a forward pass) is a draw: `h = tensor_normal_(h, ...)`.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.analysis.inplace import in_initialiser, is_initialisation, sets_parameter_data
from precision_transpiler.analysis.torch_models import RANDOM_INPLACE, random_source, warn_process_random
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_module
from precision_transpiler.syntax import all_nodes

_RANDOM = RANDOM_INPLACE
#: initialisers as statements (dropped); `mask.bernoulli_(p)` as a statement is an operation
_INIT_RANDOM = ("normal_", "uniform_")
_CONSTANT = {"zero_": "tensor_zero_", "fill_": "tensor_fill_"}
_SHIMS = {target: runtime_module(target, "modules") for target in ("jax", "tf")}
_RANDOM_SHIMS = {target: runtime_module(target, "rng") for target in ("jax", "tf")}


@register
class TorchInplaceInit(Rule):
    name = "torch-inplace-init"
    summary = "Turn in-place initialisation methods into values (or drop init statements) for Flax and Keras."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef init(p):\n    p.weight.zero_()\n    return p\n",
            "def init(p):\n    pass\n    return p\n",
            to="jax",
            diagnostics=("initialisation is not converted",),
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in _SHIMS

    def leave_SimpleStatementLine(
        self, ctx: RuleContext, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.RemovalSentinel | None:
        if len(original.body) == 1 and isinstance(original.body[0], cst.AugAssign):
            return self._scaled_data(ctx, original, original.body[0])
        if len(original.body) == 1 and isinstance(original.body[0], cst.Assign):
            return self._filled_data(ctx, original, original.body[0])
        if len(original.body) != 1 or not isinstance(original.body[0], cst.Expr):
            return None
        call = original.body[0].value
        if not isinstance(call, cst.Call):
            return None
        # `conv.weight.data.copy_(kernel)` (kornia's SIFT descriptor), `module.weight.data.mul_(s)`
        # in timm's `_init_weights`: a parameter set while building; the torch checkpoint holds it
        sets_data = sets_parameter_data(ctx, call, statement=True)
        method = _method(call)
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        if (
            method in _RANDOM
            and isinstance(receiver, cst.Name)
            and not sets_data
            and ctx.qualified_name(call.func) is None  # `init.normal_(w)`: torch.nn.init's function
            and not is_initialisation(ctx, receiver, call)
        ):
            # `h.normal_()` on a local tensor in a forward pass: a draw, not initialisation
            expr = updated.body[0]
            assert isinstance(expr, cst.Expr) and isinstance(expr.value, cst.Call)
            value = self._shim_call(ctx, call, expr.value)
            new = updated.with_changes(body=[cst.Assign([cst.AssignTarget(cst.Name(receiver.value))], value)])
            ctx.consume([call])
            ctx.record(self.name, original, new)
            return new
        if not sets_data and _method(call) not in (*_INIT_RANDOM, *_CONSTANT, "trunc_normal_"):
            return None
        if ctx.qualified_name(call.func) is not None:
            return None  # `nn.init.normal_(w)`: a function, dropped by the torch-zoo rule
        if ctx.target != "jax" and _method(call) in _CONSTANT:
            # for Flax the torch-inplace-ops rule takes `h.zero_()` on a local tensor first; for
            # Keras, where that rule does not run yet, such a statement stays (and is reported)
            assert isinstance(call.func, cst.Attribute)
            if not is_initialisation(ctx, call.func.value, call):
                return None
        return self._drop(ctx, original, call)

    def _scaled_data(
        self, ctx: RuleContext, original: cst.SimpleStatementLine, statement: cst.AugAssign
    ) -> cst.BaseStatement | None:
        """`m.weight.data *= scale` in an initialiser (kornia's `initialize_weights`), also into
        part of it (`param.data[rows, :] += diagonal_bias`, neuraloperator's attention kernel): as
        the in-place methods on `.data` there, dropped with a note."""
        target = statement.target
        if isinstance(target, cst.Subscript):
            target = target.value
        if not (isinstance(target, cst.Attribute) and target.attr.value == "data"):
            return None
        if not in_initialiser(ctx):
            return None
        return self._drop(ctx, original, statement)

    def _filled_data(
        self, ctx: RuleContext, original: cst.SimpleStatementLine, statement: cst.Assign
    ) -> cst.BaseStatement | None:
        """`self.scale.data[:] = init`, `conv.bias.data[:] = -2` in an initialiser (demucs'
        LayerScale): a parameter's values set while building, dropped with a note as the
        in-place methods on `.data` are (an array of the target cannot be assigned into)."""
        if len(statement.targets) != 1 or not isinstance(target := statement.targets[0].target, cst.Subscript):
            return None
        if not (isinstance(target.value, cst.Attribute) and target.value.attr.value == "data"):
            return None
        if not in_initialiser(ctx):
            return None
        return self._drop(ctx, original, statement)

    def _drop(self, ctx: RuleContext, original: cst.SimpleStatementLine, what: cst.CSTNode) -> cst.BaseStatement:
        """The statement as `pass`, with a note naming what was dropped."""
        text = " ".join(ctx.code(what).split())
        ctx.diagnose(
            original,
            "note",
            "init-dropped",
            f"`{text[:77] + '...' if len(text) > 80 else text}` dropped: initialisation is not converted; "
            "load the torch weights into the converted model (precision_transpiler.weights)",
        )
        new = cst.SimpleStatementLine([cst.Pass()])
        ctx.consume(all_nodes(what))  # dropped on purpose: nothing in it is left unconverted
        ctx.record(self.name, original, new)
        return new

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        method = _method(updated)
        if method not in _RANDOM and method not in _CONSTANT:
            return None
        if ctx.qualified_name(original.func) is not None:
            return None
        parent = ctx.parent(original)
        if isinstance(parent, cst.Expr):
            return None  # a statement: leave_SimpleStatementLine drops or assigns it
        new = self._shim_call(ctx, original, updated)
        ctx.record(self.name, original, new)
        return new

    def _shim_call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`x.normal_(0, 1)` -> `tensor_normal_(x, 0, 1, rngs=...)`: the runtime function that
        returns the drawn or filled array."""
        method = _method(updated)
        assert isinstance(updated.func, cst.Attribute) and method is not None
        args = [cst.Arg(updated.func.value), *updated.args]
        module = _SHIMS[ctx.target]
        if method in _RANDOM:
            module = _RANDOM_SHIMS[ctx.target]
            source = random_source(ctx) if ctx.target == "jax" else None
            if source is not None:
                equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
                args.append(cst.Arg(cst.Name(source), keyword=cst.Name("rngs"), equal=equal))
            elif ctx.target == "jax":
                warn_process_random(ctx, original, method)
        shim = _RANDOM.get(method) or _CONSTANT[method]
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]
        args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]] + args[
            -1:
        ]
        return cst.Call(func=ctx.expr_for(f"{module}.{shim}"), args=args)


def _method(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None
