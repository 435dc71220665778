"""In-place tensor operations made functional, torch -> JAX and Keras (`x.add_(y)` -> `x = jnp.add(x, y)`).

JAX arrays are immutable; torch code mutates tensors in place. This rule converts the forms
whose effect can be written as an assignment, and reports the others (never silently wrong):

* an in-place method (`mappings/ops/inplace_ops.yaml`: `add_`, `mul_`, `clamp_`, `masked_fill_`,
  `copy_`, `unsqueeze_`, ...) as a statement on a plain name: `x.add_(y)` -> `x = jnp.add(x, y)`.
  Its value comes from the table (through the op-pattern rule's emission); where an argument
  that is not a number literal could promote the dtype, `.astype(x.dtype)` keeps x's, as torch does.
* the value of one, in `y = x.add_(1)` (-> `x = y = jnp.add(x, 1)`) and `return x.mul_(2)`
  (-> `return jnp.multiply(x, 2)`: a local name is not read after `return`).
* on a basic-indexed view `x[:, 0].add_(1)` -> `x = x.at[:, 0].set(jnp.add(x[:, 0], 1))`.
* on a module attribute (statement only): a registered buffer or `nn.Parameter` is an
  `nnx.Variable` in the converted module, updated with `self.buf[...] = value` (assigning an array
  to `self.buf` would replace the Variable by a plain array, losing its type); a plain tensor
  attribute is rebound (`self.scale = ...`).
* subscript assignment to a local tensor: `x[i] = v` -> `x = x.at[i].set(v)`; `x[1:] += v` ->
  `x = x.at[1:].add(v)` (`.set(x[i] + v)` where the index may be a tensor: an accumulating
  `.at[].add` would differ from torch for repeated indices). "A local tensor" means a name the
  function binds from a torch call or annotates as `torch.Tensor`; other names (lists, dicts) are
  left alone.

For Keras (`--to tf`) the same forms are converted the same way, with TensorFlow spellings:
values from the table's `tf` patterns (`keras.ops.add(x, y)`), `keras.ops.cast(value, x.dtype)`
for the dtype, `x = torch_at(x)[i].set(v)` for stores (runtime/keras/tensor.py: JAX's `.at` for
TensorFlow tensors), and `self.buf.assign(value)` for a buffer or parameter (a Keras variable).

`zero_()`/`fill_(v)` on a parameter or attribute (an init loop, `p.weight.zero_()`) are
initialisation, left to the torch-inplace-init rule; this rule takes them only on local tensors,
so it runs before that rule. It also runs before op-pattern, which never reads the in-place
table (its patterns are emit-only) but would report the in-place calls as unknown otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import libcst as cst

from precision_transpiler.analysis.inplace import is_initialisation, sets_parameter_data, warn_aliases
from precision_transpiler.analysis.tensors import (
    Where,
    attribute_kind,
    declared_outside,
    inplace_index,
    known_tensor,
    maybe_tensor_name,
    tensor_names,
)
from precision_transpiler.mappings.model import OpSpec
from precision_transpiler.mappings.patterns import Pattern
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rewrite.templates import match_pattern, parenthesize
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.rules.op_arguments import kind_mismatch
from precision_transpiler.runtime import runtime_name

#: in-place methods that change the tensor's shape: not converted into a Buffer/Param (its
#: `[...] =` update keeps the shape)
_RESHAPING = frozenset({"unsqueeze_", "squeeze_", "t_", "transpose_"})
#: in-place methods that are initialisation on parameters (rules/torch_inplace_init_model.py)
_INIT = frozenset({"zero_", "fill_"})
#: in-place methods whose table value already has x's dtype (no `.astype(x.dtype)` needed)
_KEEP_DTYPE = frozenset({"masked_fill_", "fill_", "fill_diagonal_", "zero_", "copy_", *_RESHAPING})
_AUG_AT = {
    cst.AddAssign: "add",
    cst.SubtractAssign: "subtract",
    cst.MultiplyAssign: "multiply",
    cst.DivideAssign: "divide",
    cst.PowerAssign: "power",
}
_AUG_BINARY = {
    cst.AddAssign: cst.Add,
    cst.SubtractAssign: cst.Subtract,
    cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide,
    cst.PowerAssign: cst.Power,
    cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo,
    cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.BitAndAssign: cst.BitAnd,
    cst.BitOrAssign: cst.BitOr,
    cst.BitXorAssign: cst.BitXor,
    cst.LeftShiftAssign: cst.LeftShift,
    cst.RightShiftAssign: cst.RightShift,
}
_NO_SPACE = cst.SimpleWhitespace("")


@register
class TorchInplaceOps(Rule):
    name = "torch-inplace-ops"
    summary = "Turn in-place tensor operations (x.add_(y), x[i] = v, x[i] += v) into assignments for JAX and Keras."
    EXAMPLES = (
        Example(
            "import torch\n\n\ndef f(x, y):\n    h = x * 2\n    h.add_(y)\n    h.clamp_(0, 1)\n    return h\n",
            "import jax.numpy as jnp\n\n\ndef f(x, y):\n    h = x * 2\n    h = jnp.add(h, y).astype(h.dtype)\n"
            "    h = jnp.clip(h, min=0, max=1)\n    return h\n",
            to="jax",
        ),
        Example(
            "import torch\n\n\ndef f(x):\n    h = x + 1\n    y = h.mul_(2)\n    return h.sub_(y, alpha=0.5)\n",
            "import jax.numpy as jnp\n\n\ndef f(x):\n    h = x + 1\n    h = y = jnp.multiply(h, 2)\n"
            "    return jnp.subtract(h, jnp.multiply(0.5, y)).astype(h.dtype)\n",
            to="jax",
        ),
        Example(
            "import torch\n\n\ndef f(n):\n    pe = torch.zeros(n, 4)\n    pe[:, 0::2] = 1.0\n    pe[0] += 2.0\n"
            "    pe[:, 1].mul_(3)\n    return pe\n",
            "import jax.numpy as jnp\n\n\ndef f(n):\n    pe = jnp.zeros((n, 4))\n    pe = pe.at[:, 0::2].set(1.0)\n"
            "    pe = pe.at[0].add(2.0)\n    pe = pe.at[:, 1].set(jnp.multiply(pe[:, 1], 3))\n    return pe\n",
            to="jax",
        ),
        Example(
            "import torch\nfrom torch import nn\n\n\nclass Ema(nn.Module):\n    def __init__(self):\n"
            '        super().__init__()\n        self.register_buffer("avg", torch.zeros(3))\n\n'
            "    def forward(self, x):\n        self.avg.mul_(0.9)\n        return x\n",
            "from flax import nnx\nimport jax.numpy as jnp\nimport precision_transpiler\n\n\n"
            "class Ema(precision_transpiler.runtime.flax.modules.TorchModule):\n"
            "    def __init__(self, *, rngs: nnx.Rngs | None = None):\n        if rngs is None:\n"
            "            rngs = nnx.Rngs(0)\n        super().__init__()\n"
            "        self.avg = precision_transpiler.runtime.flax.module_api.Buffer(jnp.zeros(3))\n\n"
            "    def __call__(self, x):\n        self.avg[...] = jnp.multiply(self.avg, 0.9)\n"
            "        return x\n",
            to="jax",
            vendored=False,
        ),
        Example(
            "import torch\n\n\ndef f(x, y):\n    h = x * 2\n    h.add_(y)\n    h.mul_(3)\n    return h\n",
            "import keras\n\n\ndef f(x, y):\n    h = x * 2\n    h = keras.ops.cast(keras.ops.add(h, y), h.dtype)\n"
            "    h = keras.ops.multiply(h, 3)\n    return h\n",
            to="tf",
        ),
        Example(
            "import torch\n\n\ndef f(x, y, flag):\n    h = x * 2\n    return g(h.add_(y)) if flag else h\n",
            "def f(x, y, flag):\n    h = x * 2\n"
            "    # ptranspile: unsupported: h.add_(...) used inside an expression: torch mutates h and JAX cannot; "
            "write h = h.add(...) as its own statement first\n    return g(h.add_(y)) if flag else h\n",
            to="jax",
            diagnostics=("unsupported",),
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        # Keras (`tf`): no conversion yet, but every in-place form this rule finds is reported
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    # -- in-place methods --------------------------------------------------------------------------

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        func = original.func
        if not isinstance(func, cst.Attribute) or not func.attr.value.endswith("_"):
            return None
        method = func.attr.value
        entries = inplace_index(ctx.mappings).get(method)
        if entries is None or ctx.qualified_name(func) is not None:
            return None  # not an in-place tensor method (`nn.init.zeros_(w)` is a function)
        receiver = func.value
        state = _state(ctx)
        fresh = _creates_tensor(ctx, receiver)  # `torch.empty(n, n).fill_(v)`: a value, not initialisation
        if method in _INIT and not fresh and is_initialisation(ctx, receiver, original):
            return None  # the torch-inplace-init rule's: dropped (statement) or a shim (value)
        if sets_parameter_data(ctx, original):
            return None  # `w.data.copy_(values)`, `w.data.mul_(s)` in an initialiser: the init rule's
        where = Where.of(ctx, original)
        if _self_data(receiver):
            receiver = receiver.value  # type: ignore[attr-defined]  # `self.scale.data.clamp_(0, 4)`: the parameter
        if method in _INIT and where.kind == "" and not fresh:
            return None  # a value (`nn.Parameter(w.zero_())`): the torch-inplace-init rule's shim
        temporary = isinstance(receiver, cst.BinaryOperation | cst.UnaryOperation) or _temporary(ctx, receiver, where)
        if (fresh or temporary) and (fresh or not _may_promote(method, original, entries)):
            # `(a - b).abs_()`, `src.new_zeros(size).scatter_add_(dim, index, src)`: a fresh tensor
            # nothing else refers to; its value is all that counts (in the dtype the creating
            # call gave it, which is cheap to evaluate twice)
            value = _value(ctx, state, entries, original)
            if value is not None:
                if fresh and _may_promote(method, original, entries):
                    value = _cast_like(ctx, value, ctx.updated(receiver))  # type: ignore[arg-type]
                ctx.record(self.name, original, value)
            return value if value is not None else updated
        problem = _receiver_problem(ctx, receiver, method, where, original)
        if problem is not None:
            return _unsupported(ctx, original, updated, problem)
        value = _value(ctx, state, entries, original)
        if value is None:
            return updated  # reported by the op-pattern emission
        target = ctx.updated(receiver)
        kind = "name"
        if isinstance(receiver, cst.Subscript):
            base = receiver.value
            assert isinstance(base, cst.Name)
            at = _at(ctx, cst.Name(base.value), ctx.updated(receiver))  # type: ignore[arg-type]
            value = cst.Call(cst.Attribute(at, cst.Name("set")), [cst.Arg(value)])
            target = cst.Name(base.value)
        elif isinstance(receiver, cst.Attribute):
            kind = attribute_kind(ctx, receiver, original)
            if kind == "variable" and ctx.target == "jax":
                target = cst.Subscript(target, [cst.SubscriptElement(cst.Index(cst.Ellipsis()))])  # type: ignore[arg-type]
        if kind == "variable" and ctx.target == "tf":
            # a Keras variable: `self.buf.assign(value)` in its dtype (Variable.assign refuses another)
            value = _cast_like(ctx, value, ctx.updated(receiver)) if _may_promote(method, original, entries) else value
            state.plans[where.statement] = (target, "assign-variable")
            ctx.record(self.name, original, value)
            return value
        if kind != "variable" and not isinstance(receiver, cst.Subscript) and _may_promote(method, original, entries):
            value = _cast_like(ctx, value, ctx.updated(receiver))  # type: ignore[arg-type]
        if isinstance(receiver, cst.Name) and receiver.value in where.parameters:
            key = (id(where.scope), receiver.value)
            if key not in state.said_parameter:
                state.said_parameter.add(key)
                ctx.diagnose(
                    original,
                    "note",
                    "inplace-parameter",
                    f"{receiver.value}.{method}(...) on a parameter: torch also changes the caller's tensor; "
                    f"the converted code rebinds {receiver.value} here only (return it if the caller needs it)",
                )
        if isinstance(receiver, cst.Name | cst.Subscript) and where.statement is not None:
            name = receiver.value if isinstance(receiver, cst.Name) else receiver.value.value  # type: ignore[attr-defined]
            warn_aliases(ctx, where.scope, where.statement, name, original)
        if where.kind != "return":
            state.plans[where.statement] = (target, where.kind)
        ctx.record(self.name, original, value)
        return value

    # -- statements --------------------------------------------------------------------------------

    def leave_SimpleStatementLine(
        self, ctx: RuleContext, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | None:
        body = self._statements(ctx, original, original.body, updated.body)
        return None if body is None else updated.with_changes(body=body)

    def leave_SimpleStatementSuite(
        self, ctx: RuleContext, original: cst.SimpleStatementSuite, updated: cst.SimpleStatementSuite
    ) -> cst.SimpleStatementSuite | None:
        body = self._statements(ctx, original, original.body, updated.body)
        return None if body is None else updated.with_changes(body=body)

    def _statements(
        self,
        ctx: RuleContext,
        line: cst.CSTNode,
        originals: tuple[cst.BaseSmallStatement, ...] | list[cst.BaseSmallStatement],
        updated: tuple[cst.BaseSmallStatement, ...] | list[cst.BaseSmallStatement],
    ) -> list[cst.BaseSmallStatement] | None:
        plans = _state(ctx).plans
        out: list[cst.BaseSmallStatement] = []
        changed = False
        for old, new in zip(originals, updated, strict=True):
            replacement: cst.BaseSmallStatement | None = None
            plan = plans.pop(old, None)
            if plan is not None:
                replacement = _assign_back(new, *plan)
            elif isinstance(old, cst.Assign | cst.AugAssign):
                replacement = self._subscript_store(ctx, line, old, new)  # type: ignore[arg-type]
            if replacement is not None:
                changed = True
                out.append(replacement)
            else:
                out.append(new)
        return out if changed else None

    def _subscript_store(
        self,
        ctx: RuleContext,
        line: cst.CSTNode,
        original: cst.Assign | cst.AugAssign,
        updated: cst.Assign | cst.AugAssign,
    ) -> cst.BaseSmallStatement | None:
        """`x[i] = v` -> `x = x.at[i].set(v)`; `x[i] += v` -> `x = x.at[i].add(v)`. `line` is the
        statement line being left (on the visited path, unlike `original`)."""
        if isinstance(original, cst.Assign):
            subscripts = [t.target for t in original.targets if isinstance(t.target, cst.Subscript)]
            if not subscripts:
                return None
            store = subscripts[0]
            if len(original.targets) != 1:
                return self._store_problem(ctx, line, store, original, "a subscript in a chained assignment")
        else:
            if not isinstance(original.target, cst.Subscript):
                return None
            store = original.target
        base = store.value
        if not isinstance(base, cst.Name):
            return self._store_problem(
                ctx, line, store, original, "a subscript of an expression that is not a plain name"
            )
        scope = Where.scope_of(ctx, line)
        if tensor_names(ctx, scope).get(base.value) is not True:
            if not _array_index(store):
                if isinstance(original, cst.Assign) and _tensor_index_of_unknown(ctx, store, line):
                    return self._setitem(ctx, original, updated, base.value)
                return None  # a list, a dict, or a name we cannot tell is a tensor: left as it is
            if isinstance(scope, cst.FunctionDef) and base.value in _parameters(scope):
                ctx.diagnose(
                    line,
                    "warning",
                    "inplace-argument",
                    f"assignment into {ctx.code(store)} changes the argument {base.value} in place: torch's change "
                    "shows in the caller's tensor too, the converted code changes its own copy only; check that "
                    "the caller does not read it after",
                )
        new_store = updated.targets[0].target if isinstance(updated, cst.Assign) else updated.target
        assert isinstance(new_store, cst.Subscript)
        at = _at(ctx, cst.Name(base.value), new_store)
        if isinstance(original, cst.Assign):
            value: cst.BaseExpression = cst.Call(cst.Attribute(at, cst.Name("set")), [cst.Arg(updated.value)])
        else:
            operator = type(original.operator)
            method = _AUG_AT.get(operator)  # type: ignore[call-overload]
            # torch_at's updates (Keras) gather, combine and scatter: with repeated positions they
            # do not accumulate, as torch's `x[i] += v`; JAX's `.at[].add` would, so it only takes basic indices
            if method is not None and (_basic_index(store) or ctx.target == "tf"):
                value = cst.Call(cst.Attribute(at, cst.Name(method)), [cst.Arg(updated.value)])
            elif _pure_index(store):
                binary = _AUG_BINARY[operator]()  # type: ignore[index]
                combined = cst.BinaryOperation(new_store, binary, _operand(updated.value))
                value = cst.Call(cst.Attribute(at, cst.Name("set")), [cst.Arg(combined)])
            else:
                return self._store_problem(
                    ctx, line, store, original, "an augmented assignment whose index has calls (it would run twice)"
                )
        replacement = cst.Assign([cst.AssignTarget(cst.Name(base.value))], value)
        warn_aliases(ctx, Where.scope_of(ctx, line), original, base.value, line)
        ctx.record(self.name, original, replacement)
        return replacement

    def _setitem(
        self, ctx: RuleContext, original: cst.Assign, updated: cst.Assign, name: str
    ) -> cst.BaseSmallStatement:
        """`x[idx] = v` -> `x = torch_setitem(x, idx, v)`: the runtime sets a tensor's index the
        target's way and a Python container's in place."""
        store = updated.targets[0].target
        assert isinstance(store, cst.Subscript) and isinstance(store.slice[0].slice, cst.Index)
        index = store.slice[0].slice.value
        function = ctx.expr_for(runtime_name(ctx.target, "tensor", "torch_setitem"))
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        call = cst.Call(
            function, [cst.Arg(cst.Name(name), comma=comma), cst.Arg(index, comma=comma), cst.Arg(updated.value)]
        )
        replacement = cst.Assign([cst.AssignTarget(cst.Name(name))], call)
        ctx.record(self.name, original, replacement)
        return replacement

    def _store_problem(
        self, ctx: RuleContext, line: cst.CSTNode, store: cst.Subscript, statement: cst.CSTNode, what: str
    ) -> cst.BaseSmallStatement | None:
        base = store.value
        if isinstance(base, cst.Name):
            if tensor_names(ctx, Where.scope_of(ctx, line)).get(base.value) is not True:
                return None
        elif not (
            isinstance(base, cst.Attribute)
            and isinstance(base.value, cst.Name)
            and base.value.value == "self"
            and attribute_kind(ctx, base, line) != "unknown"
        ):
            return None  # `d[k][i] = v`, `self.cache[k] = v`, `self.layers[i] = m`: not known to be a tensor
        elif attribute_kind(ctx, base, line) == "variable":
            # a buffer or parameter (`self.cached_freqs[:n] = freqs`, rotary-embedding-torch's
            # cache): the runtime's variables take item assignment as torch's do (an nnx.Variable
            # sets `.at[index]` of its value, the Keras Parameter and Buffer assign theirs)
            return None
        framework, at = (
            ("JAX arrays", "name.at[index]") if ctx.target == "jax" else ("TensorFlow tensors", "torch_at(name)[index]")
        )
        ctx.unsupported(
            statement,
            f"assignment into {ctx.code(store)}: {what}; {framework} are immutable: "
            f"bind the tensor to a name and write name = {at}.set(value)",
            "inplace-store",
        )
        return None


# ----------------------------------------------------------------------------------------------
# The in-place table
# ----------------------------------------------------------------------------------------------


@dataclass
class _State:
    """Per-file: statements whose in-place call became a value, waiting to be assigned back."""

    op_rule: Any  # the op-pattern rule, for its emission
    plans: dict[cst.CSTNode, tuple[cst.BaseAssignTargetExpression, str]]
    said_parameter: set[tuple[int, str]]


def _state(ctx: RuleContext) -> _State:
    # imported here: importing op_patterns registers it, and this rule must be registered first
    from precision_transpiler.rules.op_patterns_any import OpPatterns

    return ctx.per_file("torch-inplace-ops", lambda: _State(OpPatterns(), {}, set()))


def _value(
    ctx: RuleContext, state: _State, entries: list[tuple[OpSpec, Pattern]], call: cst.Call
) -> cst.BaseExpression | None:
    """The table's value of the in-place call (None when reported as unsupported)."""
    roots = ctx.mappings.all_roots
    for op, pattern in entries:
        match = match_pattern(
            pattern, call, ctx.qualified_name, roots, ctx.mappings.frameworks[ctx.source].keyword_aliases
        )
        if match is None or kind_mismatch(ctx, op, match, method=True) is not None:
            continue
        value = state.op_rule._emit(ctx, op, match, call)
        if value is not None:
            ctx.consume(match.owned)
        return value
    ctx.unsupported(
        call,
        f".{pattern.method_name}(...) call could not be converted to {ctx.target}: its arguments match no "
        f"form of the in-place table ({pattern.text})",
        "unsupported-call",
    )
    return None


