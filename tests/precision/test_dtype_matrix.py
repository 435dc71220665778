"""Every dtype symbol, in every spelling and import style, converted to every other framework
and EXECUTED: the converted module must bind the target framework's dtype object for the same
canonical dtype.

The expected value is computed independently of the mapping tables: `canonical_dtype` below
names a dtype object from the frameworks' own reporting (`str(torch.float16)`, `DType.name`,
`numpy.dtype(...).name`) and checks that the object really belongs to the target framework.
The tables are only used to enumerate the source spellings, and every source snippet is itself
executed first to confirm it denotes the dtype it is said to denote.
"""

from __future__ import annotations

import ast
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
import torch

from precision_transpiler import load_mappings, transpile

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

FRAMEWORKS = ("torch", "jax", "tf", "numpy")
CANONICAL = (
    "bool", "int8", "int16", "int32", "int64", "uint8",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)  # fmt: skip

# Top-level modules that belong to each framework: converted code must not import the source
# framework any more (it would make the output depend on a framework it no longer uses).
SOURCE_ROOTS = {"torch": {"torch"}, "jax": {"jax", "flax"}, "tf": {"tensorflow", "keras"}, "numpy": {"numpy"}}

_JAX_SCALAR_TYPE = type(jnp.float32)  # jax.numpy's scalar-type metaclass (_ScalarMeta)


def canonical_dtype(obj: object, framework: str) -> str:
    """Canonical name of a dtype object, asserting it is a dtype of `framework`."""
    if framework == "torch":
        assert isinstance(obj, torch.dtype), f"{obj!r} is not a torch.dtype"
        text = str(obj)
        assert text.startswith("torch."), text
        return text[len("torch.") :]
    if framework == "tf":
        assert isinstance(obj, tf.dtypes.DType), f"{obj!r} is not a tf.dtypes.DType"
        return obj.name
    if framework == "jax":
        assert isinstance(obj, _JAX_SCALAR_TYPE), f"{obj!r} is not a jax.numpy scalar type"
        return np.dtype(obj.dtype).name  # type: ignore[attr-defined]
    if framework == "numpy":
        if isinstance(obj, np.dtype):
            return obj.name
        assert isinstance(obj, type) and issubclass(obj, np.generic), f"{obj!r} is not a NumPy scalar type"
        assert not isinstance(obj, _JAX_SCALAR_TYPE), f"{obj!r} is a jax.numpy type, not a NumPy one"
        return np.dtype(obj).name
    raise AssertionError(framework)


# -- the helper itself, checked against hand-written spellings (not the tables) ----------------


@pytest.mark.parametrize(
    ("obj", "framework", "name"),
    [
        (torch.half, "torch", "float16"),
        (torch.float, "torch", "float32"),
        (torch.cdouble, "torch", "complex128"),
        (torch.bool, "torch", "bool"),
        (jnp.bool_, "jax", "bool"),
        (jnp.bfloat16, "jax", "bfloat16"),
        (jnp.float64, "jax", "float64"),  # the type object, whatever jax_enable_x64 says
        (tf.half, "tf", "float16"),
        (tf.dtypes.double, "tf", "float64"),
        (np.single, "numpy", "float32"),
        (np.intc, "numpy", "int32"),
        (np.ubyte, "numpy", "uint8"),
        (ml_dtypes.bfloat16, "numpy", "bfloat16"),
        (np.dtype("complex64"), "numpy", "complex64"),
    ],
)
def test_canonical_dtype_helper(obj: object, framework: str, name: str) -> None:
    assert canonical_dtype(obj, framework) == name


@pytest.mark.parametrize(
    ("obj", "framework"),
    [
        (np.float16, "torch"),
        (torch.float16, "jax"),
        (np.float16, "jax"),
        (jnp.float16, "numpy"),
        ("float16", "tf"),
    ],
)
def test_canonical_dtype_helper_rejects_other_frameworks(obj: object, framework: str) -> None:
    with pytest.raises(AssertionError):
        canonical_dtype(obj, framework)


# -- source snippets ---------------------------------------------------------------------------

