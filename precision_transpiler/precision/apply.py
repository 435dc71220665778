"""Apply a precision policy to a converted module: strip what an earlier run inserted, run the
policy pass for the module's framework, put the helper block after the leading imports.

The pipeline's policy stages (pipeline.py) call these: `apply_torch_policy`, `apply_keras_policy`
and `apply_flax_policy` for a policy within one framework, `apply_flax_policy` and
`apply_keras_torch_policy` for a torch model (converted now, or earlier: the pipeline's
`UnvendorRuntime` stage takes a converted model's copied-in runtime definitions out before the
policy and `VendorRuntime` puts them back after it, so runtime code is copied in one place).
Each takes the module and its text (`source`, the code the pipeline already holds: no second
print) and returns the new module and the decisions, naming lines of `source`.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from precision_transpiler.linemap import follow_lines
from precision_transpiler.mappings import MappingSet
from precision_transpiler.rewrite.import_editor import after_leading_imports


def apply_torch_policy(
    module: cst.Module, source: str, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` (nothing more for fp32)."""
    from precision_transpiler.precision.passes.torch import HELPER_IMPORTS, TorchPolicyPass, helper_block

    return _apply_layer_policy(
        module,
        source,
        policy,
        lambda module, source: TorchPolicyPass(policy, table, module, source, nan_fallback),
        lambda done: helper_block(policy, table, nan_fallback, done),
        HELPER_IMPORTS,
    )


def apply_keras_policy(
    module: cst.Module, source: str, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to Keras layers (the helper block
    depends on what the pass found: subclassed layers, models to check for NaN)."""
    from precision_transpiler.precision.passes import keras as kp

    return _apply_layer_policy(
        module,
        source,
        policy,
        lambda module, source: kp.KerasPolicyPass(policy, table, module, source, nan_fallback),
        lambda done: kp.helper_block(policy, table, nan_fallback, done),
        kp.HELPER_IMPORTS,
    )


def apply_keras_torch_policy(
    module: cst.Module, source: str, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to torch code converted to Keras
    (precision/passes/keras_torch.py: torch's model.to + autocast semantics)."""
    from precision_transpiler.precision.passes import keras_torch as ktp

    return _apply_layer_policy(
        module,
        source,
        policy,
        lambda module, source: ktp.KerasTorchPolicyPass(policy, table, module, source),
        lambda done: ktp.helper_block(policy, table, nan_fallback, done),
        ktp.HELPER_IMPORTS,
    )


def apply_flax_policy(
    module: cst.Module, source: str, policy: Any, table: MappingSet, nan_fallback: bool = False
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, then apply `policy` to Flax NNX layers."""
    from precision_transpiler.precision.passes import flax as fp

    return _apply_layer_policy(
        module,
        source,
        policy,
        lambda module, source: fp.FlaxPolicyPass(policy, table, module, source),
        lambda done: fp.helper_block(policy, nan_fallback, done),
        fp.HELPER_IMPORTS,
    )


def _apply_layer_policy(
    module: cst.Module,
    given: str,
    policy: Any,
    make_pass: Any,
    helpers: Any,
    imports: list[tuple[str, str]],
) -> tuple[cst.Module, list[Any]]:
    """Strip what an earlier run inserted, run the pass `make_pass(module, source)` makes, and
    put `helpers(the pass, after its run)` after the leading imports when it decided anything.
    `given` is `module`'s text: printed again only when stripping changed the module."""
    from precision_transpiler.precision.strip import strip_inserted

    seen = given
    if "_ptranspile_" in given or "_PTRANSPILE_" in given:
        module, stripped = strip_inserted(module)
        if stripped:
            seen = module.code
    if policy.is_full_precision:
        return module, []
    policy_pass = make_pass(module, seen)
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
