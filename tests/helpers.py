"""Shared helpers for tests: run the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    code: int
    out: str
    err: str


def run_cli(
    *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict[str, str] | None = None
) -> Run:
    """Run `python -m precision_transpiler ARGS` (the same code as the `ptranspile` script)."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "precision_transpiler", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)
