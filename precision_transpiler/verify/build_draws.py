"""What the original draws when it is built and keeps outside its state dict.

Verification copies the original's state dict into the converted model, so their random
initial weights do not matter. A tensor the original holds as a plain attribute, neither
parameter nor buffer, is not in that dict: where the original draws it when it is built
(torchdyn's `CoupledFourierSystem`: `self.A = A_dist.sample(...)` with a random count of
harmonics), the converted model draws its own from its own generator, and the outputs differ
however right the conversion is; torch itself rebuilt from the state dict draws others.

After a failed comparison only, the runner builds the original again under another seed and asks
the source adapter which plain tensor attributes came out different (`build_draws`): those are
draws, not values the constructor computes. Each is given to the converted module at the same
path where that module holds an array under the same name (`give_attribute`), as its weights
were, and the comparison runs again. A plain attribute both builds agree on is never copied: its
value stays the converted constructor's own, and what it computes stays checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def copy_build_draws(rebuild: Callable[[], Any], original: Any, converted: Any, source: Any, target: Any) -> list[str]:
    """Copy the original's build-time draws into the converted model; the dotted names copied
    (none where an adapter cannot tell or give them, or the second build fails)."""
    find = getattr(source, "build_draws", None)
    give = getattr(target, "give_attribute", None)
    if find is None or give is None:
        return []
    try:
        again = rebuild()
    except Exception:  # a second build that fails tells nothing: the first verdict stands
        return []
    copied = []
    for path, name, array in find(original, again):
        if give(converted, path, name, array):
            copied.append(f"{path}.{name}" if path else name)
    return copied


def note(copied: list[str]) -> str:
    names = ", ".join(copied[:8]) + (f" and {len(copied) - 8} more" if len(copied) > 8 else "")
    return (
        f"the original draws {names} when it is built and holds them outside its state dict (another "
        "seed gives other values): given to the converted model as its weights are"
    )
