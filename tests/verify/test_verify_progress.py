"""Progress lines while verification runs: at once on a terminal, otherwise once it has taken a
few seconds (PTRANSPILE_PROGRESS_AFTER), never under -q."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from precision_transpiler.verify.progress import Progress
from tests.helpers import run_cli

pytestmark = pytest.mark.needs_torch

SLOW = """
import time

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        time.sleep(1.0)
        return self.fc(x)
"""
ARGS = ["--entry", "Net()", "--input", "float32[2,4]", "--no-layers"]


@pytest.mark.slow
def test_a_slow_verification_shows_its_steps_and_q_silences_them(tmp_path: Path) -> None:
    original, converted = tmp_path / "slow.py", tmp_path / "slow_fp32.py"
    original.write_text(SLOW)
    converted.write_text(SLOW)
    env = {"PTRANSPILE_PROGRESS_AFTER": "0.5"}
    run = run_cli("verify", str(original), str(converted), *ARGS, env=env)
    assert run.code == 0, run.err
    assert "ptranspile: verify: running the original (" in run.err, run.err
    assert "ptranspile: verify: running the converted model (" in run.err, run.err
    run = run_cli("verify", str(original), str(converted), *ARGS, "-q", env=env)
    assert run.code == 0, run.err
    assert run.err.splitlines() == [ln for ln in run.err.splitlines() if "PASSED" in ln], run.err
    out = tmp_path / "out.py"
    run = run_cli(str(original), "--to", "torch", "-o", str(out), "--verify", *ARGS, env=env)
    assert run.code == 0 and "ptranspile: verify: running the converted model (" in run.err, run.err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_every_step_prints_at_once() -> None:
    terminal = _Terminal()
    progress = Progress(terminal, after=3600)
    progress.step("importing")
    progress.step("running the original")
    progress.close()
    progress.step("after the end")
    assert [ln.split(" (")[0] for ln in terminal.getvalue().splitlines()] == [
        "ptranspile: verify: importing",
        "ptranspile: verify: running the original",
    ]
    quiet = io.StringIO()  # not a terminal, and done before the delay: nothing
    progress = Progress(quiet, after=3600)
    progress.step("importing")
    progress.close()
    assert quiet.getvalue() == ""
