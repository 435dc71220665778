"""Which torch functions, `torch.nn.functional` calls, Tensor methods and `torch.nn` layers the
wild corpus's packages use, how often, and which of them the mapping tables convert to both
targets: the ranking that decides which ops to map next.

    python benchmarks/wild/op_usage.py [--half dev|blind|all] [--top 40] [--markdown OUT.md]

Reads the .py files of every package named in benchmarks/wild/cases.yaml (tests excluded) with
`ast`, resolving each file's imports (`import torch.nn.functional as F`, `from torch import nn`):
a call site counts as a torch function or layer when its callee resolves into `torch`, and as a
Tensor method when its name is an attribute of `torch.Tensor` and its receiver is not a module
or class (`F.relu(x)` is a function, `x.view(...)` a method, `self.view(...)` neither). A site is
covered when an op of mappings/ops has a torch pattern for it and patterns for jax and tf, or
when the layer table maps the class for both. Call sites of what mappings/torch_surface.yaml
lists under `outside_models` (training, data loading, I/O, distributed: `torch.optim`,
`torch.save`, `x.backward()`) are counted apart: the "model code" rate leaves them out, the "all"
rate keeps them. Nothing is run but this scan (torch is imported for `dir(torch.Tensor)`).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from precision_transpiler.analysis.torch_models import RANDOM_INPLACE  # noqa: E402
from precision_transpiler.analysis.torch_models import dotted as _dotted  # noqa: E402
from precision_transpiler.analysis.torch_models import resolve as _resolve  # noqa: E402
from precision_transpiler.mappings.registry import load_mappings  # noqa: E402

CASES = ROOT / "benchmarks" / "wild" / "cases.yaml"


def _package_files(package: str) -> list[Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(p for p in root.rglob("*.py") if not ({"tests", "test", "testing"} & set(p.parts)))


def _bindings(tree: ast.Module) -> dict[str, str]:
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def scan(files: list[Path], tensor_methods: set[str]) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """(functions, methods, layers): call-site counts."""
    functions: Counter[str] = Counter()
    methods: Counter[str] = Counter()
    layers: Counter[str] = Counter()
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        bindings = _bindings(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            qualified = _resolve(node.func, bindings)
            if qualified is not None:
                if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[1][:1].isupper():
                    if not qualified.startswith(("torch.nn.functional.", "torch.nn.init.", "torch.nn.utils.")):
                        layers[qualified] += 1
                        continue
                if qualified.split(".")[0] == "torch":
                    functions[qualified] += 1
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in tensor_methods:
                receiver = _dotted(func.value)
                if receiver in ("self", "cls", "super") or (receiver or "").split(".")[0] in bindings:
                    continue
                if receiver and receiver[:1].isupper():
                    continue
                methods[func.attr] += 1
    return functions, methods, layers


def covered_sets() -> tuple[set[str], set[str], set[str]]:
    mappings = load_mappings()
    functions: set[str] = set()
    methods: set[str] = set()
    for op in mappings.ops.values():
        if not (op.patterns.get("jax") and op.patterns.get("tf")):
            continue
        for pattern in op.patterns.get("torch", ()):
            if pattern.method_name:
                methods.add(pattern.method_name)
            elif pattern.function_name:
                functions.add(pattern.function_name)
    layers = {name for name, spec in mappings.layers.items() if {"jax", "tf"} <= set(spec.targets)}
    symbols = {name for name, targets in mappings.layer_symbols.items() if {"jax", "tf"} <= set(targets)}
    zoo = {name for names in mappings.zoo.values() for name in names}
    return functions | symbols | zoo, methods, layers | symbols


#: handled by rules rather than op patterns: initialisation is dropped with a note (the torch
#: checkpoint replaces the values), torch.randn/rand while building layers become shims; the
#: random in-place methods (`x.normal_()`, `mask.bernoulli_(p)`) are draws into the tensor
#: (rules/torch_inplace_init_model.py), or initialisation of a parameter, dropped with a note
_RULE_PREFIXES = ("torch.nn.init.",)
_RULE_METHODS = frozenset(RANDOM_INPLACE)


def _covered(name: str, covered: set[str]) -> bool:
    """Mapped, handled by a rule, or a method of a mapped value (`torch.__version__.split(".")`:
    the version is the runtime's string)."""
    owner = name.rsplit(".", 1)[0]
    return name in covered or name.startswith(_RULE_PREFIXES) or name in _RULE_METHODS or owner in covered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=("dev", "blind", "all"), default="all")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    import torch

    cases = yaml.safe_load(CASES.read_text(encoding="utf-8"))["cases"]
    packages = sorted({c["package"] for c in cases if args.half == "all" or c["half"] == args.half})
    files = [f for p in packages for f in _package_files(p)]
    # names Python's own containers and strings have too (`d.values()`, `xs.index(v)`, `s.add(v)`)
    # are left out: at a call site nothing tells them from the Tensor method
    builtin = {n for t in (dict, list, set, str, tuple, bytes) for n in dir(t)}
    tensor_methods = {n for n in dir(torch.Tensor) if not n.startswith("_")} - builtin
    functions, methods, layers = scan(files, tensor_methods)
    cov_functions, cov_methods, cov_layers = covered_sets()
    lines = [
        f"{len(files)} files of {len(packages)} packages ({', '.join(packages)}), half: {args.half}",
        "",
        "| kind | call sites | covered | rate | distinct | distinct covered |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = []
    outside = 0
    surface = load_mappings().surfaces["torch"]
    for kind, counts, covered in (
        ("torch functions", functions, cov_functions),
        ("Tensor methods", methods, cov_methods),
        ("torch.nn layers", layers, cov_layers),
    ):
        total = sum(counts.values())
        hit = sum(n for name, n in counts.items() if _covered(name, covered))
        distinct_hit = sum(1 for name in counts if _covered(name, covered))
        lines.append(f"| {kind} | {total} | {hit} | {hit / max(total, 1):.1%} | {len(counts)} | {distinct_hit} |")
        for name, n in counts.items():
            if _covered(name, covered):
                continue
            if surface.outside_model(f"Tensor.{name}" if kind == "Tensor methods" else name):
                outside += n
            else:
                rows.append((n, kind, name))
    all_sites = sum(map(sum, (functions.values(), methods.values(), layers.values())))
    uncovered = sum(n for n, _, _ in rows)
    all_hit = all_sites - uncovered - outside
    model_sites = all_sites - outside
    lines += [
        f"| all | {all_sites} | {all_hit} | {all_hit / max(all_sites, 1):.1%} | | |",
        f"| model code (all less {outside} call sites outside models) | {model_sites} | {all_hit} | "
        f"{all_hit / max(model_sites, 1):.1%} | | |",
        "",
    ]
    lines += [f"The {args.top} most used that are not covered:", "", "| call sites | kind | name |", "|---:|---|---|"]
    lines += [f"| {n} | {kind} | `{name}` |" for n, kind, name in sorted(rows, key=lambda r: (-r[0], r[2]))[: args.top]]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
