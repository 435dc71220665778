"""The engine offers nodes to the rules in the order rules.RULE_ORDER lists them, and that list
names every rule module: precedence never follows file names or import order. A rule module's
name ends with its targets (`_any`, `_model`, `_jax`, `_tf`); the other modules beside them are
helpers the rules share, and register no rule."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from precision_transpiler import rules
from precision_transpiler.rules import RULE_ORDER, RULES, active_rules

RULE_MODULE = re.compile(r"_(any|model|jax|tf)$")


def _modules() -> list[str]:
    folder = Path(rules.__file__).parent
    return sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "base"))


def test_rules_run_in_the_listed_order() -> None:
    assert [rule.name for rule in active_rules()] == [name for name, _ in RULE_ORDER]


def test_every_rule_module_is_listed_once() -> None:
    files = [stem for stem in _modules() if RULE_MODULE.search(stem)]
    listed = [module for _, module in RULE_ORDER]
    assert sorted(listed) == files
    assert len(set(listed)) == len(listed)


def test_helper_modules_register_no_rule() -> None:
    helpers = [stem for stem in _modules() if not RULE_MODULE.search(stem)]
    assert helpers  # the shared helpers (module walks, op arguments, ...)
    for stem in helpers:
        importlib.import_module(f"{rules.__name__}.{stem}")
    active_rules()
    assert [rule for rule in RULES if rule.__module__.rpartition(".")[2] in helpers] == []


def test_each_rule_lives_in_the_module_listed_for_it() -> None:
    for rule, (name, module) in zip(active_rules(), RULE_ORDER, strict=True):
        assert rule.name == name
        assert rule.__module__ == f"{rules.__name__}.{module}"
