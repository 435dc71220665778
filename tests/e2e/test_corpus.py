"""benchmarks/corpus.py on a tiny corpus: a real torchvision model converts and verifies, a broken
case is recorded as a failure with its first diagnostic (not raised), and the tables and JSON
come out."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax]

REPO = Path(__file__).resolve().parents[2]


def _corpus():
    spec = importlib.util.spec_from_file_location("corpus", REPO / "benchmarks" / "corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus"] = module
    spec.loader.exec_module(module)
    return module


CASES = """
cases:
  - name: torchvision squeezenet1_1
    package: torchvision
    file: models/squeezenet.py
    entry: squeezenet1_1(num_classes=10)
    inputs: ["float32[1,3,32,32]"]
    quick: true
  - name: a file that is not there
    package: torchvision
    file: models/no_such_model.py
    entry: Nope()
    inputs: ["float32[1,3]"]
    quick: true
"""


@pytest.mark.slow
def test_corpus_runner_on_a_tiny_corpus(tmp_path: Path, capsys) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(CASES)
    out_json, out_md = tmp_path / "corpus.json", tmp_path / "corpus.md"
    corpus = _corpus()
    code = corpus.main(
        [
            "--cases-file",
            str(cases),
            "--quick",
            "--policies",
            "fp32",
            "--json",
            str(out_json),
            "--markdown",
            str(out_md),
        ]
    )
    assert code == 0
    data = json.loads(out_json.read_text())
    outcomes = {o["case"]: o for o in data["outcomes"]}
    good = outcomes["torchvision squeezenet1_1"]
    assert good["converted"] and good["verified"] and good["max_rel_err"] <= 1e-5
    bad = outcomes["a file that is not there"]
    assert not bad["converted"] and not bad["verified"] and "no_such_model.py" in bad["first_problem"]
    table = out_md.read_text()
    assert "| torchvision squeezenet1_1 | jax | fp32 | yes | 0 | yes |" in table
    assert "| jax | fp32 | 2 | 1 (50%) | 1 (50%) | 1 (50%) | 0 |" in table
    assert "Failed runs by stage: conversion 1; of these, unreported: 0." in table
    assert data["versions"]["torch"].startswith("2.")
    # --resume: what this commit measured is kept, nothing is run again
    argv = ["--cases-file", str(cases), "--quick", "--policies", "fp32", "--json", str(out_json), "--resume"]
    assert data["commit"] and corpus.main(argv) == 0
    again = json.loads(out_json.read_text())
    assert again["outcomes"] == data["outcomes"] and again["commit"] == data["commit"]


@pytest.mark.slow
def test_corpus_times_the_models_side_by_side(tmp_path: Path) -> None:
    """--time: the forward of the original, the converted model (jax.jit / tf.function) and, under
    the mixed policy, torch autocast, medians in one process; ratios in the table."""
    cases = tmp_path / "cases.yaml"
    cases.write_text(CASES.split("  - name: a file")[0])
    out_json, out_md = tmp_path / "corpus.json", tmp_path / "corpus.md"
    corpus = _corpus()
    argv = ["--cases-file", str(cases), "--targets", "tf", "--policies", "mixed", "--time", "2"]
    assert corpus.main([*argv, "--json", str(out_json), "--markdown", str(out_md)]) == 0
    (outcome,) = json.loads(out_json.read_text())["outcomes"]
    assert outcome["verified"], outcome["first_problem"]
    for key in ("forward_original_s", "forward_converted_s", "forward_reference_s"):
        assert outcome[key] is not None and outcome[key] > 0, key
    assert outcome["param_bytes_original"]  # measured, not missing
    assert outcome["param_bytes_converted"] == outcome["param_bytes_original"]  # mixed keeps float32 variables
    assert "| converted / torch | torch autocast / torch |" in out_md.read_text()


def test_a_failure_at_a_statement_the_converter_did_not_mark_is_counted() -> None:
    """Something reported elsewhere in a big library does not say why this statement failed: a
    run that fails at an unmarked statement of the converted file is counted apart."""
    from benchmarks.corpus import Outcome, failed_at_marked, markdown, unmarked, unreported

    code = "a = 1\n# ptranspile: unsupported: torch.foo has no mapping to jax\nb = torch.foo(a)\nc = b.bar()\n"
    name = "m_ptranspile_corpus_jax_fp32.py"
    assert failed_at_marked(f"running the models failed: {name}:3: AttributeError: x", name, code) is True
    assert failed_at_marked(f"running the models failed: {name}:1: NameError: y", name, code) is False
    assert failed_at_marked("running the models failed: elsewhere.py:3: E", name, code) is None
    run = Outcome("c", "jax", "fp32", converted=True, unsupported=4, first_problem="running the models failed: x")
    assert not unreported(run) and not unmarked(run)  # where it failed is not known
    run.failed_at_marked = False
    assert unmarked(run) and not unreported(run)
    assert "unreported: 0; at a statement not marked unsupported: 1 of 1 located." in markdown([run], "h")


def test_a_run_whose_original_draws_random_numbers_is_its_own_stage() -> None:
    """Its values cannot be compared: neither an outputs failure of the converter nor unreported."""
    from benchmarks.corpus import NOT_COMPARABLE, Outcome, failure_stage, markdown, unreported

    problem = "the original's forward draws random numbers (...); out: relative error 0.6 > tolerance 1e-05"
    noisy = Outcome("c", "jax", "fp32", converted=True, first_problem=problem, random_forward=True)
    assert failure_stage(noisy) == NOT_COMPARABLE and not unreported(noisy)
    noisy.torch_at_load = 1  # an output that still needs torch fails for that first
    assert failure_stage(noisy) == "outputs"
    wrong = Outcome("d", "jax", "fp32", converted=True, first_problem="out: relative error 0.6 > tolerance 1e-05")
    assert failure_stage(wrong) == "outputs"
    noisy.torch_at_load = 0
    assert "Failed runs by stage: outputs 1, not comparable 1; of these, unreported: 0." in markdown(
        [noisy, wrong], "h"
    )
