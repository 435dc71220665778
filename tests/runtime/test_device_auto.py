"""`--device auto`: the generated code decides the compute dtype where it runs.

The decision table is tested on `runtime/device.py` itself (it is a real module); the generated
code is tested by converting a small model to each target and running it in a fresh process,
with the environment saying what the machine is: `ONEDNN_MAX_CPU_ISA=AVX2` caps the frameworks'
CPU kernels below bf16 (as on a CPU without AVX512-BF16/AMX), `PTRANSPILE_COMPUTE_DTYPE` forces a
dtype.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.runtime import device

MODEL = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 8)
            self.norm = nn.LayerNorm(8)

        def forward(self, x):
            return torch.softmax(self.norm(self.fc(x)), dim=-1)
    """
)

# Runs the converted module in a fresh process; prints the decision and the dtype the Linear
# layer computed in (captured by a hook / read from the layer's policy).
PROBE = {
    "torch": """
import json, torch, model_out as m
net = m.Net()
seen = []
net.fc.register_forward_hook(lambda mod, i, o: seen.append(str(o.dtype).replace("torch.", "")))
out = net(torch.randn(2, 16))
print(json.dumps({"decision": m._PTRANSPILE_DECISION["torch"], "linear": seen[0], "out": str(out.dtype)[6:]}))
""",
    "jax": """
import json, numpy as np, model_out as m
from flax import nnx
net = m.Net(rngs=nnx.Rngs(0))
out = net(np.ones((2, 16), np.float32))
print(json.dumps({"decision": m._PTRANSPILE_DECISION["jax"], "linear": str(net.fc.dtype), "out": str(out.dtype)}))
""",
    "tf": """
import json, numpy as np, model_out as m
net = m.Net()
out = net(np.ones((2, 16), np.float32))
linear = net.fc.dtype_policy.compute_dtype
print(json.dumps({"decision": m._PTRANSPILE_DECISION["keras"], "linear": linear, "out": str(out.dtype.name)}))
""",
}


def _run_converted(tmp_path: Path, to: str, env: dict[str, str], device_flag: str = "auto") -> dict[str, object]:
    result = transpile(MODEL, to=to, policy="mixed", device=device_flag)
    assert result.ok, result.diagnostics
    (tmp_path / "model_out.py").write_text(result.code, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if k not in ("PTRANSPILE_COMPUTE_DTYPE", "ONEDNN_MAX_CPU_ISA")}
    environ.update(env, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE[to]], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["stderr"] = proc.stderr
    return data


@pytest.mark.slow
@pytest.mark.needs_torch
@pytest.mark.needs_jax
@pytest.mark.needs_tf
@pytest.mark.parametrize("to", ["torch", "jax", "tf"])
def test_cpu_without_bf16_kernels_computes_in_float32_and_says_so_once(tmp_path: Path, to: str) -> None:
    data = _run_converted(tmp_path, to, {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    decision = data["decision"]
    assert decision["compute"] == "float32" and decision["device"] == "cpu" and decision["requested"] == "half"
    assert data["linear"] == "float32"
    assert data["out"] == "float32"
    warnings = [line for line in str(data["stderr"]).splitlines() if "computing in float32" in line]
    assert len(warnings) == 1, data["stderr"]


@pytest.mark.slow
@pytest.mark.needs_torch
@pytest.mark.needs_jax
@pytest.mark.needs_tf
@pytest.mark.parametrize("to", ["torch", "jax", "tf"])
def test_forced_bfloat16_computes_the_low_precision_layers_in_bfloat16(tmp_path: Path, to: str) -> None:
    data = _run_converted(tmp_path, to, {"PTRANSPILE_COMPUTE_DTYPE": "bfloat16"})
    assert data["decision"]["compute"] == "bfloat16"
    assert data["linear"] == "bfloat16"
    assert data["out"] == "float32"  # the mixed policy's output dtype, whatever was decided


def test_this_machine_decides_by_its_own_cpu_flags(tmp_path: Path) -> None:
    """Whatever this CPU is, the generated code's decision is what its flags say."""
    data = _run_converted(tmp_path, "torch", {})
    expected = "bfloat16" if device.cpu_has_bf16() else "float32"
    assert data["decision"]["compute"] == expected
    assert data["linear"] == expected


def test_a_pinned_device_writes_the_dtype_statically() -> None:
    pinned = transpile(MODEL, to="torch", policy="mixed", device="cpu").code
    assert "device_compute_dtype" not in pinned and "compute=torch.bfloat16" in pinned
    auto = transpile(MODEL, to="torch", policy="mixed").code
    assert '_PTRANSPILE_DEVICE = device_compute_dtype("half")' in auto
    assert transpile(MODEL, to="torch", policy="fp32").code == MODEL


@pytest.mark.parametrize("to", ["torch", "jax", "tf"])
def test_the_fp32_policy_removes_the_device_helpers_exactly(to: str) -> None:
    fp32 = transpile(MODEL, to=to, policy="fp32").code
    mixed = transpile(MODEL, to=to, policy="mixed").code
    assert "def cpu_has_bf16" in mixed  # the decision helpers, copied in
    assert transpile(mixed, to=to, policy="fp32").code == fp32


@pytest.mark.parametrize(
    ("requested", "where", "gpu_bf16", "cpu_bf16", "expected"),
    [
        ("half", "gpu", True, None, "float16"),
        ("bfloat16", "gpu", True, None, "bfloat16"),
        ("bfloat16", "gpu", False, None, "float16"),
        ("float16", "gpu", True, None, "float16"),
        ("half", "tpu", False, None, "bfloat16"),
        ("half", "cpu", False, True, "bfloat16"),
        ("bfloat16", "cpu", False, True, "bfloat16"),
        ("half", "cpu", False, False, "float32"),
        ("float16", "cpu", False, False, "float16"),
        ("bfloat16", "cpu", False, False, "float32"),
    ],
)
def test_decision_table(
    monkeypatch: pytest.MonkeyPatch, requested: str, where: str, gpu_bf16: bool, cpu_bf16: bool | None, expected: str
) -> None:
    monkeypatch.delenv("PTRANSPILE_COMPUTE_DTYPE", raising=False)
    monkeypatch.setattr(device, "COMPUTE_DECISIONS", {})
    assert device.pick_compute_dtype("test", requested, where, gpu_bf16, cpu_bf16) == expected
    assert device.COMPUTE_DECISIONS["test"]["compute"] == expected


def test_the_decision_is_made_and_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("PTRANSPILE_COMPUTE_DTYPE", raising=False)
    monkeypatch.setattr(device, "COMPUTE_DECISIONS", {})
    with caplog.at_level(logging.INFO, logger="ptranspile"):
        for _ in range(3):
            device.pick_compute_dtype("test", "half", "cpu", False, False)
    assert len(caplog.records) == 1 and caplog.records[0].levelno == logging.WARNING


def test_the_override_decides_for_the_machine_but_not_for_an_explicit_float16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "COMPUTE_DECISIONS", {})
    monkeypatch.setenv("PTRANSPILE_COMPUTE_DTYPE", "float32")
    assert device.pick_compute_dtype("a", "half", "cpu", False, True) == "float32"
    assert device.pick_compute_dtype("b", "bfloat16", "gpu", True) == "float32"
    assert device.pick_compute_dtype("c", "float16", "cpu", False, True) == "float16"


def test_a_onednn_isa_cap_below_bf16_means_no_native_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert device.cpu_has_bf16() is False
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")
    assert device.cpu_has_bf16() is False
