"""The hooks of .pre-commit-hooks.yaml, run by the real `pre-commit` in a throw-away git repository.

No mocks: pre-commit clones a snapshot of this checkout, pip-installs the package into its own
environment (one environment, shared by both hooks) and runs `ptranspile` as a user's commit would.

The snapshot is a fresh git repository holding the checkout's working tree (tracked and untracked,
not ignored, files), committed once, so the test sees uncommitted changes and works in a clean
clone, in a checkout with local edits and in one with no commits at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TORCH_SOURCE = "import torch\nx = torch.half\n"
# What `ptranspile --to jax` makes of TORCH_SOURCE (asserted byte for byte).
JAX_SOURCE = "import jax.numpy as jnp\nx = jnp.float16\n"
# A Python file that uses no framework: every hook leaves it alone.
PLAIN_SOURCE = "def add_one(a):\n    return a + 1\n"
# NumPy-only code (a data loader): not model code, so the hooks leave it alone without `--from numpy`.
NUMPY_SOURCE = "import numpy as np\n\n\ndef load(arr):\n    return arr.astype(np.float32)\n"

# Installing the hook environment (a virtualenv and `pip install` of the package) dominates.
TIMEOUT = 600


def _pre_commit_cmd() -> list[str]:
    exe = Path(sys.executable).parent / ("pre-commit.exe" if os.name == "nt" else "pre-commit")
    if exe.is_file():
        return [str(exe)]
    return [sys.executable, "-m", "pre_commit"]


def _env(pre_commit_home: Path) -> dict[str, str]:
    """An environment that does not see the caller's git or pre-commit state."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "PRE_COMMIT")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        PRE_COMMIT_HOME=str(pre_commit_home),
        PRE_COMMIT_COLOR="never",
        GIT_CONFIG_GLOBAL=os.devnull,  # no global core.hooksPath, signing, templates ...
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    return env


def _run(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(cmd),
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=TIMEOUT,
        check=False,
    )


def _git(repo: Path, env: dict[str, str], *args: str) -> str:
    proc = _run(["git", *args], repo, env)
    assert proc.returncode == 0, f"git {' '.join(args)} failed:\n{proc.stdout}"
    return proc.stdout


def _git_init(repo: Path, env: dict[str, str]) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, env, "init", "-q")
    _git(repo, env, "config", "user.name", "ptranspile tests")
    _git(repo, env, "config", "user.email", "ptranspile-tests@example.invalid")
    _git(repo, env, "config", "commit.gpgsign", "false")


def _checkout_files() -> list[Path]:
    """The checkout's files as git would commit them: tracked and untracked, not ignored."""
    proc = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        text=True,
        capture_output=True,
        check=False,
    )
    if proc.returncode == 0 and proc.stdout:
        files = [Path(name) for name in proc.stdout.split("\0") if name]
        return sorted(f for f in files if (ROOT / f).is_file())
    # Not a git checkout (an unpacked sdist): the package's build inputs.
    names = ["pyproject.toml", "README.md", ".pre-commit-hooks.yaml"]
    files = [Path(n) for n in names if (ROOT / n).is_file()]
    for folder in ("precision_transpiler", "mappings"):
        files += [
            p.relative_to(ROOT)
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        ]
    return sorted(files)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pre-commit cache for the module: the hook environment is installed once."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory, pre_commit_home: Path) -> tuple[Path, str]:
    """A one-commit git repository holding this checkout's working tree: (path, commit)."""
    assert (ROOT / ".pre-commit-hooks.yaml").is_file()
    env = _env(pre_commit_home)
    repo = tmp_path_factory.mktemp("hook-repo")
    for rel in _checkout_files():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    _git_init(repo, env)
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "--no-verify", "-m", "snapshot of the checkout under test")
    return repo, _git(repo, env, "rev-parse", "HEAD").strip()


def _config(repo: Path, rev: str, args: Sequence[str]) -> str:
    """A user's .pre-commit-config.yaml: check on commit, fix on demand (manual stage)."""
    args_line = f"        args: [{', '.join(args)}]\n" if args else ""
    return (
        "repos:\n"
        f"  - repo: {repo.as_posix()}\n"
        f"    rev: {rev}\n"
        "    hooks:\n"
        "      - id: ptranspile-check\n"
        f"{args_line}"
        "      - id: ptranspile-fix\n"
        f"{args_line}"
        "        stages: [manual]\n"
    )


def _project(path: Path, env: dict[str, str], files: dict[str, str]) -> Path:
    _git_init(path, env)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    _git(path, env, "add", "-A")
    _git(path, env, "commit", "-q", "--no-verify", "-m", "initial")
    return path


def _py_envs(pre_commit_home: Path) -> list[Path]:
    return sorted(p for p in pre_commit_home.glob("repo*/py_env-*") if p.is_dir())


