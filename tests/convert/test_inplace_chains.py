"""Chains of in-place methods split into statements on their own line (convert/inplace_chains.py)."""

from __future__ import annotations

import libcst as cst

from precision_transpiler.convert.inplace_chains import may_have_chains, split_inplace_chains

METHODS = frozenset({"mul_", "add_", "sub_", "normal_", "clamp_"})


def _split(code: str) -> str | None:
    tree = split_inplace_chains(cst.parse_module(code), METHODS)
    return None if tree is None else tree.code


def test_chains_become_statements_on_the_same_line() -> None:
    code = (
        "def f(idx, row, e, n):\n"
        "    idx[1:].mul_(n).add_(e)\n"
        "    out = row.mul_(n).add_(e).sub_(1)\n"
        "    return self.buf.mul_(n).add_(e)\n"
    )
    assert may_have_chains(code)
    assert _split(code) == (
        "def f(idx, row, e, n):\n"
        "    idx[1:].mul_(n); idx[1:].add_(e)\n"
        "    row.mul_(n); row.add_(e); out = row.sub_(1)\n"
        "    self.buf.mul_(n); return self.buf.add_(e)\n"
    )


def test_what_cannot_be_read_twice_or_is_no_chain_stays() -> None:
    unchanged = (
        "from torch import nn\n"
        "def f(w, a, b, idx):\n"
        "    nn.init.normal_(w).clamp_(-1, 1)\n"  # a function of an imported module
        "    (a - b).abs_().add_(1)\n"  # a fresh tensor: the rule's
        "    idx[g(0)].mul_(2).add_(1)\n"  # the index calls g: it would run twice
        "    a.mul_(2).sum()\n"  # not a chain of in-place calls to the end
        "    a.mul_(2).add_(1)  # ptranspile: skip\n"
        "    a.mul_(2)\n"
    )
    assert _split(unchanged) is None
    assert not may_have_chains("x.add_(1)\ny = 2\n")


def test_an_unpacking_into_a_subscript_stores_after_it() -> None:
    code = "def f(idx, x):\n    idx[1:], perm = sort(idx[1:])\n    x[perm], perm = g()\n"
    assert may_have_chains(code)
    assert _split(code) == (
        "def f(idx, x):\n"
        "    _pt_unpacked_0, perm = sort(idx[1:]); idx[1:] = _pt_unpacked_0\n"
        "    x[perm], perm = g()\n"  # the index reads another target: left as written
    )
