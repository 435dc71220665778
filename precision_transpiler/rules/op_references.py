"""References to source functions passed around as values (`F.relu` handed to a layer,
`act = F.gelu`): the target function each becomes, from the op tables or the runtime's
torch-signature functions. Used by op-pattern (rules/op_patterns_any.py) and by
torch-namespace-value (rules/torch_namespace_values_model.py).
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from precision_transpiler.mappings.model import MappingSet
from precision_transpiler.mappings.patterns import Pattern
from precision_transpiler.rewrite.context import RuleContext
from precision_transpiler.runtime import SHARED, runtime_module, runtime_package_dir


def function_reference(ctx: RuleContext, qualified: str) -> str | None:
    """The target function a reference to the source function `qualified` becomes (`F.relu`
    passed around -> `jax.nn.relu`, `F.gelu` -> the runtime's torch-signature `gelu`), or None."""
    return _reference_target(ctx.mappings, ctx.source, ctx.target, qualified) or _runtime_function(ctx, qualified)


def _reference_target(mappings: MappingSet, source: str, target: str, qualified: str) -> str | None:
    """The target function a reference to the source function `qualified` can become (see
    `OpPatterns._reference`), or None."""
    key = ("op-reference", source, target)
    if key not in mappings.caches:
        found: dict[str, str | None] = {}
        for op in mappings.ops.values():
            for pattern in op.patterns.get(source, ()):
                name = pattern.function_name
                if name is None or pattern.emit_only:
                    continue
                required = [p for p in pattern.placeholders.values() if not p.optional and not p.keywords]
                if _is_passthrough(pattern):  # `F.avg_pool2d({*args}, {**kwargs})`: same arguments
                    targets = op.patterns.get(target, ())
                    emitted = targets[0].function_name if targets and _is_passthrough(targets[0]) else None
                elif len(required) != 1 or required[0].variadic:
                    continue
                else:
                    emitted = _single_argument_function(op.patterns.get(target, ()), required[0].name)
                # two ops reading the same function differently: no single reference
                found[name] = emitted if name not in found or found[name] == emitted else None
        mappings.caches[key] = found
    return mappings.caches[key].get(qualified)


#: torch callables passed around as values whose runtime counterpart is not in functional.py:
#: qualified name -> (runtime module, function), a torch-signature function on both targets
_RUNTIME_REFERENCES = {
    # `no_amp = partial(autocast, "cuda", enabled=False)`: the region's context manager when called
    "torch.autocast": ("modules", "autocast"),
    "torch.amp.autocast": ("modules", "autocast"),
    "torch.amp.autocast_mode.autocast": ("modules", "autocast"),
    # factories handed around (`partial(torch.arange, device=device)`, equiformer): torch's signature
    "torch.ones": ("tensor", "torch_ones"),
    "torch.zeros": ("tensor", "torch_zeros"),
    "torch.empty": ("tensor", "torch_zeros"),
    "torch.arange": ("tensor", "torch_arange_function"),
    # `partial(checkpoint, fn)`: the function's forward (runtime/factories.py, shared)
    "torch.utils.checkpoint.checkpoint": ("factories", "torch_checkpoint"),
}


def is_torch_initialiser(qualified: str) -> bool:
    """`torch.nn.init.kaiming_normal_`: one of torch's in-place initialisers (whose calls as
    statements are dropped: the converted model takes the torch weights)."""
    module, _, name = qualified.rpartition(".")
    return module == "torch.nn.init" and name.endswith("_") and not name.startswith("_")


def _runtime_function(ctx: RuleContext, qualified: str) -> str | None:
    """`torch.nn.functional.gelu` passed around: the runtime's torch-signature function of that
    name (runtime/<target>/functional.py, or `_RUNTIME_REFERENCES`), which takes every argument
    the torch one does."""
    if qualified in _RUNTIME_REFERENCES and ctx.source == "torch" and ctx.target in ("jax", "tf"):
        module_name, function = _RUNTIME_REFERENCES[qualified]
        if module_name in SHARED:
            return f"precision_transpiler.runtime.{module_name}.{function}"
        return f"{runtime_module(ctx.target, module_name)}.{function}"
    module, _, name = qualified.rpartition(".")
    if is_torch_initialiser(qualified) and ctx.source == "torch" and ctx.target in ("jax", "tf"):
        return "precision_transpiler.runtime.common.torch_init_skipped"
    if module != "torch.nn.functional" or ctx.source != "torch" or ctx.target not in ("jax", "tf"):
        return None
    runtime = runtime_module(ctx.target, "functional")
    key = ("runtime-functions", runtime)
    if key not in ctx.mappings.caches:
        import ast

        # read as a file: converting imports no framework (the package's __init__ would)
        file = Path(runtime_package_dir(ctx.target)) / "functional.py"
        tree = ast.parse(file.read_text(encoding="utf-8"))
        ctx.mappings.caches[key] = {
            n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
        }
    return f"{runtime}.{name}" if name in ctx.mappings.caches[key] else None


def _is_passthrough(pattern: Pattern) -> bool:
    """`f({*args}, {**kwargs})`: a call handing every argument on as written, so a reference to
    the function can become a reference to the emitted one (a runtime function with torch's
    signature)."""
    expr = pattern.expr
    if not isinstance(expr, cst.Call) or pattern.function_name is None:
        return False
    kinds = sorted((p.variadic, p.keywords) for p in pattern.placeholders.values())
    return len(expr.args) == 2 and kinds == [(False, True), (True, False)]


def _single_argument_function(patterns: tuple, param: str) -> str | None:
    """`jax.nn.relu` when the first target pattern is exactly `jax.nn.relu({param})`."""
    if not patterns:
        return None
    pattern = patterns[0]
    expr = pattern.expr
    if not isinstance(expr, cst.Call) or pattern.function_name is None or len(expr.args) != 1:
        return None
    arg = expr.args[0]
    if arg.keyword is not None or arg.star or not isinstance(arg.value, cst.Name):
        return None
    placeholder = pattern.placeholders.get(arg.value.value)
    if placeholder is None or placeholder.name != param:
        return None
    return pattern.function_name
