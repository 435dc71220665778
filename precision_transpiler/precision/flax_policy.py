"""Apply a precision policy to Flax NNX code (jax -> jax).

Flax expresses precision per layer: `dtype` is the compute dtype, `param_dtype` the storage
dtype, and Linear/Conv take `preferred_element_type` for the accumulator. On this project's CPU
an XLA bf16 matmul with bf16 output is 1.2x *slower* than fp32, with fp32 accumulation 0.53x
(../shared/REFERENCE.md), so low-precision linear/conv layers get fp32 accumulation. Keep-fp32
classes (LayerNorm, RMSNorm, embeddings) get `dtype=float32`; keep-fp32 functions
(`jax.nn.softmax(x)`) get float32 inputs; `__call__` of every nnx.Module subclass is wrapped so
that the outermost call returns the policy's output dtype. All inserted names start with
`_ptranspile_`/`_PTRANSPILE_`, so `precision.strip` removes them exactly.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.policy import Policy
from precision_transpiler.precision.torch_policy import PrecisionDecision
from precision_transpiler.rewrite.names import NameResolver
from precision_transpiler.rewrite.positions import PositionFinder
from precision_transpiler.rewrite.templates import dotted_name

_ACCUMULATING = frozenset({"linear", "conv", "attention"})
_ACCUM_LAYERS = frozenset(
    {"flax.nnx.Linear", "flax.nnx.Conv", "flax.nnx.ConvTranspose", "flax.nnx.LinearGeneral", "flax.nnx.Einsum"}
)

HELPERS = '''
# ptranspile: begin precision policy "{name}" (generated; `ptranspile --policy fp32` removes it)
_PTRANSPILE_COMPUTE = jnp.{compute}
_PTRANSPILE_PARAM = jnp.{param}
_PTRANSPILE_FLOAT32 = jnp.float32
_PTRANSPILE_OUTPUT = jnp.{output}
_PTRANSPILE_DEPTH = [0]


def _ptranspile_fp32(x):
    """fp32 island for an op the policy keeps in float32."""
    return x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x


def _ptranspile_output(t):
    if hasattr(t, "dtype") and jnp.issubdtype(t.dtype, jnp.floating):
        return t.astype(_PTRANSPILE_OUTPUT)
    return t


def _ptranspile_policy(call):
    """Cast the outermost module's floating outputs to the policy's output dtype."""
    def run(self, *args, **kwargs):
        _PTRANSPILE_DEPTH[0] += 1
        try:
            out = call(self, *args, **kwargs)
        finally:
            _PTRANSPILE_DEPTH[0] -= 1
        if _PTRANSPILE_DEPTH[0]:
            return out
        return jax.tree.map(_ptranspile_output, out)
    run.__name__ = call.__name__
    run.__wrapped__ = call
    return run
'''


def normalise(qualified: str) -> str:
    if qualified.startswith("flax.nnx.") and qualified.count(".") > 2:
        return "flax.nnx." + qualified.rsplit(".", 1)[1]
    return qualified


class FlaxPolicyPass(cst.CSTTransformer):
    def __init__(self, policy: Policy, mappings: MappingSet, module: cst.Module, source: str) -> None:
        super().__init__()
        self.policy = policy
        self.names = NameResolver(module, source)
        self.positions = PositionFinder(module, source)
        self.symbols = {normalise(k): v for k, v in mappings.symbol_to_precision_class.get("jax", {}).items()}
        self.decisions: list[PrecisionDecision] = []
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Import | cst.ImportFrom):
            return False
        self.stack.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        result = super().on_leave(original_node, updated_node)
        if not isinstance(original_node, cst.Import | cst.ImportFrom):
            self.stack.pop()
        return result  # type: ignore[return-value]

    def _qualified(self, node: cst.BaseExpression) -> str | None:
        if dotted_name(node) is None:
            return None
        q = self.names.qualified_name(node, [*self.stack, node])
        return normalise(q) if q else None

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if original_node.name.value != "__call__" or len(self.stack) < 3:
            return updated_node
        cls = self.stack[-3]
        if not isinstance(cls, cst.ClassDef) or not cls.bases:
            return updated_node
        decision = self.policy.precision_for("output")
        self._decide(original_node, cls.name.value, "output", decision, "output cast (outermost call)")
        decorator = cst.Decorator(decorator=cst.Name("_ptranspile_policy"))
        return updated_node.with_changes(decorators=[decorator, *updated_node.decorators])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self._qualified(original_node.func)
        if name is None:
            return updated_node
        op_class = self.symbols.get(name)
        if op_class is None:
            return updated_node
        layer = name.rsplit(".", 1)[1]
        is_layer = layer[:1].isupper()
        decision = self.policy.precision_for(op_class, class_name=layer)
        if not is_layer:
            if (
                op_class in self.policy.keep_fp32
                and decision.compute == "float32"
                and updated_node.args
                and updated_node.args[0].keyword is None
            ):
                self._decide(original_node, name, op_class, decision, "fp32 island")
                first = updated_node.args[0]
                island = cst.Call(func=cst.Name("_ptranspile_fp32"), args=[cst.Arg(value=first.value)])
                return updated_node.with_changes(args=[first.with_changes(value=island), *updated_node.args[1:]])
            return updated_node
        if any(a.keyword is not None and a.keyword.value in ("dtype", "param_dtype") for a in updated_node.args):
            return updated_node  # the user chose this layer's dtypes
        if decision.compute == "float32":
            extra = [("dtype", "_PTRANSPILE_FLOAT32")]
            action = "dtype=float32"
        else:
            extra = [("dtype", "_PTRANSPILE_COMPUTE"), ("param_dtype", "_PTRANSPILE_PARAM")]
            action = "dtype/param_dtype"
            if op_class in _ACCUMULATING and name in _ACCUM_LAYERS:
                extra.append(("preferred_element_type", "_PTRANSPILE_FLOAT32"))
                action += " + fp32 accumulation"
        self._decide(original_node, name, op_class, decision, action)
        return updated_node.with_changes(args=append_keywords(list(updated_node.args), extra))

    def _decide(self, node: cst.CSTNode, op: str, op_class: str, decision, action: str) -> None:  # type: ignore[no-untyped-def]
        line, col = self.positions.find(node, self.stack)
        where = next(
            (n.name.value for n in reversed(self.stack) if isinstance(n, cst.FunctionDef | cst.ClassDef)), "<module>"
        )
        self.decisions.append(
            PrecisionDecision(
                line, col, where, op, op_class, decision.param, decision.compute, decision.output, decision.rule, action
            )
        )


def append_keywords(args: list[cst.Arg], extra: list[tuple[str, str]]) -> list[cst.Arg]:
    """Append `key=NAME` arguments; the last one takes over the call's trailing comma (if any),
    so that `precision.strip` can give it back exactly."""
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    trailing: cst.Comma | cst.MaybeSentinel = cst.MaybeSentinel.DEFAULT
    separator: cst.Comma = space
    if args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):
            trailing = last.comma
            if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
                separator = args[-2].comma
        args[-1] = last.with_changes(comma=separator)
    new = [
        cst.Arg(
            keyword=cst.Name(k),
            value=cst.Name(v),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            comma=separator,
        )
        for k, v in extra
    ]
    new[-1] = new[-1].with_changes(comma=trailing)
    return [*args, *new]


def helper_block(policy: Policy) -> list[cst.BaseStatement]:
    output = policy.classes.get("output", {}).get("output", policy.output)
    code = HELPERS.format(name=policy.name, compute=policy.compute, param=policy.param, output=output)
    module = cst.parse_module(code.lstrip("\n"))
    body = list(module.body)
    lines = [cst.EmptyLine(), cst.EmptyLine(), *[ln for ln in module.header if ln.comment is not None]]
    body[0] = body[0].with_changes(leading_lines=lines)
    return body