#: torch calls that return a new tensor no other name refers to (never a view of their input)
_CREATING_METHODS = frozenset({"new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "clone"})
_CREATING_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like",
        "tensor", "arange", "eye", "linspace", "clone",
    )
)  # fmt: skip


#: torch functions whose result may share storage with an argument (a view, the argument
#: itself, or memory shared with NumPy): changing it in place changes that argument too
_SHARING_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "swapaxes", "swapdims", "permute",
        "movedim", "moveaxis", "narrow", "select", "t", "adjoint", "diagonal", "as_strided", "view_as_real",
        "view_as_complex", "real", "imag", "conj", "detach", "split", "chunk", "unbind", "tensor_split", "hsplit",
        "vsplit", "dsplit", "broadcast_to", "broadcast_tensors", "expand_copy", "atleast_1d", "atleast_2d",
        "atleast_3d", "as_tensor", "asarray", "from_numpy", "frombuffer", "from_dlpack", "ravel", "index_select",
        "resolve_conj", "resolve_neg",
    )
)  # fmt: skip


_CASTS = ("to", "type", "float", "double", "half", "bfloat16", "long", "int", "short", "char", "byte", "bool")
#: tensor methods whose result may be the receiver itself or share its memory: a view, or the
#: tensor itself where nothing changes (`x.long()` of an int64 tensor, `x.contiguous()`)
_SELF_OR_VIEW_METHODS = frozenset(
    {
        "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose",
        "swapaxes", "swapdims", "permute", "movedim", "moveaxis", "t", "narrow", "select", "expand", "expand_as",
        "as_strided", "detach", "contiguous", "unfold", "diagonal", "split", "chunk", "unbind", "tensor_split",
        "real", "imag", "conj", "view_as_real", "resolve_conj", "resolve_neg", "coalesce", "numpy", "as_subclass",
        "pin_memory", "broadcast_to", "align_to", "refine_names", "rename", "cpu", "cuda", "type_as", *_CASTS,
    }
)  # fmt: skip


