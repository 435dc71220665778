"""benchmarks/memory.py and benchmarks/plots.py on tiny real inputs: the memory measurement of a
small torchvision model (in its own process, as the benchmark runs it) gives positive numbers,
and the charts come out as PNGs from JSON written by the real corpus runner and memory.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

TINY_CORPUS = """
cases:
  - name: torchvision squeezenet1_1
    package: torchvision
    file: models/squeezenet.py
    entry: squeezenet1_1(num_classes=10)
    inputs: ["float32[1,3,32,32]"]
    quick: true
"""


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _tiny_case(memory: ModuleType) -> object:
    return memory.Case("squeezenet1_1", "torchvision", "models/squeezenet.py", "squeezenet1_1(num_classes=10)", 32)


@pytest.fixture(scope="module")
def memory_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """memory.py's subprocess measurements of torch, converted JAX and converted Keras (fp32) on
    SqueezeNet at 32x32, batch 2."""
    memory = _load("memory")
    case = _tiny_case(memory)
    results = [
        memory.run_combination(case, framework, "fp32", 2, timeout=120) for framework in ("torch", "jax", "keras")
    ]
    path = tmp_path_factory.mktemp("memory") / "memory.json"
    payload = {"date": "2026-12-03", "batch": 2, "versions": memory.versions(), "measurements": []}
    payload["measurements"] = [asdict(r) for r in results]
    path.write_text(json.dumps(payload))
    return path


@pytest.mark.slow
def test_memory_measurement_in_a_fresh_process(memory_json: Path) -> None:
    results = json.loads(memory_json.read_text())["measurements"]
    for result in results:
        assert not result["error"], result["error"]
        assert {"param_bytes", "rss_before", "forward_rise", "process_peak", "method"} <= result.keys()
        for key in ("param_bytes", "rss_before", "forward_rise", "process_peak"):
            assert isinstance(result[key], int) and result[key] > 0, (result["framework"], key, result[key])
        assert result["process_peak"] >= result["rss_before"]
    torch_bytes, jax_bytes, keras_bytes = (r["param_bytes"] for r in results)
    assert keras_bytes == torch_bytes  # the same fp32 weights, as each side holds them
    assert 0 <= jax_bytes - torch_bytes <= 64  # nnx.state also holds the model's RNG key and counter
    assert [r["allocator_rise"] is not None for r in results[:2]] == [False, False]
    # Keras: TF's pool statistics, or, on TF builds without CPU statistics, the RSS rise, said so
    memory = _load("memory")
    assert results[2]["allocator_rise"] is not None or memory.RSS_ONLY in results[2]["method"]


class _NoCpuStatistics:
    """`tf.config.experimental` as TF builds without CPU allocator statistics behave."""

    def reset_memory_stats(self, device: str) -> None:
        raise ValueError(f"Cannot reset memory stats for device '{device}'")

    def get_memory_info(self, device: str) -> dict[str, int]:
        raise ValueError(f"Memory info not available for device '{device}'")


def _past_the_peak() -> int:
    """Bytes a forward must touch to raise this process's peak RSS by 64 MiB: the peak is a
    high-water mark, and an earlier test in the same worker may have left it above the RSS."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    gap = int(fields["VmHWM"].split()[0]) - int(fields["VmRSS"].split()[0])
    return max(0, gap) * 1024 + (64 << 20)


def _touch(size: int) -> object:
    """A forward that makes `size` bytes resident: a fresh anonymous mapping written page by page
    (a Python or NumPy buffer may reuse memory an earlier test freed but the allocator kept
    resident, and then the resident set does not rise)."""
    import mmap

    mapping = mmap.mmap(-1, size)
    for offset in range(0, size, mmap.PAGESIZE):
        mapping[offset] = 1
    return mapping


def test_without_tf_allocator_statistics_the_forward_is_measured_by_rss() -> None:
    """The fallback, forced on every machine: the reading still comes, by the resident set, and
    the row says that the allocator column is missing and why."""
    memory = _load("memory")
    size = _past_the_peak()
    readings = memory.measure_forward(lambda: _touch(size), memory.TfAllocator(_NoCpuStatistics()))
    assert readings["allocator_rise"] is None and memory.RSS_ONLY in readings["method"]
    assert readings["rise"] >= 60 << 20 and readings["peak"] >= readings["rss_before"] > 0
    row = memory.Measurement(
        "tiny", "keras", "fp32", 2, param_bytes=1 << 20, rss_before=readings["rss_before"],
        forward_rise=readings["rise"], first_forward_rise=readings["rise"], process_peak=readings["peak"],
        method=readings["method"],
    )  # fmt: skip
    table = memory.markdown([row], "header")
    assert "| tiny | keras | fp32 | 1.0 |" in table and "| n/a (RSS only) |" in table
    assert memory.RSS_ONLY in table  # the caption names the method


def test_measure_forward_sees_an_allocation() -> None:
    """The in-process reading: a forward that touches 64 MiB raises the peak by about that."""
    memory = _load("memory")
    size = _past_the_peak()
    readings = memory.measure_forward(lambda: _touch(size))
    assert readings["rise"] >= 60 << 20
    assert readings["peak"] >= readings["rss_before"] > 0


def _is_png(path: Path) -> bool:
    import matplotlib.image

    data = path.read_bytes()
    if not data.startswith(PNG_MAGIC) or len(data) < 2000:
        return False
    image = matplotlib.image.imread(path)
    return image.shape[0] > 100 and image.shape[1] > 100


@pytest.mark.slow
def test_plots_from_real_corpus_and_memory_json(tmp_path: Path, memory_json: Path) -> None:
    pytest.importorskip("matplotlib")  # in the dev extra only: the charts are for the docs
    cases = tmp_path / "cases.yaml"
    cases.write_text(TINY_CORPUS)
    corpus_json = tmp_path / "corpus.json"
    corpus = _load("corpus")
    argv = ["--cases-file", str(cases), "--targets", "jax", "--policies", "mixed", "--time", "2"]
    assert corpus.main([*argv, "--json", str(corpus_json)]) == 0
    outcomes = json.loads(corpus_json.read_text())["outcomes"]
    assert all(o["verified"] and o["forward_original_s"] for o in outcomes), outcomes

    plots = _load("plots")
    out = tmp_path / "img"
    assert plots.main(["--corpus", str(corpus_json), "--memory", str(memory_json), "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["corpus_forward_time.png", "corpus_rel_err.png", "memory.png"]
    for path in out.iterdir():
        assert _is_png(path), path
