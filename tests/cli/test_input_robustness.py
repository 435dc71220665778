"""Bad input is a one-line message, never an internal error: policy files, mapping tables,
encodings, line endings, links and outputs that cannot be written."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import MappingError
from precision_transpiler.errors import PolicyError
from precision_transpiler.mappings import load_mappings
from precision_transpiler.precision.policy import resolve_policy
from tests.helpers import run_cli

TORCH_SRC = "import torch\n\n\ndef f(x):\n    return x.half()\n"


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("extends: mixed\npromote: 5\n", "promote"),
        ("extends: mixed\nkeep_fp32: 5\n", "keep_fp32"),
        ("extends: mixed\nkeep_fp32: norm\n", "keep_fp32"),
        ("extends: mixed\noverrides: 5\n", "overrides"),
        ("extends: mixed\noverrides:\n  - path: 5\n    compute: float32\n", "overrides[0].path"),
        ("extends: mixed\noverrides:\n  - class: [A]\n    compute: float32\n", "overrides[0].class"),
        ("extends: [mixed]\n", "extends"),
        ("extends: mixed\ndescription: [a]\n", "description"),
        ("extends: mixed\nname: {a: 1}\n", "name"),
        ("extends: mixed\ncompute: [bf16]\n", "compute"),
        ("extends: mixed\nclasses: {norm: {compute: [a]}}\n", "classes.norm.compute"),
    ],
)
def test_policy_file_field_types_are_checked(tmp_path: Path, text: str, field: str) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(text)
    with pytest.raises(PolicyError) as info:
        resolve_policy(str(policy))
    assert str(info.value).startswith(f"{policy}: {field}"), info.value


def test_policy_file_errors_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(TORCH_SRC)
    (tmp_path / "p.yaml").write_text("extends: mixed\npromote: 5\n")
    (tmp_path / "latin.yaml").write_bytes(b'extends: mixed\ndescription: "\xff"\n')
    r = run_cli("m.py", "--to", "torch", "--policy", "p.yaml", cwd=tmp_path)
    assert r.code == 2
    assert _one_line(r.err).startswith("ptranspile: error: p.yaml: promote: ")
    r = run_cli("m.py", "--to", "torch", "--policy", "latin.yaml", cwd=tmp_path)
    assert r.code == 2
    assert _one_line(r.err) == "ptranspile: error: latin.yaml:2: not valid UTF-8 (byte 0xff)"


def test_non_utf8_mapping_table_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_bytes(b"kind: ops\n# \xff\n")
    with pytest.raises(MappingError) as info:
        load_mappings([tmp_path])
    assert str(info.value) == f"{tmp_path / 't.yaml'}:2: not valid UTF-8 (byte 0xff)"


@pytest.mark.parametrize(
    "text",
    [
        "kind: dtypes\nsymbols:\n  jax:\n    float16: ['jnp.float16 +* (']\n",
        "kind: dtypes\nsymbols:\n  jax:\n    float16: ['jnp.class']\n",
    ],
)
def test_dtype_symbol_that_is_no_name_is_a_table_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "t.yaml").write_text(text)
    with pytest.raises(MappingError) as info:
        load_mappings([tmp_path])
    assert str(info.value).startswith(f"{tmp_path / 't.yaml'}:4: symbols.jax.float16: "), info.value
    assert "is not a qualified name" in str(info.value)


def test_non_utf8_stdin_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "precision_transpiler", "-", "--to", "jax"],
        input=b'import torch\nx = "\xff"\n',
        capture_output=True,
        cwd=tmp_path,
        timeout=300,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert _one_line(err) == "<stdin>:2:1: error: not valid UTF-8 (byte 0xff)"
    assert proc.stdout == b""


def test_layer_target_that_is_no_name_is_a_table_error(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        "kind: layers\nlayers:\n  torch.nn.Foo:\n    signature: 'x'\n    jax: {call: 'nnx.Linear +* (', args: [x]}\n"
    )
    with pytest.raises(MappingError) as info:
        load_mappings([tmp_path])
    assert str(info.value).startswith(f"{tmp_path / 't.yaml'}:3: layers.torch.nn.Foo.jax.call: "), info.value


MODEL_CRLF = (
    "import torch\r\nimport torch.nn as nn\r\n\r\n\r\nclass M(nn.Module):\r\n    def __init__(self):\r\n"
    "        super().__init__()\r\n        self.l = nn.Linear(4, 4)\r\n\r\n    def forward(self, x):\r\n"
    "        return torch.relu(self.l(x)).half()\r\n"
)


def _cli_bytes(*args: str, cwd: Path, stdin: bytes | None = None) -> tuple[int, bytes, str]:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "precision_transpiler", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=300,
    )
    return proc.returncode, proc.stdout, proc.stderr.decode()


def _same_endings(data: bytes, newline: bytes) -> None:
    lines = data.splitlines(keepends=True)
    assert lines and all(line.endswith(newline) for line in lines), [ln for ln in lines if not ln.endswith(newline)]
    if newline == b"\n":
        assert b"\r" not in data


@pytest.mark.parametrize(("to", "policy"), [("jax", "fp32"), ("tf", "fp32"), ("torch", "mixed")])
def test_crlf_file_keeps_crlf_everywhere(tmp_path: Path, to: str, policy: str) -> None:
    (tmp_path / "m.py").write_bytes(MODEL_CRLF.encode())
    code, out, err = _cli_bytes("m.py", "--to", to, "--policy", policy, "-o", "out.py", cwd=tmp_path)
    assert code == 0, err
    data = (tmp_path / "out.py").read_bytes()
    assert data != MODEL_CRLF.encode()
    _same_endings(data, b"\r\n")
    # stdout is self-contained (--runtime inline), as -o is with --runtime inline
    inline = ("-o", "inline.py", "--runtime", "inline")
    code, out, err = _cli_bytes("m.py", "--to", to, "--policy", policy, *inline, cwd=tmp_path)
    assert code == 0, err
    data = (tmp_path / "inline.py").read_bytes()
    _same_endings(data, b"\r\n")
    code, out, err = _cli_bytes("-", "--to", to, "--policy", policy, cwd=tmp_path, stdin=MODEL_CRLF.encode())
    assert code == 0, err
    assert out == data


def test_crlf_through_the_api() -> None:
    from precision_transpiler import transpile

    r = transpile(MODEL_CRLF, to="jax")
    assert r.changed and r.original == MODEL_CRLF
    _same_endings(r.code.encode(), b"\r\n")
    r = transpile("import os\r\nx = 1\n", to="jax")  # unchanged: byte for byte
    assert r.code == "import os\r\nx = 1\n" and not r.changed


def test_utf8_bom_is_kept(tmp_path: Path) -> None:
    src = b"\xef\xbb\xbf" + TORCH_SRC.encode()
    (tmp_path / "m.py").write_bytes(src)
    code, out, err = _cli_bytes("m.py", "--to", "jax", "-o", "out.py", cwd=tmp_path)
    assert code == 0, err
    data = (tmp_path / "out.py").read_bytes()
    assert data.startswith(b"\xef\xbb\xbfimport jax.numpy as jnp\n") and b"astype(jnp.float16)" in data
    code, out, err = _cli_bytes("-", "--to", "jax", cwd=tmp_path, stdin=src)
    assert code == 0, err
    assert out == data
    code, out, err = _cli_bytes("m.py", "--to", "jax", "--in-place", cwd=tmp_path)
    assert code == 0, err
    assert (tmp_path / "m.py").read_bytes() == data


def test_bom_in_a_string_is_converted() -> None:
    from precision_transpiler import transpile

    r = transpile("\ufeff" + TORCH_SRC, to="jax")
    assert r.code.startswith("\ufeffimport jax.numpy as jnp\n") and "astype(jnp.float16)" in r.code


def test_coding_cookie_is_read_and_written_back(tmp_path: Path) -> None:
    src = "# -*- coding: latin-1 -*-\n# café\n" + TORCH_SRC
    (tmp_path / "m.py").write_bytes(src.encode("latin-1"))
    code, out, err = _cli_bytes("m.py", "--to", "jax", "-o", "out.py", cwd=tmp_path)
    assert code == 0, err
    data = (tmp_path / "out.py").read_bytes()
    assert b"# caf\xe9\n" in data and b"astype(jnp.float16)" in data
    code, out, err = _cli_bytes("m.py", "--to", "jax", "--in-place", cwd=tmp_path)
    assert code == 0, err
    assert (tmp_path / "m.py").read_bytes() == data
    code, out, err = _cli_bytes("-", "--to", "jax", cwd=tmp_path, stdin=src.encode("latin-1"))
    assert code == 0, err
    assert b"# caf\xe9\n" in out


def test_unknown_coding_cookie_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_bytes(b"# -*- coding: nonsense-42 -*-\n" + TORCH_SRC.encode())
    code, _, err = _cli_bytes("m.py", "--to", "jax", cwd=tmp_path)
    assert code == 2
    assert _one_line(err) == "m.py:1:1: error: unknown encoding 'nonsense-42' in the coding comment"


JAX_OUT = "import jax.numpy as jnp\n\n\ndef f(x):\n    return x.astype(jnp.float16)\n"


def test_in_place_follows_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text(TORCH_SRC)
    (tmp_path / "link.py").symlink_to("real.py")
    r = run_cli("link.py", "--to", "jax", "--in-place", cwd=tmp_path)
    assert r.code == 0, r.err
    assert (tmp_path / "link.py").is_symlink()
    assert (tmp_path / "real.py").read_text() == JAX_OUT


def test_report_json_naming_an_input_is_refused(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(TORCH_SRC)
    (tmp_path / "n.py").write_text(TORCH_SRC)
    for extra in (["--check"], ["-o", "out"], ["--in-place"]):
        r = run_cli("m.py", "n.py", "--to", "jax", "--report-json", "n.py", *extra, cwd=tmp_path)
        assert r.code == 2, (extra, r.err)
        assert r.err.strip().splitlines()[-1] == "ptranspile: error: --report-json n.py would overwrite the input n.py"
        assert (tmp_path / "m.py").read_text() == TORCH_SRC and (tmp_path / "n.py").read_text() == TORCH_SRC
        assert not (tmp_path / "out").exists()


def test_output_naming_an_input_with_several_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(TORCH_SRC)
    (tmp_path / "n.py").write_text(TORCH_SRC)
    (tmp_path / "other.txt").write_text("x")
    r = run_cli("m.py", "n.py", "--to", "jax", "-o", "n.py", "--report-json", "r.json", cwd=tmp_path)
    assert r.code == 2
    assert _one_line(r.err) == "ptranspile: error: -o would overwrite the input n.py; use --in-place for that"
    assert (tmp_path / "n.py").read_text() == TORCH_SRC and not (tmp_path / "r.json").exists()
    r = run_cli("m.py", "n.py", "--to", "jax", "-o", "other.txt", cwd=tmp_path)
    assert r.code == 2
    assert _one_line(r.err) == (
        "ptranspile: error: -o other.txt is a file: several files are written to a directory (-o DIR)"
    )


def test_output_with_a_trailing_slash_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(TORCH_SRC)
    r = run_cli("m.py", "--to", "jax", "-o", "new/", cwd=tmp_path)
    assert r.code == 0, r.err
    assert (tmp_path / "new" / "m.py").read_text() == JAX_OUT


def test_write_error_is_one_line_per_file_and_the_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from precision_transpiler import files
    from precision_transpiler.cli import main

    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "m.py").write_text(TORCH_SRC)
    (tmp_path / "src" / "n.py").write_text(TORCH_SRC)
    real = files.write_atomic

    def read_only_a(path: Path, text: str | bytes, encoding: str = "utf-8") -> None:
        if path.parent.name == "a":  # what a read-only out/a gives
            raise PermissionError(13, "Permission denied", str(path))
        real(path, text, encoding)

    monkeypatch.setattr(files, "write_atomic", read_only_a)
    monkeypatch.chdir(tmp_path)
    code = main(["src", "--to", "jax", "-o", "out"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2, lines
    assert "ptranspile: error: out/a/m.py: cannot write: Permission denied" in lines, lines
    assert not any("internal error" in line for line in lines)
    assert lines[-1].startswith("ptranspile: 2 files:") and "1 not written (out/a/m.py)" in lines[-1], lines[-1]
    assert (tmp_path / "out" / "n.py").read_text() == JAX_OUT


def test_unencodable_output_is_a_write_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from precision_transpiler.cli import _write_one

    assert not _write_one("x = 1\ny = '\u20ac'\n", "latin-1", tmp_path / "y.py")
    err = capsys.readouterr().err
    assert _one_line(err) == (
        f"ptranspile: error: {tmp_path / 'y.py'}: cannot write: line 2 has characters that latin-1 cannot encode"
    )
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from precision_transpiler.files import write_atomic

    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "x.py", "x = 1\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(tmp_path / "y.py", "x = '\u20ac'\n", encoding="latin-1")
    assert list(tmp_path.iterdir()) == []


def test_table_cache_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from precision_transpiler.mappings import registry

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("PTRANSPILE_NO_CACHE", raising=False)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(pickle, "dump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        registry._write_pickle([], registry.MappingSet())
    assert [p.name for p in (tmp_path / "ptranspile").iterdir()] == []


def test_report_json_at_the_output_and_unwritable_report(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(TORCH_SRC)
    r = run_cli("m.py", "--to", "jax", "-o", "out.py", "--report-json", "out.py", cwd=tmp_path)
    assert r.code == 2
    assert _one_line(r.err) == "ptranspile: error: --report-json out.py is also where -o writes out.py"
    assert not (tmp_path / "out.py").exists()
    r = run_cli("m.py", "--to", "jax", "-o", "out.py", "--report-json", "m.py/r.json", cwd=tmp_path)
    assert r.code == 2
    assert _one_line(r.err).startswith("ptranspile: error: m.py/r.json: cannot write: ")
    assert (tmp_path / "out.py").read_text() == JAX_OUT


def test_diff_on_a_terminal_that_cannot_encode_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("# caf\u00e9\n" + TORCH_SRC)
    r = run_cli("m.py", "--to", "jax", "--diff", cwd=tmp_path, env={"PYTHONIOENCODING": "ascii"})
    assert r.code == 2
    line = _one_line(r.err)  # stderr itself escapes the character
    assert line.startswith("ptranspile: error: cannot print '") and line.endswith("': the output encoding is ascii")


@pytest.mark.parametrize(
    "prefix", [b"# -*- coding: latin-1 -*-\n# caf\xe9\n", b"\xef\xbb\xbf# caf\xc3\xa9\n", b"# crlf\r\n"]
)
def test_sibling_files_are_read_like_inputs(tmp_path: Path, prefix: bytes) -> None:
    from precision_transpiler import transpile_file

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "blocks.py").write_bytes(
        prefix
        + b"import torch.nn as nn\n\n\nclass B(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        b"        self.l = nn.Linear(4, 4)\n\n    def forward(self, x):\n        return self.l(x)\n"
    )
    (pkg / "model.py").write_text(
        "import torch.nn as nn\nfrom .blocks import B\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.b = B()\n\n    def forward(self, x):\n        return self.b(x)\n"
    )
    r = transpile_file(pkg / "model.py", to="jax")
    assert not r.errors, r.diagnostics
    assert "class B(" in r.code and "\r" not in r.code


def test_form_feeds_before_indentation_convert(tmp_path: Path) -> None:
    """LibCST takes a form feed that starts every indented line into the module's default
    indentation; converting parses the converted code once more only where a stage needs text,
    and the output must parse (found by benchmarks/fuzz.py)."""
    (tmp_path / "ff.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n\f    def __init__(self):\n"
        "\f        super().__init__()\n\f        self.fc = nn.Linear(2, 2)\n\n\f    def forward(self, x):\n"
        "\f        return self.fc(x)\n"
    )
    r = run_cli("ff.py", "--to", "jax", "-o", "out.py", cwd=tmp_path)
    assert "internal error" not in r.err and r.code == 0, r.err


def test_rngs_after_a_bare_generator_argument_is_valid_python() -> None:
    """`rngs=rngs` appended after a call's only argument, a bare generator expression, gives the
    generator its own parentheses (found by benchmarks/fuzz.py on torch.nn's ParameterDict)."""
    import ast

    from precision_transpiler import transpile

    source = (
        "import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def __init__(self, pairs):\n"
        "        super().__init__()\n        self.pairs = dict(pairs)\n\n\nclass M(nn.Module):\n"
        "    def __init__(self, keys):\n        super().__init__()\n        self.b = Block((k, 1) for k in keys)\n"
    )
    ast.parse(transpile(source, to="jax").code)


def test_a_policy_argument_after_a_bare_generator_is_valid_python() -> None:
    import ast

    from precision_transpiler import transpile

    source = (
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(*(n for n in (2, 2)))\n\n"
        "    def forward(self, x):\n        return torch.cat(list(t for t in (x, x)), dim=-1)\n"
    )
    for to in ("jax", "tf"):
        ast.parse(transpile(source, to=to, policy="mixed").code)


def test_converted_code_that_does_not_parse_is_an_error_and_nothing_is_written(tmp_path) -> None:
    """The last check of every conversion: output Python cannot parse is never handed out."""
    from precision_transpiler.pipeline import Document, _check_parses

    doc = Document("x = 1\n", "m.py")
    doc.set_code("x = (\n")
    _check_parses(doc)
    assert doc.unchanged and doc.result_code() == "x = 1\n"
    assert [d.code for d in doc.diagnostics] == ["invalid-output"]
    assert "converted line" in doc.diagnostics[0].message


def test_a_bare_file_name_inside_a_package_folder_converts(tmp_path: Path) -> None:
    """`cd pkg && ptranspile mod.py`: the file's folder is `.`, whose parent is itself; the
    package it sits in is found from the absolute path (a relative walk never ended)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "helpers.py").write_text("import torch\n\n\ndef double(x):\n    return x * 2\n", encoding="utf-8")
    source = "import torch\nfrom .helpers import double\n\n\ndef f(x):\n    return double(torch.relu(x))\n"
    (package / "mod.py").write_text(source, encoding="utf-8")
    code, _, err = _cli_bytes("mod.py", "--to", "jax", "-o", "out.py", cwd=package)
    assert code == 0, err
    converted = (package / "out.py").read_text(encoding="utf-8")
    assert "jax.nn.relu" in converted and "def double" in converted
