"""Imports after conversion, whatever the layout of the import statements.

Whatever way the source framework is imported (a `;`-separated line, several names in one
`import`, a parenthesised `from ... import (...)`, imports inside `if`/`try`), the converted
file must import what it uses, before it uses it, and must not keep source-framework names
nothing uses any more. Checked on fixed layouts (exact outputs) and on random layouts
(properties: the output parses, every name it reads is bound, module-level code runs with
stub modules in place of the frameworks, no unused source-framework import is left).
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from precision_transpiler import transpile

TARGETS = ("jax", "tf")


@pytest.mark.parametrize(
    ("src", "to", "expected"),
    [
        # one physical line holding the import and the code that uses it
        ("import torch; x = torch.half\n", "jax", "import jax.numpy as jnp\nx = jnp.float16\n"),
        ("import torch; x = torch.half\n", "tf", "import tensorflow as tf\nx = tf.float16\n"),
        ("import os; import torch; x = torch.half\n", "jax", "import jax.numpy as jnp\nimport os; x = jnp.float16\n"),
        ("x = 1; import torch\ny = torch.half\n", "jax", "import jax.numpy as jnp\nx = 1\ny = jnp.float16\n"),
        # several names in one import statement: the unused source-framework one goes, `os` stays
        ("import os, torch\nx = torch.half\n", "jax", "import os\nimport jax.numpy as jnp\nx = jnp.float16\n"),
        ("import torch, os\nx = torch.half\n", "tf", "import os\nimport tensorflow as tf\nx = tf.float16\n"),
        ("import os, torch as t\nx = t.half\n", "jax", "import os\nimport jax.numpy as jnp\nx = jnp.float16\n"),
        (
            "import os, torch\nx = torch.half\ny = torch.digamma\n",
            "jax",
            "import os, torch\nimport jax.numpy as jnp\n\nx = jnp.float16\n"
            "# ptranspile: unsupported: torch.digamma has no mapping to jax\ny = torch.digamma\n",
        ),
        # from-imports, partly used afterwards
        (
            "from torch import distributed, float16\nx = float16\ny = distributed\n",
            "jax",
            "from torch import distributed\nimport jax.numpy as jnp\nx = jnp.float16\n"
            "# ptranspile: unsupported: torch.distributed has no mapping to jax: distributed training (process "
            "groups, collectives); a converted model runs in one process\ny = distributed\n",
        ),
        (
            "from torch import (float16,\n    bfloat16)\nx = float16\n",
            "jax",
            "import jax.numpy as jnp\nx = jnp.float16\n",
        ),
        (
            "from torch import (\n    distributed,  # processes\n    float16,\n)\nx = float16\ny = distributed\n",
            "tf",
            "from torch import (\n    distributed,  # processes\n)\nimport tensorflow as tf\nx = tf.float16\n"
            "# ptranspile: unsupported: torch.distributed has no mapping to tf: distributed training (process "
            "groups, collectives); a converted model runs in one process\ny = distributed\n",
        ),
        # imports inside compound statements
        (
            "if True: import torch\nx = torch.half\n",
            "jax",
            "import jax.numpy as jnp\n\nif True: pass\nx = jnp.float16\n",
        ),
    ],
)
def test_layouts(src: str, to: str, expected: str) -> None:
    result = transpile(src, to=to)
    assert result.code == expected
    _check_output(result.code, to)


def test_new_import_never_lands_after_a_module_level_use() -> None:
    """The first removed top-level import is the usual place for the new one, but not when module
    code before it already needs the new name."""
    src = "import os\nif os.environ.get('X'):\n    import torch\n    y = torch.half\nimport torch\nz = torch.float\n"
    code = transpile(src, to="jax").code
    _check_output(code, "jax")
    assert code.index("import jax.numpy as jnp") < code.index("y = jnp.float16")


# -- random layouts ----------------------------------------------------------------------------

# (import statement, the name it binds for `torch`-level access, or a from-imported dtype)
IMPORTS = [
    ("import torch", "torch.half"),
    ("import torch as t", "t.half"),
    ("import os, torch", "torch.half"),
    ("import torch, os", "torch.float16"),
    ("import os, torch as T", "T.bfloat16"),
    ("from torch import float16", "float16"),
    ("from torch import float16, bfloat16", "bfloat16"),
    ("from torch import (float16,\n    bfloat16)", "float16"),
    ("from torch import (\n    float16,\n    float32,\n)", "float32"),
    ("import torch.nn as nn; import torch", "torch.float"),
]


@st.composite
def layouts(draw: st.DrawFn) -> str:
    chosen = draw(st.lists(st.sampled_from(IMPORTS), min_size=1, max_size=3))
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append('"""Docstring."""')
    if draw(st.booleans()):
        lines.append("import sys")
    for statement, use in chosen:
        wrap = draw(st.sampled_from(["plain", "semicolon", "if", "try", "suite"]))
        if wrap == "semicolon" and "\n" not in statement:
            lines.append(f"{statement}; v{len(lines)} = {use}")
            continue
        if wrap == "if":
            lines.append("if True:\n    " + statement.replace("\n", "\n    "))
        elif wrap == "try":
            lines.append("try:\n    " + statement.replace("\n", "\n    ") + "\nexcept ImportError:\n    pass")
        elif wrap == "suite" and "\n" not in statement and ";" not in statement:
            lines.append(f"if True: {statement}")
        else:
            lines.append(statement)
        lines.append(f"v{len(lines)} = {use}")
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(src=layouts(), to=st.sampled_from(TARGETS))
def test_random_layouts(src: str, to: str) -> None:
    result = transpile(src, to=to, from_="torch")
    assert result.ok, (src, result.diagnostics)
    _check_output(result.code, to, src)


# -- the checks ----------------------------------------------------------------------------------


def _check_output(code: str, to: str, src: str = "") -> None:
    context = f"\n--- input\n{src}--- output\n{code}"
    tree = ast.parse(code)  # parses
    bound = _bound_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            assert node.id in bound or hasattr(builtins, node.id), f"{node.id} is not bound{context}"
    _run_module_level(code, context)
    # Nothing is left of the source framework that the output does not use.
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                root = (module or alias.name).split(".")[0]
                local = alias.asname or (alias.name if module else alias.name.split(".")[0])
                if root == "torch":
                    assert local in used, f"unused source-framework import {local!r} kept{context}"


def _bound_names(tree: ast.Module) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound


class _Stub:
    """Stands for any framework module or attribute of one."""

    def __getattr__(self, name: str) -> _Stub:
        return _Stub()

    def __call__(self, *args: Any, **kwargs: Any) -> _Stub:
        return _Stub()


def _stub_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if name.split(".")[0] in ("os", "sys"):
        return __import__(name, globals, locals, fromlist, level)
    return _Stub()


def _run_module_level(code: str, context: str) -> None:
    """Run the module with stub frameworks: a name used before its import raises NameError."""
    namespace: dict[str, Any] = {"__builtins__": {**vars(builtins), "__import__": _stub_import}, "__name__": "m"}
    try:
        exec(compile(code, "<converted>", "exec"), namespace)
    except NameError as exc:  # pragma: no cover - the failure being tested for
        raise AssertionError(f"{exc}{context}") from None


TRY_IMPORT_MODEL = '''"""A model file whose imports include a try/except block before the framework's."""
import math

