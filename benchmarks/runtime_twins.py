"""How alike the Flax and Keras runtimes are: same-named top-level definitions of same-named
modules in precision_transpiler/runtime/flax and runtime/keras, compared as source text.

    python benchmarks/runtime_twins.py [--threshold 0.85] [--list]

For each twin module the table counts the definitions both sides have, those whose source text
is identical, and those at least `--threshold` alike (difflib's `SequenceMatcher.ratio` on the
source, decorators included; identical ones count as alike too). Definitions one side alone
has are not compared. The last column counts the definitions of runtime/common.py and
runtime/common_*.py, where bodies the twins share live (docs/architecture.md, "The runtime").
`--list` names every alike pair, most alike first.
"""

from __future__ import annotations

import argparse
import ast
import difflib
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[1] / "precision_transpiler" / "runtime"


def definitions(path: Path) -> dict[str, str]:
    """A module's top-level functions, classes and assignments by name, as source text."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    out: dict[str, str] = {}
    for node in ast.parse(text).body:
        names: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        start = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
        source = "".join(lines[start - 1 : node.end_lineno or node.lineno])
        for name in names:
            out[name] = source
    return out


def compare(threshold: float) -> list[tuple[str, str, float]]:
    """(module, name, ratio) for every definition both twins of a module have."""
    rows = []
    for flax_path in sorted((RUNTIME / "flax").glob("*.py")):
        keras_path = RUNTIME / "keras" / flax_path.name
        if flax_path.name == "__init__.py" or not keras_path.is_file():
            continue
        flax, keras = definitions(flax_path), definitions(keras_path)
        for name in sorted(flax.keys() & keras.keys()):
            a, b = flax[name], keras[name]
            ratio = 1.0 if a == b else difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
            rows.append((flax_path.stem, name, ratio))
    return rows


def shared_count() -> int:
    return sum(len(definitions(p)) for p in sorted(RUNTIME.glob("common*.py")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=0.85)
    parser.add_argument("--list", action="store_true", help="name every alike pair")
    args = parser.parse_args()
    rows = compare(args.threshold)
    modules = sorted({m for m, _, _ in rows})
    print(f"| module | in both | identical | >= {args.threshold:.0%} alike |")
    print("|---|---:|---:|---:|")
    for module in modules:
        ratios = [r for m, _, r in rows if m == module]
        same = sum(r == 1.0 for r in ratios)
        alike = sum(r >= args.threshold for r in ratios)
        print(f"| {module} | {len(ratios)} | {same} | {alike} |")
    ratios = [r for _, _, r in rows]
    same, alike = sum(r == 1.0 for r in ratios), sum(r >= args.threshold for r in ratios)
    print(f"| **all** | {len(ratios)} | {same} | {alike} |")
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in RUNTIME.glob("[fk]*[sx]/*.py"))
    print(f"\nshared definitions (runtime/common*.py): {shared_count()}; lines in flax/ + keras/: {lines}")
    if args.list:
        for module, name, ratio in sorted(rows, key=lambda r: -r[2]):
            if ratio >= args.threshold:
                print(f"{ratio:.3f} {module}.{name}")


if __name__ == "__main__":
    main()
