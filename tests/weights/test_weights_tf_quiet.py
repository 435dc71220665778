"""`ptranspile weights --to tf` prints no TensorFlow start-up log lines.

`--to tf --model CONVERTED.py` builds the Keras model, so it imports TensorFlow, whose C++ side
writes notices to stderr (the oneDNN notice, cpu_feature_guard's "This TensorFlow binary is
optimized ...", absl's "All log messages before absl::InitializeLog()", `I0000`/`W0000` lines).
The weights command silences them the way verification does (verify/quiet.py), unless the user
set TF_CPP_MIN_LOG_LEVEL.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from precision_transpiler import transpile
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

NOISE = ("cpu_feature_guard", "oneDNN", "absl", "This TensorFlow binary", "rebuild TensorFlow", "cuda")
LOG_PREFIX = re.compile(r"^[EIWF]\d{4} ")  # absl's C++ log lines: I0000 00:00:... port.cc:153] ...


def _env(**extra: str) -> dict[str, str | None]:
    # None: unset in the subprocess, even where a test module set it in this process
    return {"TF_CPP_MIN_LOG_LEVEL": None, "TF_ENABLE_ONEDNN_OPTS": None, **extra}


@pytest.mark.slow
def test_weights_to_tf_prints_no_tensorflow_log_lines(tmp_path: Path) -> None:
    import torch

    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "model_tf.py").write_text(transpile(MODEL, to="tf", path=str(tmp_path / "model.py")).code)
    namespace: dict[str, object] = {}
    exec(compile(MODEL, "model.py", "exec"), namespace)
    torch.save(namespace["Net"]().state_dict(), tmp_path / "model.pt")  # type: ignore[operator]

    for args in (
        ("weights", "model.pt", "--to", "tf", "-o", "named.safetensors"),
        ("weights", "model.pt", "--to", "tf", "-o", "model.weights.h5", "--model", "model_tf.py", "--entry", "Net()"),
    ):
        r = run_cli(*args, cwd=tmp_path, env=_env())
        assert r.code == 0, r.err
        assert "ptranspile: weights: wrote" in r.err
        noisy = [
            line
            for line in r.err.splitlines()
            if any(word.lower() in line.lower() for word in NOISE) or LOG_PREFIX.match(line)
        ]
        assert noisy == [], r.err
