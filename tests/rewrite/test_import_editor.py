"""The import edit (rewrite/import_editor.py): the code it returns is the edited module's code.

`edit_imports` prints the module once, statement by statement, and builds the edited module's
code from those texts, printing only the statements the edit changed; the pipeline keeps that
text instead of printing the module again. These tests hold the text to what LibCST prints for
the edited tree, on the layouts that stress it: no trailing newline, CRLF, comments before the
first statement and after the last, imports inside functions and on `;` lines, a file that is
only imports.
"""

from __future__ import annotations

import libcst as cst
import pytest

from precision_transpiler.rewrite.import_editor import edit_imports, module_code, used_names

SOURCES = {
    "plain": "import torch\nimport torch.nn as nn\n\n\nclass M:\n    pass\n",
    "no trailing newline": "import torch\n\nx = jnp.float16",
    "crlf": "import torch\r\n\r\n\r\ndef f(x):\r\n    return jnp.abs(x)\r\n",
    "header and footer comments": "# license\n\nimport torch\n\nx = jnp.ones(3)\n\n# def old():\n#     pass\n",
    "import inside a function": "import os\n\n\ndef f():\n    import torch\n    return jnp.zeros(2)\n",
    "semicolon line": "import torch; x = jnp.float16\n",
    "only imports": "import torch\nimport torch.nn.functional as F\n",
    "untouched compound statements": "import torch\n\n\nclass A:\n    def f(self):\n        return 1\n\n\nif True:\n"
    "    y = jnp.ones(1)\n",
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_returned_code_is_the_edited_module(name: str) -> None:
    tree = cst.parse_module(SOURCES[name])
    edited, removed, added, code = edit_imports(tree, ["torch"], [("jax.numpy", "jnp")])
    assert code == edited.code
    assert ("jax.numpy as jnp" in added) == ("jnp." in SOURCES[name])  # added where the code uses it
    assert removed  # every source imports torch, which the converted code no longer uses
    assert "import torch" not in code


def test_statements_the_edit_leaves_keep_their_objects() -> None:
    """A top-level statement without imports is not visited: the same object comes back, so its
    text printed before the edit is its text after it."""
    tree = cst.parse_module(SOURCES["untouched compound statements"])
    edited, *_ = edit_imports(tree, ["torch"], [("jax.numpy", "jnp")])
    kept = [stmt for stmt in edited.body if any(stmt is old for old in tree.body)]
    assert [type(stmt).__name__ for stmt in kept] == ["ClassDef", "If"]


def test_module_code_prints_what_it_is_not_given() -> None:
    tree = cst.parse_module(SOURCES["header and footer comments"])
    assert module_code(tree, {}) == tree.code
    first = tree.body[0]
    assert module_code(tree, {id(first): "import numpy\n"}) == tree.code.replace("import torch\n", "import numpy\n")


def test_an_empty_module_is_one_newline_as_libcst_prints_it() -> None:
    tree = cst.parse_module("")
    assert module_code(tree, {}) == tree.code


def test_names_inside_fstrings_are_uses() -> None:
    """Before Python 3.12 an f-string is one token: its `{}` are read for the names they use, so
    `f"{isinstance(t, nnx.Param)}"` gets its `from flax import nnx` and keeps `import torch`."""
    assert {"nnx", "t"} <= used_names('x = f"{isinstance(t, nnx.Param)}"\n')
    assert "torch" in used_names('x = rf"{torch.__version__!r}"\n')
    assert "a" not in used_names('x = "f{a}" + b"{a}"\n')  # not f-strings
