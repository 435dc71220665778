"""Mapping tables: schema validation with file/line/key, extension by directory and entry point."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from precision_transpiler import MappingError, transpile
from precision_transpiler.mappings import builtin_mappings_dir, load_mappings
from tests.helpers import REPO, run_cli

EXTRA_OP = textwrap.dedent(
    """\
    kind: ops
    ops:
      digamma:
        summary: Logarithmic derivative of the gamma function.
        params: {x: any}
        torch: ["torch.digamma({x:input})", "{x}.digamma()"]
        jax: ["jax.lax.digamma({x})"]
        tf: ["tensorflow.math.digamma({x})"]
    """
)


def test_builtin_tables_load_and_cover_every_canonical_dtype() -> None:
    m = load_mappings()
    assert builtin_mappings_dir().is_dir()
    assert set(m.frameworks) >= {"torch", "jax", "tf", "numpy"}
    for fw in ("torch", "jax", "tf", "numpy", "ivy"):
        assert set(m.dtype_symbols[fw]) == set(m.dtype_canonical), fw
    assert m.symbol_to_dtype["torch.half"] == ("torch", "float16")
    assert m.symbol_to_dtype["tensorflow.dtypes.bfloat16"] == ("tf", "bfloat16")
    assert m.keras_policies["mixed_bfloat16"] == {"variable": "float32", "compute": "bfloat16"}
    assert "cast" in m.ops and m.ops["cast"].patterns["torch"]


def test_extra_directory_adds_a_mapping(tmp_path: Path) -> None:
    src = "import torch\ny = torch.digamma(x)\n"
    before = transpile(src, to="jax")
    assert [d.code for d in before.unsupported] == ["unsupported-symbol"]
    (tmp_path / "digamma.yaml").write_text(EXTRA_OP)
    after = transpile(src, to="jax", mappings=[tmp_path])
    assert after.code == "import jax\ny = jax.lax.digamma(x)\n"
    assert after.ok
    tf = transpile("import torch\ny = x.digamma()\n", to="tf", mappings=[tmp_path])
    assert tf.code == "import tensorflow as tf\ny = tf.math.digamma(x)\n"
    # and through the CLI
    (tmp_path / "m.py").write_text(src)
    r = run_cli(str(tmp_path / "m.py"), "--to", "jax", "--mappings", str(tmp_path))
    assert r.code == 0 and "jax.lax.digamma(x)" in r.out


def test_pattern_warn_if_missing_is_said_for_its_framework_only(tmp_path: Path) -> None:
    """A `warn_if_missing` written on a pattern concerns that framework (JAX's int32 without x64):
    said when converting to it or from it, not between two other frameworks."""
    (tmp_path / "ones.yaml").write_text(
        textwrap.dedent(
            """\
            kind: ops
            ops:
              myones:
                params: {n: any, dtype: dtype}
                torch: ["torch.myones({n}, dtype={dtype?})"]
                jax: [{pattern: "jax.numpy.myones({n}, dtype={dtype?})", warn_if_missing: {dtype: JAX-only note}}]
                tf: ["keras.ops.ones({n}, dtype={dtype?})"]
            """
        )
    )
    src = "import torch\ny = torch.myones(3)\n"
    jax = transpile(src, to="jax", mappings=[tmp_path])
    assert [(d.code, d.message) for d in jax.diagnostics] == [("implicit-dtype", "JAX-only note")]
    assert "JAX-only note" not in [d.message for d in transpile(src, to="tf", mappings=[tmp_path]).diagnostics]
    given = transpile("import torch\ny = torch.myones(3, dtype=torch.int32)\n", to="jax", mappings=[tmp_path])
    assert not given.diagnostics
    from_jax = transpile("import jax.numpy as jnp\ny = jnp.myones(3)\n", to="tf", from_="jax", mappings=[tmp_path])
    assert [(d.code, d.message) for d in from_jax.diagnostics] == [("implicit-dtype", "JAX-only note")]


def test_extra_directory_overrides_a_dtype_spelling(tmp_path: Path) -> None:
    (tmp_path / "dtypes.yaml").write_text(
        "kind: dtypes\nsymbols:\n  jax:\n    float16: [jax.numpy.half, jax.numpy.float16]\n"
    )
    r = transpile("import torch\nd = torch.float16\n", to="jax", mappings=[tmp_path])
    assert r.code == "import jax.numpy as jnp\nd = jnp.half\n"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "kind: ops\nops:\n  digamma:\n    params: {x: any}\n    torch: '{x.digamma()'\n",
            ":5: ops.digamma.torch: malformed placeholder",
        ),
        (
            "kind: ops\nops:\n  digamma:\n    torch: '{x}.digamma()'\n",
            ":4: ops.digamma.torch: placeholder(s) ['x'] not declared",
        ),
        (
            "kind: ops\nops:\n  a:\n    params: {x: any}\n    torch: ['{x}.a()']\n"
            "    jax: [{pattern: 'jax.a({x})', warn_if_missing: {y: hi}}]\n",
            ":6: ops.a.jax.warn_if_missing: ['y'] not declared in params",
        ),
        ("kind: nonsense\n", ":1: kind: expected one of"),
        (
            "kind: dtypes\nsymbols:\n  torch:\n    float17: [torch.float17]\n",
            ":4: symbols.torch.float17: not a canonical",
        ),
        (
            "kind: dtypes\nsymbols:\n  torch:\n    float16: [half]\n",
            ":4: symbols.torch.float16: 'half' is not a qualified name",
        ),
        (
            "kind: ops\nops:\n  a:\n    params: {x: any}\n    torch: ['{x}.a(']\n",
            ":5: ops.a.torch: pattern '{x}.a(' is not",
        ),
        ("kind: ops\nops: [1, 2\n", ": invalid YAML"),
        ("kind: ops\nops:\n  a: 1\n  a: 2\n", ": invalid YAML: duplicate key 'a'"),
        (
            "kind: frameworks\nframeworks:\n  torch:\n    roots: torch\n    extra: 1\n",
            ":5: frameworks.torch.extra: unknown key",
        ),
        (
            "kind: frameworks\nframeworks:\n  torch:\n    roots: [torch]\n    import_helpers:\n"
            "      lib.optional_import: {module: 0, returns: maybe}\n",
            ":6: frameworks.torch.import_helpers.lib.optional_import.returns: expected value or pair",
        ),
        (
            "kind: frameworks\nframeworks:\n  torch:\n    roots: [torch]\n    import_helpers:\n"
            "      lib.optional_import: {module: 0, version: 1}\n",
            ":6: frameworks.torch.import_helpers.lib.optional_import.version: unknown key",
        ),
        # framework facts: frameworks.yaml lists and operators, op results, weight layouts
        (
            "kind: frameworks\nframeworks:\n  torch:\n    roots: [torch]\n    operators: {'&': torch.bitwise_and}\n",
            ":5: frameworks.torch.operators: expected operator: qualified function pairs",
        ),
        (
            "kind: frameworks\nframeworks:\n  torch:\n    roots: [torch]\n    module_bases: ['torch.nn.Module()']\n",
            ":5: frameworks.torch.module_bases: 'torch.nn.Module()' is not a qualified name",
        ),
        (
            "kind: ops\nops:\n  a:\n    returns: integer\n    params: {x: any}\n    torch: ['{x}.a()']\n",
            ":4: ops.a.returns: expected one of ['bool', 'int']",
        ),
        (
            "kind: surface\nframework: torch\ntensor_methods: [a]\nmodule_methods: [b]\noutside_models:\n"
            "  torch.save: ''\n",
            ":5: outside_models: expected qualified name: reason pairs",
        ),
        (
            "kind: layers\nparams:\n  a.Linear: {weight: {name: kernel, layout: sideways}}\n",
            ":3: params.a.Linear.weight.layout: expected one of same, transposed",
        ),
        (
            "kind: layers\nparams:\n  a.Linear: {weight: [kernel]}\n",
            ":3: params.a.Linear.weight: expected a target name or {name, layout}",
        ),
        (
            "kind: layers\nlayers:\n  a.Linear:\n    signature: 'n, m'\n"
            "    jax: {call: b.Linear, args: [n, m], sizes: [n]}\n",
            ":3: layers.a.Linear.jax: 'sizes' needs 'sized_init'",
        ),
        (
            "kind: layers\nlayers:\n  a.Linear:\n    signature: 'n, m'\n"
            "    jax: {call: b.Linear, args: [n, m], sizes: [k], sized_init: {kernel_init: b.init}}\n",
            ":3: layers.a.Linear.jax: 'k' is not a parameter of the signature",
        ),
    ],
)
def test_malformed_tables_name_file_line_key(tmp_path: Path, text: str, where: str) -> None:
    (tmp_path / "t.yaml").write_text(text)
    with pytest.raises(MappingError) as info:
        load_mappings([tmp_path])
    assert str(info.value).startswith(str(tmp_path / "t.yaml")), info.value
    assert where in str(info.value), info.value


def test_entry_point_group_adds_tables(tmp_path: Path) -> None:
    """A package registering a directory under `precision_transpiler.mappings` is picked up."""
    site = tmp_path / "site"
    pkg = site / "ptx_digamma_tables"
    (pkg / "tables").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pathlib import Path\nTABLES = Path(__file__).parent / 'tables'\n")
    (pkg / "tables" / "digamma.yaml").write_text(EXTRA_OP)
    dist = site / "ptx_digamma_tables-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ptx-digamma-tables\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[precision_transpiler.mappings]\ndigamma = ptx_digamma_tables:TABLES\n")
    script = (
        f"import sys; sys.path.insert(0, {str(site)!r})\n"
        "from precision_transpiler import transpile\n"
        "print(transpile('import torch\\ny = torch.digamma(x)\\n', to='jax').code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "y = jax.lax.digamma(x)" in proc.stdout


def test_table_cache_notices_edits(tmp_path, monkeypatch) -> None:
    """Validated tables are pickled between runs; editing a table must invalidate that."""
    from precision_transpiler.mappings import registry

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tables = tmp_path / "tables"
    tables.mkdir()
    table = tables / "digamma.yaml"
    table.write_text(EXTRA_OP)
    registry._load_cached.cache_clear()
    assert "digamma" in load_mappings([tables]).ops
    assert list((tmp_path / "cache" / "ptranspile").glob("tables-*.pickle"))
    registry._load_cached.cache_clear()
    assert "digamma" in load_mappings([tables]).ops  # served from the pickle
    table.write_text(EXTRA_OP.replace("params: {x: any}", "params: {x: matrix}"))
    registry._load_cached.cache_clear()
    with pytest.raises(MappingError, match="kind must be one of"):
        load_mappings([tables])
    registry._load_cached.cache_clear()


def test_policy_table_in_a_mappings_dir_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("kind: policies\npolicies: {}\n")
    with pytest.raises(MappingError, match="pass a policy file with --policy"):
        load_mappings([tmp_path])
