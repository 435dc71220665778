"""torch modules read as values: `getattr(nn, act_layer)()`, `vars(torch.nn.modules.activation)`.

Model code builds registries of layers and activations out of torch's own modules: torch-geometric's
activation resolver lists `vars(torch.nn.modules.activation)`, timm-style code looks an activation
up with `getattr(nn, name)` or `getattr(F, name)`. Converted, the module would still be torch's.

- `getattr(<torch module>, "name")` with a constant name is the attribute `module.name`, converted
  as if written so (a layer class, a function reference);
- any other use of a torch module listed under `namespaces:` in the layer tables becomes a
  `types.SimpleNamespace` of its listed members, each converted as `module.member` written by hand
  would be (`ReLU=ReLU`, the runtime's torch-signature class; `gelu=gelu`), so `vars()`,
  `getattr()` and attribute reads find them. Members without a counterpart in the target are left
  out, and a namespace the table marks `partial` (torch.nn holds more than its activations) also
  holds the members the file names in string constants (`rnn_type="LSTM"`, then
  `getattr(nn, rnn_type)`), and is said with a warning, so a name it lacks is no surprise at run
  time.
"""

from __future__ import annotations

import libcst as cst

from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.rules.base import Example, Rule, register
from precision_transpiler.rules.op_references import function_reference
from precision_transpiler.syntax import all_nodes


@register
class TorchNamespaceValues(Rule):
    name = "torch-namespace-value"
    summary = "torch modules read as values (getattr(nn, name), vars(...)) become namespaces of converted members."
    EXAMPLES = (
        Example(
            "import torch.nn as nn\n\n\ndef act():\n    return getattr(nn, 'GELU')()\n",
            "import precision_transpiler\n\n\ndef act():\n"
            "    return precision_transpiler.runtime.keras.activations.GELU()\n",
            to="tf",
            vendored=False,
        ),
    )

    def applies(self, ctx: RuleContext) -> bool:
        return ctx.source == "torch" and ctx.target in ("jax", "tf")

    def leave_Call(self, ctx: RuleContext, original: cst.Call, updated: cst.Call) -> cst.BaseExpression | None:
        name = _constant_getattr(original)
        if name is None:
            return None
        module = ctx.qualified_name(original.args[0].value)
        if module is None or ctx.mappings.framework_of(module) != "torch":
            return None
        target = _member(ctx, f"{module}.{name}")
        if target is None and len(updated.args) == 3:
            # `getattr(torch, "compile", None)`: a feature probed with a default, which the
            # target lacks; the code is written for its absence, as on an older torch
            new = updated.args[2].value.with_changes(lpar=original.lpar, rpar=original.rpar)
            ctx.diagnose(
                original,
                "note",
                "feature-detection",
                f"{module}.{name} has no counterpart in {ctx.target}: getattr's default is taken, "
                "as where torch lacks it",
            )
            ctx.consume(all_nodes(original.args[0].value))
            ctx.record(self.name, original, new)
            return new
        if target is None:
            return None
        new = ctx.expr_for(target).with_changes(lpar=original.lpar, rpar=original.rpar)
        ctx.consume(all_nodes(original.args[0].value))
        ctx.record(self.name, original, new)
        return new

    def leave_Name(self, ctx: RuleContext, original: cst.Name, updated: cst.Name) -> cst.BaseExpression | None:
        return self._namespace(ctx, original)

    def leave_Attribute(
        self, ctx: RuleContext, original: cst.Attribute, updated: cst.Attribute
    ) -> cst.BaseExpression | None:
        return self._namespace(ctx, original)

    def _namespace(self, ctx: RuleContext, original: cst.Name | cst.Attribute) -> cst.BaseExpression | None:
        if not ctx.is_outermost_name(original):
            return None
        parent = ctx.parent(original)
        if isinstance(parent, cst.Call) and parent.func is original:
            return None  # called
        if isinstance(parent, cst.Attribute) and parent.value is original:
            return None
        call = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
        if isinstance(call, cst.Call) and _constant_getattr(call) is not None and call.args[0].value is original:
            return None  # `getattr(nn, "ReLU")`: leave_Call converts it
        module = ctx.qualified_name(original)
        spec = ctx.mappings.namespaces.get(module or "")
        if spec is None:
            return None
        elements: list[cst.DictElement] = []
        left_out: list[str] = []
        named = _named_in_strings(ctx, module, spec.members) if spec.partial else []
        for member in (*spec.members, *named):
            target = _member(ctx, f"{module}.{member}")
            if target is None:
                left_out.append(member)
            else:
                elements.append(cst.DictElement(cst.SimpleString(f'"{member}"'), ctx.expr_for(target)))
        # one member a line, indented below the statement; string keys, so that no member's
        # name reads as a name the user's code binds (which would rename the copied shims)
        line = cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace("    "))
        end = cst.ParenthesizedWhitespace(indent=True)
        elements = [
            e.with_changes(comma=cst.Comma(whitespace_after=line if i < len(elements) - 1 else end))
            for i, e in enumerate(elements)
        ]
        new = cst.Call(
            func=ctx.expr_for("types.SimpleNamespace"),
            args=[cst.Arg(cst.Dict(elements, lbrace=cst.LeftCurlyBrace(whitespace_after=line)), star="**")],
            lpar=original.lpar,
            rpar=original.rpar,
        )
        said = []
        if spec.partial:
            also = f", and what the file names in strings: {', '.join(named)}" if named else ""
            said.append(f"the converted namespace {spec.partial}{also}")
        if left_out:
            said.append(f"left out, no counterpart in {ctx.target}: {', '.join(left_out)}")
        if said:
            ctx.diagnose(original, "warning", "partial-namespace", f"{module} used as a value: {'; '.join(said)}")
        ctx.consume(all_nodes(original))
        ctx.record(self.name, original, new)
        return new