def _temporary(ctx: RuleContext, receiver: cst.BaseExpression, where: Where) -> bool:
    """`x.abs().clamp_(0, 1)`, `hi = hi.long().clamp_(0, 5)`: an in-place method on the result of
    a tensor method that allocates a new tensor, which nothing else refers to. A cast may return
    its receiver itself (`x.long()` of an int64 tensor), so a cast counts only where the chain's
    value is assigned back to the name it started from."""
    if not (isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute)):
        return False
    inner = receiver.func.value
    if (isinstance(inner, cst.Name) and inner.value in ("self", "cls")) or ctx.qualified_name(receiver.func):
        return False
    method = receiver.func.attr.value
    surface = ctx.mappings.surfaces.get("torch")
    if surface is None or method not in surface.tensor_methods or method.endswith("_"):
        return False
    if method not in _SELF_OR_VIEW_METHODS:
        return True
    if method not in _CASTS or where.kind != "assign" or not isinstance(inner, cst.Name):
        return False
    targets = where.statement.targets  # type: ignore[union-attr]
    return len(targets) == 1 and isinstance(targets[0].target, cst.Name) and targets[0].target.value == inner.value


def _creates_tensor(ctx: RuleContext, receiver: cst.BaseExpression) -> bool:
    """`x.new_zeros(n)`, `torch.zeros(n)`, `x.clone()`, `torch.isnan(x)`: a call whose result is
    a fresh tensor, which nothing else refers to: a torch function of the top-level namespace
    that does not return a view or share its argument's storage (`torch.reshape`, `torch.as_tensor`),
    or an in-place method called on such a call."""
    if not isinstance(receiver, cst.Call):
        return False
    func = receiver.func
    qualified = ctx.qualified_name(func)
    if qualified is not None:
        if qualified in _CREATING_FUNCTIONS:
            return True
        parts = qualified.split(".")
        return len(parts) == 2 and parts[0] == "torch" and qualified not in _SHARING_FUNCTIONS
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value in _CREATING_METHODS:
        return True
    # a link of an in-place chain on a fresh tensor (`torch.empty(n, n).fill_(v).triu_(1)`): an
    # in-place method returns its receiver, so the fresh tensor is still all there is
    return func.attr.value in inplace_index(ctx.mappings) and _creates_tensor(ctx, func.value)


