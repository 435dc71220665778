"""A policy override that matches nothing is a warning, naming the closest names: a `class:`
override against the classes of the converted file (when it converts), a `path:` override
against the model's module paths (when verification runs the model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import cli, transpile
from tests.verify.test_verify_cli import ENTRY, MLP

POLICY = """name: careful
extends: mixed
overrides:
  - {class: Blok, compute: float32}
  - {class: Net, compute: float32}
  - {class: Linear, compute: float32}
  - {path: "blocks.0.fcc", compute: float32}
  - {path: "blocks.*.norm", compute: float32}
"""


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "careful.yaml"
    path.write_text(POLICY)
    return path


@pytest.mark.parametrize("to", ["torch", "jax", "tf"])
def test_a_class_override_that_matches_no_class_is_a_warning(tmp_path: Path, to: str) -> None:
    result = transpile(MLP, to=to, policy=str(_policy(tmp_path)), path="mlp.py")
    unmatched = [d for d in result.diagnostics if d.code == "policy-override-unmatched"]
    assert [(d.severity, d.message) for d in unmatched] == [
        ("warning", "policy 'careful': override class 'Blok' matches no class in this file (closest: Block)")
    ], [d.format() for d in result.diagnostics]


def test_matched_overrides_say_nothing(tmp_path: Path) -> None:
    policy = tmp_path / "ok.yaml"
    policy.write_text("name: ok\nextends: mixed\noverrides:\n  - {class: Block, compute: float32}\n")
    result = transpile(MLP, to="torch", policy=str(policy), path="mlp.py")
    assert not [d for d in result.diagnostics if d.code == "policy-override-unmatched"]


@pytest.mark.needs_torch
@pytest.mark.slow
def test_a_path_override_that_matches_no_module_is_a_warning_under_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    original = tmp_path / "mlp.py"
    original.write_text(MLP)
    monkeypatch.chdir(tmp_path)
    args = [str(original), "--to", "torch", "--policy", str(_policy(tmp_path)), "--verify", *ENTRY]
    cli.main([*args, "-o", str(tmp_path / "out.py"), "--report-json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    expected = "override path 'blocks.0.fcc' matches no module of the model (closest: blocks.0.fc"
    assert f"ptranspile: warning: policy 'careful': {expected}" in err, err
    assert "blocks.*.norm" not in err, err
    assert expected in (tmp_path / "r.json").read_text()
    cli.main([*args, "-q", "-o", str(tmp_path / "out.py")])  # -q: errors only; the report keeps the note
    assert "warning" not in capsys.readouterr().err
