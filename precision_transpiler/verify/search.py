"""`--policy auto`: the largest set of layers that can stay in low precision while verification
still passes, written as a policy YAML with fp32 overrides by module path.

Greedy bisection over layers in execution order, as onnxconverter-common's
auto_convert_mixed_precision does over ONNX nodes, but over source modules: try a whole segment
in low precision (with every undecided layer in fp32); if verification passes, keep it; if not,
split it in two and try each half; a single failing layer stays fp32. k unsafe layers among N
cost O(k log N) verification runs. Each run converts the original again with the candidate
policy and verifies it end to end, so the written policy is exactly what was verified.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from precision_transpiler.mappings import load_mappings
from precision_transpiler.verify.result import VerificationResult
from precision_transpiler.verify.runner import VerifyOptions, verify_files

_LOW_CLASSES = frozenset({"linear", "conv", "matmul", "attention", "embedding"})


@dataclass
class SearchResult:
    policy_yaml: str
    fp32_paths: list[str]
    low_paths: list[str]
    runs: int
    result: VerificationResult  # the final verification, with the written policy


def policy_yaml(name: str, base: str, fp32_paths: Sequence[str], runs: int, tolerance: float) -> str:
    lines = [
        f"# Written by `ptranspile --policy auto`: {len(fp32_paths)} layer(s) kept in float32 after "
        f"{runs} verification runs at tolerance {tolerance:.3g} (relative L2).",
        f"name: {name}",
        f"extends: {base}",
        "overrides:" if fp32_paths else "overrides: []",
    ]
    lines += [f'  - {{path: "{p}", param: float32, compute: float32, output: float32}}' for p in fp32_paths]
    return "\n".join(lines) + "\n"


def candidate_layers(result: VerificationResult, target: str) -> list[str]:
    """Layers whose precision the policy lowers, in execution order: layers of a low-precision
    class (Linear, Conv, attention, embeddings per mappings/precision_classes.yaml), and user
    modules without such children (where functional matmuls live)."""
    table = load_mappings(())
    known: dict[str, str] = {}
    for symbol, op_class in table.symbol_to_precision_class.get(target, {}).items():
        known.setdefault(symbol.rsplit(".", 1)[-1], op_class)
    paths = [layer.path for layer in sorted(result.layers, key=lambda layer: layer.order)]
    kinds = {layer.path: layer.kind for layer in result.layers}
    out: list[str] = []
    for path in paths:
        kind = kinds[path]
        children = [p for p in paths if p.startswith(path + ".")]
        if known.get(kind) in _LOW_CLASSES:
            out.append(path)
        elif (
            kind not in known
            and children
            and not any(kinds[c] not in known or known[kinds[c]] in _LOW_CLASSES for c in children)
        ):
            # A user module whose children are all cheap layers (norms, activations): its own
            # functional ops (matmuls, einsums) are what low precision touches. Modules with
            # Linear/Conv children are not candidates themselves: keeping one in fp32 would
            # also pin those children, and the bisection decides them one by one instead.
            out.append(path)
    return out


def search_policy(
    original: Path,
    options: VerifyOptions,
    *,
    to: str,
    base: str = "mixed",
    device: str = "auto",
    name: str | None = None,
    log: Callable[[str], None] | None = None,
    prune_to_entry: bool = False,
) -> SearchResult:
    """`prune_to_entry`: convert each candidate as `--prune-to-entry` does (only what
    `options.entry` reaches), so every run verifies the code that would be written."""
    from precision_transpiler.api import transpile

    source = original.read_text(encoding="utf-8")
    virtual = original.with_name(f"{original.stem}_ptranspile_auto.py")
    runs = 0
    say = log or (lambda _m: None)

    def verify(policy_file: str, layers: bool, opts: VerifyOptions) -> VerificationResult:
        nonlocal runs
        runs += 1
        prune = {"entry": options.entry, "prune_to_entry": True} if prune_to_entry else {}
        code = transpile(source, to=to, policy=policy_file, device=device, path=str(original), **prune).code
        return verify_files(
            original, virtual, dataclasses.replace(opts, policy=policy_file, layers=layers), converted_code=code
        )

    first = verify(base, True, options)
    tolerance = float(first.tolerance["max_rel_err"])
    fixed = dataclasses.replace(options, tolerance=tolerance)
    candidates = candidate_layers(first, to)
    say(f"auto: run 1 ({base}): {'passed' if first.passed else 'failed'}; {len(candidates)} candidate layers")
    accepted: set[str] = set(candidates) if first.passed else set()
    name = name or f"auto-{original.stem}"
    with tempfile.TemporaryDirectory(prefix="ptranspile-auto-") as tmp:
        trial_file = Path(tmp) / "trial.yaml"
        queue: list[list[str]] = [] if first.passed else _halves(candidates)
        while queue:
            segment = queue.pop(0)
            fp32 = [c for c in candidates if c not in accepted and c not in segment]
            trial_file.write_text(policy_yaml(name, base, fp32, runs, tolerance), encoding="utf-8")
            trial = verify(str(trial_file), False, fixed)
            say(
                f"auto: run {runs}: {len(segment)} layer(s) from {segment[0]} in low precision: "
                f"{'passed' if trial.passed else 'failed'} (rel err {trial.max_rel_err})"
            )
            if trial.passed:
                accepted.update(segment)
            elif len(segment) > 1:
                queue[0:0] = _halves(segment)
        fp32_paths = [c for c in candidates if c not in accepted]
        final_file = Path(tmp) / f"{name}.yaml"
        text = policy_yaml(name, base, fp32_paths, runs + 1, tolerance)
        final_file.write_text(text, encoding="utf-8")
        final = verify(str(final_file), True, fixed)
    text = policy_yaml(name, base, fp32_paths, runs, tolerance)
    return SearchResult(text, fp32_paths, [c for c in candidates if c in accepted], runs, final)


def _halves(segment: list[str]) -> list[list[str]]:
    if len(segment) <= 1:
        return [segment] if segment else []
    mid = len(segment) // 2
    return [segment[:mid], segment[mid:]]