@pytest.mark.slow
def test_check_hook_fails_with_diff_and_passes_after_fix_hook(
    tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    env = _env(pre_commit_home)
    repo, rev = hook_repo
    project = _project(
        tmp_path / "project",
        env,
        {
            ".pre-commit-config.yaml": _config(repo, rev, ["--to", "jax"]),
            "model/__init__.py": "",  # pre-commit passes empty files too: --skip-empty
            "model/layers.py": TORCH_SOURCE,
            "model/helpers.py": PLAIN_SOURCE,
            "data/loader.py": NUMPY_SOURCE,
            "README.md": "import torch\nx = torch.half\n",  # not Python: never passed to the hooks
        },
    )
    pre_commit = _pre_commit_cmd()

    check = _run([*pre_commit, "run", "ptranspile-check", "--all-files"], project, env)
    assert check.returncode == 1, check.stdout
    assert "ptranspile (check)" in check.stdout and "Failed" in check.stdout, check.stdout
    assert "- hook id: ptranspile-check" in check.stdout
    assert "- exit code: 1" in check.stdout
    diff = (
        "--- a/model/layers.py\n"
        "+++ b/model/layers.py\n"
        "@@ -1,2 +1,2 @@\n"
        "-import torch\n"
        "-x = torch.half\n"
        "+import jax.numpy as jnp\n"
        "+x = jnp.float16\n"
    )
    assert diff in check.stdout, check.stdout
    assert "helpers.py" not in check.stdout and "__init__.py" not in check.stdout, check.stdout
    assert "loader.py" not in check.stdout, check.stdout
    assert "README.md" not in check.stdout, check.stdout
    assert (project / "model/layers.py").read_text(encoding="utf-8") == TORCH_SOURCE  # check writes nothing
    assert len(_py_envs(pre_commit_home)) == 1, _py_envs(pre_commit_home)

    fix = _run([*pre_commit, "run", "ptranspile-fix", "--all-files", "--hook-stage", "manual"], project, env)
    assert fix.returncode == 1, fix.stdout  # pre-commit fails a hook that modified files
    assert "ptranspile (fix)" in fix.stdout and "Failed" in fix.stdout, fix.stdout
    assert "- files were modified by this hook" in fix.stdout, fix.stdout
    assert (project / "model/layers.py").read_text(encoding="utf-8") == JAX_SOURCE
    assert (project / "model/helpers.py").read_text(encoding="utf-8") == PLAIN_SOURCE
    assert (project / "data/loader.py").read_text(encoding="utf-8") == NUMPY_SOURCE
    assert (project / "model/__init__.py").read_text(encoding="utf-8") == ""
    assert (project / "README.md").read_text(encoding="utf-8") == TORCH_SOURCE
    changed = _git(project, env, "status", "--porcelain").splitlines()
    assert changed == [" M model/layers.py"], changed

    check = _run([*pre_commit, "run", "ptranspile-check", "--all-files"], project, env)
    assert check.returncode == 0, check.stdout
    assert "ptranspile (check)" in check.stdout and "Passed" in check.stdout, check.stdout
    assert "---" not in check.stdout and "+++" not in check.stdout, check.stdout

    fix = _run([*pre_commit, "run", "ptranspile-fix", "--all-files", "--hook-stage", "manual"], project, env)
    assert fix.returncode == 0, fix.stdout  # idempotent: a second fix changes nothing
    assert "Passed" in fix.stdout, fix.stdout
    assert (project / "model/layers.py").read_text(encoding="utf-8") == JAX_SOURCE

    # Both hooks ran from the one environment installed by the first run.
    assert len(_py_envs(pre_commit_home)) == 1, _py_envs(pre_commit_home)


@pytest.mark.slow
def test_installed_hook_blocks_commit_with_defaults_from_pyproject(
    tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    """`git commit` through the installed hook; the target comes from [tool.ptranspile], no args."""
    env = _env(pre_commit_home)
    repo, rev = hook_repo
    project = _project(
        tmp_path / "project",
        env,
        {
            ".pre-commit-config.yaml": _config(repo, rev, []),
            "pyproject.toml": '[tool.ptranspile]\nto = "jax"\nskip-empty = true\n',
            "helpers.py": PLAIN_SOURCE,
        },
    )
    pre_commit = _pre_commit_cmd()
    installed = _run([*pre_commit, "install"], project, env)
    assert installed.returncode == 0, installed.stdout
    head = _git(project, env, "rev-parse", "HEAD").strip()

    (project / "net.py").write_text(TORCH_SOURCE, encoding="utf-8")
    _git(project, env, "add", "net.py")
    commit = _run(["git", "commit", "-m", "add a torch model"], project, env)
    assert commit.returncode != 0, commit.stdout
    assert "ptranspile (check)" in commit.stdout and "Failed" in commit.stdout, commit.stdout
    assert "--- a/net.py\n+++ b/net.py\n" in commit.stdout, commit.stdout
    assert "+x = jnp.float16\n" in commit.stdout, commit.stdout
    assert _git(project, env, "rev-parse", "HEAD").strip() == head  # nothing was committed

    fix = _run([*pre_commit, "run", "ptranspile-fix", "--files", "net.py", "--hook-stage", "manual"], project, env)
    assert fix.returncode == 1, fix.stdout
    assert "- files were modified by this hook" in fix.stdout, fix.stdout
    assert (project / "net.py").read_text(encoding="utf-8") == JAX_SOURCE

    _git(project, env, "add", "net.py")
    commit = _run(["git", "commit", "-m", "add a jax model"], project, env)
    assert commit.returncode == 0, commit.stdout
    assert "ptranspile (check)" in commit.stdout and "Passed" in commit.stdout, commit.stdout
    assert _git(project, env, "show", "HEAD:net.py") == JAX_SOURCE
    assert len(_py_envs(pre_commit_home)) == 1, _py_envs(pre_commit_home)
