"""The mapping tables ship inside the wheel: a non-editable install works from anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.helpers import REPO


def test_wheel_contains_tables_and_cli_works_elsewhere(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("precision_transpiler-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "precision_transpiler/_builtin_mappings/dtypes.yaml" in names
    assert "precision_transpiler/_builtin_mappings/ops/dtype_ops.yaml" in names

    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "m.py").write_text("import torch\nd = torch.half\n")
    # Only the installed copy may be importable: not the repository checkout.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    proc = subprocess.run(
        [str(target / "bin" / "ptranspile"), "m.py", "--to", "jax"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "import jax.numpy as jnp\nd = jnp.float16\n"
    where = subprocess.run(
        [sys.executable, "-c", "import precision_transpiler.mappings as m; print(m.builtin_mappings_dir())"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert where.stdout.strip().startswith(str(target)), where.stdout