def _constant_getattr(call: cst.Call) -> str | None:
    """`name` of `getattr(x, "name")` / `getattr(x, "name", default)`, else None."""
    if not (isinstance(call.func, cst.Name) and call.func.value == "getattr" and len(call.args) in (2, 3)):
        return None
    if any(arg.star or arg.keyword for arg in call.args):
        return None
    name = call.args[1].value
    if isinstance(name, cst.SimpleString) and isinstance(name.evaluated_value, str):
        return name.evaluated_value if name.evaluated_value.isidentifier() else None
    return None


def _named_in_strings(ctx: RuleContext, module: str, members: tuple[str, ...] | list[str]) -> list[str]:
    """Members of `module` beyond the table's list that the file names in string constants
    (`rnn_type="LSTM"` then `getattr(nn, rnn_type)`, `if rnn_type in ["LSTM", "GRU"]`), or that
    a string template of the file can spell (`getattr(nn, "Conv{}d".format(dimensions))`,
    `f"BatchNorm{dims}d"`, `"Dropout%dd" % n`, `getattr(F, f"conv{n_dim}d")` among the functions
    the op tables map): a name a lookup can reach comes from somewhere,
    most often the file itself."""
    tree, _ = ctx.module_ast()
    if tree is None:
        return []
    import ast
    import re

    strings: set[str] = set()
    templates: list[re.Pattern[str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
            if re.search(r"\{[^{}]*\}|%[sd]", node.value):
                parts = re.split(r"\{[^{}]*\}|%[sd]", node.value)
                templates.append(re.compile(r"\w*".join(re.escape(part) for part in parts)))
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else None for v in node.values]
            pattern = "".join(re.escape(str(part)) if part is not None else r"\w*" for part in parts)
            templates.append(re.compile(pattern))
    listed = set(members)
    prefix = f"{module}."
    if templates:
        functions = (p.function_name for op in ctx.mappings.ops.values() for p in op.patterns.get("torch", ()))
        known = {
            name[len(prefix) :]
            for name in (*ctx.mappings.layers, *ctx.mappings.layer_symbols, *functions)
            if name and name.startswith(prefix)
        }
        strings |= {
            name
            for name in known
            if "." not in name and name.isidentifier() and any(t.fullmatch(name) for t in templates)
        }
    return sorted(
        name
        for name in strings
        if name.isidentifier() and name not in listed and _member(ctx, f"{module}.{name}") is not None
    )


def _member(ctx: RuleContext, qualified: str) -> str | None:
    """What `qualified` (a torch layer class or function) becomes when read as a value."""
    public = ctx.mappings.frameworks["torch"].public_name(qualified)
    spec = ctx.mappings.layers.get(public)
    target = spec.targets.get(ctx.target) if spec is not None else None
    if target is not None:
        return target.class_symbol
    direct = ctx.mappings.layer_symbols.get(public, {}).get(ctx.target)
    return direct or function_reference(ctx, public)
