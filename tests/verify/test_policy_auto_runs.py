"""`--policy auto` runs each set-up once: a candidate whose layers in float32 are those of a run
already made (the plain `mixed` run, which the bisection reaches again once every other segment
passed) reuses that run's verdict, and the command does not verify the written code again after
the search's final check verified that very code. The final check repeats a trial's set-up only
to collect the per-layer report the trials leave out."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from precision_transpiler import cli
from precision_transpiler.verify import runner, search
from precision_transpiler.verify.result import LayerRecord, VerificationResult
from tests.verify.test_verify_cli import ENTRY, MLP


def _fp32_paths(policy: str | None) -> frozenset[str]:
    """The layers a candidate policy keeps in float32 (none for the plain base policy)."""
    if policy is None or not policy.endswith(".yaml"):
        return frozenset()
    data = yaml.safe_load(Path(policy).read_text(encoding="utf-8"))
    return frozenset(o["path"] for o in data.get("overrides") or [])


@pytest.mark.needs_torch
@pytest.mark.slow
def test_policy_auto_makes_no_run_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    original = tmp_path / "mlp.py"
    original.write_text(MLP)
    runs: list[tuple[tuple[frozenset[str], bool], float]] = []
    real = runner.verify_files

    def counted(original, converted, options, **kwargs):  # type: ignore[no-untyped-def]
        result = real(original, converted, options, **kwargs)
        runs.append(((_fp32_paths(options.policy), options.layers), result.max_rel_err))
        return result

    monkeypatch.setattr(runner, "verify_files", counted)
    monkeypatch.setattr(search, "verify_files", counted)
    monkeypatch.chdir(tmp_path)
    # the mixed error, then a tolerance a third of it: the bisection has to work
    assert cli.main([str(original), "--to", "torch", "--policy", "mixed", "--verify", "-q", *ENTRY]) == 0
    tight = runs.pop()[1] / 3
    out = tmp_path / "mlp_auto.py"
    args = [str(original), "--to", "torch", "--policy", "auto", "--tolerance", f"{tight:.3g}", "-o", str(out), *ENTRY]
    assert cli.main(args) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    set_ups = [paths for paths, _ in runs]
    assert len(set_ups) > 2, err
    repeated = [paths for i, paths in enumerate(set_ups) if paths in set_ups[:i]]
    assert not repeated, f"{len(repeated)} of {len(set_ups)} runs repeated a set-up: {err}"
    assert f"{len(set_ups)} verification runs" in err, err


def _result(passed: bool, paths: list[str]) -> VerificationResult:
    layers = [
        LayerRecord(path, "Linear", i, 1, [2, 4], 0.0, 0.0, None, None, False, False, None, None)
        for i, path in enumerate(paths)
    ]
    return VerificationResult(
        passed, "torch", "torch", "p", "a.py", "b.py", "Net()", [], 0, 0.0, 0.0 if passed else 1.0, 1.0, 1.0, 0,
        {"max_rel_err": 0.5}, [] if passed else ["too far"], [], layers,
    )  # fmt: skip


def test_the_bisection_does_not_rerun_the_base_set_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Low precision fails only with every layer low: run 1 (plain mixed) fails, each first half
    then passes, and each second half would be plain mixed again: its verdict is run 1's."""
    original = tmp_path / "mlp.py"
    original.write_text(MLP)
    layers = ["a", "b", "c", "d"]
    made: list[tuple[frozenset[str], bool]] = []

    def fake(original, converted, options, **kwargs):  # type: ignore[no-untyped-def]
        fp32 = _fp32_paths(options.policy)
        made.append((fp32, options.layers))
        return _result(bool(fp32), layers if options.layers else [])

    monkeypatch.setattr(search, "verify_files", fake)
    log: list[str] = []
    options = runner.VerifyOptions(entry="Net()", inputs=["float32[8,32]"])
    found = search.search_policy(original, options, to="torch", log=log.append, policy_out=tmp_path / "p.yaml")
    assert found.fp32_paths == ["d"] and found.low_paths == ["a", "b", "c"]
    assert len(made) == len(set(made)) == found.runs == 4, (made, log)
    assert sum("not run again" in line for line in log) == 2, log
    assert "after 4 verification runs" in (tmp_path / "p.yaml").read_text()
