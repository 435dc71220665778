"""Rewrite rules, one per module. Importing this package registers them in order."""

from __future__ import annotations

from precision_transpiler.rules.base import RULES, Example, Rule, register


def active_rules() -> list[type[Rule]]:
    """All registered rules, in the order they run."""
    from precision_transpiler.rules import (  # noqa: F401  (import registers; `Rule.order` orders)
        dtype_identity,
        dtype_string,
        dtype_symbol,
        op_patterns,
        torch_autocast,
        torch_bool_arith_tf,
        torch_inplace_init,
        torch_inplace_ops,
        torch_int_promotion_tf,
        torch_layers,
        torch_modules,
        torch_modules_keras,
        torch_random_init,
        torch_tensor_index_tf,
        torch_zoo,
    )

    return list(RULES)


__all__ = ["RULES", "Example", "Rule", "active_rules", "register"]
