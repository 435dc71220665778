"""Follow lines from one version of a code to another.

Policy decisions name lines of the code a pass was given; the code the user gets has blocks
inserted (policy helpers, runtime definitions copied in), import lines taken out and some lines
edited. `follow_lines` moves each decision to the same line in the other version.
"""

from __future__ import annotations

from typing import Any


def follow_lines(decisions: list[Any], before: str, after: str) -> list[Any]:
    """Decisions with their lines moved from `before` to `after`, a version of the same code with
    blocks inserted (policy helpers, decorators, shims copied in), import lines taken out and some
    lines edited (`dtype=` added): lines are matched, and an edited line keeps its distance to
    the last matched line above it."""
    import bisect
    import difflib
    import re
    from dataclasses import replace

    moved: dict[int, int] = {}
    old_lines = before.splitlines()
    # a runtime definition is copied in: the bare name remains
    shim = re.compile(r"precision_transpiler\.runtime\.(?:(?:flax|keras|torch)\.)?\w+\.")
    matcher = difflib.SequenceMatcher(None, [shim.sub("", t) for t in old_lines], after.splitlines(), autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            if old_lines[block.a + k].strip():  # a blank line matches anywhere: not evidence
                moved[block.a + k + 1] = block.b + k + 1
    known = sorted(moved)

    def follow(line: int) -> int:
        while 0 < line < len(old_lines) and not old_lines[line - 1].strip():
            line += 1  # a definition's position can be its leading blank lines
        if line in moved:
            return moved[line]
        i = bisect.bisect_left(known, line) - 1
        return line if i < 0 else moved[known[i]] + (line - known[i])

    return [replace(d, line=follow(d.line)) for d in decisions]