# ----------------------------------------------------------------------------------------------
# Where the call is, and what it is called on
# ----------------------------------------------------------------------------------------------
def _receiver_problem(
    ctx: RuleContext, receiver: cst.BaseExpression, method: str, where: Where, call: cst.Call
) -> str | None:
    """Why `receiver.method(...)` cannot be made an assignment here (None when it can)."""
    shown = _short(ctx, receiver)
    if where.kind == "":
        return (
            f"{shown}.{method}(...) used inside an expression: torch mutates {shown} and JAX cannot; "
            f"write {shown} = {shown}.{method[:-1]}(...) as its own statement first"
        )
    if isinstance(receiver, cst.Name):
        if receiver.value in ("self", "cls"):
            return f"{shown}.{method}(...) on the module itself"
        if where.kind == "return" and declared_outside(where.scope, receiver.value):
            return f"return {shown}.{method}(...) of a global or nonlocal name: assign it first, then return it"
        return None
    if isinstance(receiver, cst.Subscript):
        base = receiver.value
        if not isinstance(base, cst.Name) or base.value in ("self", "cls"):
            return f"{shown}.{method}(...) on a subscript of an expression that is not a plain name"
        if where.kind != "statement":
            return f"the value of {shown}.{method}(...) (a view of {base.value}): write the call as its own statement"
        if not _basic_index(receiver):
            return (
                f"{shown}.{method}(...) with an index that may be a tensor: torch changes {base.value} for "
                f"basic indexing (a view) but only a copy for advanced indexing; write "
                f"{base.value} = {base.value}.at[...].set(...) by hand"
            )
        return None
    if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self":
        if where.kind != "statement":
            return f"the value of {shown}.{method}(...) on a module attribute: write the call as its own statement"
        kind = attribute_kind(ctx, receiver, call)
        if kind == "unknown":
            return (
                f"{shown}.{method}(...): {shown} is not assigned or registered in this class, so it cannot be "
                "told whether it is a buffer or parameter (an nnx.Variable, updated with [...] =) or a plain array"
            )
        if kind == "variable" and method in _RESHAPING:
            return f"{shown}.{method}(...) changes the shape of a buffer or parameter (an nnx.Variable)"
        return None
    return (
        f"{shown}.{method}(...) on {ctx.code(receiver)[:40]}: only a plain name, a basic index of one, "
        "or an attribute of self can be assigned back"
    )


