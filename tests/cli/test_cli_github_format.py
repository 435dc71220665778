"""`--output-format github`: diagnostics as GitHub Actions workflow commands (annotations)."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler.diagnostics import Diagnostic
from tests.helpers import run_cli

SRC = "import torch\ny = torch.digamma(x).half()\nz = torch.tensor([1], dtype=torch.int64)\n"


def test_unsupported_warning_and_would_change_are_annotations(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SRC)
    r = run_cli("m.py", "--to", "jax", "--check", "--output-format", "github", cwd=tmp_path)
    assert r.code == 1, r.err
    lines = r.out.splitlines()
    assert "::error file=m.py,line=2,col=5,title=ptranspile unsupported::torch.digamma has no mapping to jax" in lines
    warning = [line for line in lines if line.startswith("::warning file=m.py,line=3,")]
    assert warning and ",title=ptranspile warning::JAX uses int32 for int64" in warning[0], r.out
    assert "::error file=m.py,title=ptranspile check::would change" in lines
    assert all(line.startswith("::") for line in lines), r.out
    assert "m.py:2:5: unsupported" not in r.err  # not said twice


def test_notes_errors_and_strict(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import torch\nx = (\n")
    (tmp_path / "m.py").write_text("import torch\ny = torch.digamma(x)\n")
    r = run_cli("bad.py", "m.py", "--to", "jax", "--check", "--strict", "--output-format", "github", cwd=tmp_path)
    assert r.code == 2
    assert "::error file=bad.py,line=2,col=5,title=ptranspile error::syntax error: '(' was never closed" in r.out
    assert "::error file=m.py,line=2,col=5,title=ptranspile unsupported::torch.digamma has no mapping to jax" in r.out
    assert "ptranspile: 2 files:" in r.err  # the summary stays a plain line on stderr


def test_github_format_needs_stdout_free_of_code(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SRC)
    r = run_cli("m.py", "--to", "jax", "--output-format", "github", cwd=tmp_path)
    assert r.code == 2 and r.out == ""
    assert "--output-format github prints annotations on stdout" in r.err
    r = run_cli("m.py", "--to", "jax", "--output-format", "json", cwd=tmp_path)
    assert r.code == 2 and "invalid choice: 'json'" in r.err
    # text (the default) is the compiler format on stderr
    r = run_cli("m.py", "--to", "jax", "--output-format", "text", "-o", "out.py", cwd=tmp_path)
    assert r.code == 1 and "m.py:2:5: unsupported: torch.digamma has no mapping to jax" in r.err


def test_escaping() -> None:
    d = Diagnostic("dir,x/a:b.py", 3, 7, "note", "some-code", "50% done\nsecond line, with: colon")
    assert d.format_github() == (
        "::notice file=dir%2Cx/a%3Ab.py,line=3,col=7,title=ptranspile note::50%25 done%0Asecond line, with: colon"
    )
