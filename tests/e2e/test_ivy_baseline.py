"""The Ivy side-by-side benchmark (benchmarks/ivy_baseline) without Ivy installed.

Ivy lives in its own venv (`make bench-ivy`), so CI checks what it can here: every script of the
folder parses, ours.py converts and verifies the smallest case in this environment and writes
every key the merge needs, and compare.py turns a real ours.py output plus a row of a real Ivy
run into the side-by-side table.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax]

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "ivy_baseline"

# Two rows of the run in docs/benchmarks.md ("Ivy side by side": run_ivy.py, Ivy 1.0.0.5 in its own
# venv): the MLP converts and matches torch; the autocast case runs but silently lost its bf16 region.
IVY_RUN: dict[str, Any] = {
    "tool": "ivy",
    "date": "2026-12-03",
    "seconds": 822.0,
    "versions": {
        "python": "3.11.7",
        "ivy": "1.0.0.5",
        "torch": "2.13.0+cpu",
        "jax": "0.6.2",
        "flax": "0.11.2",
        "tensorflow-cpu": "2.20.0",
        "keras": "3.11.3",
        "numpy": "2.3.5",
    },
    "results": [
        {
            "case": "mlp",
            "target": "jax",
            "tool": "ivy",
            "transpiled": True,
            "ran": True,
            "passed": True,
            "transpile_s": 91.57,
            "files": 57,
            "lines": 5831,
            "files_all": 86,
            "lines_all": 6954,
            "max_abs_err": 0.0,
            "rel_err": 0.0,
            "weights": "synced",
            "out_dtype": "float32",
            "torch_dtype": "float32",
            "lowp_effect": None,
            "markers": [],
            "precision_kept": "-",
            "error": "",
            "wall_s": 96.44,
        },
        {
            "case": "autocast_mlp",
            "target": "jax",
            "tool": "ivy",
            "transpiled": True,
            "ran": True,
            "passed": False,
            "transpile_s": 65.21,
            "files": 57,
            "lines": 5833,
            "files_all": 86,
            "lines_all": 6959,
            "max_abs_err": 0.0014373362064361572,
            "rel_err": 0.0021016566368651664,
            "weights": "synced",
            "out_dtype": "float32",
            "torch_dtype": "float32",
            "lowp_effect": 0.0021016566368651664,
            "markers": [],
            "precision_kept": "no (matches the fp32 version: effect 2.1e-03)",
            "error": "",
            "wall_s": 69.38,
        },
    ],
}


def _load(name: str) -> ModuleType:
    """A script of the folder as a module of its own name (the folder is not a package)."""
    module_name = f"ivy_baseline_test_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, FOLDER / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["cases.py", "run_ivy.py", "ours.py", "compare.py"])
def test_scripts_parse(name: str) -> None:
    tree = ast.parse((FOLDER / name).read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{name} says what it is for"


def test_requirements_pin_the_ivy_stack() -> None:
    """Exact pins: a torch range would pull a CUDA build, a newer jax/keras breaks Ivy's output."""
    pins = dict(
        line.split("==", 1)
        for line in (FOLDER / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    )
    assert pins["torch"] == "2.13.0"
    assert pins["jax"] == pins["jaxlib"] == "0.6.2"
    assert pins["keras"].startswith("3.11")
    assert {"ivy", "ruff", "flax", "tensorflow-cpu", "numpy"} <= set(pins)


def test_precision_markers_are_words() -> None:
    cases = _load("cases")
    assert cases.markers_in("class jax_HalfMLP:\n    y = jax_half_frnt(x)") == ["half"]
    assert cases.markers_in("class AutocastMLP:\n    h = x.astype(jnp.bfloat16)") == ["bfloat16"]
    assert cases.markers_in("class AutocastMLP:\n    return x") == []


@pytest.fixture(scope="module")
def ours_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """ours.py on the smallest case, and on the autocast case it flags, for one target, in a
    subprocess as `make bench-ivy` runs it."""
    out = tmp_path_factory.mktemp("ours") / "ours.json"
    command = [sys.executable, str(FOLDER / "ours.py"), "--cases", "mlp,autocast_mlp", "--targets", "jax"]
    command += ["--json", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_ours_emits_every_key(ours_run: dict[str, Any]) -> None:
    cases = _load("cases")
    assert ours_run["tool"] == "ptranspile"
    assert {"date", "seconds", "versions", "results"} <= set(ours_run)
    mlp, autocast = ours_run["results"]
    for row in (mlp, autocast):
        assert set(cases.RESULT_KEYS) <= set(row)
    assert (mlp["case"], mlp["target"]) == ("mlp", "jax")
    assert mlp["transpiled"] and mlp["ran"] and mlp["passed"], mlp["error"]
    assert mlp["files"] == 1 and mlp["lines"] > 10
    assert mlp["rel_err"] <= 1e-5
    assert mlp["out_dtype"] == mlp["torch_dtype"] == "float32"
    # the autocast region is converted (rules/torch_autocast_model.py), not dropped: the converted code
    # keeps it and verifies against the original (its tolerance derived from the region's own error)
    assert autocast["case"] == "autocast_mlp" and autocast["transpiled"] and autocast["ran"]
    assert autocast["passed"] and not autocast["error"], autocast["error"]
    assert "autocast" in autocast["markers"] and autocast["out_dtype"] == "float32"
    assert autocast["lowp_effect"] > 1e-4  # the bf16 region matters, so dropping it would show


@pytest.mark.slow
def test_compare_merges_real_outputs(ours_run: dict[str, Any], tmp_path: Path) -> None:
    compare = _load("compare")
    ivy_path, ours_path, md_path = tmp_path / "ivy.json", tmp_path / "ours.json", tmp_path / "table.md"
    ivy_path.write_text(json.dumps(IVY_RUN), encoding="utf-8")
    ours_path.write_text(json.dumps(ours_run), encoding="utf-8")
    assert compare.main(["--ivy", str(ivy_path), "--ours", str(ours_path), "--markdown", str(md_path)]) == 0
    table = md_path.read_text(encoding="utf-8")
    rows = {
        tuple(cells[:2]): cells
        for line in table.splitlines()
        if line.startswith("| ") and (cells := [c.strip() for c in line.strip("|").split("|")])[1] in ("jax", "tf")
    }
    mlp, autocast = rows["mlp", "jax"], rows["autocast_mlp", "jax"]
    assert mlp[2:4] == ["matches torch", "matches torch"]
    assert mlp[6] == "57 / 5,831"
    assert mlp[7] == f"1 / {ours_run['results'][0]['lines']:,}"
    assert autocast[2] == "runs, differs" and autocast[4].startswith("2.1e-03 / ")
    assert autocast[8].startswith("no (matches the fp32 version")
    assert "- ptranspile, autocast_mlp -> jax: `" not in table and "unsupported: torch.autocast" not in table
    assert "ivy 1.0.0.5" in table and "precision_transpiler 0.1.0" in table
