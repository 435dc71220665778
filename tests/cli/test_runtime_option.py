"""`--runtime module|inline`: converted files written with `-o` import their runtime from one
module beside them; stdout and a single file in place stay self-contained (cli_runtime.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import run_cli

BLOCK = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, dim=8):
            super().__init__()
            self.conv = nn.Conv1d(dim, dim, 3, padding=1)
            self.act = nn.GELU()

        def forward(self, x):
            return self.act(self.conv(x.transpose(1, 2))).transpose(1, 2)
    """
).lstrip()

HEAD = textwrap.dedent(
    """
    import torch.nn as nn
    import torch.nn.functional as F


    class Head(nn.Module):
        def __init__(self, dim=8, classes=3):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.fc = nn.Linear(dim, classes)

        def forward(self, x):
            return F.softmax(self.fc(self.norm(x)), dim=-1)
    """
).lstrip()


def _tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "block.py").write_text(BLOCK)
    (src / "head.py").write_text(HEAD)
    return src


def _run_models(folder: Path, target: str) -> str:
    """Import the converted files from their folder, as a user would, and call them."""
    script = textwrap.dedent(
        """
        import numpy as np
        import block, head
        x = np.ones((2, 5, 8), np.float32)
        print(block.Block()(x).shape, head.Head()(x).shape)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_folder_gets_one_runtime_module_and_its_files_run(tmp_path: Path, target: str) -> None:
    src = _tree(tmp_path)
    run = run_cli(str(src), "--to", target, "-o", str(tmp_path / "out"))
    assert run.code == 0, run.err
    out = tmp_path / "out"
    module = out / f"_ptranspile_runtime_{target}.py"
    assert sorted(p.name for p in out.iterdir()) == sorted(["block.py", "head.py", module.name])
    for name in ("block.py", "head.py"):
        text = (out / name).read_text()
        assert f"from _ptranspile_runtime_{target} import " in text
        assert len(text.splitlines()) <= 2 * len((src / name).read_text().splitlines())
    assert "# ptranspile-runtime: " in module.read_text()
    assert "(2, 5, 8) (2, 5, 3)" in _run_models(out, target)
    # converting the folder again writes the same files; --check on the outputs finds nothing to do
    before = {p.name: p.read_text() for p in out.iterdir()}
    assert run_cli(str(src), "--to", target, "-o", str(out)).code == 0
    assert {p.name: p.read_text() for p in out.iterdir()} == before
    check = run_cli(str(out), "--to", target, "--check")
    assert check.code == 0, check.err


@pytest.mark.needs_jax
def test_files_converted_one_by_one_share_the_module(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    out = tmp_path / "out"
    assert run_cli(str(src / "block.py"), "--to", "jax", "-o", str(out) + "/").code == 0
    (src / "head.py").write_text(HEAD.replace("F.softmax(", "nn.Softmax(dim=-1)(").replace(", dim=-1)", ")"))
    first = (out / "_ptranspile_runtime_jax.py").read_text()
    assert "class Conv1d" in first and "class Softmax" not in first
    assert run_cli(str(src / "head.py"), "--to", "jax", "-o", str(out) + "/").code == 0
    merged = (out / "_ptranspile_runtime_jax.py").read_text()
    assert "class Conv1d" in merged and "class Softmax" in merged  # block.py still finds its Conv1d
    assert "(2, 5, 8) (2, 5, 3)" in _run_models(out, "jax")


def test_inline_keeps_every_file_self_contained(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    out = tmp_path / "out"
    run = run_cli(str(src), "--to", "jax", "-o", str(out), "--runtime", "inline")
    assert run.code == 0, run.err
    assert sorted(p.name for p in out.iterdir()) == ["block.py", "head.py"]
    printed = run_cli(str(src / "block.py"), "--to", "jax")  # stdout: self-contained by default
    assert printed.out == (out / "block.py").read_text()
    assert "class Conv1d" in printed.out and "_ptranspile_runtime" not in printed.out


def test_a_single_file_in_place_stays_self_contained_and_a_folder_does_not(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    assert run_cli(str(src / "block.py"), "--to", "jax", "--in-place").code == 0
    assert "class Conv1d" in (src / "block.py").read_text()
    assert not (src / "_ptranspile_runtime_jax.py").exists()
    assert run_cli(str(src), "--to", "jax", "--in-place").code == 0
    assert (src / "_ptranspile_runtime_jax.py").is_file()
    assert "from _ptranspile_runtime_jax import " in (src / "head.py").read_text()


def test_check_and_diff_report_the_runtime_module(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    run = run_cli(str(src), "--to", "jax", "--check")
    assert run.code == 1
    assert "would change: " + str(src / "_ptranspile_runtime_jax.py") in run.err
    diff = run_cli(str(src), "--to", "jax", "--diff")
    assert "+++ b/" + str(src / "_ptranspile_runtime_jax.py") in diff.out
    assert "+from _ptranspile_runtime_jax import " in diff.out


def test_a_package_folder_imports_its_runtime_relatively(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    (src / "__init__.py").write_text("")
    out = tmp_path / "pkg"
    assert run_cli(str(src), "--to", "jax", "-o", str(out)).code == 0
    assert "from ._ptranspile_runtime_jax import " in (out / "block.py").read_text()
    proc = subprocess.run(
        [sys.executable, "-c", "import numpy as np, pkg.block as b; print(b.Block()(np.ones((1, 4, 8), 'f')).shape)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0 and "(1, 4, 8)" in proc.stdout, proc.stderr[-2000:]


def test_runtime_modules_are_never_inputs(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    out = tmp_path / "out"
    assert run_cli(str(src), "--to", "jax", "-o", str(out)).code == 0
    again = run_cli(str(out), "--to", "jax", "-o", str(tmp_path / "again"))
    assert again.code == 0, again.err
    assert "2 files" in again.err  # the runtime module beside them was not converted


@pytest.mark.slow
@pytest.mark.needs_torch
@pytest.mark.needs_tf
def test_verification_runs_the_files_as_they_are_written(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    out = tmp_path / "out" / "head_tf.py"
    run = run_cli(
        str(src / "head.py"), "--to", "tf", "--policy", "mixed", "-o", str(out),
        "--verify", "--entry", "Head()", "--input", "float32[2,8]", "--no-layers",
    )  # fmt: skip
    assert run.code == 0, run.err[-3000:]
    assert "from _ptranspile_runtime_tf import " in out.read_text()
    assert (out.parent / "_ptranspile_runtime_tf.py").is_file()
    again = run_cli("verify", str(src / "head.py"), str(out), "--entry", "Head()", "--input", "float32[2,8]")
    assert again.code == 0, again.err[-3000:]


def test_a_file_written_with_its_runtime_module_is_checked_as_it_is_written(tmp_path: Path) -> None:
    """One file alone defaults to self-contained, except one that already imports its runtime
    module: checking it (or converting it in place) keeps that form."""
    src = _tree(tmp_path)
    out = tmp_path / "out" / "block.py"
    assert run_cli(str(src / "block.py"), "--to", "tf", "--policy", "mixed", "-o", str(out)).code == 0
    check = run_cli(str(out), "--to", "tf", "--policy", "mixed", "--check")
    assert check.code == 0, check.err
    assert run_cli(str(out), "--to", "tf", "--policy", "mixed", "--in-place").code == 0
    assert "from _ptranspile_runtime_tf import " in out.read_text()


def test_processes_writing_one_folder_at_once_keep_each_others_names(tmp_path: Path) -> None:
    """pre-commit runs hook processes side by side: each merges its names into the folder's
    runtime module under a lock on the folder, so none is lost."""
    src = _tree(tmp_path)
    (src / "head.py").write_text(HEAD.replace("F.softmax(", "nn.Softmax(dim=-1)(").replace(", dim=-1)", ")"))
    out = tmp_path / "out"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "precision_transpiler", str(src / name), "--to", "jax", "-o", str(out) + "/"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in ("block.py", "head.py")
    ]
    assert [proc.wait(timeout=300) for proc in procs] == [0, 0]
    module = (out / "_ptranspile_runtime_jax.py").read_text()
    assert "class Conv1d" in module and "class Softmax" in module
    assert sorted(p.name for p in out.iterdir()) == ["_ptranspile_runtime_jax.py", "block.py", "head.py"]


def test_a_stale_runtime_module_is_written_again_and_said_so(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    out = tmp_path / "out"
    assert run_cli(str(src), "--to", "jax", "-o", str(out)).code == 0
    module = out / "_ptranspile_runtime_jax.py"
    fresh = module.read_text()
    module.write_text(fresh.replace("# ptranspile-runtime: ", "# ptranspile-runtime: 0.0.1 jax 000000000000\n# was: "))
    again = run_cli(str(src), "--to", "jax", "-o", str(out))
    assert again.code == 0, again.err
    assert f"ptranspile: note: {module} was written by another ptranspile version or edited" in again.err
    assert module.read_text() == fresh
