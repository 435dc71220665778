"""Which files are converted from which framework: `--from` names the source frameworks.

By default the command converts torch, jax and tf model code; NumPy code (a data loader written
against NumPy, in a repository the pre-commit hook runs over) is left alone unless `--from`
names numpy. `--from` takes one framework or a comma-separated list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import UsageError, transpile
from tests.helpers import run_cli

TORCH = "import torch\n\n\ndef f(x):\n    return x.half()\n"
NUMPY = "import numpy as np\n\n\ndef load(arr):\n    return arr.astype(np.float32)\n"
JAX = "import jax.numpy as jnp\nx = jnp.bfloat16\n"
NOTE = "NumPy-only file left unchanged: the source frameworks are torch, jax, tf (pass --from numpy to convert it)"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(TORCH)
    (tmp_path / "pkg" / "loader.py").write_text(NUMPY)
    (tmp_path / "pkg" / "flax_bits.py").write_text(JAX)
    return tmp_path


def test_hook_to_torch_leaves_numpy_code_alone(repo: Path) -> None:
    """The pre-commit fix hook applying a policy (`--to torch`) must not turn NumPy into torch."""
    loader = repo / "pkg" / "loader.py"
    r = run_cli("--in-place", "--skip-empty", "--to", "torch", str(loader), str(repo / "pkg" / "model.py"), cwd=repo)
    assert r.code == 0, r.err
    assert loader.read_text() == NUMPY
    assert "left unchanged" not in r.err  # many files: no note per file
    r = run_cli("--check", "--diff", "--skip-empty", "--to", "torch", "pkg", cwd=repo)
    assert r.code == 1 and r.out.startswith("--- a/pkg/flax_bits.py"), r.out  # jax code is converted
    assert "loader.py" not in r.out


def test_directory_converts_model_code_only(repo: Path) -> None:
    r = run_cli("pkg", "--to", "jax", "-o", "out", cwd=repo)
    assert r.code == 0, r.err
    assert (repo / "out" / "loader.py").read_text() == NUMPY  # copied unchanged, like a plain file
    assert "jnp.float16" in (repo / "out" / "model.py").read_text()
    assert "ptranspile: 3 files: 1 changed, 2 unchanged, 0 skipped" in r.err


def test_from_numpy_and_lists(repo: Path) -> None:
    r = run_cli("pkg", "--to", "torch", "--from", "numpy", "--check", "--diff", cwd=repo)
    assert "+    return arr.to(torch.float32)" in r.out and "flax_bits.py" not in r.out, r.out
    r = run_cli("pkg", "--to", "tf", "--from", "torch,numpy", "--check", "--diff", cwd=repo)
    assert "b/pkg/loader.py" in r.out and "b/pkg/model.py" in r.out and "flax_bits.py" not in r.out, r.out
    r = run_cli("pkg", "--to", "tf", "--from", "torch, jax", "--check", "--diff", cwd=repo)
    assert "b/pkg/flax_bits.py" in r.out and "b/pkg/model.py" in r.out and "loader.py" not in r.out, r.out
    r = run_cli("pkg", "--to", "tf", "--from", "torch,mx", "--check", cwd=repo)
    assert r.code == 2
    assert "argument --from: invalid choice: 'mx' (choose from 'torch', 'jax', 'tf', 'numpy')" in r.err


def test_single_file_gets_a_note(repo: Path) -> None:
    r = run_cli("pkg/loader.py", "--to", "torch", cwd=repo)
    assert r.code == 0 and r.out == NUMPY
    assert r.err == f"pkg/loader.py:1:1: note: {NOTE}\n"
    r = run_cli("pkg/loader.py", "--to", "torch", "-q", cwd=repo)
    assert r.err == ""
    r = run_cli("-", "--to", "jax", stdin=NUMPY, cwd=repo)
    assert r.out == NUMPY and NOTE in r.err
    r = run_cli("pkg/loader.py", "--to", "torch", "--from", "numpy", cwd=repo)
    assert r.code == 0 and "arr.to(torch.float32)" in r.out and r.err == ""


def test_from_in_pyproject(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.ptranspile]\nto = "tf"\nfrom = "numpy,torch"\n')
    r = run_cli("pkg", "--check", cwd=repo)
    assert r.code == 1
    assert "would change: pkg/loader.py" in r.err and "would change: pkg/model.py" in r.err, r.err
    assert "flax_bits.py" not in r.err


def test_api_from_sequence() -> None:
    result = transpile(NUMPY, to="torch", from_=("torch", "jax", "tf"))
    assert not result.changed and result.source_framework is None
    assert [d.code for d in result.diagnostics] == ["source-not-selected"]
    assert transpile(NUMPY, to="torch", from_="torch,numpy").changed
    assert transpile(NUMPY, to="torch").changed  # the API's default: any framework, NumPy included
    mixed = "import numpy as np\nimport torch\nx = torch.half\ny = np.float32\n"
    assert transpile(mixed, to="jax", from_=("jax", "numpy")).source_framework == "numpy"
    with pytest.raises(UsageError, match="unknown framework 'mx'"):
        transpile(NUMPY, to="torch", from_="torch,mx")
