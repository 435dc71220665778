"""How many times one conversion parses and prints its model: LibCST parses, LibCST code
generation and Python `ast` parses, observed with a profile hook (nothing is patched).

    python benchmarks/parse_count.py [--to jax,tf] [--policies fp32,mixed]

A stage that works on text makes the next one parse again; the aim is one LibCST parse and one
print per file where the stages allow (docs/architecture.md, "The flow"). Code generation is
counted by what was printed: a whole module, or top-level statements one at a time (the import
edit prints the converted model so, once, and the pipeline keeps that text), and apart from
both the single statements printed to find the line and column of a rewritten node
(rewrite/positions.py); expressions printed for messages are not counted.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from types import FrameType
from typing import Any

import libcst as cst

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

#: the runtime imported from the module beside the output (the output is the converted model)
RUNTIME = "module"
COLUMNS = (
    "LibCST parses",
    "module prints",
    "statements printed one at a time",
    "statement prints (positions)",
    "ast parses",
)
_PARSE = ("libcst/_parser/entrypoints.py", "parse_module")
_PRINT = ("libcst/_nodes/module.py", "code_for_node")
_AST = ("/ast.py", "parse")
_POSITIONS = "rewrite/positions.py"


def _is(frame: FrameType, where: tuple[str, str]) -> bool:
    code = frame.f_code
    return code.co_name == where[1] and code.co_filename.replace("\\", "/").endswith(where[0])


def _caller_file(frame: FrameType) -> str:
    """The file of the first caller outside LibCST's module.py (`Module.code` calls
    `code_for_node`)."""
    caller = frame.f_back
    while caller is not None and caller.f_code.co_filename.replace("\\", "/").endswith("libcst/_nodes/module.py"):
        caller = caller.f_back
    return caller.f_code.co_filename.replace("\\", "/") if caller is not None else ""


def _printed(frame: FrameType) -> str | None:
    """The column a code generation counts in (None: an expression, for a message or a log)."""
    if _caller_file(frame).endswith(_POSITIONS):
        return "statement prints (positions)"
    node = frame.f_locals.get("node")
    if isinstance(node, cst.Module):
        return "module prints"
    if isinstance(node, cst.BaseStatement):
        return "statements printed one at a time"
    return None


def count(source: str, to: str, policy: str) -> dict[str, int]:
    """What converting `source` once parses and prints (after a warm-up run, so that the tables
    and the runtime definitions, parsed once per process, are not counted; Python's `ast` of
    the model's texts is forgotten, as for a new model)."""
    transpile(source, to=to, policy=policy, runtime=RUNTIME)
    python_ast.cache_clear()
    found = dict.fromkeys(COLUMNS, 0)
    depth = [0]  # code generations in progress: only the outermost counts

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if _is(frame, _PARSE):
                found["LibCST parses"] += 1
            elif _is(frame, _AST):
                found["ast parses"] += 1
            elif _is(frame, _PRINT):
                depth[0] += 1
                column = _printed(frame) if depth[0] == 1 else None
                if column is not None:
                    found[column] += 1
        elif event == "return" and _is(frame, _PRINT):
            depth[0] -= 1

    sys.setprofile(hook)
    try:
        transpile(source, to=to, policy=policy, runtime=RUNTIME)
    finally:
        sys.setprofile(None)
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
            cells = " | ".join(str(found[c]) for c in COLUMNS)
            print(f"| {to} | {policy} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
