"""Every rule's own before/after EXAMPLES, run through the full transpiler.

The examples live beside each rule (precision_transpiler/rules/*.py), Fixit-style, so the
documentation of a rule and its test are one text.
"""

from __future__ import annotations

import types

import libcst as cst
import pytest

from precision_transpiler import transpile
from precision_transpiler.mappings import load_mappings
from precision_transpiler.pipeline import Job, convert_document
from precision_transpiler.precision.policy import resolve_policy
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


def _converted(example):
    """The example through the pipeline: whole, or (an example that is not `vendored`) as a
    sibling module is converted: rewritten, with runtime definitions left as qualified names."""
    if example.vendored:
        return transpile(example.before, to=example.to, from_=example.from_)
    sources = tuple(example.from_.split(",")) if example.from_ else None
    job = Job(example.to, sources, resolve_policy("fp32"), load_mappings(()), standalone=False)
    doc = convert_document(example.before, "<string>", job)
    return types.SimpleNamespace(code=doc.result_code(), rewrites=doc.rewrites, diagnostics=doc.diagnostics)


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_rule_example(rule, example) -> None:
    result = _converted(example)
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
