"""Test configuration: what every test process needs before the tests import anything.

- torchvision's work-around (tests/torchvision_shim/sitecustomize.py, the one copy): installed
  first, before any test module imports torchvision or transformers.
- One compute thread per framework in each xdist worker (`make test` runs `pytest -n 2`): two
  workers on two cores, each running torch, TensorFlow and XLA thread pools, stall each other
  (benchmarks/threads.py measured a small torch ViT forward at 122 ms with 2 threads, 0.74 ms
  with 1). Set as environment variables, so subprocesses the tests start inherit them; a value
  already set in the environment wins.
- A framework that is not installed skips the tests that need it, with the reason, instead of
  breaking collection. Test modules say what they run with `pytestmark`:
  `@pytest.mark.needs_torch` (torch), `needs_jax` (jax, jaxlib and flax), `needs_tf` (tensorflow
  and keras); a marked test is skipped at collection when one of those packages is missing
  (`pytest_collection_modifyitems`). The safety net behind the markers: a test module whose
  import fails on a missing framework is skipped as a whole, and a test that meets one while it
  runs (a lazy `import torch`, or `tests.real_models.package_file("transformers", ...)`) is
  skipped. Only a package that is really missing counts: an ImportError for an installed one (a
  broken build, a test's own import blocker) still fails.
- `@pytest.mark.browser` tests (a real headless Chromium) run only when asked for:
  PTRANSPILE_BROWSER_TESTS=1 (`make test-browser`) or CI=true; then a missing Chromium fails them.
- `@pytest.mark.slow` tests (over ~5 s on a 2-core machine) are left out by `make test-fast`
  (`-m "not slow"`); `make test` runs everything.
- `PTRANSPILE_COMPUTE_DTYPE=bfloat16` (unless set): generated `--device auto` code decides its
  compute dtype by the machine, float32 on a CPU without native bf16 kernels; the tests of
  low-precision behaviour (bf16 layers, mixed-precision errors) must exercise bf16 on every CPU,
  so the suite decides for the machine. tests/runtime/test_device_auto.py clears it to test the decision.
- `converted`: conversions of real model files that several tests repeat (torchvision's
  resnet.py to JAX takes seconds, transformers' BERT more), done once per run and shared.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests.torchvision_shim.sitecustomize import install as _install_torchvision_workaround

_install_torchvision_workaround()

#: top-level packages whose absence skips a test; the value is what to install
FRAMEWORKS = {
    "torch": "torch",
    "torchvision": "torchvision",
    "transformers": "transformers",
    "jax": "jax",
    "jaxlib": "jaxlib",
    "flax": "flax",
    "tensorflow": "tensorflow-cpu",
    "keras": "keras",
    "safetensors": "safetensors",
    "ml_dtypes": "ml_dtypes",
    "numpy": "numpy",
    "hypothesis": "hypothesis",
    "matplotlib": "matplotlib",
}


def _limit_threads_in_xdist_workers() -> None:
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    threads = str(max(1, (os.cpu_count() or 1) // max(1, int(workers))))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, threads)
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", threads)
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", threads)
    if "intra_op_parallelism_threads" not in os.environ.get("XLA_FLAGS", ""):
        flags = f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()


_limit_threads_in_xdist_workers()
os.environ.setdefault("PTRANSPILE_COMPUTE_DTYPE", "bfloat16")
# verification prints progress lines once it has run a few seconds: on a busy machine that would
# add lines to the stderr the tests compare (tests/verify/test_verify_progress.py sets its own)
os.environ.setdefault("PTRANSPILE_PROGRESS_AFTER", "3600")


# ------------------------------------------------------------------------ missing frameworks


def _not_installed(name: str) -> bool:
    """Whether the top-level package `name` is absent (not merely failing to import)."""
    if name in sys.modules and sys.modules[name] is not None:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except (ValueError, ImportError):  # `sys.modules[name] = None`: blocked, as good as absent
        return True


def missing_framework(exc: BaseException) -> str | None:
    """The framework whose absence caused `exc` (a ModuleNotFoundError naming it), else None."""
    while exc is not None:
        if isinstance(exc, ImportError) and exc.name:
            top = exc.name.split(".")[0]
            if top in FRAMEWORKS and _not_installed(top):
                return top
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return None


def _skip_reason(name: str) -> str:
    return f"needs {name}, which is not installed here (pip install {FRAMEWORKS[name]})"


class _FrameworkModule(pytest.Module):
    """A test module that skips itself when importing it fails on a missing framework."""

    def _getobj(self) -> Any:
        try:
            return super()._getobj()
        except pytest.Collector.CollectError as error:
            cause = error.__cause__ or error.__context__
            missing = missing_framework(cause) if cause is not None else None
            if missing is None:
                raise
            raise pytest.skip.Exception(_skip_reason(missing), allow_module_level=True) from None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Any, parent: pytest.Collector) -> pytest.Module | None:
    if module_path.name == "conftest.py":
        return None
    return _FrameworkModule.from_parent(parent, path=module_path)


def _skipping_missing_frameworks() -> Generator[None, Any, Any]:
    try:
        return (yield)
    except ImportError as exc:
        missing = missing_framework(exc)
        if missing is None:
            raise
        pytest.skip(_skip_reason(missing))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _skipping_missing_frameworks())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _skipping_missing_frameworks())


# ------------------------------------------------------------------------ browser tests


def browser_tests_requested() -> bool:
    """`make test-browser` sets PTRANSPILE_BROWSER_TESTS=1; CI (CI=true) always runs them."""
    return os.environ.get("PTRANSPILE_BROWSER_TESTS", "") == "1" or os.environ.get("CI", "").lower() == "true"


BROWSER_SKIP = (
    "browser test (headless Chromium): run `make test-browser`, or set PTRANSPILE_BROWSER_TESTS=1 "
    "with Chromium installed (CI=true runs it)"
)


#: `@pytest.mark.needs_<name>` -> the packages it needs (each must be installed, else a skip)
NEEDS = {
    "needs_torch": ("torch",),
    "needs_jax": ("jax", "jaxlib", "flax"),
    "needs_tf": ("tensorflow", "keras"),
}


def _missing_for(item: pytest.Item) -> str | None:
    """The first package a `needs_*` marker of `item` names that is not installed, else None."""
    for marker, packages in NEEDS.items():
        if item.get_closest_marker(marker) is not None:
            for name in packages:
                if _not_installed(name):
                    return name
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    browser_skip = None if browser_tests_requested() else pytest.mark.skip(reason=BROWSER_SKIP)
    for item in items:
        missing = _missing_for(item)
        if missing is not None:
            item.add_marker(pytest.mark.skip(reason=_skip_reason(missing)))
        elif browser_skip is not None and item.get_closest_marker("browser") is not None:
            item.add_marker(browser_skip)


# ------------------------------------------------------------------------ shared conversions


class ConversionCache:
    """`transpile()` of a model file, once per test run: kept in memory by each process and
    pickled under the run's temporary folder, so that the other xdist worker loads the result
    instead of converting the file again. Transpiling is deterministic, so a shared result is
    the result each test would have computed; tests must not modify it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._memory: dict[str, Any] = {}

    def __call__(self, file: Path, *, to: str, policy: str = "fp32", path: str | None = None, **options: Any) -> Any:
        """`transpile(file's text, to=to, policy=policy, path=path, **options)`; `path` defaults
        to the file's own path (pass "<string>" for a conversion without one)."""
        from precision_transpiler import transpile

        path = str(file) if path is None else path
        key = hashlib.sha256(repr((str(file), to, policy, path, sorted(options.items()))).encode()).hexdigest()[:24]
        if key in self._memory:
            return self._memory[key]
        stored = self.folder / f"{key}.pickle"
        result = None
        if stored.is_file():
            try:
                result = pickle.loads(stored.read_bytes())
            except Exception:  # the other worker's file, half written by an older run: convert again
                result = None
        if result is None:
            result = transpile(file.read_text(encoding="utf-8"), to=to, policy=policy, path=path, **options)
            partial = stored.with_name(f"{stored.name}.{os.getpid()}.tmp")
            partial.write_bytes(pickle.dumps(result))
            os.replace(partial, stored)  # atomic: a reader sees all of it or nothing
        self._memory[key] = result
        return result


@pytest.fixture(scope="session")
def converted(tmp_path_factory: pytest.TempPathFactory) -> ConversionCache:
    """Shared conversions (see ConversionCache). Under xdist the workers' temporary folders sit
    in one folder of the run, which holds the cache; a plain run keeps it in its own."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "ptranspile-conversions"
    folder.mkdir(exist_ok=True)
    return ConversionCache(folder)
