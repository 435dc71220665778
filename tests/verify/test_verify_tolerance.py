"""Tolerances derived on the machine that verifies (verify/runner.py, docs/verification.md).

Between frameworks, the yardstick of a low-precision conversion is the larger of the source's and
the target's own mixed-precision error: the target framework's own low precision on the fp32
conversion, and for an original with torch.autocast regions, the converted model against itself
with its regions disabled. The CPU decides how far the frameworks' bf16 kernels part ways: the
last test runs verification with the frameworks' CPU kernels capped below bf16 (what a CPU
without AVX512-BF16/AMX gives them), where constants tuned on a bf16-capable CPU failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.rules.test_torch_autocast_regions import REGION

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

ROOT = Path(__file__).resolve().parents[2]
BLOCK = ROOT / "examples" / "attention_block.py"


def _convert(tmp_path: Path, source: str, name: str, to: str, policy: str = "fp32") -> tuple[Path, Path]:
    original = tmp_path / f"{name}.py"
    original.write_text(source, encoding="utf-8")
    result = transpile(source, to=to, policy=policy, path=str(original))
    assert result.ok, result.diagnostics
    converted = tmp_path / f"{name}_{to}_{policy}.py"
    converted.write_text(result.code, encoding="utf-8")
    return original, converted


@pytest.mark.slow
@pytest.mark.parametrize("to", ["jax", "tf"])
def test_a_mixed_conversion_is_measured_against_the_targets_own_mixed_precision(tmp_path: Path, to: str) -> None:
    original, converted = _convert(tmp_path, BLOCK.read_text(encoding="utf-8"), "block", to, "mixed")
    options = VerifyOptions(entry="AttentionBlock()", inputs=["float32[2,16,64]"], policy="mixed")
    verdict = verify_files(original, converted, options)
    assert verdict.passed, verdict.failures
    tolerance = verdict.tolerance
    assert tolerance["target_reference"].endswith("on the fp32 conversion")
    assert tolerance["target_reference_err"] > 1e-4  # it ran in low precision
    reference = max(tolerance["target_reference_err"], tolerance["reference_err"])
    assert tolerance["max_rel_err"] == pytest.approx(2 * reference + 1e-5)
    shares = [layer.share for layer in verdict.layers if layer.reference_err]
    assert shares, "the layers' shares come from the references too"


def test_within_one_framework_the_sources_own_mixed_precision_is_the_yardstick(tmp_path: Path) -> None:
    original, converted = _convert(tmp_path, BLOCK.read_text(encoding="utf-8"), "block", "torch", "mixed")
    options = VerifyOptions(entry="AttentionBlock()", inputs=["float32[2,16,64]"], policy="mixed", layers=False)
    verdict = verify_files(original, converted, options)
    assert verdict.passed, verdict.failures
    assert "target_reference" not in verdict.tolerance


# Runs in a fresh process: oneDNN and ATen read their ISA caps when they start.
CAPPED_RUN = """
import json, sys
from precision_transpiler.verify import VerifyOptions, verify_files
verdict = verify_files(sys.argv[1], sys.argv[2], VerifyOptions(entry="Net()", inputs=["float32[4,16]"], layers=False))
print(json.dumps({"passed": verdict.passed, "failures": verdict.failures, "tolerance": verdict.tolerance}))
"""


@pytest.mark.slow
def test_regions_verify_on_a_cpu_without_bf16_kernels(tmp_path: Path) -> None:
    """With the source's reference alone this failed there: 0.0114 > tolerance 0.00819."""
    original, converted = _convert(tmp_path, REGION, "region", "tf")
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2", TF_CPP_MIN_LOG_LEVEL="3")
    # TensorFlow reads the CPU's flags and picks oneDNN bf16 kernels that the capped oneDNN refuses
    # (a crash no real CPU meets); on a CPU without them it runs its Eigen kernels, as here.
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    proc = subprocess.run(
        [sys.executable, "-c", CAPPED_RUN, str(original), str(converted)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["passed"], (data["failures"], data["tolerance"])
    assert data["tolerance"]["rule"].startswith("autocast regions: 2 x their own error")


def test_an_output_at_the_limit_of_float32_is_judged_against_its_own_float32_error() -> None:
    """mega-pytorch's FFT convolution of a 1-long sequence gives an output of rounding noise:
    torch's own float32 result is 84 times off against float64, so no float32 implementation can
    match it to 1e-5. With the original's float64 run as the yardstick the comparison is judged
    against what float32 costs there; an output float32 computes well still gets 1e-5."""
    import numpy as np

    from precision_transpiler.verify.adapters.base import Capture
    from precision_transpiler.verify.judge import judge
    from precision_transpiler.verify.runner import policy_of

    exact = np.array([1e-9, -2e-9, 1.5e-9])
    noisy = np.array([3e-8, 1e-8, -2e-8], dtype=np.float32)  # float32's answer: rounding noise
    converted = np.array([2e-8, -1e-8, 1e-8], dtype=np.float32)  # another float32 answer
    policy, options = policy_of("", "fp32"), VerifyOptions(entry="M()", inputs=["float32[3]"])

    def capture(array: np.ndarray) -> Capture:
        return Capture(outputs=[("out", array, str(array.dtype))])

    plain = judge(capture(noisy), capture(converted), None, policy, options, "jax", "torch")
    assert not plain.passed
    against = judge(capture(noisy), capture(converted), None, policy, options, "jax", "torch", float64=capture(exact))
    assert against.passed, against.failures
    assert "float64" in against.tolerance["rule"] and against.tolerance["reference_err"] > 1
    precise = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    off = precise * np.float32(1.001)
    well = judge(
        capture(precise), capture(off), None, policy, options, "jax", "torch", float64=capture(precise.astype(float))
    )
    assert not well.passed  # float32 costs nothing here: 1e-3 is a conversion error
