"""Policy overrides that match nothing: a `class:` or `path:` override whose name is misspelt
would otherwise change nothing, silently. Each one becomes a warning naming the closest names
(`difflib.get_close_matches`) among those that exist:

- `class:` overrides, when a policy is applied to a file: the classes the file defines and the
  classes it calls (`nn.Linear(...)`, `Dense(...)`), in the code the policy pass saw and in the
  input (a converted model's layers are spelt the target's way);
- `path:` overrides, when verification ran the model: the module paths it recorded (module
  paths exist only at run time).
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
from collections.abc import Iterable

from precision_transpiler.precision.policy import Policy

CODE = "policy-override-unmatched"


def class_names(*sources: str) -> set[str]:
    """Classes the sources define, and names they call that are spelt as classes (`Linear` of
    `nn.Linear(...)`)."""
    names: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if name[:1].isupper():
                    names.add(name)
    return names


def unmatched_class_overrides(policy: Policy, *sources: str) -> list[str]:
    """A message for each `class:` override of `policy` that names no class of `sources`."""
    wanted = [o.class_name for o in policy.overrides if o.class_name is not None]
    if not wanted:
        return []
    known = class_names(*sources)
    return [
        f"policy {policy.name!r}: override class {name!r} matches no class in this file{_closest(name, known)}"
        for name in dict.fromkeys(wanted)
        if name not in known
    ]


def unmatched_path_overrides(policy: Policy, paths: Iterable[str]) -> list[str]:
    """A message for each `path:` override of `policy` that matches none of the module `paths`."""
    known = [p for p in paths if p]
    if not known:
        return []
    globs = [o.path for o in policy.overrides if o.path is not None]
    return [
        f"policy {policy.name!r}: override path {glob!r} matches no module of the model{_closest(glob, known)}"
        for glob in dict.fromkeys(globs)
        if not any(fnmatch.fnmatchcase(path, glob) for path in known)
    ]


def _closest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    return f" (closest: {', '.join(close)})" if close else ""
