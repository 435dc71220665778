"""The library API: typed results, aliases and shadowing, layout preservation, determinism."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import (
    PolicyError,
    TranspileResult,
    UsageError,
    transpile,
    transpile_file,
    transpile_paths,
)


def test_result_shape() -> None:
    r = transpile("import torch\nx = torch.half\n", to="jax")
    assert isinstance(r, TranspileResult)
    assert r.changed and r.ok and r.source_framework == "torch" and r.target_framework == "jax"
    assert r.imports_added == ("jax.numpy as jnp",)
    (rw,) = r.rewrites
    assert (rw.line, rw.col, rw.rule, rw.before, rw.after) == (
        2,
        5,
        "dtype-symbol",
        "torch.half",
        "jnp.float16",
    )
    assert r.to_json()["rewrites"][0]["after"] == "jnp.float16"


@pytest.mark.parametrize(
    ("src", "to", "expected"),
    [
        ("import torch as t\nx = t.half\n", "jax", "import jax.numpy as jnp\nx = jnp.float16\n"),
        ("from torch import float16 as h\nx = h\n", "tf", "import tensorflow as tf\nx = tf.float16\n"),
        ("import jax.numpy as jnp\nx = jnp.bfloat16\n", "torch", "import torch\nx = torch.bfloat16\n"),
        ("from jax import numpy as J\nx = J.int8\n", "tf", "import tensorflow as tf\nx = tf.int8\n"),
        (
            "from tensorflow import dtypes\nx = dtypes.float64\n",
            "numpy",
            "import numpy as np\nx = np.float64\n",
        ),
        ("import numpy as np\nx = np.float32\n", "torch", "import torch\nx = torch.float32\n"),
        ("import tensorflow.dtypes as D\nx = D.half\n", "torch", "import torch\nx = torch.float16\n"),
    ],
)
def test_aliases(src: str, to: str, expected: str) -> None:
    assert transpile(src, to=to).code == expected


def test_uses_existing_target_alias() -> None:
    src = "import torch\nimport jax.numpy as J\nx = torch.half\ny = J.zeros(1)\n"
    r = transpile(src, to="jax", from_="torch")
    assert r.code == "import jax.numpy as J\nx = J.float16\ny = J.zeros(1)\n"
    assert r.imports_added == ()


def test_shadowing_local_is_left_alone() -> None:
    src = (
        "import torch\n\n\ndef f(torch):\n    return torch.half\n\n\n"
        "def g():\n    half = 1\n    return half\n\n\nx = torch.half\n"
    )
    r = transpile(src, to="jax")
    assert "def f(torch):\n    return torch.half\n" in r.code
    assert "x = jnp.float16\n" in r.code
    assert [rw.line for rw in r.rewrites] == [13]


def test_layout_comments_and_formatting_preserved() -> None:
    src = (
        '"""Module doc."""\n\n'
        "import os  # stdlib\n"
        "import torch\n\n"
        "# A comment block\n"
        "CONST   =  {'a' : 1}   # odd spacing stays\n\n\n"
        "def f(x):\n"
        '    """Doc."""\n'
        "    y = x.to(\n"
        "        torch.float16\n"
        "    )  # trailing\n"
        "    return y\n"
    )
    r = transpile(src, to="tf")
    assert r.code == (
        '"""Module doc."""\n\n'
        "import os  # stdlib\n"
        "import tensorflow as tf\n\n"
        "# A comment block\n"
        "CONST   =  {'a' : 1}   # odd spacing stays\n\n\n"
        "def f(x):\n"
        '    """Doc."""\n'
        "    y = tf.cast(x, tf.float16)  # trailing\n"
        "    return y\n"
    )


def test_nothing_to_do_is_byte_identical() -> None:
    src = "import torch\n\n\nclass A:  # comment\n    x  =  1\n"
    r = transpile(src, to="torch")
    assert r.code == src and not r.changed
    r = transpile("x = 1\n", to="jax")
    assert r.code == "x = 1\n" and r.source_framework is None


def test_deterministic() -> None:
    src = "import torch\nimport numpy as np\na = x.half()\nb = np.float32\nc = torch.finfo(torch.bfloat16).eps\n"
    outs = {transpile(src, to=t).code for t in ("jax",) for _ in range(3)}
    assert len(outs) == 1


def test_detects_source_framework() -> None:
    assert transpile("import tensorflow as tf\nx = tf.half\n", to="jax").source_framework == "tf"
    assert transpile("import numpy as np\nx = np.half\n", to="jax").source_framework == "numpy"
    # numpy used beside torch: torch is the framework
    both = transpile("import numpy as np\nimport torch\nx = torch.half\ny = np.float32\n", to="jax")
    assert both.source_framework == "torch"
    assert "y = np.float32" in both.code


def test_detects_the_target_of_a_file_that_imports_only_its_runtime_module() -> None:
    """A converted model of runtime layers only imports nothing but the runtime module beside
    it (`--runtime module`): its framework is that module's target, so `ptranspile verify`
    takes it without --to."""
    from precision_transpiler.api import detect_framework

    code = "from _ptranspile_runtime_tf import (\n    Linear,\n    TorchModule,\n)\n\n\n"
    code += "class Net(TorchModule):\n    pass\n"
    assert detect_framework(code) == "tf"
    assert detect_framework(code.replace("_tf", "_jax")) == "jax"
    assert detect_framework("x = 1\n") is None


def test_syntax_error_is_a_diagnostic_not_an_exception() -> None:
    r = transpile("def f(:\n", to="jax", path="m.py")
    (err,) = r.errors
    assert err.format().startswith("m.py:1:7: error: syntax error")
    assert r.code == "def f(:\n" and not r.changed


def test_bad_arguments_raise() -> None:
    with pytest.raises(UsageError):
        transpile("x = 1\n", to="mxnet")
    with pytest.raises(PolicyError):
        transpile("x = 1\n", to="jax", policy="turbo")


def test_transpile_file_and_paths(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\nx = torch.double\n")
    (tmp_path / "b.py").write_text("")
    (tmp_path / "c.py").write_bytes(b"\xff\xfe")
    r = transpile_file(tmp_path / "a.py", to="numpy")
    assert r.code == "import numpy as np\nx = np.float64\n"
    results = transpile_paths([tmp_path], to="numpy", jobs=2)
    assert [Path(x.path).name for x in results] == ["a.py", "b.py", "c.py"]
    assert results[1].skipped == "empty file" and not results[1].errors
    assert results[2].errors[0].code == "not-utf8"
    assert transpile_file(tmp_path / "b.py", to="jax").errors[0].code == "empty-file"


def test_unsupported_is_reported_with_position_and_marked_once() -> None:
    src = "import torch\n\n\ndef f(x):\n    y = torch.digamma(x) + torch.digamma(x)\n    return y\n"
    r = transpile(src, to="jax", path="m.py")
    assert [d.format() for d in r.unsupported] == [
        "m.py:5:9: unsupported: torch.digamma has no mapping to jax",
        "m.py:5:28: unsupported: torch.digamma has no mapping to jax",
    ]
    assert r.code.count("# ptranspile: unsupported: torch.digamma has no mapping to jax") == 1
    # Marking is idempotent: converting the output again adds no second marker.
    again = transpile(r.code, to="jax", from_="torch")
    assert again.code == r.code