_MODULE_ALIAS = {
    "torch": "t",
    "jax.numpy": "jnp",
    "tensorflow": "tf",
    "tensorflow.dtypes": "dt",
    "numpy": "np",
    "ml_dtypes": "mld",
}
_ROOT_ALIAS = {"tensorflow": "tf", "jax": "jx"}


def source_variants(qualified: str, var: str, n: int) -> list[tuple[str, list[str], list[str]]]:
    """Ways to bind `var` to the symbol `qualified`: (style, import lines, body lines).
    `n` keeps the local names of different spellings apart when they share one file."""
    module, _, attr = qualified.rpartition(".")
    alias = _MODULE_ALIAS.get(module, "m")
    variants = [
        ("import", [f"import {module}"], [f"{var}_import = {qualified}"]),
        ("import-as", [f"import {module} as {alias}"], [f"{var}_import_as = {alias}.{attr}"]),
    ]
    if "." in module:
        parent, _, leaf = module.rpartition(".")
        variants.append(("from-module", [f"from {parent} import {leaf}"], [f"{var}_from_module = {leaf}.{attr}"]))
        root, _, rest = module.partition(".")
        root_alias = _ROOT_ALIAS.get(root, "r")
        variants.append(
            ("root-alias", [f"import {root} as {root_alias}"], [f"{var}_root_alias = {root_alias}.{rest}.{attr}"])
        )
    variants.append(("from-import-as", [f"from {module} import {attr} as h{n}"], [f"{var}_from_import_as = h{n}"]))
    variants.append(("from-import", [f"from {module} import {attr}"], [f"{var}_from_import = {attr}"]))
    # Used inside an expression in a function body, not only as a bare module-level assignment.
    variants.append(
        (
            "in-function",
            [f"import {module} as {alias}"],
            [f"def get{n}():", f"    return [{alias}.{attr}][0]", f"{var}_in_function = get{n}()"],
        )
    )
    return variants


def build_source(snippets: list[tuple[str, list[str], list[str]]]) -> str:
    imports: list[str] = []
    body: list[str] = []
    for _, imp, lines in snippets:
        imports += [line for line in imp if line not in imports]
        body += lines
    return "\n".join([*imports, "", *body]) + "\n"


def bound_names(snippets: list[tuple[str, list[str], list[str]]]) -> list[str]:
    return [line.split(" = ")[0] for _, _, lines in snippets for line in lines if " = " in line and line[0] != " "]


TABLE = load_mappings().dtype_symbols


def spellings(source: str, canon: str) -> list[str]:
    found = TABLE[source].get(canon, [])
    # Every framework can spell every canonical dtype (NumPy's bfloat16 through ml_dtypes).
    assert found, f"no {source} spelling for {canon} in the tables"
    return found


def all_variants(source: str, canon: str) -> list[tuple[str, list[str], list[str]]]:
    out = []
    for n, spelling in enumerate(spellings(source, canon)):
        out += source_variants(spelling, f"d{n}", n)
    return out


def _exec(code: str) -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "converted"}
    exec(compile(code, "<converted>", "exec"), namespace)
    return namespace


