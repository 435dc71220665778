"""Deeply nested and long-chained expressions: LibCST's native parser crashes the process on deep
nesting (a segmentation fault no `except` catches) and its visitors exceed the recursion limit on
long chains. Every file gets its own verdict; the run goes on (rewrite/depth.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from precision_transpiler.api import detect_framework, transpile
from precision_transpiler.rewrite.depth import MAX_BRACKETS, MAX_CHAIN, TooDeep, check_depth
from tests.helpers import run_cli

HEADER = "import torch\n\n"


def _tree(folder: Path) -> Path:
    folder.mkdir()
    (folder / "chain.py").write_text(HEADER + "x = torch.half" + " + 1" * 200 + "\n")
    (folder / "nested.py").write_text(HEADER + "x = " + "(" * 1500 + "1" + ")" * 1500 + "\n")
    (folder / "long.py").write_text(HEADER + "x = torch.half" + " + 1" * 20000 + "\n")
    (folder / "plain.py").write_text(HEADER + "y = torch.zeros(3)\n")
    return folder


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_directory_with_deep_files_gets_a_verdict_for_every_file(tmp_path: Path, jobs: str) -> None:
    tree = _tree(tmp_path / "src")
    out = tmp_path / "out"
    run = run_cli(str(tree), "--to", "jax", "-o", str(out), "-j", jobs)
    assert run.code == 2, run.err  # errors in some files, not a crash (139) or BrokenProcessPool
    assert "internal error" not in run.err and "Traceback" not in run.err, run.err
    lines = run.err.splitlines()
    nested = [ln for ln in lines if "nested.py:3:" in ln]
    long = [ln for ln in lines if "long.py:3:" in ln]
    assert len(nested) == 1 and f"{MAX_BRACKETS} nested brackets" in nested[0], run.err
    assert len(long) == 1 and f"{MAX_CHAIN} operators" in long[0], run.err
    assert "4 files" in lines[-1] and "2 with errors" in lines[-1], run.err
    assert "jnp.float16 + 1 + 1" in (out / "chain.py").read_text()  # the 200-term chain converted
    assert "jnp.zeros(3)" in (out / "plain.py").read_text()


def test_a_long_flat_chain_converts_through_the_library_api() -> None:
    result = transpile(HEADER + "x = torch.half" + " + 1" * 1500 + "\n", to="jax")
    assert not result.errors and result.code.count("+ 1") == 1500


def test_the_limits_are_exact_and_name_the_line() -> None:
    check_depth("x = " + "(" * MAX_BRACKETS + "1" + ")" * MAX_BRACKETS + "\n")
    check_depth("x = a" + " + a" * MAX_CHAIN + "\n")
    check_depth("x = [" + ", ".join(["-1"] * 50000) + "]\n")  # long, but flat: commas reset the chain
    with pytest.raises(TooDeep) as deep:
        check_depth("\n\nx = " + "f(" * (MAX_BRACKETS + 1) + "1" + ")" * (MAX_BRACKETS + 1) + "\n")
    assert deep.value.line == 3
    with pytest.raises(TooDeep):
        check_depth("x = " + "not " * (MAX_CHAIN + 1) + "a\n")
    result = transpile(HEADER + "x = " + "[" * 1500 + "]" * 1500 + "\n", to="jax", path="deep.py")
    assert [(d.line, d.code) for d in result.errors] == [(3, "too-deep")]
    assert detect_framework(HEADER + "x = " + "[" * 1500 + "]" * 1500 + "\n") is None


def test_nested_lambdas_chain_through_their_colons_and_parameters() -> None:
    """A lambda's colon ends its parameters, not the chain: 20,000 nested `lambda:` crashed the
    parser (signal 11) when each colon reset the count like a dict's colon."""
    half = MAX_CHAIN // 2  # each lambda counts twice: the keyword and its colon
    check_depth("f = " + "lambda: " * (half - 1) + "a\n")
    for lam in ("lambda: ", "lambda x, y=1: ", "lambda *a, **k: "):
        with pytest.raises(TooDeep):
            check_depth("f = " + lam * (half + 1) + "a\n")
    with pytest.raises(TooDeep):
        check_depth("d = {1: " + "lambda: " * (half + 1) + "a}\n")
    # colons of dicts, slices and annotations still separate, after a lambda too
    check_depth("d = {" + ", ".join(f"{i}: lambda: x[1:2]" for i in range(5000)) + "}\n")
    check_depth("".join(f"def f{i}(a: int = 1, b: str = 'x') -> None: ...\n" for i in range(3000)))


def test_a_deep_lambda_file_is_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "lambdas.py").write_text(HEADER + "f = " + "lambda: " * 20000 + "torch.half\n")
    (tree / "plain.py").write_text(HEADER + "y = torch.zeros(3)\n")
    run = run_cli(str(tree), "--to", "jax", "-o", str(tmp_path / "out"))
    assert run.code == 2, run.err  # not -11: the parser never sees the lambdas
    assert f"lambdas.py:3:1: error: an expression chains more than {MAX_CHAIN} operators" in run.err
    assert "jnp.zeros(3)" in (tmp_path / "out" / "plain.py").read_text()


def _strings_model(n: int) -> str:
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(2, 2)\n\n    def forward(self, x):\n"
        "        y = " + " ".join(['"a"'] * n) + "\n        return self.fc(x.half())\n"
    )


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_many_adjacent_strings_convert_or_are_one_line(tmp_path: Path, to: str) -> None:
    """Implicit concatenation nests one LibCST node per string: 1,200 of them beside a rewrite
    made its code generator recurse and fail with a KeyError that hid the RecursionError (a
    traceback); over the chain limit they crashed a directory run."""
    (tmp_path / "strings.py").write_text(_strings_model(1200))
    (tmp_path / "many.py").write_text(_strings_model(MAX_CHAIN + 2))  # MAX_CHAIN + 1 joins
    run = run_cli("strings.py", "many.py", "--to", to, "-o", "out", cwd=tmp_path)
    assert run.code == 2 and "Traceback" not in run.err and "internal error" not in run.err, run.err
    assert run.err.splitlines()[0].startswith("many.py:11:1: error: an expression chains more than"), run.err
    assert (tmp_path / "out" / "strings.py").read_text().count('"a"') == 1200


