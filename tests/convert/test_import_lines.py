"""Editing top-level imports by lines (convert/import_lines.py) gives what a LibCST edit of the
whole module gives, with comments and layout of the untouched lines kept byte for byte."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst

from precision_transpiler.convert.import_lines import (
    after_imports,
    is_import_node,
    lone_from_imports,
    lone_statement,
    render,
    splice,
)
from precision_transpiler.convert.module_imports import module_imports_as_names
from precision_transpiler.syntax import is_import_statement

SOURCE = '''"""Docstring."""
# a comment about the imports
from a import (  # trailing comment
    b,
    c,
)
import os; from x import y
from .sibling import Layer as L

try:
    from typing import Literal
except ImportError:
    from typing_extensions import Literal


class Model:  # not an import
    pass
'''


def test_lone_from_imports_skip_shared_lines_and_keep_comments() -> None:
    found = lone_from_imports(SOURCE, ast.parse(SOURCE))
    modules = [cst.Module([]).code_for_node(f.node.module) if f.node.module else "" for f in found]
    assert modules == ["a", "sibling"]  # `import os; from x import y` shares a line
    first = found[0]
    assert (first.start, first.end) == (2, 6)
    assert "# trailing comment" in render(first.statement)


def test_splice_drops_a_statement_with_the_blank_lines_above() -> None:
    found = lone_from_imports(SOURCE, ast.parse(SOURCE))
    sibling = found[1]
    edited = splice(SOURCE, {(sibling.start, sibling.end): ""})
    assert "from .sibling" not in edited
    assert edited.replace("from .sibling import Layer as L\n", "") == edited  # nothing else lost
    assert edited.splitlines()[:7] == SOURCE.splitlines()[:7]
    ast.parse(edited)


def test_after_imports_matches_libcst_import_statements() -> None:
    tree = ast.parse(SOURCE)
    module = cst.parse_module(SOURCE)
    try_block = next(n for n in tree.body if isinstance(n, ast.Try))
    class_def = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert is_import_node(try_block) and not is_import_node(class_def)
    assert is_import_statement(next(s for s in module.body if isinstance(s, cst.Try)))
    # the try/except of imports counts as an import block; the class ends the leading run
    line = after_imports(tree, leading_only=True)
    assert SOURCE.splitlines()[line - 1].strip() == "from typing_extensions import Literal"
    assert after_imports(tree, leading_only=False) == line


def test_lone_statement_inside_a_block_is_parsed_without_its_indentation() -> None:
    code = "def f():\n    from a import (\n        b,\n    )\n    return b\n"
    tree = ast.parse(code)
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    statement = lone_statement(code.splitlines(keepends=True), function.body[0], function.body)
    assert statement is not None
    assert render(statement, "    ") == "    from a import (\n        b,\n    )\n"
    one_liner = "if x: import y\n"
    tree = ast.parse(one_liner)
    block = tree.body[0]
    assert isinstance(block, ast.If)
    assert lone_statement(one_liner.splitlines(keepends=True), block.body[0], block.body) is None


FLOW = """import torch  # the framework
{module_import}


class Flow(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        # a comment that stays
        self.made = {made}(d)  # built here
        self.other = {other}(
            d
        )
"""


def test_module_aliases_become_names_by_text_edits(tmp_path: Path) -> None:
    """`made_module.MADE(...)` -> `MADE(...)` imported by name: attribute chains, the module
    import and the new import edited in place, the rest of the file byte for byte."""
    package = tmp_path / "flowpkg"
    (package / "nets").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "nets" / "__init__.py").write_text("")
    (package / "nets" / "made.py").write_text("import torch\n\n\nclass MADE(torch.nn.Module):\n    pass\n")
    model = package / "model.py"
    code = FLOW.format(
        module_import="from .nets import made as made_module", made="(made_module).MADE", other="made_module.MADE"
    )
    model.write_text(code)

    def locate(level: int, name: str | None) -> tuple[Path | None, str]:
        parts = (name or "").split(".")
        if not level:  # absolute: `flowpkg.nets.made`
            parts = parts[1:]
        base = package.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate, "flowpkg." + ".".join(parts)
        return None, "flowpkg." + ".".join(parts)

    edited = module_imports_as_names(code, locate)
    assert edited == FLOW.format(module_import="from flowpkg.nets.made import MADE", made="MADE", other="MADE")


def test_a_chain_inside_an_f_string_is_renamed_too(tmp_path: Path) -> None:
    """ast positions inside f-strings are unreliable before Python 3.12: such a file is edited
    with LibCST instead, with the same result."""
    package = tmp_path / "fpkg"
    (package / "nets").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "nets" / "__init__.py").write_text("")
    (package / "nets" / "made.py").write_text("import torch\n\n\nclass MADE(torch.nn.Module):\n    pass\n")
    code = 'from .nets import made as made_module\n\nNAME = f"{made_module.MADE.__name__}"\nM = made_module.MADE\n'

    def locate(level: int, name: str | None) -> tuple[Path | None, str]:
        parts = (name or "").split(".")[0 if level else 1 :]
        base = package.joinpath(*parts)
        found = next((c for c in (base.with_suffix(".py"), base / "__init__.py") if c.is_file()), None)
        return found, "fpkg." + ".".join(parts)

    edited = module_imports_as_names(code, locate)
    assert edited == 'from fpkg.nets.made import MADE\n\nNAME = f"{MADE.__name__}"\nM = MADE\n'


def test_a_class_attribute_of_the_same_name_does_not_keep_the_module_import(tmp_path: Path) -> None:
    """spikingjelly: `from .. import surrogate` and `surrogate.Sigmoid()` beside a dataclass field
    `surrogate: str`: the field binds a class attribute, not the module-level name."""
    package = tmp_path / "spkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "surrogate.py").write_text("import torch\n\n\nclass Sigmoid(torch.nn.Module):\n    pass\n")
    code = (
        "from . import surrogate\n\n\ndef make(f=surrogate.Sigmoid()):\n    return f\n\n\n"
        "class Config:\n    surrogate: str = 'sigmoid'\n"
    )

    def locate(level: int, name: str | None) -> tuple[Path | None, str]:
        parts = (name or "").split(".")[0 if level else 1 :]
        base = package.joinpath(*[p for p in parts if p])
        found = next((c for c in (base.with_suffix(".py"), base / "__init__.py") if c.is_file()), None)
        return found, "spkg." + ".".join(p for p in parts if p)

    edited = module_imports_as_names(code, locate)
    assert edited.startswith("from spkg.surrogate import Sigmoid\n") and "f=Sigmoid()" in edited, edited
    assert "surrogate: str = 'sigmoid'" in edited


def test_a_statement_on_an_import_line_stays_in_the_leading_imports() -> None:
    """`from einops import rearrange; has_einops = True` (a helper's import written out): copies
    go after the whole line, not between the import and the rest of the imports' run."""
    code = "import torch\nfrom einops import rearrange; has_einops = True\nimport math\n\n\nclass A:\n    pass\n"
    line = after_imports(ast.parse(code), leading_only=True)
    assert code.splitlines()[line - 1] == "import math"
