"""Chunks of `tensor.split(size, dim)` changed in place in a loop are written back.

Blockwise attention accumulates into row blocks of its output through the views `split` gives
(`for ind, (qc, oc) in enumerate(zip(q.split(b, dim=-2), o.split(b, dim=-2))): ...
oc.mul_(s).add_(v)`): torch's change reaches `o`, the converted one only rebinds `oc`. Each
chunk is a slice of its dimension, so the loop ends each iteration by writing the chunk back
(`o = torch_write_split(o, oc, ind, b, -2)`, runtime/*/tensor.py), and so does each `continue`
or `break` of the loop before it leaves, counting its iterations with `enumerate` where it did
not. Which loops qualify: analysis/split_chunks.py.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.analysis.inplace import aliases
from precision_transpiler.analysis.tensors import Where
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_module
from precision_transpiler.syntax import all_nodes

COUNTER = "chunk_index"


@register
class TorchSplitWriteBack(Rule):
    name = "torch-split-write-back"
    summary = "Write chunks of x.split(size, dim) changed in place in a loop back into x."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef f(o: torch.Tensor):\n    for oc in o.split(2, dim=-1):\n        oc.mul_(2)\n"
            "    return o\n",
            "import jax\nimport precision_transpiler\nimport jax.numpy as jnp\n\n\ndef f(o: jax.Array):\n"
            "    for chunk_index, oc in enumerate(precision_transpiler.runtime.flax.tensor.torch_split(o, 2, -1)):\n"
            "        oc = jnp.multiply(oc, 2)\n"
            "        o = precision_transpiler.runtime.flax.tensor.torch_write_split(o, oc, chunk_index, 2, -1)\n"
            "    return o\n",
            to="jax",
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_For(self, ctx: RuleContext, original: cst.For, updated: cst.For) -> cst.For | None:
        scope = Where.scope_of(ctx, original)
        loop = aliases(ctx, scope).split_loops.get(id(original)) if scope is not None else None
        if loop is None or not isinstance(updated.body, cst.IndentedBlock):
            return None
        counter = loop.counter
        if counter is None:
            taken = {n.value for n in all_nodes(scope) if isinstance(n, cst.Name)}
            counter = (
                COUNTER
                if COUNTER not in taken
                else next(f"{COUNTER}_{i}" for i in range(2, 99) if f"{COUNTER}_{i}" not in taken)
            )
            updated = updated.with_changes(
                target=cst.Tuple(
                    [cst.Element(cst.Name(counter)), cst.Element(_parenthesised(updated.target))], lpar=[], rpar=[]
                ),
                iter=cst.Call(cst.Name("enumerate"), [cst.Arg(updated.iter)]),
            )
        function = ctx.code(ctx.expr_for(f"{runtime_module(ctx.target, 'tensor')}.torch_write_split"))
        lines = [
            cst.parse_statement(
                f"{b.source} = {function}({b.source}, {b.chunk}, {counter}, {ctx.code(b.size)}, {b.dim})\n"
            )
            for b in loop.write_backs
        ]
        body = updated.body.with_changes(body=[*updated.body.body, *lines])
        body = body.visit(_BeforeLeaving(lines))  # `continue` / `break` write back first too
        replacement = updated.with_changes(body=body)
        ctx.record(self.name, original, replacement)
        return replacement


class _BeforeLeaving(cst.CSTTransformer):
    """Puts `lines` before each `continue` and `break` of the loop (not of loops or functions
    inside it): the iteration leaves there, and the chunk's changes must reach the tensor."""

    def __init__(self, lines: list[cst.BaseStatement]) -> None:
        super().__init__()
        self.lines = lines

    def visit_For(self, node: cst.For) -> bool:
        return False

    def visit_While(self, node: cst.While) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if not any(isinstance(small, cst.Continue | cst.Break) for small in updated.body):
            return updated
        return cst.FlattenSentinel([*self.lines, updated])

    def leave_SimpleStatementSuite(
        self, original: cst.SimpleStatementSuite, updated: cst.SimpleStatementSuite
    ) -> cst.BaseSuite:
        """`if causal: continue` on one line: the block, indented, with the lines first."""
        if not any(isinstance(small, cst.Continue | cst.Break) for small in updated.body):
            return updated
        statements = [cst.SimpleStatementLine([small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
                      for small in updated.body]  # fmt: skip
        return cst.IndentedBlock(body=[*self.lines, *statements])


def _parenthesised(target: cst.BaseAssignTargetExpression) -> cst.BaseAssignTargetExpression:
    """`qc, oc` as the second element of `i, (qc, oc)`."""
    if isinstance(target, cst.Tuple) and not target.lpar:
        return target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return target
