"""The CI slice of the wild corpus: real model files of three development-half sources, copied
verbatim into benchmarks/wild/vendored (benchmarks/wild/vendor.py), converted to JAX and Keras at
fp32 and mixed and verified against the originals by `benchmarks/corpus.py --suite wild
--vendored`, with none of their distributions installed. The full corpus is `make bench-wild`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import load_script

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

REPO = Path(__file__).resolve().parents[2]
WILD = REPO / "benchmarks" / "wild"


def _slice_cases() -> list[dict]:
    cases = yaml.safe_load((WILD / "cases.yaml").read_text(encoding="utf-8"))["cases"]
    return [c for c in cases if c.get("ci")]


def test_the_slice_is_development_half_code_from_several_sources() -> None:
    cases = _slice_cases()
    vendor = load_script("wild_vendor", WILD / "vendor.py")
    packages = {item.package for item in vendor.load()}
    assert len({c["source"] for c in cases}) >= 3
    assert all(c["half"] == "dev" for c in cases)  # the blind half stays unseen
    assert {c["package"] for c in cases} <= packages


def test_the_vendored_files_are_the_listed_ones_with_their_licences() -> None:
    vendor = load_script("wild_vendor", WILD / "vendor.py")
    expected = {"README.md"}
    for item in vendor.load():
        expected |= {f"{item.package}/{rel}" for rel in (*item.files, *item.stubs, "LICENSE")}
        for rel in item.stubs:
            text = (vendor.ROOT / item.package / rel).read_text(encoding="utf-8")
            assert text == vendor.stub_text(item, rel)
        assert "licen" in (vendor.ROOT / item.package / "LICENSE").read_text(encoding="utf-8").lower()
    present = {
        str(p.relative_to(vendor.ROOT)) for p in vendor.ROOT.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }
    assert present == expected
    assert (vendor.ROOT / "README.md").read_text(encoding="utf-8") == vendor.readme(vendor.load())


@pytest.mark.slow
def test_the_vendored_slice_converts_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # --vendored puts the copies first on sys.path
    corpus = load_script("corpus", REPO / "benchmarks" / "corpus.py")
    out = tmp_path / "slice.json"
    before = set(sys.modules)
    try:
        code = corpus.main(
            ["--suite", "wild", "--vendored", "--targets", "jax,tf", "--policies", "fp32,mixed", "--json", str(out)]
        )
        # the files converted are the copies, whatever else is installed
        for case in _slice_cases():
            assert corpus.package_file(case["package"], case["file"]).is_relative_to(corpus.VENDORED)
    finally:
        for name in set(sys.modules) - before:
            if name.split(".")[0] in {"segment_anything", "pytorch_tabnet", "normflows"}:
                del sys.modules[name]
    assert code == 0
    outcomes = json.loads(out.read_text(encoding="utf-8"))["outcomes"]
    assert {o["case"] for o in outcomes} == {c["name"] for c in _slice_cases()}
    assert len(outcomes) == 4 * len(_slice_cases())
    failed = [f"{o['case']} {o['target']} {o['policy']}: {o['first_problem']}" for o in outcomes if not o["verified"]]
    assert not failed, failed
    assert all(o["max_rel_err"] <= o["tolerance"] for o in outcomes)
