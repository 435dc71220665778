"""Verification cannot be fooled or starved: user code that raises SystemExit (or any other
BaseException) is a failed verification, never exit 0 without a verdict; an original whose
outputs are non-finite is reported as such, never PASSED; an original whose forward draws random
numbers fails with that reason, apart from a wrong conversion; input specs over the memory budget
are refused before anything is allocated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from precision_transpiler.verify.metrics import compare
from tests.helpers import convert_and_verify, on_both_targets, run_cli

pytestmark = pytest.mark.needs_torch

MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        {body}
"""
ARGS = ["--entry", "Net()", "--input", "float32[2,4]", "--no-layers"]


def _files(tmp_path: Path, body: str, converted_body: str | None = None) -> tuple[str, str]:
    original, converted = tmp_path / "net.py", tmp_path / "net_fp32.py"
    original.write_text(MODEL.format(body=body))
    converted.write_text(MODEL.format(body=converted_body or body))
    return str(original), str(converted)


@pytest.mark.parametrize(
    ("body", "code", "expected"),
    [
        ("raise SystemExit(0)", 2, "SystemExit"),
        ("raise KeyboardInterrupt", 130, "interrupted"),
        ("raise GeneratorExit('bye')", 2, "GeneratorExit"),
    ],
)
def test_base_exceptions_in_forward_never_pass_silently(tmp_path: Path, body: str, code: int, expected: str) -> None:
    run = run_cli("verify", *_files(tmp_path, body), *ARGS, "-q")
    assert run.code == code, run.err
    errors = [ln for ln in run.err.splitlines() if ln.startswith("ptranspile: error")]
    assert len(errors) == 1 and expected in errors[0], run.err
    assert "Traceback" not in run.err


def test_system_exit_at_import_and_in_convert_and_verify(tmp_path: Path) -> None:
    original = tmp_path / "boom.py"
    original.write_text(MODEL.format(body="return self.fc(x)") + "\nraise SystemExit(0)\n")
    run = run_cli(str(original), "--to", "torch", "-o", str(tmp_path / "out.py"), "--verify", *ARGS)
    assert run.code == 2, run.err
    assert run.err.count("ptranspile: error") == 1 and "SystemExit" in run.err, run.err
    assert not (tmp_path / "out.py").exists()


def test_an_original_with_only_non_finite_outputs_fails(tmp_path: Path) -> None:
    files = _files(tmp_path, "return self.fc(x) * float('nan')")
    run = run_cli("verify", *files, *ARGS)
    assert run.code == 1, run.err
    assert "PASSED" not in run.err and "non-finite" in run.err, run.err
    report = tmp_path / "report.json"
    quiet = run_cli("verify", *files, *ARGS, "-q", "--report-json", str(report))
    assert quiet.code == 1 and "(the original's outputs are all NaN/inf: not comparable)" in quiet.err, quiet.err
    data = json.loads(report.read_text())
    assert data["original_nonfinite"] is True and data["random_forward"] is False, data


def test_an_output_non_finite_in_both_beside_compared_ones_agrees(tmp_path: Path) -> None:
    # vector-quantize's FSP returns a variance of one element (NaN in torch) beside its codes:
    # entries non-finite in the original are skipped in any output, so a whole such output is too
    body = "y = self.fc(x)\n        return y, y.sum() * float('nan')"
    report = tmp_path / "report.json"
    run = run_cli("verify", *_files(tmp_path, body), *ARGS, "-q", "--report-json", str(report))
    assert run.code == 0 and "PASSED" in run.err, run.err
    assert json.loads(report.read_text())["original_nonfinite"] is False
    finite = "y = self.fc(x)\n        return y, y.sum() * 0.0"
    run = run_cli("verify", *_files(tmp_path, body, converted_body=finite), *ARGS, "-q")
    assert run.code == 1 and "PASSED" not in run.err, run.err


