"""Property tests on random dtype-level torch snippets.

For snippets built only from constructs that convert (casts, dtype symbols in every spelling,
finfo/iinfo, predicates, tensor creation with dtype=, dtype comparisons, device moves, and
promote_types where the target is JAX), converting must be:

* deterministic: the same input gives the same output and diagnostics, twice;
* valid: the output parses as Python;
* complete: nothing reported unsupported, no error;
* stable under a round trip: torch -> T -> torch -> T gives the first T output again, for
  T in jax, tf, numpy (converting back and forth does not drift).
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from precision_transpiler import load_mappings, transpile

TORCH_DTYPES = load_mappings().dtype_symbols["torch"]  # canonical -> spellings ("torch.half", ...)
FLOAT_CANON = ["float16", "bfloat16", "float32", "float64"]
INT_CANON = ["int8", "int16", "int32", "int64", "uint8"]
CAST_METHODS = ["half", "float", "double", "long", "int", "short", "char", "byte", "bool", "bfloat16"]


def _spelling(canon_strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A torch spelling (`torch.float`, `torch.float32`, ...) of a drawn canonical dtype."""
    return canon_strategy.flatmap(lambda canon: st.sampled_from(TORCH_DTYPES[canon]))


any_dtype = _spelling(st.sampled_from(sorted(TORCH_DTYPES)))
float_dtype = _spelling(st.sampled_from(FLOAT_CANON))
int_dtype = _spelling(st.sampled_from(INT_CANON))


@st.composite
def statement(draw: st.DrawFn, names: list[str], target: str) -> str:
    """One statement assigning a new name from the existing `names` (templates use `torch.`;
    the module alias is substituted later)."""
    x = draw(st.sampled_from(names))
    y = draw(st.sampled_from(names))
    kinds = [
        "method",
        "to",
        "to_kw",
        "to_device_dtype",
        "type",
        "type_as",
        "finfo",
        "iinfo",
        "symbol",
        "predicate",
        "tensor",
        "is",
        "device",
        "default",
    ]
    if target == "jax":  # promote_types maps between torch and JAX only (NumPy/TF promote differently)
        kinds.append("promote")
    kind = draw(st.sampled_from(kinds))
    d = draw(any_dtype)
    if kind == "method":
        return f"{x}.{draw(st.sampled_from(CAST_METHODS))}()"
    if kind == "to":
        return f"{x}.to({d})"
    if kind == "to_kw":
        return f"{x}.to(dtype={d})"
    if kind == "to_device_dtype":
        return f'{x}.to("cpu", {d})'
    if kind == "type":
        return f"{x}.type({d})"
    if kind == "type_as":
        return f"{x}.type_as({y})"
    if kind == "finfo":
        attr = draw(st.sampled_from(["eps", "max", "min", "tiny", "bits"]))
        return f"torch.finfo({draw(float_dtype)}).{attr}"
    if kind == "iinfo":
        attr = draw(st.sampled_from(["max", "min", "bits"]))
        return f"torch.iinfo({draw(int_dtype)}).{attr}"
    if kind == "symbol":
        return d
    if kind == "predicate":
        return f"{x}.{draw(st.sampled_from(['is_floating_point', 'is_complex', 'element_size']))}()"
    if kind == "tensor":
        fn = draw(st.sampled_from(["tensor", "as_tensor"]))
        return f"torch.{fn}([1.0, 2.0], dtype={draw(float_dtype)})"
    if kind == "is":
        op = draw(st.sampled_from(["is", "is not"]))
        return f"{x}.dtype {op} {d}"
    if kind == "device":
        return draw(st.sampled_from([f"{x}.cpu()", f'{x}.to("cpu")', f"{x}.cuda()", f'{x}.to("cuda")']))
    if kind == "default":
        return "torch.get_default_dtype()"
    assert kind == "promote"
    return f"torch.promote_types({d}, {draw(any_dtype)})"


@st.composite
def torch_module(draw: st.DrawFn, target: str) -> str:
    alias = draw(st.sampled_from(["torch", "t"]))
    names = ["x", "y"]
    body = []
    for i in range(draw(st.integers(min_value=1, max_value=6))):
        expr = draw(statement(names, target))
        name = f"v{i}"
        body.append(f"    {name} = {expr}")
        names.append(name)
    if draw(st.booleans()):  # a dtype test in control flow
        body.append(f"    if x.dtype is {draw(any_dtype)}:")
        body.append(f"        x = x.{draw(st.sampled_from(CAST_METHODS))}()")
    body.append(f"    return {', '.join(names[2:])}")
    header = "import torch\n" if alias == "torch" else "import torch as t\n"
    code = header + "\n\ndef f(x, y):\n" + "\n".join(body) + "\n"
    if alias == "t":
        code = code.replace("torch.", "t.").replace("import t\n", "import torch\n")
    return code


