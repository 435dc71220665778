"""How many times one conversion parses and prints its model: LibCST parses, LibCST code
generations and Python `ast` parses, counted by the profiler (nothing is patched).

    python benchmarks/parse_count.py [--to jax,tf] [--policies fp32,mixed]

A stage that works on text makes the next one parse again; the aim is one LibCST parse and one
print per file where the stages allow (docs/architecture.md, "The flow"). Prints of a single
statement, made to find the line and column of a rewritten node, are counted apart.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import textwrap

from precision_transpiler import transpile
from precision_transpiler.syntax import python_ast

MODEL = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class MLP(nn.Module):
        def __init__(self, dim=16, hidden=32):
            super().__init__()
            self.fc1 = nn.Linear(dim, hidden)
            self.norm = nn.LayerNorm(hidden)
            self.fc2 = nn.Linear(hidden, dim)

        def forward(self, x):
            return self.fc2(F.gelu(self.norm(self.fc1(x)))) + x
    """
).lstrip()

# (file name ending, function name) -> what the table calls it
COUNTED = {
    ("libcst/_parser/entrypoints.py", "parse_module"): "LibCST parses",
    ("libcst/_nodes/module.py", "code"): "LibCST prints",
    ("ast.py", "parse"): "ast parses",
}
#: prints of one statement, made to find a node's line and column (rewrite/positions.py): they
#: are counted apart from the prints of the module
STATEMENT_PRINTS = "rewrite/positions.py"
COLUMNS = ("LibCST parses", "LibCST prints", "statement prints (positions)", "ast parses")


def count(source: str, to: str, policy: str) -> dict[str, int]:
    """Calls of each counted function while converting `source` once (after a warm-up run, so
    that the tables and caches loaded once per process are not counted)."""
    transpile(source, to=to, policy=policy)
    python_ast.cache_clear()  # the texts of this model's conversion: parsed again, as for a new model
    profile = cProfile.Profile()
    profile.enable()
    transpile(source, to=to, policy=policy)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    found = dict.fromkeys(COLUMNS, 0)
    for (filename, _, function), (_, calls, _tt, _ct, callers) in stats.items():
        for (ending, name), label in COUNTED.items():
            if function == name and filename.replace("\\", "/").endswith(ending):
                found[label] += calls
                if label == "LibCST prints":
                    positions = sum(
                        caller[1]
                        for (file, *_), caller in callers.items()
                        if file.replace("\\", "/").endswith(STATEMENT_PRINTS)
                    )
                    found[label] -= positions
                    found["statement prints (positions)"] += positions
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", default="jax,tf")
    parser.add_argument("--policies", default="fp32,mixed")
    args = parser.parse_args(argv)
    lines = len(MODEL.splitlines())
    print(f"Parses and prints converting one {lines}-line model (one conversion, after a warm-up)\n")
    print("| to | policy | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for to in args.to.split(","):
        for policy in args.policies.split(","):
            found = count(MODEL, to, policy)
            print(f"| {to} | {policy} | " + " | ".join(str(found[label]) for label in COLUMNS) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
