"""Verifying a model converted to Keras prints no TensorFlow start-up log lines.

Importing TensorFlow writes C++ log lines to stderr (cpu_feature_guard's "This TensorFlow binary
is optimized ...", the oneDNN notice, absl's "All log messages before absl::InitializeLog()");
the verifier silences them before it imports TensorFlow, unless the user set TF_CPP_MIN_LOG_LEVEL.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.helpers import run_cli

pytestmark = [
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in ("torch", "tensorflow", "keras")),
        reason="needs torch, tensorflow and keras",
    ),
    pytest.mark.needs_torch,
    pytest.mark.needs_tf,
]

MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return torch.relu(self.fc(x))
"""

NOISE = ("cpu_feature_guard", "oneDNN", "absl", "This TensorFlow binary", "rebuild TensorFlow")


def _env(**extra: str) -> dict[str, str | None]:
    # None: unset in the subprocess, even where a test module set it in this process
    # (runtime/test_casts_execute.py and precision/test_dtype_matrix.py set TF_CPP_MIN_LOG_LEVEL when imported)
    return {"TF_CPP_MIN_LOG_LEVEL": None, "TF_ENABLE_ONEDNN_OPTS": None, **extra}


@pytest.mark.slow
def test_verify_to_tf_prints_no_tensorflow_log_lines(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    args = ("model.py", "--to", "tf", "--verify", "--entry", "Net()", "--input", "float32[2,4]", "-o", "model_tf.py")
    r = run_cli(*args, cwd=tmp_path, env=_env())
    assert r.code == 0, r.err
    assert "PASSED" in r.out + r.err
    noisy = [line for line in r.err.splitlines() if any(word in line for word in NOISE)]
    assert noisy == [], r.err


def test_quieting_leaves_a_users_setting_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from precision_transpiler.verify.quiet import quiet_tensorflow_env

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert quiet_tensorflow_env() is False
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL")
    assert quiet_tensorflow_env() is True
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
