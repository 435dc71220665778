"""Apply a precision policy to a converted module: strip what an earlier run inserted, run the
policy pass for the module's framework, put the helper block after the leading imports.

The pipeline (pipeline.py) calls these: `apply_torch_policy`, `apply_keras_policy_converted`
and `apply_flax_policy_converted` for a policy within one framework (the last two recognise a
model converted from torch by its copied-in runtime definitions and run the pass converting
from torch applies), `apply_flax_policy` and `apply_keras_torch_policy` for a torch model being
converted. Each returns the new module and the decisions, naming lines of the code it was given.
"""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from precision_transpiler.linemap import follow_lines
from precision_transpiler.mappings import MappingSet
from precision_transpiler.rewrite.import_editor import after_leading_imports
from precision_transpiler.runtime import POLICY_MODULES

#: how a converted model's imports from the runtime package start (runtime read back from the
#: module beside it: convert/runtime_module.py)
RUNTIME_IMPORT = "from precision_transpiler.runtime."
_RUNTIME_IMPORT_MODULE = re.compile(re.escape(RUNTIME_IMPORT) + r"([\w.]+) import")


def apply_torch_policy(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` (nothing more for fp32). A file
    a policy was applied to has the policy's runtime copied in: it is taken out for the pass
    (vendor.unvendor) and copied in again after it (the pipeline's VendorRuntime stage)."""
    from precision_transpiler.convert.vendor import MARKER, unvendor
    from precision_transpiler.precision.passes.torch import HELPER_IMPORTS, TorchPolicyPass, helper_block

    given = module.code
    unvendored = unvendor(given, "torch") if MARKER in given else None
    policed, precision = _apply_layer_policy(
        module if unvendored is None else cst.parse_module(unvendored),
        policy,
        lambda module, source: TorchPolicyPass(policy, table, module, source, nan_fallback),
        lambda done: helper_block(policy, table, nan_fallback, done),
        HELPER_IMPORTS,
    )
    if precision and unvendored is not None:  # decisions name the given code's lines
        precision = follow_lines(precision, unvendored, given)
    return policed, precision


def apply_keras_policy(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to Keras layers (the helper block
    depends on what the pass found: subclassed layers, models to check for NaN)."""
    from precision_transpiler.precision.passes import keras as kp

    return _apply_layer_policy(
        module,
        policy,
        lambda module, source: kp.KerasPolicyPass(policy, table, module, source, nan_fallback),
        lambda done: kp.helper_block(policy, table, nan_fallback, done),
        kp.HELPER_IMPORTS,
    )


def apply_keras_torch_policy(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to torch code converted to Keras
    (precision/passes/keras_torch.py: torch's model.to + autocast semantics)."""
    from precision_transpiler.precision.passes import keras_torch as ktp

    return _apply_layer_policy(
        module,
        policy,
        lambda module, source: ktp.KerasTorchPolicyPass(policy, table, module, source),
        lambda done: ktp.helper_block(policy, table, nan_fallback, done),
        ktp.HELPER_IMPORTS,
    )


def apply_keras_policy_converted(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """apply_keras_policy, or for a model converted from torch (it has copied-in torch-semantics
    shims) the pass converting from torch applies, with the shims taken out for it and copied in
    again after it: applying a policy again to such an output changes nothing."""
    from precision_transpiler.convert.vendor import unvendor, vendor_shims

    unvendored = unvendor(module.code, "tf")
    # converted from torch: torch-semantics runtime definitions, copied in or read back from a
    # runtime module's imports (a policy's own runtime definitions say nothing)
    converted = _imports_torch_semantics(module.code if unvendored is None else unvendored)
    apply = apply_keras_torch_policy if converted else apply_keras_policy
    if unvendored is None:
        return apply(module, policy, table, nan_fallback)
    policed, precision = apply(cst.parse_module(unvendored), policy, table, nan_fallback)
    code, _ = vendor_shims(policed.code)
    if precision:  # decisions name lines of the code the pass was given: the given code's lines
        precision = follow_lines(precision, unvendored, module.code)
    return cst.parse_module(code), precision


def apply_flax_policy(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to Flax NNX layers."""
    from precision_transpiler.precision.passes import flax as fp

    return _apply_layer_policy(
        module,
        policy,
        lambda module, source: fp.FlaxPolicyPass(policy, table, module, source),
        lambda done: fp.helper_block(policy, nan_fallback, done),
        fp.HELPER_IMPORTS,
    )


def apply_flax_policy_converted(
    module: cst.Module, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """apply_flax_policy, for a model converted from torch too: its copied-in shims are taken
    out for the pass (so that it sees them as the torch-semantics layers they are) and copied in
    again after it, as converting from torch does: applying a policy again changes nothing."""
    from precision_transpiler.convert.vendor import unvendor, vendor_shims

    # fp32 on a file a policy was applied to: stripping must not take an import the copied-in
    # shims need (the policy's marked `jnp` import can be their only one)
    inserted = "_ptranspile_" in module.code or "_PTRANSPILE_" in module.code
    unvendored = unvendor(module.code, "jax") if inserted or not policy.is_full_precision else None
    if unvendored is None:
        return apply_flax_policy(module, policy, table, nan_fallback)
    policed, precision = apply_flax_policy(cst.parse_module(unvendored), policy, table, nan_fallback)
    code, _ = vendor_shims(policed.code)
    if precision:  # decisions name lines of the code the pass was given: the given code's lines
        precision = follow_lines(precision, unvendored, module.code)
    return cst.parse_module(code), precision


def _imports_torch_semantics(code: str) -> bool:
    """`code` imports runtime definitions other than the precision policies' (POLICY_MODULES)."""
    return RUNTIME_IMPORT in code and any(
        m.group(1) not in POLICY_MODULES for m in _RUNTIME_IMPORT_MODULE.finditer(code)
    )


def _apply_layer_policy(
    module: cst.Module, policy: Any, make_pass: Any, helpers: Any, imports: list[tuple[str, str]]
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, run the pass `make_pass(module, source)` makes, and
    put `helpers(the pass, after its run)` after the leading imports when it decided anything."""
    from precision_transpiler.precision.strip import strip_inserted

    given = module.code
    if "_ptranspile_" in given or "_PTRANSPILE_" in given:
        module, _ = strip_inserted(module)
    if policy.is_full_precision:
        return module, []
    policy_pass = make_pass(module, module.code)
    seen = module.code
    module = module.visit(policy_pass)
    if not policy_pass.decisions:
        return module, []
    body = list(module.body)
    index = after_leading_imports(body, blocks=True)
    body[index:index] = helpers(policy_pass)
    decisions = policy_pass.decisions
    if seen != given:  # an earlier run's insertions were stripped: name the given code's lines
        decisions = follow_lines(decisions, seen, given)
    return _with_helper_imports(module.with_changes(body=body), imports), decisions


def _with_helper_imports(module: cst.Module, wanted: list[tuple[str, str]]) -> cst.Module:
    """Add the imports the generated helpers use (marked, so stripping removes exactly them)."""
    from precision_transpiler.precision.strip import marked_import
    from precision_transpiler.rewrite.imports import module_imports

    available = module_imports(module)
    missing = [marked_import(m, a) for m, a in wanted if available.get(m) != a]
    if not missing:
        return module
    body = list(module.body)
    index = after_leading_imports(body, blocks=True)
    body[index:index] = missing
    return module.with_changes(body=body)
