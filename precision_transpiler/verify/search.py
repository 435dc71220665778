"""`--policy auto`: the largest set of layers that can stay in low precision while verification
still passes, written as a policy YAML with fp32 overrides by module path.

Greedy bisection over layers in execution order, as onnxconverter-common's
auto_convert_mixed_precision does over ONNX nodes, but over source modules: try a whole segment
in low precision (with every undecided layer in fp32); if verification passes, keep it; if not,
split it in two and try each half; a single failing layer stays fp32. k unsafe layers among N
cost O(k log N) verification runs. Each run converts the original again with the candidate
policy and verifies it end to end, so the written policy is exactly what was verified.

A set-up is the set of layers kept in float32: one already verified (the plain base policy is
the empty set, which the bisection reaches again once every other segment passed) is not run
again, its verdict is reused; so is a run with the per-layer report for the final check.
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
    #: the final verification, with the written policy; when the policy found keeps no layer in
    #: float32 and run 1 (the plain base policy, the same set-up) passed, that run's
    result: VerificationResult
    code: str = ""  # the converted code that final verification ran


@dataclass
class _Run:
    number: int
    result: VerificationResult
    code: str
    layers: bool  # made with the per-layer report


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
    converted: Path | None = None,
    policy_out: Path | None = None,
) -> SearchResult:
    """`prune_to_entry`: convert each candidate as `--prune-to-entry` does (only what
    `options.entry` reaches), so every run verifies the code that would be written.
    `converted`: where the converted code is verified as if written (its imports resolve from
    there); `policy_out`: where the policy found is written before its final verification (so
    the report names it), else a temporary file."""
    from precision_transpiler.api import transpile
    from precision_transpiler.files import write_report

    source = original.read_text(encoding="utf-8")
    virtual = converted or original.with_name(f"{original.stem}_ptranspile_auto.py")
    runs = 0
    say = log or (lambda _m: None)
    made: dict[frozenset[str], _Run] = {}  # set-up (layers kept in float32) -> its run

    def verify(policy_file: str, layers: bool, opts: VerifyOptions, fp32: Sequence[str]) -> _Run:
        nonlocal runs
        known = made.get(frozenset(fp32))
        if known is not None and (known.layers or not layers):
            return known
        runs += 1
        prune = {"entry": options.entry, "prune_to_entry": True} if prune_to_entry else {}
        code = transpile(source, to=to, policy=policy_file, device=device, path=str(original), **prune).code
        result = verify_files(
            original, virtual, dataclasses.replace(opts, policy=policy_file, layers=layers), converted_code=code
        )
        made[frozenset(fp32)] = _Run(runs, result, code, layers)
        return made[frozenset(fp32)]

    first = verify(base, True, options, []).result
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
            before = runs
            run = verify(str(trial_file), False, fixed, fp32)
            trial = run.result
            again = "" if runs > before else f" (the set-up of run {run.number}, not run again)"
            say(
                f"auto: run {run.number}: {len(segment)} layer(s) from {segment[0]} in low precision: "
                f"{'passed' if trial.passed else 'failed'}{again} (rel err {trial.max_rel_err})"
            )
            if trial.passed:
                accepted.update(segment)
            elif len(segment) > 1:
                queue[0:0] = _halves(segment)
        fp32_paths = [c for c in candidates if c not in accepted]
        final_file = policy_out or Path(tmp) / f"{name}.yaml"
        known = made.get(frozenset(fp32_paths))
        text = policy_yaml(name, base, fp32_paths, runs + (0 if known and known.layers else 1), tolerance)
        write_report(final_file, text)
        final = verify(str(final_file), True, fixed, fp32_paths)
    return SearchResult(text, fp32_paths, [c for c in candidates if c in accepted], runs, final.result, final.code)


def _halves(segment: list[str]) -> list[list[str]]:
    if len(segment) <= 1:
        return [segment] if segment else []
    mid = len(segment) // 2
    return [segment[:mid], segment[mid:]]