def _self_data(receiver: cst.BaseExpression) -> bool:
    """`self.<name>.data`: the module's parameter or buffer itself, outside autograd (CLIP's
    `self.logit_scale.data.clamp_(0, 4.6052)` in a forward pass), assigned back as the attribute."""
    return (
        isinstance(receiver, cst.Attribute)
        and receiver.attr.value == "data"
        and isinstance(receiver.value, cst.Attribute)
        and isinstance(receiver.value.value, cst.Name)
        and receiver.value.value.value == "self"
    )


def _assign_back(
    statement: cst.BaseSmallStatement, target: cst.BaseAssignTargetExpression, kind: str
) -> cst.BaseSmallStatement:
    """`x.add_(y)` (already `jnp.add(x, y)`) -> `x = jnp.add(x, y)`; `y = x.add_(1)` -> `x = y = ...`."""
    if kind == "statement":
        assert isinstance(statement, cst.Expr)
        return cst.Assign([cst.AssignTarget(target)], statement.value)
    if kind == "assign-variable":  # Keras: `self.buf.assign(value)`
        assert isinstance(statement, cst.Expr)
        return statement.with_changes(
            value=cst.Call(cst.Attribute(target, cst.Name("assign")), [cst.Arg(statement.value)])
        )  # type: ignore[arg-type]
    assert isinstance(statement, cst.Assign)
    targets = list(statement.targets)
    if not (len(targets) == 1 and targets[0].target.deep_equals(target)):
        targets.insert(0, cst.AssignTarget(target))
    return statement.with_changes(targets=targets)


