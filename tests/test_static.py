"""Transpiling is static: it never imports the frameworks nor executes the user's code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers import REPO

BLOCKER = textwrap.dedent(
    """
    import sys

    class _Block:
        # Any attempt to import a framework fails loudly.
        BLOCKED = ("torch", "jax", "jaxlib", "flax", "tensorflow", "keras", "numpy", "ml_dtypes")

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.BLOCKED:
                raise ImportError(f"blocked import of {name}")
            return None

    sys.meta_path.insert(0, _Block())
    """
)


def test_transpile_imports_no_framework_and_runs_no_user_code(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    user_code = textwrap.dedent(
        f"""
        import torch
        open({str(marker)!r}, "w").write("user code ran")
        x = torch.zeros(3).half()
        """
    )
    (tmp_path / "model.py").write_text(user_code)
    script = BLOCKER + textwrap.dedent(
        f"""
        from precision_transpiler import transpile_paths
        from precision_transpiler.cli import main
        for target in ("jax", "tf", "numpy", "torch"):
            (result,) = transpile_paths([{str(tmp_path / "model.py")!r}], to=target)
            assert not result.errors, result.errors
        assert main([{str(tmp_path / "model.py")!r}, "--to", "jax", "--check"]) == 1
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in _Block.BLOCKED)
        print("loaded:", loaded)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "loaded: []" in proc.stdout
    assert not marker.exists()
