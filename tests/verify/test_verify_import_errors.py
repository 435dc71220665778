"""A model file whose import fails is reported by the verifier in one line (exit 2, no traceback)
naming the file and the exception: ptranspile imports the user's files as they are, with no
work-arounds of its own, so this is what a user with a broken environment sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli

pytestmark = pytest.mark.needs_torch

GOOD = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
"""

BROKEN = """
import torch

raise RuntimeError("operator demo::op does not exist")
"""

ENTRY = ["--entry", "Net()", "--input", "float32[2,4]"]


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("ptranspile: error")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.slow
def test_an_original_that_fails_to_import_is_one_line_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    run = run_cli("verify", str(broken), str(broken), *ENTRY)
    assert run.code == 2, run.err
    line = _one_error_line(run.err)
    assert "broken.py" in line and "RuntimeError: operator demo::op does not exist" in line, line
    # converting and verifying in one go says the same
    run = run_cli(str(broken), "--to", "torch", "--policy", "mixed", "-o", str(tmp_path / "out.py"), "--verify", *ENTRY)
    assert run.code == 2, run.err
    line = _one_error_line(run.err)
    assert "broken.py" in line and "RuntimeError: operator demo::op does not exist" in line, line


def test_a_converted_file_that_fails_to_import_is_one_line_exit_2(tmp_path: Path) -> None:
    good, broken = tmp_path / "net.py", tmp_path / "net_converted.py"
    good.write_text(GOOD)
    broken.write_text(GOOD + "\nraise ImportError('cannot import name Missing from demo')\n")
    run = run_cli("verify", str(good), str(broken), *ENTRY)
    assert run.code == 2, run.err
    line = _one_error_line(run.err)
    assert "net_converted.py" in line and "ImportError: cannot import name Missing from demo" in line, line


def test_a_keras_layer_error_is_reported_by_its_own_message(tmp_path: Path) -> None:
    """Keras wraps an error raised in a layer's `call` in "Exception encountered when calling
    M.call()." plus the real message lines below: the one line keeps the real message."""
    from precision_transpiler.verify.loading import short_error

    try:
        raise TypeError(
            "Exception encountered when calling M.call().\n\n\x1b[1mcannot compare bool with 0\x1b[0m\n\n"
            "Arguments received by M.call():\n  • x=tf.Tensor(shape=(2, 4), dtype=float32)"
        )
    except TypeError as exc:
        line = short_error(exc, str(tmp_path / "m.py"))
    assert line.endswith("TypeError: cannot compare bool with 0 (Exception encountered when calling M.call())")
    assert "\n" not in line and "\x1b" not in line