try:
    from typing import Literal
except ImportError:
    from typing_extensions import Literal

import torch.nn as nn
from .helpers import block


class Net(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.fc = block(d)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x)) * math.sqrt(2.0)
'''


@pytest.mark.parametrize("to", TARGETS)
def test_copied_code_goes_after_import_blocks(tmp_path, to: str) -> None:
    """timm's vision_transformer.py has a `try:` import block before `import torch`: copied
    sibling and runtime definitions went before it, and so before the framework imports they use
    (NameError: name 'nnx' is not defined, at import)."""
    package = tmp_path / "trypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("import torch.nn as nn\n\n\ndef block(d):\n    return nn.Linear(d, d)\n")
    model = package / "model.py"
    model.write_text(TRY_IMPORT_MODEL)
    result = transpile(TRY_IMPORT_MODEL, to=to, path=str(model))
    assert not result.errors, [d.format() for d in result.errors]
    code = result.code
    framework = "from flax import nnx" if to == "jax" else "import keras"
    assert code.index(framework) < code.index("# ptranspile: converted from trypkg.helpers")
    assert code.index("except ImportError") < code.index("# ptranspile: torch-compatible")
    namespace: dict[str, Any] = {"__name__": "trypkg.converted"}
    exec(compile(code, "<converted>", "exec"), namespace)  # module level runs: names bound in order
    assert namespace["Net"]() is not None


CONDITIONAL_IMPORT_MODEL = """import torch.nn as nn
from .helpers import block, flex_available

if flex_available():
    import math


class Net(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.fc = block(d)

    def forward(self, x):
        return self.fc(x)
"""


@pytest.mark.parametrize("to", TARGETS)
def test_copied_code_goes_before_an_if_that_calls_it(tmp_path, to: str) -> None:
    """transformers' `if is_torch_flex_attn_available(): from ... import ...` calls a copied
    helper: the copy must come before that `if` (NameError at import otherwise)."""
    package = tmp_path / "ifpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text(
        "import torch.nn as nn\n\n\ndef flex_available():\n    return True\n\n\n"
        "def block(d):\n    return nn.Linear(d, d)\n"
    )
    model = package / "model.py"
    model.write_text(CONDITIONAL_IMPORT_MODEL)
    result = transpile(CONDITIONAL_IMPORT_MODEL, to=to, path=str(model))
    assert not result.errors, [d.format() for d in result.errors]
    assert result.code.index("def flex_available") < result.code.index("if flex_available():")
    namespace: dict[str, Any] = {"__name__": "ifpkg.converted"}
    exec(compile(result.code, "<converted>", "exec"), namespace)
    assert namespace["Net"]() is not None