def _parse_ok(code: str) -> None:
    ast.parse(code)
    compile(code, "<converted>", "exec")


def _key(result) -> tuple:
    return result.code, tuple(d.format() for d in result.diagnostics), tuple(result.rewrites)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), target=st.sampled_from(["jax", "tf", "numpy"]))
def test_roundtrip_is_deterministic_valid_and_a_fixed_point(data: st.DataObject, target: str) -> None:
    code = data.draw(torch_module(target), label="torch source")
    _parse_ok(code)

    first = transpile(code, to=target, from_="torch")
    again = transpile(code, to=target, from_="torch")
    assert _key(first) == _key(again), "transpile is not deterministic"
    assert not first.errors and not first.unsupported, (
        code + "\n->\n" + first.code + "\n" + "\n".join(d.format() for d in first.diagnostics)
    )
    assert first.changed
    _parse_ok(first.code)
    assert "torch" not in _imported_roots(first.code), first.code

    back = transpile(first.code, to="torch", from_=target)
    assert not back.errors and not back.unsupported, (
        first.code + "\n->\n" + back.code + "\n" + "\n".join(d.format() for d in back.diagnostics)
    )
    _parse_ok(back.code)

    forth = transpile(back.code, to=target, from_="torch")
    _parse_ok(forth.code)
    drift = (
        f"torch -> {target} -> torch -> {target} drifted\n--- source\n{code}\n--- first\n{first.code}"
        f"\n--- back\n{back.code}\n--- again\n{forth.code}"
    )
    # Layered, so that a failure says how deep the drift goes: statements, imports, text.
    assert _statements(forth.code) == _statements(first.code), "statements: " + drift
    assert _imports(forth.code) == _imports(first.code), "imports: " + drift
    assert forth.code == first.code, "text: " + drift


def _statements(code: str) -> list[str]:
    return [ast.dump(n) for n in ast.parse(code).body if not isinstance(n, ast.Import | ast.ImportFrom)]


def _imports(code: str) -> list[str]:
    return [ast.dump(n) for n in ast.parse(code).body if isinstance(n, ast.Import | ast.ImportFrom)]


def _imported_roots(code: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.slow
def test_generator_produces_what_it_claims() -> None:
    """The strategy itself: valid torch code that can contain each kind of construct."""
    for token in ("finfo(", "iinfo(", ".to(", " is ", "tensor(", ".type(", "cuda", "t.half", "promote_types"):
        example = find(
            torch_module("jax"),
            lambda code, token=token: token in code,
            settings=settings(max_examples=2000, deadline=None, database=None),
        )
        _parse_ok(example)
        assert example.startswith("import torch")


# Fixed inputs for the same round-trip property, for shapes random generation rarely hits:
# code that needs no torch import once converted back, and tf patterns that need NumPy.
FIXED = [
    "import torch\n\n\ndef f(x, y):\n    v0 = x.type_as(y)\n    return v0\n",
    "import torch\n\n\ndef f(x):\n    return x.is_floating_point(), x.element_size(), x.cpu()\n",
    "import torch\n\n\ndef f(x):\n    return torch.iinfo(torch.int8).max, torch.get_default_dtype()\n",
    "import torch as t\n\n\ndef f(x):\n    if x.dtype is t.half:\n        x = x.float()\n    return x.to(t.bfloat16)\n",
]


@pytest.mark.parametrize("target", ["jax", "tf", "numpy"])
@pytest.mark.parametrize("code", FIXED, ids=["type_as", "predicates-cpu", "iinfo-default", "alias-is-bfloat16"])
def test_roundtrip_fixed_point_on_fixed_inputs(code: str, target: str) -> None:
    first = transpile(code, to=target, from_="torch")
    assert first.ok and first.changed, first.code
    back = transpile(first.code, to="torch", from_=target)
    assert back.ok, back.code
    forth = transpile(back.code, to=target, from_="torch")
    drift = f"--- first\n{first.code}\n--- back\n{back.code}\n--- again\n{forth.code}"
    assert _statements(forth.code) == _statements(first.code), "statements: " + drift
    assert _imports(forth.code) == _imports(first.code), "imports: " + drift
    assert forth.code == first.code, "text: " + drift
    # Converting back must not leave imports the torch code no longer uses.
    assert not _imported_roots(back.code) - {"torch"}, back.code
