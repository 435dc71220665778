"""The engine offers nodes to the rules in the order rules.RULE_ORDER lists them, and that list
names every rule module: precedence never follows file names or import order."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import rules
from precision_transpiler.rules import RULE_ORDER, active_rules


def test_rules_run_in_the_listed_order() -> None:
    assert [rule.name for rule in active_rules()] == [name for name, _ in RULE_ORDER]


def test_every_rule_module_is_listed_once() -> None:
    folder = Path(rules.__file__).parent
    files = sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "base"))
    listed = [module for _, module in RULE_ORDER]
    assert sorted(listed) == files
    assert len(set(listed)) == len(listed)


def test_each_rule_lives_in_the_module_listed_for_it() -> None:
    for rule, (name, module) in zip(active_rules(), RULE_ORDER, strict=True):
        assert rule.name == name
        assert rule.__module__ == f"{rules.__name__}.{module}"
