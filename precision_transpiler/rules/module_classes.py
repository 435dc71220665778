"""Class statements of torch module classes converted to Flax NNX (torch_modules_jax.py's
helpers): what nnx's Module, an ABC with a metaclass, asks of a class that torch's plain
nn.Module does not.

- `concrete_methods`: `@abstractmethod` on a torch module's method marks intent only (torch's
  Module is no ABC), so it goes unless the class asks for ABC itself;
- `module_metaclass`: a source metaclass (`metaclass=Meta`) would conflict with nnx's, so the
  class gets the runtime's metaclass derived from both.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.analysis.torch_models import analysis_for
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.runtime import runtime_name
from precision_transpiler.syntax import dotted_name


def concrete_methods(ctx: RuleContext, original: cst.ClassDef, body: cst.BaseSuite) -> cst.BaseSuite:
    """Methods of a torch module class without `@abstractmethod`: torch's nn.Module is no ABC, so
    the decorator marks intent only (torch_geometric's `MessagePassing.edge_update`), while nnx's
    Module is one and would refuse to build every subclass that does not override them. A class
    that asks for ABC itself (an `ABC` base, a `metaclass=`) keeps them."""
    if any(b.keyword is not None for b in original.keywords) or any(
        ctx.qualified_name(b.value) in ("abc.ABC", "abc.ABCMeta") for b in original.bases
    ):
        return body
    if not isinstance(body, cst.IndentedBlock) or not isinstance(original.body, cst.IndentedBlock):
        return body
    abstract = {
        statement.name.value: {dotted_name(d.decorator) for d in statement.decorators if _is_abstract(ctx, d)}
        for statement in original.body.body
        if isinstance(statement, cst.FunctionDef) and any(_is_abstract(ctx, d) for d in statement.decorators)
    }
    if not abstract:
        return body
    statements = []
    for statement in body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value in abstract:
            names = abstract[statement.name.value]
            kept = [d for d in statement.decorators if dotted_name(d.decorator) not in names]
            statement = statement.with_changes(decorators=kept)
        statements.append(statement)
    return body.with_changes(body=statements)


def module_metaclass(
    ctx: RuleContext, original: cst.ClassDef, updated: cst.ClassDef, bases: list[cst.Arg], module: bool
) -> list[cst.Arg] | None:
    """`class Base(nn.Module, metaclass=Meta)`: nnx's Module has a metaclass and torch's has none,
    so the source's would conflict with it; the runtime's `module_metaclass(Meta, *bases)` derives
    one from both (runtime/flax/modules.py). ABC's metaclass is already nnx's base."""
    if not module and original.name.value not in analysis_for(ctx).module_classes:
        return None
    keywords = list(updated.keywords)
    for index, keyword in enumerate(original.keywords):
        if keyword.keyword is None or keyword.keyword.value != "metaclass":
            continue
        if ctx.qualified_name(keyword.value) == "abc.ABCMeta":
            return None
        args = [cst.Arg(keywords[index].value), *(cst.Arg(b.value) for b in bases if b.star == "")]
        func = ctx.expr_for(runtime_name("jax", "modules", "module_metaclass"))
        keywords[index] = keywords[index].with_changes(value=cst.Call(func=func, args=args))
        return keywords
    return None


def _is_abstract(ctx: RuleContext, decorator: cst.Decorator) -> bool:
    return ctx.qualified_name(decorator.decorator) == "abc.abstractmethod"
