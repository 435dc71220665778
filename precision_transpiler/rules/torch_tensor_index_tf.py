"""Reads of a tensor at a tensor index, torch -> Keras (`table[index]` -> `torch_at(table)[index].get()`).

torch indexes tensors with integer and boolean tensors (`bias_table[relative_position_index]` in
Swin, `x[mask]`, `x[:, idx]`), as NumPy does; TensorFlow tensors take only ints, slices, `None`
and `...` (a TypeError when run). JAX arrays index like NumPy, so only the Keras target needs
this rule. It rewrites a subscript read whose base is known to be a tensor (a name the function
binds to torch calls or annotates `torch.Tensor`, a registered buffer or parameter `self.<name>`)
and whose index holds something that may be a tensor (such a name or buffer, a torch call, a
comparison) or a list (`times[list(range(b)), k]`: torch's index arrays):
`torch_at(x)[index].get()` (runtime/keras/tensor.py) gathers exactly what torch's
advanced indexing selects, and falls back to TensorFlow's own indexing when the index turns out
to be basic. Where the base is a tensor, a name the function does not bind only to Python
values (an argument: `deg[row]`) may be a tensor index. A base of unknown kind (an unannotated
argument) read at an index known to be a tensor (a buffer, a torch call's result) or at a list
display (`x[:, [-1], :]`: no Python sequence takes a list index) or at a name the function binds
only to lists (`row, col = list(), list()`, then appended to) is rewritten too; torch_at
indexes a base that is no tensor (a list) as Python does. An index that is a mask combined with
`&`/`|`/`~` from comparisons (`x[(x > -b) & (x < b)]`) is a boolean tensor whatever its
operands, so its base is a tensor too. Subscripts
that are stored into are the in-place rule's (rules/torch_inplace_ops_model.py); a base of
unknown kind read at an index not known to be a tensor is left alone.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.analysis.masks import combined_mask
from precision_transpiler.analysis.tensors import known_tensor, maybe_tensor_name
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_name

_AT = runtime_name("tf", "tensor", "torch_at")


@register
class TorchTensorIndexTf(Rule):
    name = "torch-tensor-index-tf"
    summary = "Turn reads at tensor indices (x[idx], x[mask]) into gathers TensorFlow can run."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef f(table: torch.Tensor, index: torch.Tensor, x):\n"
            "    n = x.shape[0]\n    return table[index], table[:n]\n",
            # before the shim is copied into the file (vendored=False): its qualified name
            "import tensorflow as tf\nimport precision_transpiler\n\n\n"
            "def f(table: tf.Tensor, index: tf.Tensor, x):\n    n = x.shape[0]\n"
            "    return precision_transpiler.runtime.keras.tensor.torch_at(table)[index].get(), table[:n]\n",
            to="tf",
            vendored=False,
        ),
        Example(
            "import torch\n\n\ndef f(times: torch.Tensor, x, b):\n"
            "    inside = (x >= -b) & (x <= b)\n    return times[list(range(2)), 0], x[inside]\n",
            "import tensorflow as tf\nimport precision_transpiler\n\n\ndef f(times: tf.Tensor, x, b):\n"
            "    inside = (x >= -b) & (x <= b)\n"
            "    return precision_transpiler.runtime.keras.tensor.torch_at(times)[list(range(2)), 0].get(), "
            "precision_transpiler.runtime.keras.tensor.torch_at(x)[inside].get()\n",
            to="tf",
            vendored=False,
        ),
        Example(
            # a comparison of indexes of a tensor is a tensor (torch_geometric's self-loop removal)
            "import torch\n\n\ndef f(edge_index: torch.Tensor):\n"
            "    mask = edge_index[0] != edge_index[1]\n    return edge_index[:, mask]\n",
            "import tensorflow as tf\nimport precision_transpiler\n\n\ndef f(edge_index: tf.Tensor):\n"
            "    mask = edge_index[0] != edge_index[1]\n"
            "    return precision_transpiler.runtime.keras.tensor.torch_at(edge_index)[:, mask].get()\n",
            to="tf",
            vendored=False,
        ),
        Example(
            "import torch\n\n\ndef f(x, index: torch.Tensor, layers):\n    return x[:, index], layers[0], x[:, [-1]]\n",
            "import tensorflow as tf\nimport precision_transpiler\n\n\ndef f(x, index: tf.Tensor, layers):\n"
            "    return precision_transpiler.runtime.keras.tensor.torch_at(x)[:, index].get(), layers[0], "
            "precision_transpiler.runtime.keras.tensor.torch_at(x)[:, [-1]].get()\n",
            to="tf",
            vendored=False,
        ),
        Example(
            # a name the function binds only to lists is an index array; one bound otherwise is not known
            "import torch\n\n\ndef f(x, n, k):\n    row, col = list(), []\n    for i in range(n):\n"
            "        row.append(i)\n    col += [n]\n    j = k + 1\n    return x[:, row], x[col], x[:, j]\n",
            "import precision_transpiler\n\n\ndef f(x, n, k):\n    row, col = list(), []\n    for i in range(n):\n"
            "        row.append(i)\n    col += [n]\n    j = k + 1\n"
            "    return precision_transpiler.runtime.keras.tensor.torch_at(x)[:, row].get(), "
            "precision_transpiler.runtime.keras.tensor.torch_at(x)[col].get(), x[:, j]\n",
            to="tf",
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target == "tf"

    def leave_Subscript(
        self, ctx: RuleContext, original: cst.Subscript, updated: cst.Subscript
    ) -> cst.BaseExpression | None:
        parent = ctx.parent(original)
        if (
            isinstance(parent, cst.AssignTarget | cst.Del)
            or (isinstance(parent, cst.AugAssign) and parent.target is original)
            or (
                isinstance(parent, cst.Attribute)
                and parent.attr.value.endswith("_")
                and isinstance(ctx.parent(parent), cst.Call)
            )
        ):
            return None  # a store (the in-place rule's), or the receiver of an in-place call (`x[i].add_(1)`)
        masked = any(
            isinstance(e.slice, cst.Index) and combined_mask(ctx, e.slice.value, original) for e in original.slice
        )
        if not (masked or known_tensor(ctx, original.value, original)):
            # a base of unknown kind (`x` in `forward(self, x)`) read at a known tensor (`x[:, self.idx]`,
            # a buffer): torch_at reads a base that turns out not to be a tensor as Python does
            if not any(
                isinstance(e.slice, cst.Index)
                and (
                    known_tensor(ctx, e.slice.value, original)
                    or _list_like(e.slice.value)
                    or (isinstance(e.slice.value, cst.Name) and _list_name(ctx, e.slice.value.value))
                )
                for e in original.slice
            ):
                return None
        elif not masked and not any(
            self._may_be_tensor(ctx, element.slice, original, loose=True) for element in original.slice
        ):
            return None
        at = cst.Call(ctx.expr_for(_AT), [cst.Arg(updated.value)])
        value = cst.Call(cst.Attribute(cst.Subscript(at, updated.slice), cst.Name("get")), [])
        ctx.record(self.name, original, value)
        return value

    def _may_be_tensor(self, ctx: RuleContext, piece: cst.BaseSlice, anchor: cst.CSTNode, loose: bool) -> bool:
        if not isinstance(piece, cst.Index):
            return False  # a slice: ints (or None)
        return self._tensor_expr(ctx, piece.value, anchor, loose)

    def _tensor_expr(self, ctx: RuleContext, value: cst.BaseExpression, anchor: cst.CSTNode, loose: bool) -> bool:
        """A tensor, or arithmetic/comparison with a tensor operand (`i - 3`, `x > 0`, `~mask`);
        `loose`: also a name not bound only to Python values (`deg[row]` with `row` from an
        argument) and an attribute of `self` (`self.relative_indices[:, :, 0]`, a tensor kept in
        a plain attribute), which torch_at reads as TensorFlow does when they hold ints after all."""
        if isinstance(value, cst.Comparison):
            parts = [value.left, *(c.comparator for c in value.comparisons)]
            return any(self._tensor_expr(ctx, part, anchor, loose) for part in parts)
        if isinstance(value, cst.BinaryOperation):
            return self._tensor_expr(ctx, value.left, anchor, loose) or self._tensor_expr(
                ctx, value.right, anchor, loose
            )
        if isinstance(value, cst.UnaryOperation):
            return self._tensor_expr(ctx, value.expression, anchor, loose)
        if loose and isinstance(value, cst.Name) and value.value not in ("None", "True", "False", "Ellipsis"):
            return maybe_tensor_name(ctx, value.value, anchor)
        if loose and isinstance(value, cst.Subscript):
            return self._tensor_expr(ctx, value.value, anchor, loose)  # `idx[:, :, 0]` of a maybe-tensor
        if loose and isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
            # `self.relative_indices`, a tensor kept in a plain attribute (Swin's window attention)
            return value.value.value == "self"
        if isinstance(value, cst.List | cst.ListComp) or (
            isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "list"
        ):
            return True  # a list of indices: an index array to torch, refused by TensorFlow
        return known_tensor(ctx, value, anchor)


def _list_like(value: cst.BaseExpression) -> bool:
    """A list display, a list comprehension or `list(...)`: torch's index arrays."""
    return isinstance(value, cst.List | cst.ListComp) or (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "list"
    )