def _at(ctx: RuleContext, base: cst.Name, subscript: cst.Subscript) -> cst.Subscript:
    """`x.at[<subscript's index>]` (JAX); `torch_at(x)[<index>]` (Keras: runtime/keras/tensor.py),
    which has the same `.set`/`.add`/... updates for TensorFlow tensors."""
    if ctx.target == "tf":
        at = cst.Call(ctx.expr_for(runtime_name("tf", "tensor", "torch_at")), [cst.Arg(base)])
        return cst.Subscript(at, subscript.slice)
    return cst.Subscript(cst.Attribute(base, cst.Name("at")), subscript.slice)


def _cast_like(ctx: RuleContext, value: cst.BaseExpression, receiver: cst.BaseExpression) -> cst.BaseExpression:
    """`value.astype(x.dtype)` (JAX); `keras.ops.cast(value, x.dtype)` (Keras)."""
    dtype = cst.Attribute(receiver, cst.Name("dtype"))
    if ctx.target == "tf":
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return cst.Call(ctx.expr_for("keras.ops.cast"), [cst.Arg(value, comma=comma), cst.Arg(dtype)])
    return cst.Call(cst.Attribute(parenthesize(value), cst.Name("astype")), [cst.Arg(dtype)])


def _may_promote(method: str, call: cst.Call, entries: list[tuple[OpSpec, Pattern]]) -> bool:
    """Whether the value may have another dtype than x: an argument that is not a number literal
    (`x.add_(y)`; `x.mul_(0.5)` keeps x's floating dtype in JAX too), or an op whose value holds
    bools or integers whatever x holds (`x.eq_(y)`, `mask.logical_not_()`: `returns:` in the table)."""
    if method in _KEEP_DTYPE:
        return False
    if any(op.returns is not None for op, _ in entries):
        return True
    return any(not _number_literal(arg.value) for arg in call.args)


