"""The CI slice of the harvested corpus: every frozen case of three small packages, whose files are
copied verbatim into benchmarks/harvest/vendored (benchmarks/wild/vendor.py --corpus harvest),
converted to JAX and Keras at fp32 and verified stage by stage by `benchmarks/harvest/run.py
--vendored`, with none of the harvest's packages installed. The full harvest is a benchmark
(`make bench-harvest`, then run.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import load_script

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
    assert "| p | jax | 2 | 2 | 2 | 0 | 0 | 0 | 0 | 1 |" in table
    assert "| p | tf | 2 | 1 | 1 | 1 | 1 | 1 | 0 | 0 |" in table


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
