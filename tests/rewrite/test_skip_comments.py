"""Opt-out comments: `# ptranspile: skip` (one statement) and `# ptranspile: skip-file`."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from precision_transpiler.rewrite.engine import SKIPPED_BY_COMMENT
from tests.helpers import run_cli

MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        y = x.half()  # ptranspile: skip
        z = torch.digamma(x)  # ptranspile: skip
        w = torch.zeros(
            3, dtype=torch.half)  # ptranspile: skip
        return self.fc(x.float())


@torch.no_grad()  # ptranspile: skip
def helper(x):
    return x.half()


v = torch.float16
"""


def test_skipped_statements_are_left_exactly_as_written() -> None:
    result = transpile(MODEL, to="jax")
    code = result.code
    for line in [
        "        y = x.half()  # ptranspile: skip\n",
        "        z = torch.digamma(x)  # ptranspile: skip\n",
        "        w = torch.zeros(\n            3, dtype=torch.half)  # ptranspile: skip\n",
        "@torch.no_grad()  # ptranspile: skip\ndef helper(x):\n    return x.half()\n",
    ]:
        assert line in code, code
    assert "return self.fc(x.astype(jnp.float32))" in code and "v = jnp.float16" in code
    assert code.startswith("import torch\n"), code  # the skipped statements still need it
    assert not result.unsupported and "unsupported" not in code  # torch.digamma: not reported, not marked
    notes = [(d.line, d.col, d.code) for d in result.diagnostics if d.severity == "note"]
    skipped = [n for n in notes if n[2] == "skipped"]
    assert skipped == [(11, 9, "skipped"), (12, 9, "skipped"), (13, 9, "skipped"), (18, 1, "skipped")]
    # Converting the output again leaves it as it is: the markers are found again.
    again = transpile(code, to="jax")
    assert again.code == code and not again.unsupported


def test_layouts_of_the_marker() -> None:
    def convert(src: str, to: str = "tf") -> str:
        return transpile(src, to=to).code

    # an import line
    assert convert("import torch  # ptranspile: skip\nimport torch.nn as nn\nx = torch.half\n") == (
        "import torch  # ptranspile: skip\nimport tensorflow as tf\nx = tf.float16\n"
    )
    # a comment inside a multi-line statement; a `;` line is one statement
    src = "import torch\ny = f(\n    # ptranspile: skip\n    torch.half)\nx = torch.half; z = torch.float\n"
    assert convert(src) == (
        "import torch\nimport tensorflow as tf\n\ny = f(\n    # ptranspile: skip\n    torch.half)\n"
        "x = tf.float16; z = tf.float32\n"
    )
    # the header line of a compound statement: the whole statement; a nested one: just that
    src = (
        "import torch\nif x:  # ptranspile: skip\n    a = torch.half\nelif y:\n    b = torch.half\n"
        "for i in r:\n    c = torch.half  #ptranspile:skip  (reason)\n    d = torch.half\n"
    )
    assert convert(src) == (
        "import torch\nimport tensorflow as tf\n\nif x:  # ptranspile: skip\n    a = torch.half\nelif y:\n"
        "    b = torch.half\nfor i in r:\n    c = torch.half  #ptranspile:skip  (reason)\n    d = tf.float16\n"
    )
    src = "import torch\nif x:\n    a = torch.half\nelif y:  # ptranspile: skip\n    b = torch.half\n"
    assert convert(src) == (
        "import torch\nimport tensorflow as tf\n\nif x:\n    a = tf.float16\n"
        "elif y:  # ptranspile: skip\n    b = torch.half\n"
    )


def test_similar_comments_are_not_markers() -> None:
    src = (
        "import torch\n"
        "# ptranspile: unsupported: torch.digamma has no mapping to jax\n"
        "x = torch.half  # ptranspile: skipped\n"
        "y = torch.half  # ptranspile: skip-this\n"
        "s = '# ptranspile: skip'\n"
    )
    result = transpile(src, to="jax")
    assert "x = jnp.float16  # ptranspile: skipped\n" in result.code
    assert "y = jnp.float16  # ptranspile: skip-this\n" in result.code
    assert not [d for d in result.diagnostics if d.code in ("skipped", "skip-comment-ignored")]


def test_markers_that_apply_to_nothing_are_warned_about() -> None:
    src = "import torch\n# ptranspile: skip\nx = torch.half\nif x:\n    # ptranspile: skip-file\n    pass\n"
    result = transpile(src, to="jax")
    assert "x = jnp.float16" in result.code  # the next line is not skipped
    warnings = [(d.line, d.code) for d in result.diagnostics if d.severity == "warning"]
    assert warnings == [(2, "skip-comment-ignored"), (5, "skip-comment-ignored")]


def test_skip_file(tmp_path: Path) -> None:
    src = '"""A torch file kept as it is."""\nimport torch\n\n# ptranspile: skip-file\nx = torch.half\n'
    result = transpile(src, to="jax", policy="mixed")
    assert result.code == src and result.skipped == SKIPPED_BY_COMMENT and not result.precision
    assert [(d.line, d.severity, d.code) for d in result.diagnostics] == [(4, "note", "skipped-file")]

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "kept.py").write_text(src)
    (tmp_path / "src" / "model.py").write_text("import torch\nx = torch.half\n")
    r = run_cli("src/kept.py", "--to", "jax", cwd=tmp_path)
    assert r.code == 0 and r.out == src  # one file to stdout: the file as it is
    assert r.err == "src/kept.py:4:1: note: file skipped: `# ptranspile: skip-file`\n"
    r = run_cli("src", "--to", "jax", "-o", "out", cwd=tmp_path)
    assert r.code == 0, r.err
    assert (tmp_path / "out" / "kept.py").read_text() == src  # copied, so the tree stays whole
    assert "ptranspile: 2 files: 1 changed, 0 unchanged, 1 skipped, 0 with errors" in r.err
    r = run_cli("src", "--to", "jax", "--check", cwd=tmp_path)
    assert r.code == 1 and "would change: src/kept.py" not in r.err and "would change: src/model.py" in r.err
    r = run_cli("src", "--to", "jax", "--in-place", cwd=tmp_path)
    assert (tmp_path / "src" / "kept.py").read_text() == src


POLICY_MODEL = """import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=-1)  # ptranspile: skip
        return torch.softmax(y, dim=-1)


class Kept(nn.Module):  # ptranspile: skip
    def forward(self, x):
        return torch.softmax(x, dim=-1)
"""


def test_precision_policies_leave_skipped_statements_as_written() -> None:
    code = transpile(POLICY_MODEL, to="torch", policy="mixed").code
    assert "        y = torch.softmax(x, dim=-1)  # ptranspile: skip\n" in code
    assert "return torch.softmax(_ptranspile_fp32(y), dim=-1)" in code  # the next statement has its island
    kept = code[code.index("class Kept") :]
    assert "_ptranspile" not in kept
    assert transpile(code, to="torch", policy="fp32").code == POLICY_MODEL