def test_adjacent_strings_count_as_a_chain_across_lines() -> None:
    check_depth("y = " + " ".join(['"a"'] * (MAX_CHAIN + 1)) + "\n")  # MAX_CHAIN joins
    check_depth("y = [" + ", ".join(['"a"'] * 50000) + "]\n")  # separate strings: no chain
    with pytest.raises(TooDeep):
        check_depth("y = (\n" + "\n".join(['    "a"  # c'] * (MAX_CHAIN + 2)) + "\n)\n")


def test_deep_stack_retries_an_error_raised_while_a_recursion_error_unwound() -> None:
    from precision_transpiler.rewrite.depth import with_deep_stack

    calls: list[str] = []

    def masked(succeed_in_thread: bool) -> str:
        calls.append(threading.current_thread().name)
        if succeed_in_thread and len(calls) > 1:
            return "converted"
        try:
            raise RecursionError("maximum recursion depth exceeded")
        except RecursionError:
            raise KeyError("position") from None  # what LibCST's position bookkeeping does

    assert with_deep_stack(lambda: masked(True)) == "converted"
    assert calls == [threading.current_thread().name, "ptranspile-deep"]
    with pytest.raises(RecursionError):
        with_deep_stack(lambda: masked(False))
    with pytest.raises(KeyError):  # any other error is not retried
        with_deep_stack(lambda: {}["x"])


@pytest.mark.parametrize("newline", ["\r", "\r\n"])
def test_the_scan_reads_lines_as_python_does(tmp_path: Path, newline: str) -> None:
    """A file whose lines end in a lone CR was one line to the scan, which saw nothing to count:
    a 3,000-term chain in it reached the parser and crashed the run (exit 139)."""
    chain = HEADER + "x = torch.half" + " + 1" * 3000 + "\n"
    with pytest.raises(TooDeep) as deep:
        check_depth(chain.replace("\n", newline))
    assert deep.value.line == 3
    (tmp_path / "cr.py").write_bytes(chain.replace("\n", newline).encode())
    (tmp_path / "plain.py").write_text(HEADER + "y = torch.zeros(3)\n")
    run = run_cli("cr.py", "plain.py", "--to", "jax", "-o", "out", cwd=tmp_path)
    assert run.code == 2, run.err
    assert run.err.startswith(f"cr.py:3:1: error: an expression chains more than {MAX_CHAIN} operators"), run.err


def test_a_chain_whose_conversion_nests_too_deep_is_a_one_line_error() -> None:
    """`x.float().float()...` is flat in the input, but each cast becomes a call around the last
    one in Keras: past Python's 200 nested brackets that is the file's error, never code that
    does not parse (found by benchmarks/fuzz.py)."""
    from precision_transpiler import transpile

    source = "import torch\n\ny = x" + ".float()" * 300 + "\n"
    result = transpile(source, to="tf")
    assert result.code == source
    assert [(d.severity, d.code) for d in result.diagnostics] == [("error", "too-deep")]
    assert "internal error" not in result.diagnostics[0].message


def test_a_syntax_error_python_cannot_report_is_still_one_line() -> None:
    """CPython's parser raises MemoryError instead of SyntaxError on some invalid input with deep
    brackets (here: 199 nested braces, then a `def` without a body at the end of the file); the
    error comes from LibCST's parser then (found by benchmarks/fuzz.py)."""
    from precision_transpiler import transpile

    braces = 199
    source = (
        "class M:\n    def f(self):\n        if a:\n            b = 1\n"
        f"        y = {'{' * braces}torch.half{'}' * braces}\n    def forward(self, x):"
    )
    result = transpile(source, to="jax")
    assert [d.code for d in result.diagnostics] == ["syntax-error"]
    assert result.code == source


@pytest.mark.parametrize(("trailer", "cost"), [("[0]", 4), ("()", 2), (".a", 1)])
def test_subscript_and_call_chains_count_by_what_they_cost_the_parser(trailer: str, cost: int) -> None:
    """LibCST parses a chain of trailers in time growing with the square of its length (12,000
    subscripts `x[0][0]...` crashed it, 6,000 took 99 s): a subscript counts as 4 operators, a
    call as 2, an attribute as 1, so a file within the limit parses in well under a second."""
    most = MAX_CHAIN // cost
    check_depth("y = x" + trailer * most + "\n")
    with pytest.raises(TooDeep) as deep:
        check_depth("import torch\ny = x" + trailer * (most + 1) + "\n")
    assert deep.value.line == 2
    check_depth("y = [x[0] for x in rows], f(a)(b)[c], d.get(k)\n" * 400)  # ordinary code: no chain


def test_a_twelve_thousand_subscript_chain_is_one_line_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "deep.py").write_text(HEADER + "y = x" + "[0]" * 12000 + "\n")
    (tmp_path / "src" / "plain.py").write_text(HEADER + "y = torch.zeros(3)\n")
    run = run_cli(str(tmp_path / "src"), "--to", "tf", "-o", str(tmp_path / "out"), "-j", "2")
    assert run.code == 2 and "internal error" not in run.err, run.err
    assert "deep.py:3:1: error: an expression chains more than" in run.err, run.err
    assert (tmp_path / "out" / "plain.py").is_file()
