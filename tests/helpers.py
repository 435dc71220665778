"""Shared helpers for tests: run the real CLI in a subprocess, import a script by path."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
TORCHVISION_SHIM = REPO / "tests" / "torchvision_shim"


def torchvision_env() -> dict[str, str]:
    """Environment for a subprocess that imports torchvision (`ptranspile --verify` on
    torchvision's files): the tests' work-around goes on its PYTHONPATH as `sitecustomize`
    (tests/torchvision_shim/sitecustomize.py). ptranspile itself imports user code as it is."""
    paths = [str(TORCHVISION_SHIM), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(paths)}


@dataclass
class Run:
    code: int
    out: str
    err: str


def run_cli(
    *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict[str, str | None] | None = None
) -> Run:
    """Run `python -m precision_transpiler ARGS` (the same code as the `ptranspile` script), in
    this process's environment updated with `env` (a None value removes that variable: test
    modules may have set one for their own process, such as TF_CPP_MIN_LOG_LEVEL)."""
    merged = {**os.environ, **(env or {})}
    full_env = {k: v for k, v in merged.items() if v is not None}
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


def load_script(name: str, path: Path) -> ModuleType:
    """Import a file that is not part of a package (a benchmark script) as module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def on_both_targets(test: Any) -> Any:
    """Mark a test that converts to JAX and to Keras (parameter `target`) and runs the result
    against torch: it needs all three frameworks."""
    marks = (
        pytest.mark.parametrize("target", ["jax", "tf"]),
        pytest.mark.needs_tf,
        pytest.mark.needs_jax,
        pytest.mark.needs_torch,
    )
    for mark in marks:
        test = mark(test)
    return test


def convert_and_verify(
    tmp_path: Path,
    source: str,
    target: str,
    entry: str,
    inputs: list[str],
    name: str = "model",
    edit: Callable[[str], str] | None = None,
):
    """Write `source`, convert it to `target` (no error diagnostics allowed), write the output
    beside it (through `edit` first, when given: a conversion made wrong on purpose) and verify
    it torch-free against the original: the verdict, for the test to assert."""
    from precision_transpiler import transpile
    from precision_transpiler.verify import VerifyOptions, verify_files

    original = tmp_path / f"{name}.py"
    original.write_text(source, encoding="utf-8")
    result = transpile(source, to=target, path=str(original))
    assert not [d for d in result.diagnostics if d.severity == "error"], result.diagnostics
    converted = tmp_path / f"{name}_{target}.py"
    converted.write_text(edit(result.code) if edit else result.code, encoding="utf-8")
    return verify_files(original, converted, VerifyOptions(entry=entry, inputs=inputs, torch_free=True))
