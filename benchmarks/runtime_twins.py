"""How alike the Flax and Keras runtimes are: same-named top-level definitions of same-named
modules in precision_transpiler/runtime/flax and runtime/keras, compared as source text.

    python benchmarks/runtime_twins.py [--threshold 0.85] [--list] [--runtime DIR]

For each twin module the table counts the definitions both sides have, those whose source text
is identical, those at least `--threshold` alike (difflib's `SequenceMatcher.ratio` on the
source, decorators included; identical ones count as alike too), and the lines those alike
pairs span on both sides together. Definitions one side alone has are not compared. Below the
table: the lines of flax/ and keras/, and the definitions and lines of the framework-free modules
beside them (runtime/*.py: common.py and the framework-free halves of subjects, where the bodies
the twins share live; docs/architecture.md, "The runtime copied into outputs"). `--list` names
every alike pair, most alike first; `--runtime` measures another checkout's runtime directory
(an earlier revision's, extracted with `git archive`).
"""

from __future__ import annotations

import argparse
import ast
import difflib
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[1] / "precision_transpiler" / "runtime"
Row = tuple[str, str, float, int]  # (module, name, ratio, lines on both sides)


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


def compare(runtime: Path) -> list[Row]:
    """(module, name, ratio, lines) for every definition both twins of a module have."""
    rows = []
    for flax_path in sorted((runtime / "flax").glob("*.py")):
        keras_path = runtime / "keras" / flax_path.name
        if flax_path.name == "__init__.py" or not keras_path.is_file():
            continue
        flax, keras = definitions(flax_path), definitions(keras_path)
        for name in sorted(flax.keys() & keras.keys()):
            a, b = flax[name], keras[name]
            ratio = 1.0 if a == b else difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
            rows.append((flax_path.stem, name, ratio, a.count("\n") + b.count("\n")))
    return rows


def _lines(paths: list[Path]) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=0.85)
    parser.add_argument("--list", action="store_true", help="name every alike pair")
    parser.add_argument("--runtime", type=Path, default=RUNTIME, help="the runtime directory to measure")
    args = parser.parse_args()
    rows = compare(args.runtime)
    print(f"| module | in both | identical | >= {args.threshold:.0%} alike | lines of the alike pairs |")
    print("|---|---:|---:|---:|---:|")
    for module in [*sorted({r[0] for r in rows}), None]:
        chosen = [r for r in rows if module is None or r[0] == module]
        same = sum(r[2] == 1.0 for r in chosen)
        alike = [r for r in chosen if r[2] >= args.threshold]
        label = "**all**" if module is None else module
        print(f"| {label} | {len(chosen)} | {same} | {len(alike)} | {sum(r[3] for r in alike)} |")
    twins = _lines([*args.runtime.glob("flax/*.py"), *args.runtime.glob("keras/*.py")])
    shared = sorted(p for p in args.runtime.glob("*.py") if p.name != "__init__.py")
    count = sum(len(definitions(p)) for p in shared)
    print(f"\nflax/ + keras/: {twins} lines; framework-free modules ({', '.join(p.name for p in shared)}):")
    print(f"{count} definitions, {_lines(shared)} lines")
    if args.list:
        for module, name, ratio, _ in sorted(rows, key=lambda r: -r[2]):
            if ratio >= args.threshold:
                print(f"{ratio:.3f} {module}.{name}")


if __name__ == "__main__":
    main()
