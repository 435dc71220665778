"""Unsupported constructs are reported on one line and marked in the output by one `#` comment,
even when the message quotes source code that spans lines (rewrite/engine.py)."""

from __future__ import annotations

import libcst as cst

from precision_transpiler import transpile

MULTI_LINE_RECEIVER = """\
import torch
import torch.nn as nn


class Gate(nn.Module):
    def forward(self, x, idx, flag):
        ce = torch.zeros(4, 8)
        return ce.scatter_add_(
            1, idx, torch.ones_like(x)).div_(3) if flag else ce
"""


def test_a_message_quoting_code_over_several_lines_is_one_comment_and_one_line() -> None:
    """Found by fuzzing: an in-place chain whose receiver spans lines made the marker comment
    hold a newline, which LibCST refuses (an internal error for the whole file)."""
    for policy in ("fp32", "mixed"):
        result = transpile(MULTI_LINE_RECEIVER, to="jax", policy=policy, path="gate.py")
        assert not result.errors, [d.format() for d in result.errors]
        unsupported = [d for d in result.diagnostics if d.severity == "unsupported"]
        assert unsupported and all("\n" not in d.format() for d in unsupported)
        markers = [line for line in result.code.splitlines() if "# ptranspile: unsupported:" in line]
        assert markers and any("scatter_add_( 1, idx" in m for m in markers)  # the receiver, on one line
        cst.parse_module(result.code)
