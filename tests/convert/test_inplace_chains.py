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


def test_an_inplace_call_inside_an_expression_moves_before_its_statement() -> None:
    code = (
        "def f(idx, mask, a, b):\n"
        "    idx.sub_(mask.logical_not_().cumsum(dim=0))\n"
        "    a.mul_(2).sum()\n"
        "    b = g(b.add_(1)) + 1\n"
        "    s = a.add_(1).mul_(2).sum()\n"
    )
    assert may_have_chains(code)
    methods = METHODS | {"logical_not_"}
    tree = split_inplace_chains(cst.parse_module(code), methods)
    assert tree is not None and tree.code == (
        "def f(idx, mask, a, b):\n"
        "    mask.logical_not_(); idx.sub_(mask.cumsum(dim=0))\n"
        "    a.mul_(2); a.sum()\n"
        "    b.add_(1); b = g(b) + 1\n"  # assigned to afterwards: read nowhere else
        "    a.add_(1); a.mul_(2); s = a.sum()\n"
    )


def test_an_inplace_call_that_may_not_run_or_whose_receiver_is_read_first_stays() -> None:
    unchanged = (
        "def f(h, x, flag):\n"
        "    return g(h.add_(1)) if flag else h\n"  # a branch: it may not run
        "    s = flag and h.add_(1).sum()\n"  # `and` may not run it
        "    s = h.sum() + h.add_(1).sum()\n"  # h is read before the call
        "    ys = [h.add_(i) for i in x]\n"  # once per element
        "    t = torch.randn(3) + h.add_(torch.randn(3))\n"  # its argument's draw would come first
    )
    assert _split(unchanged) is None
    assert not may_have_chains("x.add_(1)\ny = x.mul_(2)\nreturn x[0].sub_(y)  # note\n")