def _imported_roots(code: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


def _check_bindings(code: str, names: list[str], framework: str, canon: str, what: str) -> None:
    namespace = _exec(code)
    wrong = []
    for name in names:
        try:
            got = canonical_dtype(namespace[name], framework)
        except (AssertionError, KeyError) as exc:
            wrong.append(f"{name}: {exc!r}")
            continue
        if got != canon:
            wrong.append(f"{name}: {got}")
    assert not wrong, f"{what} does not bind {framework} {canon}:\n{code}\n" + "\n".join(wrong)


def _check_converted(
    code: str, result, names: list[str], source: str, target: str, canon: str, *, imports: bool = True
) -> None:
    bad = [d.format() for d in result.diagnostics if d.severity in ("error", "unsupported")]
    assert not bad, f"diagnostics for\n{code}\n->\n{result.code}\n{bad}"
    assert result.changed, f"nothing converted:\n{code}"
    _check_bindings(result.code, names, target, canon, f"converted code (from\n{code})")
    if imports:
        _check_no_source_imports(result.code, source)


def _check_no_source_imports(code: str, source: str) -> None:
    leftover = _imported_roots(code) & SOURCE_ROOTS[source]
    assert not leftover, f"converted code still imports {leftover}:\n{code}"


PAIRS = [(s, t) for s in FRAMEWORKS for t in FRAMEWORKS if s != t]


# -- every spelling, every import style: one small file per (source dtype, target) -------------


@pytest.mark.parametrize("canon", CANONICAL)
@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_every_spelling_and_import_style(source: str, target: str, canon: str) -> None:
    snippets = all_variants(source, canon)
    code = build_source(snippets)
    names = bound_names(snippets)
    assert len(names) == len(snippets)
    _check_bindings(code, names, source, canon, "the source itself")  # guards the test's inputs
    result = transpile(code, to=target, from_=source)
    assert result.source_framework == source
    # Leftover imports are checked by test_no_source_import_left_when_a_module_is_imported_twice
    # (this file imports each module in several ways at once).
    _check_converted(code, result, names, source, target, canon, imports=False)


# One module imported in two ways in the same file; every use is converted, so no import of the
# source framework may remain (the converted file would otherwise need it installed).
TWICE = {
    "torch": "import torch\nimport torch as t\na = torch.half\nb = t.half\n",
    "jax": "import jax.numpy\nimport jax.numpy as jnp\na = jax.numpy.float16\nb = jnp.float16\n",
    "tf": "import tensorflow.dtypes\nimport tensorflow.dtypes as dt\na = tensorflow.dtypes.half\nb = dt.half\n",
    "numpy": "import numpy\nimport numpy as np\na = numpy.half\nb = np.half\n",
}


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_no_source_import_left_when_a_module_is_imported_twice(source: str, target: str) -> None:
    code = TWICE[source]
    _check_bindings(code, ["a", "b"], source, "float16", "the source itself")
    result = transpile(code, to=target, from_=source)
    _check_converted(code, result, ["a", "b"], source, target, "float16")


# -- the tiny one-symbol file of the plain form, for each dtype and pair -----------------------


@pytest.mark.parametrize("canon", CANONICAL)
@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_single_symbol_file(source: str, target: str, canon: str) -> None:
    spelling = spellings(source, canon)[0]
    module = spelling.rpartition(".")[0]
    code = f"import {module}\nd = {spelling}\n"
    _check_bindings(code, ["d"], source, canon, "the source itself")
    result = transpile(code, to=target, from_=source)
    _check_converted(code, result, ["d"], source, target, canon)


# -- source detection: every dtype of a framework in one file, `from_=None` ------------------


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_all_dtypes_with_detected_source(source: str, target: str) -> None:
    lines_by_canon = {}
    for canon in CANONICAL:
        spelling = spellings(source, canon)[0]
        module = spelling.rpartition(".")[0]
        lines_by_canon[canon] = ([f"import {module}"], [f"d_{canon} = {spelling}"])
    imports = sorted({imp for imp, _ in lines_by_canon.values() for imp in imp})
    code = "\n".join([*imports, "", *(b for _, body in lines_by_canon.values() for b in body)]) + "\n"
    result = transpile(code, to=target)
    assert result.source_framework == source, f"detected {result.source_framework} for\n{code}"
    bad = [d.format() for d in result.diagnostics if d.severity in ("error", "unsupported")]
    assert not bad, f"{result.code}\n{bad}"
    namespace = _exec(result.code)
    got = {canon: canonical_dtype(namespace[f"d_{canon}"], target) for canon in CANONICAL}
    assert got == {canon: canon for canon in CANONICAL}, result.code
    assert not _imported_roots(result.code) & SOURCE_ROOTS[source], result.code


def test_matrix_is_complete() -> None:
    """Every canonical dtype has spellings in every framework; all the styles are generated."""
    for source in FRAMEWORKS:
        for canon in CANONICAL:
            styles = {style for style, _, _ in all_variants(source, canon)}
            assert {"import", "import-as", "from-import-as", "from-import", "in-function"} <= styles
    assert any(style == "from-module" for style, _, _ in all_variants("tf", "float16"))  # from tensorflow import dtypes
    assert "from jax import numpy" in build_source(all_variants("jax", "float16"))
    assert len(PAIRS) == 12
