"""The `ptranspile` command line: output modes, exit codes, configuration, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import run_cli

TORCH_SRC = "import torch\n\n\ndef f(x):\n    return x.half()  # keep me\n"
JAX_OUT = "import jax.numpy as jnp\n\n\ndef f(x):\n    return x.astype(jnp.float16)  # keep me\n"
UNSUPPORTED_SRC = "import torch\ny = torch.digamma(x).half()\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text(TORCH_SRC)
    (tmp_path / "pkg" / "sub" / "b.py").write_text("import torch as t\nd = t.bfloat16\n")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "plain.py").write_text("x = 1\n")
    return tmp_path


def test_single_file_to_stdout(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(TORCH_SRC)
    r = run_cli(str(src), "--to", "jax", cwd=tmp_path)
    assert r.code == 0, r.err
    assert r.out == JAX_OUT
    assert src.read_text() == TORCH_SRC  # input untouched


def test_output_file_and_report_json(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(UNSUPPORTED_SRC)
    out = tmp_path / "out" / "m_jax.py"
    report = tmp_path / "r.json"
    r = run_cli(str(src), "--to", "jax", "-o", str(out), "--report-json", str(report), cwd=tmp_path)
    assert r.code == 1  # unsupported construct reported
    assert f"{src}:2:5: unsupported: torch.digamma has no mapping to jax" in r.err
    text = out.read_text()
    assert "# ptranspile: unsupported: torch.digamma has no mapping to jax\n" in text
    assert "torch.digamma(x).astype(jnp.float16)" in text
    data = json.loads(report.read_text())
    (entry,) = data["files"]
    assert entry["source"] == "torch" and entry["target"] == "jax" and entry["changed"] is True
    # the unconverted call keeps `import torch`, which the output then needs at load: said too
    assert [d["code"] for d in entry["diagnostics"]] == ["torch-at-load", "unsupported-symbol"]
    assert {rw["rule"] for rw in entry["rewrites"]} == {"op-pattern"}
    assert data["summary"]["unsupported"] == 1


def test_strict_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(UNSUPPORTED_SRC)
    out = tmp_path / "o.py"
    r = run_cli(str(src), "--to", "jax", "--strict", "-o", str(out), cwd=tmp_path)
    assert r.code == 1
    assert "error: unsupported: torch.digamma" in r.err
    assert not out.exists()


def test_check_and_diff(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(TORCH_SRC)
    r = run_cli(str(src), "--to", "jax", "--check", cwd=tmp_path)
    assert r.code == 1 and "would change" in r.err and r.out == ""
    r = run_cli(str(src), "--to", "jax", "--diff", cwd=tmp_path)
    assert r.code == 0
    assert "-    return x.half()  # keep me\n+    return x.astype(jnp.float16)  # keep me\n" in r.out
    r = run_cli(str(src), "--to", "jax", "--check", "--diff", cwd=tmp_path)
    assert r.code == 1 and "+import jax.numpy as jnp" in r.out
    assert src.read_text() == TORCH_SRC
    # Already in the target framework: nothing to change.
    r = run_cli(str(src), "--to", "torch", "--check", cwd=tmp_path)
    assert r.code == 0 and r.out == ""


def test_in_place_and_idempotent(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(TORCH_SRC)
    mode = src.stat().st_mode
    assert run_cli(str(src), "--to", "jax", "--in-place", cwd=tmp_path).code == 0
    assert src.read_text() == JAX_OUT
    assert src.stat().st_mode == mode
    # a second run finds nothing to do
    r = run_cli(str(src), "--to", "jax", "--check", cwd=tmp_path)
    assert r.code == 0


def test_stdin_to_stdout() -> None:
    r = run_cli("-", "--to", "tf", stdin="import torch\ny = x.float()\n")
    assert r.code == 0
    assert r.out == "import tensorflow as tf\ny = tf.cast(x, tf.float32)\n"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_directory_to_output_dir(tree: Path, jobs: str) -> None:
    out = tree / "out"
    r = run_cli(str(tree / "pkg"), "--to", "jax", "-o", str(out), "-j", jobs, cwd=tree)
    assert r.code == 0, r.err
    assert (out / "a.py").read_text() == JAX_OUT
    assert (out / "sub" / "b.py").read_text() == "import jax.numpy as jnp\nd = jnp.bfloat16\n"
    assert (out / "plain.py").read_text() == "x = 1\n"
    assert "4 files: 2 changed" in r.err
    assert (tree / "pkg" / "a.py").read_text() == TORCH_SRC


def test_directory_needs_output_mode(tree: Path) -> None:
    r = run_cli(str(tree / "pkg"), "--to", "jax", cwd=tree)
    assert r.code == 2
    assert r.err.strip().count("\n") == 0 and "need -o DIR, --in-place, --check or --diff" in r.err


def test_parallel_equals_serial(tree: Path) -> None:
    one = run_cli(str(tree / "pkg"), "--to", "tf", "--diff", "-j", "1", cwd=tree)
    two = run_cli(str(tree / "pkg"), "--to", "tf", "--diff", "-j", "2", cwd=tree)
    assert one.out == two.out and one.out.count("+++ b/") == 2


# -- bad input ---------------------------------------------------------------------------------


def _one_line_error(err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "expected an error message"
    assert "Traceback" not in err


def test_syntax_error(tmp_path: Path) -> None:
    src = tmp_path / "bad.py"
    src.write_text("import torch\ndef f(:\n    pass\n")
    out = tmp_path / "o.py"
    r = run_cli(str(src), "--to", "jax", "-o", str(out), cwd=tmp_path)
    assert r.code == 2
    _one_line_error(r.err)
    assert r.err.startswith(f"{src}:2:7: error: syntax error")
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfeimport torch\n", "not valid UTF-8"),
        (b"\x00\x01\x02binary", "binary file"),
        (b"", "file is empty"),
    ],
)
def test_unusable_files(tmp_path: Path, content: bytes, message: str) -> None:
    src = tmp_path / "x.py"
    src.write_bytes(content)
    r = run_cli(str(src), "--to", "jax", "--in-place", cwd=tmp_path)
    assert r.code == 2
    _one_line_error(r.err)
    assert message in r.err and str(src) in r.err
    assert src.read_bytes() == content


def test_missing_path_and_others_still_processed(tree: Path) -> None:
    out = tree / "out"
    r = run_cli(str(tree / "nope.py"), str(tree / "pkg" / "a.py"), "--to", "jax", "-o", str(out), cwd=tree)
    assert r.code == 2
    assert f"{tree / 'nope.py'}:1:1: error: no such file" in r.err
    assert (out / "a.py").read_text() == JAX_OUT


def test_unreadable_via_directory_walk_is_reported(tree: Path) -> None:
    (tree / "pkg" / "broken.py").write_bytes(b"\xff\xfe\x00")
    r = run_cli(str(tree / "pkg"), "--to", "jax", "--check", cwd=tree)
    assert r.code == 2
    assert "broken.py:1:1: error: binary file" in r.err
    assert "would change: " in r.err  # the other files were still processed


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--to", "mxnet"], "invalid choice: 'mxnet'"),
        (["--to", "jax", "--policy", "turbo"], "unknown policy 'turbo'"),
        (["--to", "jax", "--policy", "params=float32,compute=int3"], "unknown dtype"),
        ([], "target framework is required"),
        (["--to", "jax", "--bogus"], "unrecognized arguments: --bogus"),
        (["--to", "jax", "--mappings", "/nonexistent/dir"], "mapping directory does not exist"),
    ],
)
def test_usage_errors(tmp_path: Path, args: list[str], needle: str) -> None:
    src = tmp_path / "m.py"
    src.write_text(TORCH_SRC)
    r = run_cli(str(src), *args, cwd=tmp_path)
    assert r.code == 2
    assert needle in r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert src.read_text() == TORCH_SRC


def test_malformed_mapping_table_names_file_line_key(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "bad.yaml").write_text("kind: ops\nops:\n  relu:\n    params: {x: matrix}\n    torch: '{x}.relu()'\n")
    src = tmp_path / "m.py"
    src.write_text(TORCH_SRC)
    r = run_cli(str(src), "--to", "jax", "--mappings", str(tables), cwd=tmp_path)
    assert r.code == 2
    assert f"{tables / 'bad.yaml'}:4: ops.relu.params.x: kind must be one of" in r.err


def test_pyproject_defaults(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.ptranspile]\nto = "tf"\nexclude = ["*skip*"]\n')
    (tmp_path / "m.py").write_text("import torch\ny = x.double()\n")
    (tmp_path / "skip_me.py").write_text("import torch\ny = x.double()\n")
    r = run_cli("m.py", cwd=tmp_path)
    assert r.code == 0 and r.out == "import tensorflow as tf\ny = tf.cast(x, tf.float64)\n"
    r = run_cli(".", "--check", cwd=tmp_path)
    assert r.code == 1 and "m.py" in r.err and "skip_me" not in r.err
    # the command line wins over the file
    r = run_cli("m.py", "--to", "jax", cwd=tmp_path)
    assert "jnp.float64" in r.out


def test_pyproject_unknown_key(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.ptranspile]\ntarget = "tf"\n')
    (tmp_path / "m.py").write_text(TORCH_SRC)
    r = run_cli("m.py", cwd=tmp_path)
    assert r.code == 2 and "unknown key 'target'" in r.err


def test_refuses_to_overwrite_input_with_o(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(TORCH_SRC)
    r = run_cli(str(src), "--to", "jax", "-o", str(src), cwd=tmp_path)
    assert r.code == 2 and "--in-place" in r.err
    assert src.read_text() == TORCH_SRC


def test_help_and_version() -> None:
    r = run_cli("--help")
    assert r.code == 0 and "--to" in r.out and "Exit codes" in r.out
    r = run_cli("--version")
    assert r.code == 0 and r.out.startswith("ptranspile ")


def test_output_to_a_device_writes_through_it(tmp_path: Path) -> None:
    """`--report-json /dev/null` and `-o /dev/null` must not replace the device node."""
    import stat

    src = tmp_path / "m.py"
    src.write_text(TORCH_SRC)
    r = run_cli(str(src), "--to", "jax", "-o", os.devnull, "--report-json", os.devnull, cwd=tmp_path)
    assert r.code == 0, r.err
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


POLICY_SRC = (
    "import torch\nimport torch.nn as nn\n\n\nclass Block(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n        self.norm = nn.LayerNorm(8)\n\n"
    "    def forward(self, x):\n        return self.norm(x).softmax(-1)\n"
)


def test_policy_report_json_and_nan_fallback_flag(tmp_path: Path) -> None:
    src = tmp_path / "block.py"
    src.write_text(POLICY_SRC)
    report = tmp_path / "r.json"
    r = run_cli(
        str(src),
        "--to",
        "torch",
        "--policy",
        "mixed",
        "--report",
        "--nan-fallback",
        "--report-json",
        str(report),
        cwd=tmp_path,
    )
    assert r.code == 0, r.err
    assert "nan_fallback=True" in r.out  # the file's TorchPolicy(...)
    assert "@_ptranspile_policy\n    def forward(self, x):" in r.out
    assert f"== {src}: policy mixed (param float32, compute bfloat16, output float32)" in r.err
    assert "self.norm" in r.err and "[fp32 island; policy mixed: keep_fp32 norm]" in r.err
    assert "Tensor.softmax" in r.err and "[autocast region; policy mixed: default]" in r.err
    (entry,) = json.loads(report.read_text())["files"]
    assert entry["policy_info"]["compute"] == "bfloat16"
    actions = sorted((p["op"], p["action"]) for p in entry["precision"])
    assert actions == [("Block", "autocast region"), ("Tensor.softmax", "fp32 island"), ("self.norm", "fp32 island")]


@pytest.mark.parametrize(
    ("policy", "output"),
    [("mixed", "float32"), ("bf16", "bfloat16"), ("params=float32,compute=bfloat16,output=float16", "float16")],
)
def test_policy_report_model_row_shows_the_policy_output_dtype(tmp_path: Path, policy: str, output: str) -> None:
    """The model row (`autocast region`) is the generated wrapper, which casts the outermost
    call's outputs to the policy's output dtype: its `output=` is that dtype, as in the header."""
    src = tmp_path / "block.py"
    src.write_text(POLICY_SRC)
    r = run_cli(str(src), "--to", "torch", "--policy", policy, "--report", "-o", str(tmp_path / "out.py"))
    assert r.code == 0, r.err
    assert f"output {output})" in r.err.splitlines()[0]  # the header
    (row,) = [line for line in r.err.splitlines() if "[autocast region;" in line]
    assert f" output={output} " in row, row
    assert "compute=bfloat16" in row


def test_policy_not_applied_across_frameworks_is_reported(tmp_path: Path) -> None:
    """Policies apply within one framework and on torch models converted to JAX or Keras; other
    directions (JAX code converted to tf) say so."""
    src = tmp_path / "f.py"
    src.write_text("import jax.numpy as jnp\n\n\ndef f(x):\n    return x.astype(jnp.float16)\n")
    r = run_cli(str(src), "--to", "tf", "--policy", "mixed", cwd=tmp_path)
    assert r.code == 1
    assert "policy-not-applied" not in r.err  # the code is internal; the message is what users read
    assert "precision policy 'mixed' is not applied when converting jax to tf yet" in r.err
    block = tmp_path / "block.py"
    block.write_text(POLICY_SRC)
    r = run_cli(str(block), "--to", "tf", "--policy", "mixed", cwd=tmp_path)
    assert r.code == 0 and "@_ptranspile_module" in r.out, r.err
