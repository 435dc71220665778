"""Module-level values and star imports of sibling and torch-library modules: what the output
needs of them is copied (or reported where it cannot be), never left as an import that loads
torch when the converted module does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.analysis import load_imports
from precision_transpiler.convert.cleanup import drop_orphaned_imports
from precision_transpiler.convert.module_imports import module_imports_as_names
from precision_transpiler.convert.siblings import inline_siblings
from precision_transpiler.convert.siblings.resolve import locator, package_imports_torch, star_imports_as_names
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.convert.siblings.packages import unchanged, write_package
from tests.helpers import on_both_targets

OPS = """
import logging

import torch

_DTYPES = (torch.float32, torch.float16)
logger = logging.getLogger(__name__)


class _CudaSelection:
    def __init__(self, name: str):
        self.name = name

    def pick(self, x):
        return "reference"


_selection = _CudaSelection(__name__)
"""

MODEL = """
import torch
from torch import nn

from fc8lib.ops import _DTYPES, _selection, logger


class Net(nn.Module):
    def __init__(self, d: int = 8):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        logger.debug("forward")
        assert x.dtype in _DTYPES and _selection.pick(x) == "reference"
        return torch.tanh(self.fc(x))
"""


def _imported_modules(code: str) -> set[str]:
    tree = ast.parse(code)
    found = {("." * n.level) + (n.module or "") for n in tree.body if isinstance(n, ast.ImportFrom)}
    return found | {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}


@pytest.fixture
def torch_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`fc8lib`, installed (a dist-info on the search path) and requiring torch."""
    write_package(tmp_path, {"fc8lib/ops.py": OPS, "fc8lib/model.py": MODEL})
    info = tmp_path / "fc8lib-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fc8lib\nVersion: 0.1\nRequires-Dist: torch\n")
    (info / "top_level.txt").write_text("fc8lib\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    load_imports.torch_distribution.cache_clear()
    load_imports._distributions.cache_clear()
    yield tmp_path
    load_imports.torch_distribution.cache_clear()
    load_imports._distributions.cache_clear()


@on_both_targets
def test_values_of_a_package_that_requires_torch_are_copied(torch_library: Path, target: str) -> None:
    """A tuple of torch dtypes, a module-level instance and a logger of a package built on torch
    were left imported (the sibling's conversion dropped its private values, unread there), and
    the output imported torch through them; they come in with the class they need."""
    model = torch_library / "fc8lib/model.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    assert not any(m.startswith("fc8lib") or m.split(".")[0] == "torch" for m in _imported_modules(result.code))
    assert "class _CudaSelection" in result.code and "_selection = _CudaSelection(__name__)" in result.code
    assert "_DTYPES = (" in result.code and "logger = logging.getLogger(__name__)" in result.code
    converted = torch_library / f"net_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,8]"], torch_free=True)
    verdict = verify_files(model, converted, options)
    assert verdict.passed, verdict.failures


def test_private_constants_the_original_never_read_are_kept() -> None:
    """A private constant only dropped code read goes with it; one the module never read itself
    is there for the modules that import it, and stays."""
    original = "import torch\n\n_META = {'a': 1}\n_EXPORTED = 2\n\n\ndef f():\n    return _META\n"
    converted = "_META = {'a': 1}\n_EXPORTED = 2\n"
    assert drop_orphaned_imports(original, converted) == "_EXPORTED = 2\n"


def test_a_module_name_read_through_the_module_is_never_imported(tmp_path: Path) -> None:
    """`surrogate.__name__` is the module's name: importing `__name__` from the module would
    replace the output's own. It becomes the name, as a string; other names still come in."""
    write_package(
        tmp_path,
        {
            "pk/sur.py": "import torch\n\n\ndef act(x):\n    return torch.sigmoid(x)\n",
            "pk/model.py": "from pk import sur as surrogate\n\nTAG = surrogate.__name__\nY = surrogate.act\n",
        },
    )
    model = tmp_path / "pk/model.py"
    code = module_imports_as_names(model.read_text(), locator(model, frozenset({"torch"})))
    assert 'TAG = "pk.sur"' in code and "from pk.sur import act" in code
    assert "__name__" not in code.replace('"pk.sur"', "")