def _number_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus | cst.Plus):
        return _number_literal(node.expression)
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    return isinstance(node, cst.Integer | cst.Float)


def _tensor_index_of_unknown(ctx: RuleContext, store: cst.Subscript, line: cst.CSTNode) -> bool:
    """`x[idx] = v` where `x` may hold a tensor (it is not bound only to Python values: a helper's
    result) and the one index is known to be a tensor (`edge_index[0][inv_mask]`): lists and dicts
    take no tensor index, so `x` is most likely a tensor, which the runtime checks."""
    if len(store.slice) != 1 or not isinstance(store.slice[0].slice, cst.Index):
        return False
    assert isinstance(store.value, cst.Name)
    if not maybe_tensor_name(ctx, store.value.value, line):
        return False
    return known_tensor(ctx, store.slice[0].slice.value, line)


def _array_index(subscript: cst.Subscript) -> bool:
    """An index only arrays take: `...`, `None`, or a slice among several entries (`x[..., -1]`,
    `x[:, 0]`). Lists take neither and dict keys cannot hold slices, so the name is a tensor."""
    elements = list(subscript.slice)
    for element in elements:
        part = element.slice
        if isinstance(part, cst.Index) and isinstance(part.value, cst.Ellipsis):
            return True
        if isinstance(part, cst.Index) and isinstance(part.value, cst.Name) and part.value.value == "None":
            return True
        if isinstance(part, cst.Slice) and len(elements) > 1:
            return True
    return False


