"""The test configuration itself (tests/conftest.py): a missing framework skips the tests that need
it (marked `needs_torch`/`needs_jax`/`needs_tf`, or found missing on import), with the reason, and
nothing else is turned into a skip; the browser test is skipped unless
asked for, and under CI=true it runs and fails without Chromium. Each check runs pytest in a
subprocess, as `make test` would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

AT_IMPORT = """
import torch


def test_uses_torch():
    assert torch
"""

AT_RUN_TIME = """
import pytest


def test_imports_transformers_lazily():
    import transformers  # noqa: F401


def test_reads_a_file_of_a_missing_package():
    from tests.real_models import package_file

    package_file("transformers", "models/bert/modeling_bert.py")


def test_a_missing_module_that_is_no_framework_fails():
    import no_such_module_anywhere  # noqa: F401


def test_an_import_error_of_an_installed_framework_fails():
    raise ImportError("blocked by the test", name="numpy")
"""


def _pytest(args: list[str], *, block: tuple[str, ...] = (), env: dict[str, str] | None = None) -> str:
    """Run pytest with tests/conftest.py as a plugin, the `block` packages made unimportable."""
    script = (
        "import sys\n"
        + "".join(f"sys.modules[{name!r}] = None\n" for name in block)
        + "import pytest\n"
        + f"sys.exit(pytest.main({['-p', 'no:cacheprovider', '-q', '-rsf', *args]!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
    )
    return done.stdout + done.stderr


def test_missing_frameworks_skip_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "test_at_import.py").write_text(AT_IMPORT)
    (tmp_path / "test_at_run_time.py").write_text(AT_RUN_TIME)
    out = _pytest(["-p", "tests.conftest", str(tmp_path)], block=("torch", "transformers"))
    assert "2 failed, 3 skipped" in out, out
    assert "needs torch, which is not installed here (pip install torch)" in out
    assert "SKIPPED [2] tests/conftest.py" in out and "needs transformers, which is not installed here" in out
    assert "FAILED" in out and "no_such_module_anywhere" in out and "blocked by the test" in out
    assert "error" not in out.splitlines()[-1], out  # collection did not break


MARKED = """
import pytest

pytestmark = pytest.mark.needs_jax


def test_marked_for_jax():
    pass


@pytest.mark.needs_torch
def test_marked_for_torch_too():
    pass
"""


def test_a_needs_marker_skips_when_its_framework_is_missing(tmp_path: Path) -> None:
    (tmp_path / "test_marked.py").write_text(MARKED)
    out = _pytest(["-p", "tests.conftest", str(tmp_path)], block=("jax",))
    assert "2 skipped" in out, out
    assert "needs jax, which is not installed here (pip install jax)" in out, out
    assert "error" not in out.splitlines()[-1], out


def test_the_browser_test_runs_only_when_asked_and_then_needs_chromium() -> None:
    target = "tests/verify/test_verify_render.py::test_html_report_in_headless_chromium"
    quiet = {"CI": "", "PTRANSPILE_BROWSER_TESTS": ""}
    out = _pytest([target], env=quiet)
    assert "1 skipped" in out and "make test-browser" in out, out
    # CI=true: the test runs; without Chromium (none on this PATH) it fails and says why
    no_chromium = {"CI": "true", "PTRANSPILE_CHROMIUM": "", "PATH": str(Path(sys.executable).parent)}
    out = _pytest([target], env=no_chromium)
    assert "1 failed" in out and "Chromium is required" in out, out