STARS = {
    "spkg/__init__.py": "import torch  # the package's __init__ needs torch\n",
    "spkg/config.py": """
        __all__ = ["is_exportable"]
        _EXPORTABLE = False


        def is_exportable():
            return _EXPORTABLE


        def unrelated():
            return 1
    """,
    "spkg/conv2d_layers.py": """
        import math

        import torch
        from torch import nn

        from .config import *


        def _pad(k):
            return k // 2


        def select_conv2d(cin, cout, k):
            assert not is_exportable()
            return nn.Conv2d(cin, cout, k, padding=_pad(k))
    """,
    "spkg/model.py": """
        import torch
        from torch import nn

        from .config import *
        from .conv2d_layers import *


        class Net(nn.Module):
            def __init__(self, c: int = 3):
                super().__init__()
                self.conv = select_conv2d(c, 4, 3)
                self.scale = math.sqrt(2.0)  # `math` too comes through the star import

            def forward(self, x):
                y = self.conv(x) * self.scale
                return y if is_exportable() else torch.relu(y)
    """,
}


def test_star_imports_are_spelled_out_as_the_names_used(tmp_path: Path) -> None:
    """The names a star import gives are the module's `__all__`, else its public names; only
    those the file uses are imported, a name the module imports itself from where it comes, and
    a star import of which nothing is used goes."""
    write_package(tmp_path, STARS)
    model = tmp_path / "spkg/model.py"
    code = "from .config import *\nfrom .conv2d_layers import *\nfrom .config import *\n"
    code += "\nx = select_conv2d(1, 2, 3) if is_exportable() else math.pi\n"
    spelled, unresolved = star_imports_as_names(code, model, locator(model, None))
    assert not unresolved
    lines = spelled.splitlines()
    # conv2d_layers gives `is_exportable` too, through its own star import; `math` it imports
    assert lines == [
        "from .config import is_exportable",
        "from .conv2d_layers import is_exportable, select_conv2d",
        "import math",
        "from .config import is_exportable",
        "",
        "x = select_conv2d(1, 2, 3) if is_exportable() else math.pi",
    ]
    unused = star_imports_as_names("from .config import *\n\nx = 1\n", model, locator(model, None))
    assert unused == ("\nx = 1\n", [])
    shared = "from .conv2d_layers import *; import math\n\nx = select_conv2d(1, 2, 3), math.pi\n"
    spelled, _ = star_imports_as_names(shared, model, locator(model, None))
    assert spelled.startswith("from .conv2d_layers import select_conv2d\nimport math\n\n")


def test_a_package_whose_init_imports_torch_is_told(tmp_path: Path) -> None:
    write_package(tmp_path, {**STARS, "plain/config.py": "X = 1\n", "reexp/__init__.py": "from .layers import *\n"})
    write_package(tmp_path, {"reexp/layers.py": "import torch\n", "reexp/util.py": "X = 1\n"})
    assert package_imports_torch(tmp_path / "spkg/config.py")
    assert package_imports_torch(tmp_path / "reexp/util.py")  # its __init__ loads a torch module
    assert not package_imports_torch(tmp_path / "plain/config.py")


def test_star_imports_of_siblings_are_followed(tmp_path: Path) -> None:
    """geffnet: `from .config import *` (plain Python, but the package's `__init__` imports
    torch) was kept as written, and `from .conv2d_layers import *` (torch code) was left
    imported: the names they give are copied like named imports."""
    write_package(tmp_path, STARS)
    model = tmp_path / "spkg/model.py"
    code, report = inline_siblings(str(model), model.read_text(), unchanged)
    assert "import *" not in code and not any(m.startswith((".", "spkg")) for m in _imported_modules(code))
    assert "def is_exportable(" in code and "def select_conv2d(" in code and "def unrelated(" not in code
    assert {"spkg.config.is_exportable", "spkg.conv2d_layers.select_conv2d"} <= set(report.inlined)