def _parameters(function: cst.FunctionDef) -> set[str]:
    params = function.params
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}


def _index_elements(subscript: cst.Subscript) -> Iterator[cst.BaseSlice]:
    for element in subscript.slice:
        yield element.slice


def _basic_index(subscript: cst.Subscript) -> bool:
    """Only slices, integer literals, None and `...`: a view in torch (never a tensor index)."""
    for piece in _index_elements(subscript):
        if isinstance(piece, cst.Slice):
            continue
        value = piece.value  # type: ignore[attr-defined]
        if isinstance(value, cst.Ellipsis):
            continue
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
            value = value.expression
        if not isinstance(value, cst.Integer):
            return False
    return True


def _pure_index(subscript: cst.Subscript) -> bool:
    """No calls (or other side effects) in the index: it may be evaluated twice."""
    impure = False

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal impure
            impure = True

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            nonlocal impure
            impure = True

        def visit_Await(self, node: cst.Await) -> None:
            nonlocal impure
            impure = True

        def visit_Yield(self, node: cst.Yield) -> None:
            nonlocal impure
            impure = True

    for element in subscript.slice:
        element.visit(_V())
    return not impure


_LOOSE = (
    cst.BinaryOperation,
    cst.BooleanOperation,
    cst.UnaryOperation,
    cst.Comparison,
    cst.IfExp,
    cst.Lambda,
    cst.NamedExpr,
)


def _operand(value: cst.BaseExpression) -> cst.BaseExpression:
    """`v` as the right operand of a binary operator (parenthesised where it binds more loosely)."""
    if isinstance(value, _LOOSE) and not value.lpar:
        return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return value


def _short(ctx: RuleContext, node: cst.CSTNode) -> str:
    text = " ".join(ctx.code(node).split())
    return text if len(text) <= 40 else text[:37] + "..."


def _unsupported(ctx: RuleContext, original: cst.Call, updated: cst.Call, message: str) -> cst.Call:
    """Report, and keep the call as it is (returning it stops the op-pattern rule from reading it)."""
    ctx.unsupported(original, message, "inplace-unsupported")
    return updated
