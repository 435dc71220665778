"""Huge inputs: the per-file size limit (`--max-file-mb`), progress on a terminal, and a large
generated model file (benchmarks/huge_files.py's generator) converting at all.

Progress is checked under a real pseudo-terminal (the command's stderr is a pty), and its
absence when stderr is a pipe; nothing here asserts on time.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from precision_transpiler.api import transpile, transpile_file, transpile_paths
from tests.helpers import run_cli

REPO = Path(__file__).resolve().parents[2]
MODEL = (
    "import torch\nimport torch.nn as nn\n\n\n"
    "class Net(nn.Module):\n    def forward(self, x):\n        return x.half()\n"
)


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_huge_files", REPO / "benchmarks" / "huge_files.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(tmp_path: Path, big_bytes: int = 30_000) -> Path:
    """A directory with two small torch files and one over a 0.02 MB limit."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(MODEL)
    (src / "big.py").write_text(MODEL + "\n# padding\n" * (big_bytes // 11))
    (src / "c.py").write_text(MODEL)
    return src


# -- the size limit ----------------------------------------------------------------------------


def test_a_file_over_the_limit_is_skipped_with_one_line_and_the_directory_goes_on(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    out = tmp_path / "out"
    run = run_cli(str(src), "--to", "jax", "-o", str(out), "--max-file-mb", "0.02")
    assert run.code == 2, run.err
    big = src / "big.py"
    size = big.stat().st_size / 1_000_000
    expected = f"{big}: skipped: {size:.3g} MB is over the 0.02 MB limit (--max-file-mb)"
    assert expected in run.err.splitlines(), run.err
    converted = sorted(p.name for p in out.iterdir() if not p.name.startswith("_ptranspile_runtime"))
    assert converted == ["a.py", "c.py"]  # the others are converted (their runtime module beside them)
    assert "3 files: 2 changed, 0 unchanged, 0 skipped, 1 with errors" in run.err


def test_the_limit_comes_from_the_project_config_and_the_option_overrides_it(tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.ptranspile]\nmax-file-mb = 0.02\n")
    run = run_cli("src", "--to", "jax", "--check", cwd=tmp_path)
    assert run.code == 2 and "big.py: skipped: " in run.err, run.err
    run = run_cli("src", "--to", "jax", "--check", "--max-file-mb", "1", cwd=tmp_path)
    assert run.code == 1 and "skipped: " not in run.err, run.err  # converted: would change
    run = run_cli("src", "--to", "jax", "--check", "--max-file-mb", "0", cwd=tmp_path)
    assert run.code == 2 and "--max-file-mb must be positive" in run.err


def test_the_default_limit_lets_an_ordinary_file_through(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(MODEL)
    run = run_cli(str(path), "--to", "jax")
    assert run.code == 0 and "nnx" in run.out, run.err


def test_the_library_api_honours_the_limit(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    result = transpile_file(src / "big.py", to="jax", max_file_mb=0.02)
    assert result.skipped and "over the 0.02 MB limit" in result.skipped
    assert [d.code for d in result.errors] == ["file-too-large"] and not result.changed
    assert transpile_file(src / "big.py", to="jax").changed  # no limit unless asked for
    results = transpile_paths([src], to="jax", max_file_mb=0.02)
    assert [bool(r.errors) for r in results] == [False, True, False]


# -- progress ----------------------------------------------------------------------------------


def _run_with_tty_stderr(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the command with stderr on a pseudo-terminal; its exit code and what it wrote there."""
    controller, terminal = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "precision_transpiler", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=terminal,
            env={**os.environ, **(env or {})},
        )
    finally:
        os.close(terminal)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(controller)
    code = proc.wait(timeout=300)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_a_directory_run_counts_files_on_a_terminal(tmp_path: Path) -> None:
    src = _tree(tmp_path, big_bytes=100)
    code, shown = _run_with_tty_stderr(["src", "--to", "jax", "--check"], tmp_path)
    assert code == 1, shown
    for i in (1, 2, 3):
        assert f"[{i}/3] src" in shown, shown
    assert "\r\x1b[K" in shown  # one line, rewritten, cleared before the summary
    assert "ptranspile: 3 files: 3 changed" in shown
    assert sorted(p.name for p in src.iterdir()) == ["a.py", "big.py", "c.py"]


def test_a_long_conversion_names_its_stage_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(MODEL)
    # PTRANSPILE_PROGRESS_AFTER=0: stages from the start, as for a file over 1 MB
    code, shown = _run_with_tty_stderr(["m.py", "--to", "jax"], tmp_path, {"PTRANSPILE_PROGRESS_AFTER": "0"})
    assert code == 0, shown
    assert "ptranspile: m.py: converting (" in shown, shown
    assert "ptranspile: m.py: copying in runtime definitions (" in shown, shown
    code, shown = _run_with_tty_stderr(["m.py", "--to", "jax"], tmp_path)  # quick: nothing
    assert code == 0 and "ptranspile:" not in shown, shown


def test_no_progress_without_a_terminal_or_under_quiet(tmp_path: Path) -> None:
    _tree(tmp_path, big_bytes=100)
    run = run_cli("src", "--to", "jax", "--check", cwd=tmp_path, env={"PTRANSPILE_PROGRESS_AFTER": "0"})
    assert run.code == 1
    assert "[1/3]" not in run.err and "converting (" not in run.err and "\x1b" not in run.err, run.err
    code, shown = _run_with_tty_stderr(
        ["src", "--to", "jax", "--check", "-q"], tmp_path, {"PTRANSPILE_PROGRESS_AFTER": "0"}
    )
    assert code == 1 and shown == "", shown


# -- a large file ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_300_kb_generated_model_file_converts() -> None:
    source = _generator().generate(300 * 1024)
    assert len(source) >= 300 * 1024
    result = transpile(source, to="jax", path="huge.py")
    assert not result.errors and result.changed, result.errors[:3]
    tree = ast.parse(result.code)  # valid Python
    assert "import torch" not in result.code and "nnx.Module" in result.code
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert sum(name.startswith("Attention") for name in classes) > 50