def _list_name(ctx: RuleContext, name: str) -> bool:
    """Whether the function around the node binds `name` only to lists (`row, col = list(), list()`
    then `row.append(i)`: torchfm's pair indices, `x[:, row]`), so a subscript at it is an index
    array whatever the base."""
    func = ctx.enclosing_def()
    if func is None:
        return False
    values: list[cst.BaseExpression] = []

    class _Bindings(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                values.extend(_bound(target.target, node.value, name))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name) and node.target.value == name:
                values.append(node.value)

        def visit_For(self, node: cst.For) -> None:
            values.extend(_bound(node.target, cst.Name("None"), name))

    func.body.visit(_Bindings())
    return bool(values) and all(_list_like(v) for v in values)


def _bound(target: cst.BaseExpression, value: cst.BaseExpression, name: str) -> list[cst.BaseExpression]:
    """The values an assignment binds to `name` (unpacking a tuple display pairwise; an unpacking
    it cannot pair binds an unknown value)."""
    if isinstance(target, cst.Name):
        return [value] if target.value == name else []
    if isinstance(target, cst.Tuple | cst.List):
        elements = [e.value for e in target.elements]
        if isinstance(value, cst.Tuple | cst.List) and len(value.elements) == len(elements):
            return [v for t, e in zip(elements, value.elements, strict=True) for v in _bound(t, e.value, name)]
        return [cst.Name("None") for t in elements for _ in _bound(t, value, name)]
    return []
