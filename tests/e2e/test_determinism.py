"""Output is deterministic and idempotent (docs/cli.md#determinism-and-idempotence).

* The bytes written do not depend on PYTHONHASHSEED (set iteration order must never reach the
  output) nor on `-j` (files converted in worker processes give what one process gives).
* Converting an output again, with the same target and policy, changes nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from precision_transpiler import transpile
from tests.e2e.test_roundtrip_property import torch_module
from tests.real_models import package_file

# A package whose models import helpers from a sibling module: the helpers are converted and
# copied in, with their imports (several `typing` names, which a set once ordered by hash).
HELPERS = """from typing import Optional, Callable, Union
import math
import torch
from torch import nn


def scale(x: torch.Tensor, factor: Optional[float] = None) -> torch.Tensor:
    return x * (factor if factor is not None else math.sqrt(2.0))


class Block(nn.Module):
    def __init__(self, dim: int, act: Union[Callable, None] = None) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return scale(self.norm(self.fc(x)).float())
"""

MODEL = """import torch
from torch import nn
from .helpers import Block, scale


class Model{n}(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.block = Block(dim)
        self.head = nn.Linear(dim, 2)

    def forward(self, x):
        y = self.block(x).half()
        return torch.softmax(self.head(scale(y)), dim=-1)
"""


def _package(root: Path) -> Path:
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(HELPERS)
    for n in "ABC":
        (pkg / f"model_{n.lower()}.py").write_text(MODEL.format(n=n))
    return root


def _ptranspile(*args: str | os.PathLike[str], seed: str = "0") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run(
        [sys.executable, "-m", "precision_transpiler", *map(str, args)], capture_output=True, env=env, timeout=300
    )


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.py"))}


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_output_does_not_depend_on_the_hash_seed(tmp_path: Path, to: str) -> None:
    src = _package(tmp_path / "src")
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"out{seed}"
        done = _ptranspile(src, "--to", to, "-o", out, "-q", seed=seed)
        assert done.returncode == 0, done.stderr.decode()
        outputs.append(_tree(out))
    assert outputs[0], "nothing was written"
    assert outputs[0] == outputs[1]


def test_jobs_do_not_change_the_output(tmp_path: Path) -> None:
    src = _package(tmp_path / "src")
    trees = []
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        done = _ptranspile(src, "--to", "jax", "-j", jobs, "-o", out, "-q")
        assert done.returncode == 0, done.stderr.decode()
        trees.append(_tree(out))
    assert trees[0] and trees[0] == trees[1]


@pytest.mark.parametrize(
    "args",
    [
        ["--to", "jax"],
        pytest.param(["--to", "tf"], marks=pytest.mark.slow),
        pytest.param(["--to", "torch", "--policy", "mixed"], marks=pytest.mark.slow),
    ],
)
def test_converting_an_output_again_changes_nothing_cli(tmp_path: Path, args: list[str]) -> None:
    src = _package(tmp_path / "src")
    out = tmp_path / "out"
    done = _ptranspile(src, *args, "-o", out, "-q")
    assert done.returncode == 0, done.stderr.decode()
    again = _ptranspile(out, *args, "--check", "--diff")
    assert again.returncode == 0, again.stdout.decode() + again.stderr.decode()


# Real model files: (package, file) converted whole to each target; the seed comparison runs the
# command line (a fresh hash seed needs a fresh process).
SEED_CASES = [
    ("torchvision", "models/convnext.py", "jax"),
    ("torchvision", "models/mobilenetv2.py", "tf"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("package", "rel", "to"), SEED_CASES, ids=[f"{c[1]}-{c[2]}" for c in SEED_CASES])
def test_real_models_do_not_depend_on_the_hash_seed(package: str, rel: str, to: str) -> None:
    file = package_file(package, rel)
    outputs = []
    for seed in ("1", "2"):
        done = _ptranspile(file, "--to", to, "-q", seed=seed)
        assert done.stdout, done.stderr.decode()
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]


IDEMPOTENT_CASES = [
    ("torchvision", "models/resnet.py", "jax", "fp32"),
    ("torchvision", "models/convnext.py", "tf", "fp32"),
    ("torchvision", "models/mobilenetv2.py", "torch", "mixed"),
    ("transformers", "models/bert/modeling_bert.py", "jax", "fp32"),
    ("transformers", "models/vit/modeling_vit.py", "tf", "fp32"),
    ("transformers", "models/gpt2/modeling_gpt2.py", "torch", "mixed"),
    ("torchvision", "models/resnet.py", "jax", "mixed"),
    ("torchvision", "models/resnet.py", "tf", "mixed"),
    ("transformers", "models/vit/modeling_vit.py", "tf", "fp16"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("package", "rel", "to", "policy"),
    IDEMPOTENT_CASES,
    ids=[f"{c[1]}-{c[2]}-{c[3]}" for c in IDEMPOTENT_CASES],
)
def test_real_models_convert_to_a_fixed_point(
    converted, tmp_path: Path, package: str, rel: str, to: str, policy: str
) -> None:
    first = converted(package_file(package, rel), to=to, policy=policy)
    assert first.changed
    out = tmp_path / Path(rel).name  # where `-o` would have written it
    again = transpile(first.code, to=to, policy=policy, path=str(out))
    assert again.code == first.code


def _as_module(code: str) -> str:
    """The snippet's function as the `forward` of an `nn.Module` (what policies and whole-model
    conversion act on)."""
    alias = "t" if "import torch as t\n" in code else "torch"
    head, body = code.split("def f(x, y):\n")
    body = "".join(f"    {line}\n" if line else "\n" for line in body.splitlines())
    return f"{head}class M({alias}.nn.Module):\n    def forward(self, x, y):\n{body}"


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), to=st.sampled_from(["jax", "tf", "numpy", "torch"]))
def test_converting_an_output_again_is_a_no_op(data: st.DataObject, to: str) -> None:
    code = data.draw(torch_module("jax" if to == "torch" else to), label="torch source")
    if data.draw(st.booleans(), label="as a module's forward"):
        code = _as_module(code)
    policy = data.draw(st.sampled_from(["mixed", "bf16", "fp32"])) if to == "torch" else "fp32"
    first = transpile(code, to=to, from_="torch", policy=policy)
    again = transpile(first.code, to=to, from_="torch" if to == "torch" else None, policy=policy)
    assert again.code == first.code, f"--- source\n{code}\n--- first\n{first.code}\n--- again\n{again.code}"
