"""Every rule's own before/after EXAMPLES, run through the full transpiler.

The examples live beside each rule (precision_transpiler/rules/*.py), Fixit-style, so the
documentation of a rule and its test are one text.
"""

from __future__ import annotations

import libcst as cst
import pytest

from precision_transpiler import transpile
from precision_transpiler.rules import active_rules

CASES = [
    pytest.param(rule, example, id=f"{rule.name}-{i}")
    for rule in active_rules()
    for i, example in enumerate(rule.EXAMPLES)
]


def test_every_rule_has_examples() -> None:
    for rule in active_rules():
        assert rule.EXAMPLES, f"{rule.name} has no examples"
        assert rule.summary, f"{rule.name} has no summary"
        assert rule.__module__ and __import__(rule.__module__, fromlist=["_"]).__doc__, rule.name


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_rule_example(rule, example) -> None:
    result = transpile(example.before, to=example.to, from_=example.from_, _standalone=example.vendored)
    if example.after is None:
        # Unchanged by this rule: no rewrite may be attributed to it.
        assert not [r for r in result.rewrites if r.rule == rule.name]
    else:
        assert result.code == example.after
        if not example.diagnostics or "unsupported" not in example.diagnostics:
            assert any(r.rule == rule.name for r in result.rewrites), [r.rule for r in result.rewrites]
    cst.parse_module(result.code)  # output is always valid Python
    messages = [d.format() for d in result.diagnostics]
    for expected in example.diagnostics:
        assert any(expected in m for m in messages), (expected, messages)
    if not example.diagnostics:
        assert not [d for d in result.diagnostics if d.severity in ("error", "unsupported")], messages
