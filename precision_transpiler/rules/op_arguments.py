"""What op-pattern checks of a matched call's arguments before it converts the call: each bound
argument must fit its parameter's kind (mappings/registry.py lists the kinds), or the call is
not the op (`s.split(",")` on a string is no tensor split). Used by op-pattern
(rules/op_patterns_any.py) and by the in-place rule (rules/torch_inplace_ops_model.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from precision_transpiler.analysis.masks import dtype_name
from precision_transpiler.analysis.tensors import Where, known_tensor
from precision_transpiler.analysis.torch_models import analysis_for
from precision_transpiler.mappings.model import OpSpec
from precision_transpiler.mappings.patterns import Pattern
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rewrite.templates import Match
from precision_transpiler.syntax import dotted_name


def receiver_params(pattern: Pattern) -> set[str]:
    """The parameter a method or attribute pattern is read on: when a target leaves it out (`x.new_zeros(2,
    dtype=d)` needs only d), no "argument was dropped" note, it is not an argument."""
    expr = pattern.expr
    if isinstance(expr, cst.Attribute):  # an attribute pattern (`{x}._version`): x is what it is read on
        receiver = expr.value
    elif pattern.method_name is not None and isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        receiver = expr.func.value
    else:
        return set()
    placeholder = pattern.placeholders.get(receiver.value) if isinstance(receiver, cst.Name) else None
    return {placeholder.name} if placeholder is not None else set()


@dataclass(frozen=True)
class KindMismatch:
    reason: str
    #: the argument shows the call is not a tensor call at all (a string where a dim goes)
    foreign: bool = False


#: Kinds that only reject literals that cannot be one: checked for every pattern, keyword or not.
STRICT_KINDS = frozenset({"tensor", "int", "ints"})
STRINGS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
_NOT_A_VALUE = (*STRINGS, cst.Dict, cst.Set, cst.DictComp, cst.SetComp, cst.Lambda, cst.Ellipsis)
_NOT_AN_INT = (
    *_NOT_A_VALUE,
    cst.Float,
    cst.Imaginary,
    cst.Tuple,
    cst.List,
    cst.ListComp,
    cst.GeneratorExp,
)
LITERALS = (*_NOT_AN_INT, cst.Integer)


def kind_mismatch(
    ctx: RuleContext, op: OpSpec, match: Match, *, method: bool, anchor: cst.CSTNode | None = None
) -> KindMismatch | None:
    """Why a bound argument does not fit its parameter kind (None when all fit).

    A framework function says what the call is; a method name may be overloaded (`x.to(dtype)`
    vs `x.to(device)`), so `dtype` and `device` are checked for method patterns only, and not
    for arguments passed by keyword (`device=dev` says what it is). `tensor`, `int` and `ints`
    only reject literals that cannot be one, always. `known_tensor` asks tensor inference, in the
    function around `anchor` (the call in the source tree). `display` takes only a list or tuple
    display or a list comprehension (`torch.FloatTensor([0.5])`, where `FloatTensor(3)` is a size)."""
    for name, node in match.bindings.items():
        kind = op.params.get(name, "any")
        if kind == "display":
            if not isinstance(node, cst.List | cst.Tuple | cst.ListComp):
                return KindMismatch(f"argument {ctx.code(node)!r} is not a list or tuple display")
            continue
        if kind == "known_tensor":
            if anchor is None or ctx.is_dtype_like(node) or not known_tensor(ctx, node, anchor):
                # a receiver not known to be a tensor is left alone unreported: its method of the
                # same name is another object's (a converted module's `requires_grad_`)
                receiver = method and isinstance(anchor, cst.Call) and name in receiver_params(match.pattern)
                return KindMismatch(f"argument {ctx.code(node)!r} is not known to be a tensor", receiver)
            continue
        if kind == "undecided":
            if ctx.is_dtype_like(node) or ctx.is_device_like(node) or _strict_kind_problem(ctx, node, "tensor"):
                return KindMismatch(f"argument {ctx.code(node)!r} is a literal, a dtype or a device")
            continue
        if kind == "optional_dtype":
            if anchor is None or not optional_parameter(ctx, node, anchor):
                return KindMismatch(f"argument {ctx.code(node)!r} is not a parameter that may be None")
            continue
        if kind in STRICT_KINDS:
            if name in match.defaulted:
                continue
            args = match.sequences.get(name)
            if args is not None and (len(args) != 1 or args[0].star):  # none: a keyword-only pass-through
                element_kind = "tensor" if kind == "tensor" else "int"
                checked = [a.value for a in args if not a.star]
            else:
                element_kind, checked = kind, [node]
            for value in checked:
                problem = _strict_kind_problem(ctx, value, element_kind)
                if problem is not None:
                    return KindMismatch(f"argument {ctx.code(value)!r} {problem}", isinstance(value, STRINGS))
            continue
        if not method or name in match.by_keyword:
            continue
        if kind == "dtype" and not ctx.is_dtype_like(node) and not (anchor and dtype_name(ctx, node, anchor)):
            return KindMismatch(
                f"argument {ctx.code(node)!r} does not look like a dtype (a dtype symbol, string or *dtype name)"
            )
        if kind == "device" and not ctx.is_device_like(node):
            return KindMismatch(f"argument {ctx.code(node)!r} does not look like a device")
    return None


def optional_parameter(ctx: RuleContext, node: cst.BaseExpression, anchor: cst.CSTNode) -> bool:
    """Whether `node` names a parameter of the function around `anchor` that may be None: its
    default is None or its annotation says Optional (`dtype: Optional[torch.dtype] = None`)."""
    if not isinstance(node, cst.Name):
        return False
    scope = Where.scope_of(ctx, anchor)
    if not isinstance(scope, cst.FunctionDef):
        return False
    p = scope.params
    for param in (*p.posonly_params, *p.params, *p.kwonly_params):
        if param.name.value != node.value:
            continue
        if isinstance(param.default, cst.Name) and param.default.value == "None":
            return True
        annotation = ctx.code(param.annotation.annotation) if param.annotation is not None else ""
        return "Optional" in annotation or "None" in annotation
    return False


def _strict_kind_problem(ctx: RuleContext, node: cst.BaseExpression, kind: str) -> str | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return f"cannot be a {kind}"
    if kind == "tensor":
        if isinstance(node, LITERALS):
            return "is a literal, not a tensor"
        qualified = ctx.qualified_name(node) if isinstance(node, cst.Name | cst.Attribute) else None
        if qualified is not None and ctx.mappings.framework_of(qualified) is not None:
            # `torch.device(...)`: not `<tensor>.device`; `torch.utils.data`: not `<tensor>.data`
            return "is a framework module or symbol, not a tensor"
        if qualified is not None and (dotted_name(node) or "").split(".")[0] in _module_imports(ctx):
            return "is an imported module, not a tensor"  # `esm.data.Alphabet`: not `<tensor>.data`
        if isinstance(node, cst.Name) and node.value == "self" and _in_module_class(ctx):
            return "is the module itself, not a tensor"  # `self.device`, `self.data`, `self.T`
        return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus | cst.Plus):
        return _strict_kind_problem(ctx, node.expression, kind)  # type: ignore[arg-type]
    if kind == "ints" and isinstance(node, cst.Tuple | cst.List):
        for element in node.elements:
            if not isinstance(element, cst.StarredElement):
                problem = _strict_kind_problem(ctx, element.value, "int")
                if problem is not None:
                    return problem
        return None
    if isinstance(node, _NOT_AN_INT):
        return f"cannot be an {kind}"
    if ctx.dtype_of(node) is not None:
        return "is a dtype"  # `x.view(torch.float16)` reinterprets bits: not a reshape
    return None


def _module_imports(ctx: RuleContext) -> frozenset[str]:
    """The names the file binds with `import X` / `import X.Y as Z` statements: modules, never
    tensors (a `from X import y` may bind either, and is not counted)."""

    def build() -> frozenset[str]:
        tree, _ = ctx.module_ast()
        if tree is None:
            return frozenset()
        return frozenset(
            alias.asname or alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        )

    return ctx.per_file("module-imports", build)


def _in_module_class(ctx: RuleContext) -> bool:
    """Whether the code being converted is a method of an nn.Module class of the file."""
    key = ctx.enclosing_function()
    return key is not None and "." in key and key.split(".")[0] in analysis_for(ctx).module_classes