def test_a_partly_finite_original_is_not_marked_non_finite(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    body = "y = self.fc(x)\n        return y, y * float('nan')"
    run_cli("verify", *_files(tmp_path, body), *ARGS, "-q", "--report-json", str(report))
    assert json.loads(report.read_text())["original_nonfinite"] is False


def test_entries_finite_in_the_original_are_compared(tmp_path: Path) -> None:
    body = "y = self.fc(x)\n        return torch.where(y > 0, y, torch.full_like(y, float('nan')))"
    run = run_cli("verify", *_files(tmp_path, body), *ARGS, "-q")
    assert run.code == 0, run.err  # the same model: the finite entries agree
    wrong = body.replace("return torch.where(y > 0, y,", "return torch.where(y > 0, y * 2,")
    run = run_cli("verify", *_files(tmp_path, body, wrong), *ARGS, "-q")
    assert run.code == 1 and "FAILED" in run.err, run.err


def test_compare_counts_values_the_converted_lost_where_the_original_was_finite() -> None:
    errors = compare(np.array([np.nan, 1.0, 2.0]), np.array([5.0, np.inf, 2.0]))
    assert errors.nonfinite_original == 1 and errors.nonfinite_converted == 1
    assert errors.new_nonfinite == 1  # position 1: finite in the original, not in the converted
    assert errors.rel_err == 0.0  # the one entry finite in both agrees
    nothing = compare(np.array([np.nan, np.inf]), np.array([np.nan, np.inf]))
    assert nothing.rel_err is None and nothing.finite_original == 0


def test_inputs_over_the_memory_budget_are_refused_up_front(tmp_path: Path) -> None:
    original, converted = _files(tmp_path, "return self.fc(x)")
    run = run_cli("verify", original, converted, "--entry", "Net()", "--input", "float32[1000000,1000000,4]")
    assert run.code == 2, run.err
    lines = run.err.splitlines()
    assert len(lines) == 1 and "float32[1000000,1000000,4]" in lines[0], run.err
    assert "MemoryError" not in run.err and "1024 MB" in lines[0] and "--max-input-mb" in lines[0], run.err
    small = ["--entry", "Net()", "--input", "float32[1000,1000]"]
    run = run_cli("verify", original, converted, *small, "--max-input-mb", "1")
    assert run.code == 2 and "1 MB" in run.err and "4 MB" in run.err, run.err
    (tmp_path / "pyproject.toml").write_text("[tool.ptranspile]\nmax-input-mb = 1\n")
    run = run_cli("verify", original, converted, *small, cwd=tmp_path)
    assert run.code == 2 and "float32[1000,1000]" in run.err, run.err


NOISY = """
import torch
from torch import nn


class NoisyGate(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x):
        noise = torch.randn(x.shape, dtype=x.dtype)
        return x + noise * self.linear(x)
"""
RANDOM_FORWARD = "the original's forward draws random numbers (its outputs under two seeds differ by"
GENERATORS = {"jax": "JAX's generator", "tf": "TensorFlow's generator"}


@on_both_targets
def test_an_original_that_draws_random_numbers_fails_saying_so(tmp_path: Path, target: str) -> None:
    verdict = convert_and_verify(tmp_path, NOISY, target, "NoisyGate(8)", ["float32[2,8]"], name="noisy_gate")
    assert not verdict.passed and verdict.random_forward and verdict.to_json()["random_forward"] is True
    first = verdict.failures[0]
    assert first.startswith(RANDOM_FORWARD), verdict.failures
    assert "cannot be compared with the converted model's" in first and GENERATORS[target] in first, first
    assert any(f.startswith("out: relative error") for f in verdict.failures[1:]), verdict.failures


@on_both_targets
def test_a_deterministic_wrong_conversion_is_not_called_random(tmp_path: Path, target: str) -> None:
    scaled = NOISY.replace("NoisyGate", "ScaledGate").replace(
        "noise = torch.randn(x.shape, dtype=x.dtype)\n        return x + noise * self.linear(x)",
        "return x + self.linear(x) * 2.0",
    )
    assert "randn" not in scaled

    def wrong(code: str) -> str:
        assert code.count("* 2.0") == 1, code
        return code.replace("* 2.0", "* 3.0")

    verdict = convert_and_verify(
        tmp_path, scaled, target, "ScaledGate(8)", ["float32[2,8]"], name="scaled_gate", edit=wrong
    )
    assert not verdict.passed and not verdict.random_forward, verdict.failures
    assert verdict.failures[0].startswith("out: relative error"), verdict.failures
    assert not any("random" in f for f in verdict.failures), verdict.failures


INPLACE_INPUT = """
import torch
from torch import nn


class AddInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return x.add_(self.lin(x))  # equiformer's Residual when nothing requires grad
"""


@on_both_targets
def test_a_forward_that_changes_its_input_in_place_verifies(tmp_path: Path, target: str) -> None:
    """Each run gets its own copy of the inputs: the original's in-place change of its input must
    not reach the next run (which would look like randomness) or the converted model's input."""
    verdict = convert_and_verify(tmp_path, INPLACE_INPUT, target, "AddInPlace()", ["float32[2,16]"], name="add_in")
    assert verdict.passed and not verdict.random_forward, verdict.failures


def test_random_forward_in_the_quiet_line_and_the_report(tmp_path: Path) -> None:
    body = "return x + torch.randn(x.shape) * self.fc(x)"
    run = run_cli("verify", *_files(tmp_path, body), *ARGS, "-q")
    assert run.code == 1 and run.err.count("\n") == 1, run.err
    assert "FAILED" in run.err and "the original's forward draws random numbers: not comparable" in run.err, run.err
    run = run_cli("verify", *_files(tmp_path, body), *ARGS)
    assert run.code == 1 and RANDOM_FORWARD in run.err and "torch's own generator" in run.err, run.err


WRAPPED = """
import torch
from torch import nn


class Wrapped(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def state_dict(self):
        return self.model.state_dict()

    def load_state_dict(self, state_dict, strict=True):
        return self.model.load_state_dict(state_dict, strict)


class Chopped(Wrapped):
    def forward(self, x):
        return self.model(x) * 2
"""


@on_both_targets
def test_weights_go_by_the_module_tree_when_state_dict_is_overridden(tmp_path: Path, target: str) -> None:
    """torchsr's `WrappedModel.state_dict()` returns its inner model's, without `model.`: the
    converted model is loaded by the original's module tree, as torch's own `state_dict` gives it."""
    verdict = convert_and_verify(tmp_path, WRAPPED, target, "Chopped(nn.Linear(4, 4))", ["float32[2,4]"], "wrapped")
    assert verdict.passed, verdict
