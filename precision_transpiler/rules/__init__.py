"""Rewrite rules, one per module (rules/base.py has the contract).

`RULE_ORDER` is the one place that says in which order the engine offers a node to the rules
(the first rule that returns a node replaces it). It is an explicit list, so that adding or
renaming a rule's file never changes which rule wins.
"""

from __future__ import annotations

import importlib

from precision_transpiler.rules.base import RULES, Example, Rule, register

#: (rule name, module under precision_transpiler.rules), in the order rules are offered a node.
RULE_ORDER: tuple[tuple[str, str], ...] = (
    # Rules that take over calls op-pattern would otherwise map or report as unsupported go
    # first: `x.add_(y)` is an assignment to write, not an op to look up ...
    ("torch-inplace-ops", "torch_inplace_ops_model"),
    # `for oc in o.split(b, dim)` changing `oc` in place: the chunk is written back into `o`
    ("torch-split-write-back", "torch_split_write_back_model"),
    # ... and `torch.autocast(...)` regions become the runtime's autocast context.
    ("torch-autocast", "torch_autocast_model"),
    # `hasattr(torch, "compiler")`: answered for the converted code before the symbols are mapped.
    ("torch-feature-checks", "torch_feature_checks_model"),
    # `exec(...)` / `loader.exec_module(...)` of code generated at run time: refused, not run
    ("torch-generated-code", "torch_generated_code_model"),
    # torch modules named in strings and imported at run time (`optional_import("einops.layers.torch")`)
    ("torch-module-strings", "torch_module_strings_model"),
    # `copy.deepcopy(layer)` on Keras: copied attribute by attribute, not through Keras saving
    ("torch-copy-tf", "torch_copy_tf"),
    # Symbols, strings and comparisons of dtypes; then every other op through the op tables.
    ("dtype-identity", "dtype_identity_any"),
    ("dtype-string", "dtype_string_any"),
    ("dtype-symbol", "dtype_symbol_any"),
    ("op-pattern", "op_patterns_any"),
    # `p.requires_grad = False` and the `requires_grad_(...)` calls op-pattern left (not tensors)
    ("torch-requires-grad", "torch_requires_grad_model"),
    # `getattr(t, mode)` on a tensor with a computed name: torch's method, looked up when it runs
    ("torch-dynamic-method", "torch_dynamic_methods_model"),
    # Keras-only arithmetic fixes (torch's promotion of bools and integers).
    ("torch-bool-arith-tf", "torch_bool_arith_tf"),
    ("torch-inplace-init", "torch_inplace_init_model"),
    ("torch-data-assign", "torch_data_assign_model"),
    ("torch-int-promotion-tf", "torch_int_promotion_tf"),
    ("torch-matmul-tf", "torch_matmul_tf"),
    # Layers and modules: constructors through the layer table, then the classes around them.
    ("torch-layer", "torch_layers_model"),
    # torch modules read as values (`getattr(nn, name)`, `vars(torch.nn.modules.activation)`)
    ("torch-namespace-value", "torch_namespace_values_model"),
    ("torch-module", "torch_modules_jax"),
    ("torch-module-keras", "torch_modules_tf"),
    ("torch-tensor-index-tf", "torch_tensor_index_tf"),
    ("torch-zoo", "torch_zoo_model"),
    # torch symbols without a counterpart left in annotations (`Callable[..., Optimizer]`)
    ("torch-annotations", "torch_annotations_model"),
)


def active_rules() -> list[type[Rule]]:
    """Every rule, in RULE_ORDER. Importing a rule's module registers it; a registered rule
    missing from RULE_ORDER (or listed but not registered) is a programming error."""
    for _, module in RULE_ORDER:
        importlib.import_module(f"{__name__}.{module}")
    by_name = {rule.name: rule for rule in RULES}
    listed = [name for name, _ in RULE_ORDER]
    missing = sorted(set(by_name) - set(listed))
    unknown = [name for name in listed if name not in by_name]
    if missing or unknown:
        raise RuntimeError(f"RULE_ORDER is out of date: not listed {missing}, not registered {unknown}")
    return [by_name[name] for name in listed]


__all__ = ["RULES", "RULE_ORDER", "Example", "Rule", "active_rules", "register"]
