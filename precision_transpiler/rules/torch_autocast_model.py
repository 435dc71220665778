"""`torch.autocast` regions in model code, torch -> Flax NNX and Keras.

torch.autocast is dynamic state: inside a region, torch's lower-precision ops (linear, conv,
matmul, einsum, scaled_dot_product_attention) cast their floating inputs to the region's dtype.
Neither JAX nor Keras has such a state, and dropping the region (what Ivy does) silently gives a
float32 model. So each region becomes a context-manager shim that reproduces it:

    with torch.autocast("cpu", dtype=torch.bfloat16):  ->  with torch_autocast(self, "bfloat16", enabled=True):

- the first argument is the instance parameter of the module method the region is in (`self`),
  `None` in plain functions and at module level: on entry the shim makes every lower-precision
  layer under that module (Linear, Conv*, MultiheadAttention ...) compute in the region's dtype
  and restores it on exit (runtime/flax/modules.py and runtime/keras/modules.py say how);
- the dtype comes from `dtype=` (a torch dtype becomes its name), else torch's default for the
  device type ("cpu" -> bfloat16, "cuda" -> float16); `enabled` is kept (it may be an
  expression); `cache_enabled` has no meaning outside torch and is dropped;
- matmul-class functional calls written inside the region (the target's names of the `linear`,
  `conv`, `matmul` and `attention` classes of mappings/precision_classes.yaml, and `a @ b`)
  become `torch_autocast_call(op, *args)`, which casts their floating inputs to the active
  region's dtype at run time (a module-level stack the context manager pushes and pops);
- `@torch.autocast(...)` on a function becomes the same `with` around the function's body (the
  instance a method's region needs exists only when it is called).

The forms covered: `torch.autocast`, `torch.amp.autocast`, `torch.cpu.amp.autocast(...)` and
`torch.cuda.amp.autocast(...)` (their first positional argument is `enabled`), in `with` items
and as decorators. Any other use (`ctx = torch.autocast(...)`) is left to the op table.
The rule runs before op-pattern (order < 100), which would report the call, or take a literal
`enabled=False` region for a no-op (which is wrong inside an enabled region).
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.analysis.torch_models import analysis_for
from precision_transpiler.rewrite.context import RuleContext, string_value
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.runtime import runtime_module
from precision_transpiler.syntax import all_nodes, dotted_name, is_docstring

_SHIMS = {target: runtime_module(target, "modules") for target in ("jax", "tf")}
_MATMUL = {"jax": "jax.numpy.matmul", "tf": "keras.ops.matmul"}
# qualified name -> the device type it fixes (None: the first argument says)
_AUTOCAST = {
    "torch.autocast": None,
    "torch.amp.autocast": None,
    "torch.amp.autocast_mode.autocast": None,
    "torch.cpu.amp.autocast": "cpu",
    "torch.cpu.amp.autocast_mode.autocast": "cpu",
    "torch.cuda.amp.autocast": "cuda",
    "torch.cuda.amp.autocast_mode.autocast": "cuda",
}
_PARAMS = {
    None: ("device_type", "dtype", "enabled", "cache_enabled"),
    "cpu": ("enabled", "dtype", "cache_enabled"),
    "cuda": ("enabled", "dtype", "cache_enabled"),
}
# torch.get_autocast_dtype(device) defaults (torch 2.13)
_DEFAULT_DTYPE = {
    "cpu": "bfloat16",
    "cuda": "float16",
    "mps": "float16",
    "xpu": "float16",
    "mtia": "float16",
    "hpu": "bfloat16",
    "xla": "bfloat16",
    "maia": "bfloat16",
}
_AUTOCAST_CLASSES = ("linear", "conv", "matmul", "attention")
_EQUAL = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
_COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


@register
class TorchAutocast(Rule):
    name = "torch-autocast"
    summary = "Turn torch.autocast regions into a context manager that autocasts layers and matmul-class ops."
    EXAMPLES = (
        Example(
            "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n    def forward(self, x):\n"
            '        with torch.autocast("cpu", dtype=torch.bfloat16):\n'
            "            h = self.fc(x)\n            return torch.matmul(h, h.T)\n",
            # before the shims are copied into the file (vendored=False): their qualified names
            "from flax import nnx\nimport jax.numpy as jnp\nimport precision_transpiler\n\n\n"
            "class Net(precision_transpiler.runtime.flax.modules.TorchModule):\n"
            "    def __init__(self, *, rngs: nnx.Rngs | None = None):\n        if rngs is None:\n"
            "            rngs = nnx.Rngs(0)\n        super().__init__()\n"
            "        self.fc = nnx.Linear(4, 4, rngs=rngs)\n\n    def __call__(self, x):\n"
            '        with precision_transpiler.runtime.flax.modules.torch_autocast(self, "bfloat16", enabled=True):\n'
            "            h = self.fc(x)\n"
            "            return precision_transpiler.runtime.flax.modules.torch_autocast_call(jnp.matmul, h, h.T)\n",
            to="jax",
            diagnostics=("autocast region",),
            vendored=False,
        ),
        Example(
            "import torch\n\n\n@torch.cuda.amp.autocast(enabled=False)\ndef score(q, k):\n"
            '    """Attention logits in float32."""\n    return q @ k.transpose(-1, -2)\n',
            "import precision_transpiler\nimport keras\n\n\ndef score(q, k):\n"
            '    """Attention logits in float32."""\n'
            '    with precision_transpiler.runtime.keras.modules.torch_autocast(None, "float16", enabled=False):\n'
            "        return precision_transpiler.runtime.keras.modules.torch_autocast_call(keras.ops.matmul, q, "
            "keras.ops.swapaxes(k, -1, -2))\n",
            to="tf",
            diagnostics=("autocast region",),
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in _SHIMS

    # -- the region itself ---------------------------------------------------------------------

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        qualified = ctx.qualified_name(original.func)
        if qualified not in _AUTOCAST or not isinstance(ctx.parent(original), cst.WithItem | cst.Decorator):
            return None
        fixed = _AUTOCAST[qualified]
        bound = _bind(original, _PARAMS[fixed])
        if bound is None:
            return None  # *args/**kwargs: left to op-pattern, which reports it
        device = fixed
        if device is None and "device_type" in bound:
            device = string_value(bound["device_type"])
        dtype_node = bound.get("dtype")
        if dtype_node is not None and ctx.code(dtype_node) == "None":
            dtype_node = None
        dtype: cst.BaseExpression
        if dtype_node is not None:
            canon = ctx.dtype_of(dtype_node)
            # a dtype held in a variable stays an expression; the shim reads its name at run time
            dtype = cst.SimpleString(f'"{canon}"') if canon else ctx.updated(dtype_node)  # type: ignore[assignment]
            label = canon or ctx.code(dtype_node)
        else:
            label = _DEFAULT_DTYPE.get(device or "", "bfloat16")
            dtype = cst.SimpleString(f'"{label}"')
            if device not in _DEFAULT_DTYPE:
                ctx.diagnose(
                    original,
                    "warning",
                    "autocast-dtype",
                    "autocast region without dtype= on a device type that is not a literal: bfloat16 assumed "
                    "(torch's CPU default; CUDA's is float16): pass dtype= to be sure",
                )
        enabled = ctx.updated(bound["enabled"]) if "enabled" in bound else cst.Name("True")
        module = _instance(ctx, original)
        args = [
            cst.Arg(cst.Name(module) if module else cst.Name("None"), comma=_COMMA),
            cst.Arg(dtype, comma=_COMMA),  # type: ignore[arg-type]
            cst.Arg(enabled, keyword=cst.Name("enabled"), equal=_EQUAL),  # type: ignore[arg-type]
        ]
        dropped = [bound[k] for k in ("device_type", "dtype", "cache_enabled") if k in bound]
        for node in dropped:
            ctx.retract_under(node)
        ctx.consume([original.func, *(n for node in dropped for n in all_nodes(node))])
        new = cst.Call(func=ctx.expr_for(f"{_SHIMS[ctx.target]}.torch_autocast"), args=args)
        ctx.per_file("torch-autocast-calls", set).add(original)
        state = "disabled" if ctx.code(enabled) == "False" else f"computing in {label}"
        if module:
            reach = (
                f"the Linear/Conv/MultiheadAttention layers under `{module}` and the matmul-class calls written "
                "in it follow it"
            )
        else:
            reach = "no enclosing module method, so only the matmul-class calls written in it follow it"
        ctx.diagnose(original, "note", "autocast-region", f"autocast region ({state}) converted: {reach}")
        ctx.record(self.name, original, new)
        return new

    def leave_Decorator(
        self, ctx: RuleContext, original: cst.Decorator, updated: cst.Decorator
    ) -> cst.RemovalSentinel | None:
        # the region moves into the function's body (leave_IndentedBlock, which ran already)
        if original.decorator in ctx.per_file("torch-autocast-calls", set):
            return cst.RemovalSentinel.REMOVE
        return None

    # -- what runs inside it -------------------------------------------------------------------

    def leave_With(self, ctx: RuleContext, original: cst.With, updated: cst.With) -> cst.With | None:
        converted = ctx.per_file("torch-autocast-calls", set)
        if not any(item.item in converted for item in original.items):
            return None
        new = updated.with_changes(body=updated.body.visit(_OpWrapper(ctx)))
        return new

    def leave_IndentedBlock(
        self, ctx: RuleContext, original: cst.IndentedBlock, updated: cst.IndentedBlock
    ) -> cst.IndentedBlock | None:
        function = ctx.parent(original)
        if not isinstance(function, cst.FunctionDef):
            return None
        converted = ctx.per_file("torch-autocast-calls", set)
        calls = [ctx.updated(d.decorator) for d in function.decorators if d.decorator in converted]
        if not calls:
            return None
        body = list(updated.body)
        head = body[:1] if body and is_docstring(body[0]) else []
        inner: list[cst.BaseStatement] = body[len(head) :] or [cst.SimpleStatementLine([cst.Pass()])]
        block = cst.IndentedBlock(body=inner).visit(_OpWrapper(ctx))
        for call in reversed(calls):  # the outermost decorator is the outermost region
            assert isinstance(call, cst.BaseExpression) and isinstance(block, cst.IndentedBlock)
            block = cst.IndentedBlock(body=[cst.With(items=[cst.WithItem(call)], body=block)])
        assert isinstance(block, cst.IndentedBlock)
        return updated.with_changes(body=[*head, *block.body])


class _OpWrapper(cst.CSTTransformer):
    """Wrap the converted matmul-class calls (and `a @ b`) of a region's body in
    `torch_autocast_call(op, ...)`. Converted code is read through the file's imports as the
    converter spelled them (`jnp.matmul`, `precision_transpiler.runtime.flax.functional.linear`)."""

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.ops = _autocast_ops(ctx)
        self.locals = {local: qualified for qualified, local in ctx.namer.available.items()}

    def _qualified(self, node: cst.BaseExpression) -> str | None:
        text = dotted_name(node)
        if text is None:
            return None
        parts = text.split(".")
        for i in range(len(parts), 0, -1):
            head = self.locals.get(".".join(parts[:i]))
            if head is not None:
                return ".".join([head, *parts[i:]])
        return None

    def _wrap(self, op: cst.BaseExpression, args: list[cst.Arg]) -> cst.Call:
        # (a call needs no parentheses of its own: `(a @ b).sum()` -> `torch_autocast_call(...).sum()`)
        shim = self.ctx.expr_for(f"{_SHIMS[self.ctx.target]}.torch_autocast_call")
        return cst.Call(func=shim, args=[cst.Arg(op, comma=_COMMA), *args])

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self._qualified(updated.func) not in self.ops:
            return updated
        return self._wrap(updated.func.with_changes(lpar=(), rpar=()), list(updated.args))

    def leave_BinaryOperation(self, original: cst.BinaryOperation, updated: cst.BinaryOperation) -> cst.BaseExpression:
        if not isinstance(updated.operator, cst.MatrixMultiply):
            return updated
        matmul = self.ctx.expr_for(_MATMUL[self.ctx.target])
        args = [cst.Arg(updated.left, comma=_COMMA), cst.Arg(updated.right)]
        return self._wrap(matmul, args)


def _autocast_ops(ctx: RuleContext) -> frozenset[str]:
    """The target's functional ops of the lower-precision classes (functions, not layers)."""

    def build() -> frozenset[str]:
        classes = ctx.mappings.precision_classes
        names = (n for c in _AUTOCAST_CLASSES for n in classes.get(c, {}).get(ctx.target, ()))
        return frozenset(n for n in names if n.rsplit(".", 1)[-1][:1].islower())

    return ctx.per_file("torch-autocast-ops", build)


def _bind(call: cst.Call, params: tuple[str, ...]) -> dict[str, cst.BaseExpression] | None:
    """Argument name -> original value node, for the call's positional and keyword arguments."""
    bound: dict[str, cst.BaseExpression] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            bound[arg.keyword.value] = arg.value
        elif i < len(params):
            bound[params[i]] = arg.value
        else:
            return None
    return bound


def _instance(ctx: RuleContext, node: cst.CSTNode) -> str | None:
    """The instance parameter (`self`) of the module-class method `node` is in, looking through
    nested functions (closures see it); None in plain functions, other classes and at module level."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = ctx.parent(current)
        if isinstance(current, cst.FunctionDef) and isinstance(parent, cst.IndentedBlock):
            owner = ctx.parent(parent)
            if isinstance(owner, cst.ClassDef):
                if owner.name.value not in analysis_for(ctx).module_classes:
                    return None
                static = {dotted_name(d.decorator) for d in current.decorators} & {"staticmethod", "classmethod"}
                params = current.params.params or current.params.posonly_params
                return params[0].name.value if params and not static else None
        if isinstance(current, cst.ClassDef):
            return None
        current = parent
    return None
