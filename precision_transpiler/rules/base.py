"""The contract every rewrite rule follows.

A rule is a small class in its own file (like a Fixit rule or a pyupgrade plugin). The engine
walks the tree once and, when it leaves a node of type `T`, calls each rule's `leave_T(ctx,
original, updated)` in the order `rules.RULE_ORDER` lists the rules; the first rule that returns
a node replaces it.
`original` carries metadata (qualified names, positions); `updated` has converted children.

Each rule carries `EXAMPLES`: before/after cases that the test-suite runs, so the rule's
documentation and its tests are the same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from precision_transpiler.rewrite.context import RuleContext


@dataclass(frozen=True)
class Example:
    """A before/after case. `after=None` means the rule must leave `before` unchanged."""

    before: str
    after: str | None
    to: str
    from_: str | None = None
    #: substrings that must each appear in some diagnostic (e.g. "unsupported")
    diagnostics: tuple[str, ...] = ()
    #: False: `after` shows shims imported, not copied in (keeps an example about a shim short)
    vendored: bool = True


class Rule:
    """Base class. Subclasses define `leave_<NodeType>` methods that return a node or None."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    EXAMPLES: ClassVar[tuple[Example, ...]] = ()

    def applies(self, ctx: RuleContext) -> bool:
        """Whether the rule has anything to do for this source/target pair."""
        return True


RULES: list[type[Rule]] = []


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator making a rule known to the engine (which runs it where `rules.RULE_ORDER`
    lists it)."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} needs a name")
    if any(rule.name == cls.name for rule in RULES):
        raise TypeError(f"two rules are named {cls.name!r}")
    RULES.append(cls)
    return cls
