"""The CI slice of the harvested corpus: every frozen case of three small packages, whose files are
copied verbatim into benchmarks/harvest/vendored (benchmarks/wild/vendor.py --corpus harvest),
converted to JAX and Keras at fp32 and verified stage by stage by `benchmarks/harvest/run.py
--vendored`, with none of the harvest's packages installed. The full harvest is a benchmark
(`make bench-harvest`, then run.py)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from tests.helpers import load_script, on_both_targets

REPO = Path(__file__).resolve().parents[2]
HARVEST = REPO / "benchmarks" / "harvest"


def _spec() -> list[dict]:
    return yaml.safe_load((HARVEST / "vendored.yaml").read_text(encoding="utf-8"))["packages"]


def _splits() -> dict[str, str]:
    data = yaml.safe_load((HARVEST / "packages.yaml").read_text(encoding="utf-8"))
    return {p["distribution"]: p["split"] for p in data["packages"]}


def test_the_slice_is_packages_open_to_work_with_their_licences() -> None:
    vendor = load_script("wild_vendor", REPO / "benchmarks" / "wild" / "vendor.py")
    root = HARVEST / "vendored"
    splits = _splits()
    expected = {"README.md"}
    for item in vendor.load(HARVEST / "vendored.yaml"):
        assert splits[item.distribution] != "held_back"  # that half stays unseen
        expected |= {f"{item.package}/{rel}" for rel in (*item.files, *item.stubs, "LICENSE")}
        assert "licen" in (root / item.package / "LICENSE").read_text(encoding="utf-8").lower()
    present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert present == expected
    assert (root / "README.md").read_text(encoding="utf-8") == vendor.readme(
        vendor.load(HARVEST / "vendored.yaml"), "harvest"
    )


def test_a_failure_with_nothing_reported_is_counted_as_unreported() -> None:
    run = load_script("harvest_run", HARVEST / "run.py")
    silent = run.Result("p", "1", "p.A", "jax", stage="built")
    reported = run.Result("p", "1", "p.B", "jax", stage="built", unsupported=1)
    unconverted = run.Result("p", "1", "p.C", "tf", stage="converted")
    verified = run.Result("p", "1", "p.D", "tf")
    assert [r.unreported for r in (silent, reported, unconverted, verified)] == [True, False, False, False]
    # a torch import the conversion warned would run at load is reported; one it did not warn of is not
    warned = run.Result("p", "1", "p.E", "jax", stage="imported", imports_torch="torch", torch_at_load=1)
    unwarned = run.Result("p", "1", "p.F", "jax", stage="imported", imports_torch="torch")
    assert (warned.unreported, unwarned.unreported) == (False, True)
    table = run.table([silent, reported, unconverted, verified])
    assert "| p | jax | 2 | 2 | 2 | 0 | 0 | 0 | 0 | 0 | 1 |" in table
    assert "| p | tf | 2 | 1 | 1 | 1 | 1 | 1 | 0 | 0 | 0 |" in table


def test_a_run_whose_original_draws_random_numbers_is_counted_apart() -> None:
    run = load_script("harvest_run", HARVEST / "run.py")
    noisy = run.Result("p", "1", "p.Noisy", "jax", stage="verified", random_forward=True)
    wrong = run.Result("p", "1", "p.Wrong", "jax", stage="verified")
    right = run.Result("p", "1", "p.Right", "jax")
    # a torch import fails it first: that failure is the converter's, not the original's randomness
    imports = run.Result("p", "1", "p.Imports", "tf", stage="imported", imports_torch="torch", random_forward=True)
    assert [r.not_comparable for r in (noisy, wrong, right, imports)] == [True, False, False, False]
    assert [r.unreported for r in (noisy, wrong, right, imports)] == [False, True, False, True]
    table = run.table([noisy, wrong, right, imports])
    assert "| verified | not comparable | imports torch | unreported |" in table
    assert "| p | jax | 3 | 3 | 3 | 3 | 3 | 1 | 1 | 0 | 1 |" in table
    # the verified rate leaves the not comparable run out of its denominator: 1 of 2, not 1 of 3
    assert "| **all** | jax | 3 | 3 (100%) | 3 (100%) | 3 (100%) | 3 (100%) | 1 (50%) | 1 | | 1 |" in table
    assert "| **all** | tf | 1 | 1 (100%) | 0 (0%) | 0 (0%) | 0 (0%) | 0 (0%) | 0 | | 1 |" in table
    # results written before the field existed still load
    older = {k: v for k, v in asdict(noisy).items() if k != "random_forward"}
    assert run.Result(**older).random_forward is False and not run.Result(**older).not_comparable


NOISY_PACKAGE = """
import torch
from torch import nn


class NoisyMix(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Conv1d(dim, dim, kernel_size=1, bias=False)

    def forward(self, x):
        b, _, t = x.shape
        noise = torch.randn((b, 1, t), device=x.device, dtype=x.dtype)
        return x + noise * self.proj(x)
"""


@on_both_targets
def test_run_one_records_an_original_that_draws_random_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    package = tmp_path / "noisy_harvest_case"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(NOISY_PACKAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    run = load_script("harvest_run", HARVEST / "run.py")
    document = {"package": "noisy-harvest-case", "version": "0.1", "import": "noisy_harvest_case"}
    case = {"class": "noisy_harvest_case.layers.NoisyMix", "file": "layers.py", "entry": "NoisyMix(8)"}
    result = run.run_one(document, {**case, "inputs": ["float32[1,8,16]"]}, target)
    assert result.stage == "verified" and result.random_forward and result.not_comparable, result
    assert not result.unreported and "draws random numbers" in result.problem, result.problem
    assert "| noisy-harvest-case | " + target + " | 1 | 1 | 1 | 1 | 1 | 0 | 1 | 0 | 0 |" in run.table([result])


@pytest.mark.slow
@pytest.mark.needs_torch
@pytest.mark.needs_jax
@pytest.mark.needs_tf
def test_the_vendored_slice_converts_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # --vendored puts the copies first on sys.path
    run = load_script("harvest_run", HARVEST / "run.py")
    corpus = sys.modules["benchmarks.corpus"]
    out = tmp_path / "slice.json"
    packages = {item["package"] for item in _spec()}
    before = set(sys.modules)
    try:
        assert run.main(["--vendored", "--results", str(out)]) == 0
        # the files converted are the copies, whatever else is installed
        for package in packages:
            assert corpus.package_file(package, "__init__.py").is_relative_to(run.VENDORED)
    finally:
        for name in set(sys.modules) - before:
            if name.split(".")[0] in packages:
                del sys.modules[name]
    results = [r for column in json.loads(out.read_text(encoding="utf-8")).values() for r in column.values()]
    frozen = 0
    for item in _spec():
        document = yaml.safe_load((HARVEST / "cases" / f"{item['distribution']}.yaml").read_text(encoding="utf-8"))
        frozen += len(document["cases"])
    assert len(results) == 2 * frozen  # every frozen case, on both targets
    failed = [f"{r['case']} {r['target']}: {r['stage']} {r['problem']}" for r in results if r["stage"]]
    assert not failed, failed
    assert all(not r["imports_torch"] for r in results)


def test_shards_share_a_run_each_case_once() -> None:
    run = load_script("harvest_run", HARVEST / "run.py")
    pairs = list(range(11))
    shards = [run.sharded(pairs, f"{k}/3") for k in range(3)]
    assert sorted(x for shard in shards for x in shard) == pairs
    assert run.sharded(pairs, "0/1") == pairs
    with pytest.raises(SystemExit, match="expected K/N"):
        run.sharded(pairs, "3/3")
