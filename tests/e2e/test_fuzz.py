"""benchmarks/fuzz.py: the reliability promises of the command (no crash, no traceback, no
internal error, inputs kept, a verdict for every file, output independent of PYTHONHASHSEED) on
mutated real model code, and the harness's own checks, which must flag what they look for."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _fuzz() -> types.ModuleType:
    name = "bench_fuzz"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "fuzz.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.mark.slow
def test_a_small_fuzz_run_finds_nothing(tmp_path: Path) -> None:
    fuzz = _fuzz()
    if not fuzz.collect_sources(1):
        pytest.skip("no installed package with model code (torchvision, transformers, torch)")
    # Seed 40 with 60-file batches: an --in-place batch to jax and an -o batch to tf under
    # --policy mixed (stdin mode, one process per file, is left to the full run).
    lines: list[str] = []
    options = fuzz.Options(count=120, seed=40, batch_size=60, results=tmp_path / "results", log=lines.append)
    counters = fuzz.fuzz(options)
    assert counters.batches == 2 and counters.files == 120, lines
    assert counters.violations() == 0, "\n".join([*lines, counters.table()])
    assert (tmp_path / "results" / "table.md").read_text().startswith("| files | batches |")


def test_the_mutations_are_reproducible_and_varied() -> None:
    fuzz = _fuzz()
    sources = [("pkg/model.py", b"import torch\n\n\nclass M(nn.Module):\n    def forward(self, x):\n" * 60)]
    first = [fuzz.Mutator(sources, 3).make(i) for i in range(200)]
    again = [fuzz.Mutator(sources, 3).make(i) for i in range(200)]
    assert first == again
    assert len({data for data, _ in first}) > 150
    hows = " ".join(how for _, how in first)
    for kind in ("edit_token", "delete_lines", "nested", "bom", "crlf", "latin1_header", "empty"):
        assert kind in hows, kind


def test_the_checks_flag_each_kind_of_violation() -> None:
    fuzz = _fuzz()
    spec = fuzz.BatchSpec("output", "jax", None)
    ok_report = {"files": [{"path": "/b/a.py", "diagnostics": [], "changed": True}]}
    clean = fuzz.Run(0, b"", "", {"a.py": "1"}, ok_report)
    assert fuzz._problems(spec, Path("/b"), clean, ["a.py"]) == {}
    crash = fuzz.Run(-11, b"", "", {}, None)
    assert "crash" in fuzz._problems(spec, Path("/b"), crash, ["a.py"])
    trace = fuzz.Run(2, b"", "Traceback (most recent call last):\n", {"a.py": "1"}, ok_report)
    assert "traceback" in fuzz._problems(spec, Path("/b"), trace, ["a.py"])
    internal = fuzz.Run(2, b"", "ptranspile: error: internal error: KeyError: 'x'\n", {"a.py": "1"}, ok_report)
    assert fuzz._problems(spec, Path("/b"), internal, ["a.py"])["internal"]
    # b.py has no verdict; a.py has an error in the report but no line on stderr
    error = {"severity": "error", "message": "syntax error"}
    quiet = {"files": [{"path": "/b/a.py", "diagnostics": [error], "changed": False}]}
    verdicts = fuzz._problems(spec, Path("/b"), fuzz.Run(2, b"", "", {}, quiet), ["a.py", "b.py"])["verdict"]
    assert [v.split(":")[0] for v in verdicts] == ["a.py", "b.py"]
    other = fuzz.Run(0, b"", "", {"a.py": "2"}, ok_report)
    assert fuzz._differences(clean, other) == ["a.py"]
    assert fuzz._differences(clean, clean) == []
