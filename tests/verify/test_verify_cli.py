"""The verification command line, end to end in subprocesses: `ptranspile verify`, `--verify`,
`--policy auto`, `--emit-test`, reports, exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import run_cli, torchvision_env
from tests.real_models import package_file

pytestmark = pytest.mark.needs_torch

MLP = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x + torch.tanh(self.fc(x)))


class Net(nn.Module):
    def __init__(self, dim=64, depth=4):
        super().__init__()
        self.stem = nn.Linear(32, dim)
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))
"""
ENTRY = ["--entry", "Net()", "--input", "float32[8,32]"]


def _model(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.py"
    path.write_text(MLP)
    return path


@pytest.mark.slow
def test_convert_and_verify_a_real_resnet_writes_reports(tmp_path: Path) -> None:
    original = package_file("torchvision", "models/resnet.py")
    out, report, page = tmp_path / "resnet_mixed.py", tmp_path / "r.json", tmp_path / "r.html"
    run = run_cli(
        str(original), "--to", "torch", "--policy", "mixed", "-o", str(out), "--verify",
        "--entry", "resnet18(num_classes=10)", "--input", "float32[2,3,64,64]", "--calibrate-bn",
        "--report-json", str(report), "--report-html", str(page), env=torchvision_env(),
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "PASSED" in run.err
    data = json.loads(report.read_text())
    assert data["passed"] is True and data["policy"] == "mixed" and data["source"] == "torch"
    assert 0 < data["max_rel_err"] <= data["tolerance"]["max_rel_err"]
    assert data["files"][0]["changed"] is True  # the conversion's own report is in the same file
    assert {layer["path"] for layer in data["layers"]} >= {"conv1", "layer1.0.conv1", "fc"}
    assert "report-data" in page.read_text() and out.is_file()


@pytest.mark.slow
def test_verify_subcommand_fails_with_exit_1_and_names_the_layer(tmp_path: Path) -> None:
    original = _model(tmp_path)
    converted = tmp_path / "mlp_fp32.py"
    converted.write_text(MLP.replace("nn.LayerNorm(dim)", "nn.LayerNorm(dim, eps=0.5)"))
    converted.write_text("# converted by hand\n" + converted.read_text())  # its lines are one further down
    report, page = tmp_path / "r.json", tmp_path / "r.html"
    run = run_cli(
        "verify", str(original), str(converted), *ENTRY, "--report-json", str(report), "--report-html", str(page)
    )
    assert run.code == 1, run.err
    assert "FAILED" in run.err
    data = json.loads(report.read_text())
    assert data["passed"] is False and data["first_bad_layer"] == "blocks.0.norm"
    line = MLP.splitlines().index("        self.norm = nn.LayerNorm(dim)") + 1
    # the user's own line first, the converted file's beside it
    assert data["first_bad_source"] == f"{original}:{line}"
    assert data["first_bad_converted_source"] == f"{converted}:{line + 1}"
    norm = next(layer for layer in data["layers"] if layer["path"] == "blocks.0.norm")
    assert (norm["source"], norm["converted_source"]) == (f"{original}:{line}", f"{converted}:{line + 1}")
    assert f"{original}:{line} (converted {converted}:{line + 1})" in run.err
    assert f"{original}:{line}" in page.read_text() and f"{converted}:{line + 1}" in page.read_text()
    ok = run_cli("verify", str(original), str(original), *ENTRY, "-q")
    assert ok.code == 0 and ok.err.count("\n") == 1 and "PASSED" in ok.err, ok.err  # -q: the verdict only


@pytest.mark.slow
def test_usage_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    original = _model(tmp_path)
    cases = [
        (["verify", str(original), str(original), "--input", "float32[8,32]"], "--entry"),
        (["verify", str(original), str(original), "--entry", "Net()"], "--input"),
        (["verify", str(original), str(original), "--entry", "Net()", "--input", "float[8]"], "unknown dtype"),
        (["verify", str(original), str(tmp_path / "nope.py"), *ENTRY], "no such file"),
        (["verify", str(original), str(original), "--entry", "Nett()", "--input", "float32[8,32]"], "NameError"),
        ([str(original), str(original), "--to", "torch", "--verify", *ENTRY], "exactly one model file"),
        ([str(original), "--to", "torch", "--verify", "--in-place", *ENTRY], "-o OUT"),
        (["verify", str(original), str(original), *ENTRY, "--mixed-factor", "0.5"], "--mixed-factor"),
    ]
    for args, expected in cases:
        run = run_cli(*args)
        assert run.code == 2, (args, run.err)
        lines = [ln for ln in run.err.splitlines() if ln.startswith("ptranspile: error")]
        assert len(lines) == 1 and expected in lines[0], (args, run.err)
        assert "Traceback" not in run.err


@pytest.mark.slow
def test_policy_auto_writes_a_policy_that_the_normal_flags_use(tmp_path: Path) -> None:
    original = _model(tmp_path)
    mixed = run_cli(str(original), "--to", "torch", "--policy", "mixed", "--verify", *ENTRY, "--report-json",
                    str(tmp_path / "m.json"))  # fmt: skip
    assert mixed.code == 0, mixed.err
    tight = json.loads((tmp_path / "m.json").read_text())["max_rel_err"] / 3
    policy = tmp_path / "found.yaml"
    out = tmp_path / "mlp_auto.py"
    run = run_cli(
        str(original), "--to", "torch", "--policy", "auto", "--tolerance", f"{tight:.3g}", "-o", str(out),
        "--policy-out", str(policy), *ENTRY,
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "verification runs" in run.err
    data = yaml.safe_load(policy.read_text())
    assert data["extends"] == "mixed" and data["overrides"], data
    assert all(o["compute"] == "float32" for o in data["overrides"])
    again = run_cli(
        str(original), "--to", "torch", "--policy", str(policy), "-o", str(tmp_path / "again.py"), "--verify",
        "--tolerance", f"{tight:.3g}", *ENTRY,
    )  # fmt: skip
    assert again.code == 0, again.err
    assert (tmp_path / "again.py").read_text() == out.read_text()


@pytest.mark.slow
def test_emit_test_writes_a_pytest_file_that_passes_then_catches_a_regression(tmp_path: Path) -> None:
    original = _model(tmp_path)
    out = tmp_path / "mlp_mixed.py"
    test_file = tmp_path / "tests" / "test_mlp_equivalence.py"
    test_file.parent.mkdir()
    run = run_cli(
        str(original), "--to", "torch", "--policy", "mixed", "-o", str(out), *ENTRY, "--emit-test", str(test_file)
    )
    assert run.code == 0, run.err
    text = test_file.read_text()
    assert "verify_files" in text and "TOLERANCE = " in text and "../mlp.py" in text
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    passed = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    out.write_text(out.read_text().replace("torch.tanh(", "torch.sigmoid("))  # a numeric regression
    failed = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert failed.returncode == 1 and "relative error" in failed.stdout, failed.stdout


@pytest.mark.slow
def test_an_emitted_test_finds_its_policy_file_wherever_pytest_runs(tmp_path: Path) -> None:
    """A policy file is named relative to the test, as the model files are: pytest run from
    another folder (the repository root, CI) still finds it."""
    original = _model(tmp_path)
    policy = tmp_path / "mlp.policy.yaml"
    policy.write_text("extends: mixed\n")
    out = tmp_path / "mlp_mixed.py"
    test_file = tmp_path / "tests" / "test_mlp_equivalence.py"
    test_file.parent.mkdir()
    run = run_cli(
        str(original), "--to", "torch", "--policy", str(policy), "-o", str(out), *ENTRY, "--emit-test", str(test_file)
    )
    assert run.code == 0, run.err
    assert "policy=str(HERE / '../mlp.policy.yaml')" in test_file.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    passed = subprocess.run(cmd, capture_output=True, text=True, cwd=elsewhere, timeout=300)
    assert passed.returncode == 0, passed.stdout + passed.stderr


@pytest.mark.slow
def test_thresholds_come_from_pyproject_and_flags_override_them(tmp_path: Path) -> None:
    _model(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.ptranspile]\nto = 'torch'\ntolerance = 1e-9\nseed = 3\n")
    report = tmp_path / "r.json"
    strict = run_cli("mlp.py", "--policy", "mixed", "--verify", *ENTRY, "--report-json", str(report), cwd=tmp_path)
    assert strict.code == 1, strict.err
    data = json.loads(report.read_text())
    assert data["tolerance"]["max_rel_err"] == 1e-9 and data["seed"] == 3
    assert data["tolerance"]["derived"] > 1e-9  # the rule's value is still reported
    loose = run_cli("mlp.py", "--policy", "mixed", "--verify", *ENTRY, "--tolerance", "0.5", cwd=tmp_path)
    assert loose.code == 0, loose.err
    (tmp_path / "pyproject.toml").write_text("[tool.ptranspile]\nmixed-factor = 'two'\n")
    bad = run_cli("mlp.py", "--to", "torch", "--verify", *ENTRY, cwd=tmp_path)
    assert bad.code == 2 and "'mixed-factor' has the wrong type" in bad.err


@pytest.mark.slow
def test_time_reports_forward_speed_side_by_side(tmp_path: Path) -> None:
    """`--time N`: medians of one forward of the original and of the converted model (jax.jit
    here), and under a mixed policy of torch autocast, in the terminal summary and the JSON."""
    original = _model(tmp_path)
    report = tmp_path / "r.json"
    run = run_cli(
        str(original), "--to", "jax", "--policy", "mixed", "-o", str(tmp_path / "mlp_jax.py"), "--verify",
        *ENTRY, "--time", "3", "--no-layers", "--report-json", str(report),
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "forward       original" in run.err and "original's own mixed precision" in run.err
    timing = json.loads(report.read_text())["timing"]
    assert timing["repeat"] == 3 and all(timing[k] > 0 for k in ("original", "converted", "reference"))


UNREACHED = """

def unreached(x):
    # not reached from Net(): only --prune-to-entry leaves it out
    return torch.sigmoid(x) * 2
"""


@pytest.mark.slow
def test_verify_does_not_change_what_o_writes(tmp_path: Path) -> None:
    """`--verify --entry` observes the conversion: `-o` gets the same bytes as without `--verify`;
    pruning to the entry is `--prune-to-entry`, with or without `--verify`."""
    original = tmp_path / "mlp.py"
    original.write_text(MLP.replace("\n\nclass Block", UNREACHED + "\n\nclass Block", 1))
    plain, verified = tmp_path / "plain.py", tmp_path / "verified.py"
    assert run_cli(str(original), "--to", "torch", "-o", str(plain)).code == 0
    run = run_cli(str(original), "--to", "torch", "-o", str(verified), "--verify", *ENTRY)
    assert run.code == 0, run.err
    assert "def unreached" in plain.read_text() and verified.read_bytes() == plain.read_bytes()
    pruned, pruned_verified = tmp_path / "pruned.py", tmp_path / "pruned_verified.py"
    assert run_cli(str(original), "--to", "torch", "-o", str(pruned), "--entry", "Net()", "--prune-to-entry").code == 0
    run = run_cli(str(original), "--to", "torch", "-o", str(pruned_verified), "--verify", *ENTRY, "--prune-to-entry")
    assert run.code == 0, run.err
    assert "def unreached" not in pruned.read_text() and pruned_verified.read_bytes() == pruned.read_bytes()


@pytest.mark.slow
def test_layer_sources_name_the_original_file_and_the_converted_one(tmp_path: Path) -> None:
    """A torch model converted to Flax: each layer's `source` is the line of the torch file that
    creates it, `converted_source` the line in the written conversion."""
    original = tmp_path / "mlp.py"
    original.write_text(MLP.replace("\n\nclass Block", UNREACHED + "\n\nclass Block", 1))
    out, report = tmp_path / "mlp_jax.py", tmp_path / "r.json"
    run = run_cli(str(original), "--to", "jax", "-o", str(out), "--verify", *ENTRY, "--report-json", str(report))
    assert run.code == 0, run.err
    layers = {layer["path"]: layer for layer in json.loads(report.read_text())["layers"]}
    written = out.read_text().splitlines()
    for path, code in (("blocks.0.norm", "self.norm = nn.LayerNorm(dim)"), ("stem", "self.stem = nn.Linear(32, dim)")):
        line = original.read_text().splitlines().index(f"        {code}") + 1
        assert layers[path]["source"] == f"{original}:{line}", layers[path]
        where, _, converted_line = layers[path]["converted_source"].rpartition(":")
        assert where == str(out) and f"self.{path.rsplit('.', 1)[-1]} = " in written[int(converted_line) - 1]


@pytest.mark.slow
def test_verification_that_cannot_run_writes_nothing_and_says_one_line(tmp_path: Path) -> None:
    """A wrong input shape: exit 2, the error as the only line on stderr, `-o` neither created
    nor, when it exists, touched."""
    original = _model(tmp_path)
    out = tmp_path / "mlp_out.py"
    args = [str(original), "--to", "torch", "-o", str(out), "--verify", "--entry", "Net()", "--input", "float32[2,5]"]
    run = run_cli(*args)
    assert run.code == 2, run.err
    assert run.err.count("\n") == 1 and run.err.startswith("ptranspile: error: "), run.err
    assert "Traceback" not in run.err and run.out == ""
    assert not out.exists()
    out.write_text("# an earlier conversion\n")
    run = run_cli(*args)
    assert run.code == 2 and run.err.count("\n") == 1, run.err
    assert out.read_text() == "# an earlier conversion\n"


@pytest.mark.slow
def test_failed_verification_writes_the_reports_but_not_the_output(tmp_path: Path) -> None:
    original = _model(tmp_path)
    out, report, page = tmp_path / "mlp_mixed.py", tmp_path / "r.json", tmp_path / "r.html"
    run = run_cli(
        str(original), "--to", "torch", "--policy", "mixed", "-o", str(out), "--verify", *ENTRY,
        "--tolerance", "1e-12", "--report-json", str(report), "--report-html", str(page),
    )  # fmt: skip
    assert run.code == 1, run.err
    assert "FAILED" in run.err
    said = [line for line in run.err.splitlines() if "not written" in line]
    hint = "(run without --verify and --report-html to write it anyway)"  # --report-html alone also verifies
    assert said == [f"ptranspile: verification failed: {out} not written {hint}"]
    assert not out.exists()
    assert json.loads(report.read_text())["passed"] is False and "report-data" in page.read_text()
    stdout = run_cli(str(original), "--to", "torch", "--policy", "mixed", "--verify", *ENTRY, "--tolerance", "1e-12")
    assert stdout.code == 1 and stdout.out == "", stdout.out[:200]  # nor printed, without -o


def test_an_output_that_imports_only_its_runtime_module_verifies(tmp_path: Path) -> None:
    """A converted file may import nothing but the runtime module written beside it (no `keras`,
    no `flax`): the conversion's --to tells verification what it is."""
    source = tmp_path / "act.py"
    source.write_text(
        "from torch import nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(4, 4, 1)\n        self.act = nn.ReLU()\n\n"
        "    def forward(self, x):\n        return self.act(self.conv(x))\n"
    )
    out = tmp_path / "act_tf.py"
    run = run_cli(
        str(source), "--to", "tf", "-o", str(out), "--verify", "--entry", "Block()", "--input", "float32[1,4,3,3]"
    )
    assert run.code == 0, run.err
    assert not [ln for ln in out.read_text().splitlines() if ln.startswith(("import keras", "import tensorflow"))]