@on_both_targets
def test_star_imported_siblings_convert_and_verify(
    tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole pipeline: the converter knows `math` (from the star import's module) and the
    output loads without torch or the package."""
    write_package(tmp_path, STARS)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = tmp_path / "spkg/model.py"
    result = transpile(model.read_text(), to=target, path=str(model))
    assert not result.errors and not result.unsupported, [d.format() for d in result.diagnostics]
    assert not any(m.startswith((".", "spkg", "torch")) for m in _imported_modules(result.code))
    converted = tmp_path / f"net_{target}.py"
    converted.write_text(result.code)
    options = VerifyOptions(entry="Net()", inputs=["float32[1,3,8,8]"], torch_free=True)
    verdict = verify_files(model, converted, options)
    assert verdict.passed, verdict.failures


def test_a_star_import_that_cannot_be_read_is_reported(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "bad/broken.py": "import torch\n\ndef f(:\n",
            "bad/model.py": "import torch\n\nfrom .broken import *\n\n\ndef g(x):\n    return f(x)\n",
        },
    )
    model = tmp_path / "bad/model.py"
    code, report = inline_siblings(str(model), model.read_text(), unchanged)
    assert "from .broken import *" in code
    assert [(p, line, col, sev) for p, line, col, sev, _, _ in report.diagnostics] == [(str(model), 3, 1, "warning")]


def test_a_value_that_cannot_be_copied_is_reported_where_it_is_defined(tmp_path: Path) -> None:
    """A global set under `try` from a relative import cannot be copied (the import would not
    resolve in the output): the name stays imported, and since its module runs torch, that is
    reported at the definition."""
    write_package(
        tmp_path,
        {
            "tpk/__init__.py": "import torch\n",
            "tpk/fast.py": "impl = None\n",
            "tpk/ops.py": """
                import torch

                try:
                    from .fast import impl
                except ImportError:
                    impl = None


                def run(x):
                    return impl(x) if impl is not None else torch.relu(x)
            """,
            "tpk/model.py": "from .ops import run\n\n\ndef g(x):\n    return run(x)\n",
        },
    )
    model = tmp_path / "tpk/model.py"
    code, report = inline_siblings(str(model), model.read_text(), unchanged)
    assert "from .ops import run" in code
    found = [(Path(p).name, line, col, sev, code_) for p, line, col, sev, code_, _ in report.diagnostics]
    assert found == [("ops.py", 9, 1, "unsupported", "sibling-not-copied")]


def test_a_name_bound_only_under_try_is_reported_where_it_is_bound(tmp_path: Path) -> None:
    """fair-esm's `ESM1bLayerNorm`, bound by an optional accelerator's `try` or its torch
    fallback: there is no definition to copy, so the import stays and that is said at the `try`."""
    write_package(
        tmp_path,
        {
            "apk/__init__.py": "import torch\n",
            "apk/modules.py": """
                import torch

                try:
                    from apex.normalization import FusedLayerNorm as _Fused

                    class FastNorm(_Fused):
                        pass

                except ImportError:
                    from torch.nn import LayerNorm as FastNorm


                def helper(x):
                    return torch.relu(x)
            """,
            "apk/model.py": "from .modules import FastNorm, helper\n\n\ndef g(x):\n    return helper(FastNorm(4)(x))\n",
        },
    )
    model = tmp_path / "apk/model.py"
    code, report = inline_siblings(str(model), model.read_text(), unchanged)
    assert "from .modules import FastNorm" in code and "def helper" in code
    found = [(Path(p).name, line, sev, code_) for p, line, _, sev, code_, _ in report.diagnostics]
    assert ("modules.py", 3, "unsupported", "sibling-not-copied") in found


def test_a_library_without_torch_stays_imported_whatever_its_functions_import(tmp_path: Path) -> None:
    """beartype.typing binds `List` under a version switch and imports lazily in a module
    `__getattr__`: a library that needs no torch stays imported, with nothing reported."""
    write_package(
        tmp_path,
        {
            "plaintyping/typing/__init__.py": """
                import sys
                if sys.version_info >= (3, 9):
                    from plaintyping.typing._impl import List
                else:
                    List = list

                def __getattr__(name):
                    from plaintyping.typing import _impl
                    return getattr(_impl, name)
            """,
            "plaintyping/typing/_impl.py": "List = list\n",
        },
    )
    (tmp_path / "plainmodelpkg").mkdir()
    (tmp_path / "plainmodelpkg/__init__.py").write_text("")
    model = tmp_path / "plainmodelpkg/model.py"
    model.write_text(
        "import torch\nfrom torch import nn\nfrom plaintyping.typing import List\n\n\n"
        "class Net(nn.Module):\n    def forward(self, xs: List[torch.Tensor]):\n        return xs[0]\n"
    )
    sys_path = str(tmp_path)
    import sys

    sys.path.insert(0, sys_path)
    try:
        result = transpile(model.read_text(), to="jax", path=str(model))
    finally:
        sys.path.remove(sys_path)
    assert "from plaintyping.typing import List" in result.code, result.code
    assert not result.unsupported, [d.format() for d in result.diagnostics]
