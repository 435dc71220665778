"""Modules of the package imported as objects (`from pkg.utils import torchutils`, then
`torchutils.tile(x, 2)`): what they call are the module's functions, converted and copied in,
never tensor methods of the module object (nflows' MADE builds its masks so)."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.convert.siblings.packages import write_package
from tests.helpers import on_both_targets

UTILS = """
    import torch


    def tile(x, n):
        return x.repeat(n)
"""

MODEL = """
    import torch
    from torch import nn

    {import_line}


    class Net(nn.Module):
        def __init__(self, d=4):
            super().__init__()
            self.fc = nn.Linear(d, d)
            self.register_buffer("deg", torchutils.tile(torch.arange(2.0), 2))

        def forward(self, x):
            return self.fc(x) + self.deg.sum()
"""

IMPORTS = {
    "from-package": "from modalias.utils import torchutils",
    "relative": "from .utils import torchutils",
    "import-as": "import modalias.utils.torchutils as torchutils",
}


def _verifies_without_torch(model: Path, code: str, target: str) -> None:
    converted = model.parent.parent / f"model_{target}.py"
    converted.write_text(code)
    options = VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True)
    assert verify_files(model, converted, options).passed


@on_both_targets
@pytest.mark.parametrize("form", list(IMPORTS))
def test_a_module_imported_as_an_object_has_its_functions_copied(tmp_path: Path, target: str, form: str) -> None:
    write_package(
        tmp_path,
        {
            "modalias/utils/__init__.py": "from modalias.utils.torchutils import tile\n",
            "modalias/utils/torchutils.py": UTILS,
            "modalias/model.py": MODEL.format(import_line=IMPORTS[form]),
        },
    )
    model = tmp_path / "modalias/model.py"
    result = transpile(model.read_text(), to=target, path=str(model), entry="Net()", prune_to_entry=True)
    assert "def tile(x, n):" in result.code, result.code
    assert "tile(torchutils" not in result.code  # not `jnp.tile(torchutils, ...)`: not a tensor method
    assert "torchutils" not in result.code.replace("modalias.utils.torchutils", "")
    _verifies_without_torch(model, result.code, target)


def test_a_local_of_the_alias_name_is_still_a_tensor(tmp_path: Path) -> None:
    """A parameter named like the module alias is the function's own value: its `.tile` is the
    tensor method."""
    write_package(
        tmp_path,
        {
            "modalias2/utils/torchutils.py": UTILS,
            "modalias2/model.py": """
                import torch
                from .utils import torchutils


                def grow(torchutils):
                    return torchutils.repeat(2)


                def grow_module(x):
                    return torchutils.tile(x, 2)
            """,
        },
    )
    model = tmp_path / "modalias2/model.py"
    result = transpile(model.read_text(), to="jax", path=str(model))
    assert "return jnp.tile(torchutils, 2)" in result.code, result.code
    assert "jnp.tile(torchutils, (x" not in result.code


@on_both_targets
@pytest.mark.parametrize(
    "import_line",
    ["from modalias3.utils import typechecks as check", "import modalias3.utils.typechecks as check"],
    ids=["from-import", "import-as"],
)
def test_a_plain_module_of_a_package_that_loads_torch_is_copied(tmp_path: Path, target: str, import_line: str) -> None:
    """`typechecks` uses no torch, but importing it runs `utils/__init__.py`, which imports the
    torch helpers: kept imported, it would load torch with the converted model. Copied instead."""
    write_package(
        tmp_path,
        {
            "modalias3/utils/__init__.py": "from modalias3.utils.torchutils import tile\n",
            "modalias3/utils/torchutils.py": UTILS,
            "modalias3/utils/typechecks.py": "def is_positive_int(x):\n    return isinstance(x, int) and x > 0\n",
            "modalias3/model.py": """
                import torch
                from torch import nn

                {import_line}


                class Net(nn.Module):
                    def __init__(self, d=4):
                        super().__init__()
                        assert check.is_positive_int(d)
                        self.fc = nn.Linear(d, d)

                    def forward(self, x):
                        return self.fc(x)
            """.replace("{import_line}", import_line),
        },
    )
    model = tmp_path / "modalias3/model.py"
    result = transpile(model.read_text(), to=target, path=str(model), entry="Net()", prune_to_entry=True)
    assert "def is_positive_int(x):" in result.code, result.code
    assert "modalias3" not in result.code.replace("# ptranspile: converted from modalias3", "")
    _verifies_without_torch(model, result.code, target)


def test_a_plain_module_of_a_plain_package_stays_imported(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "modalias4/utils/typechecks.py": "def is_positive_int(x):\n    return isinstance(x, int) and x > 0\n",
            "modalias4/model.py": """
                import torch
                from torch import nn

                from modalias4.utils import typechecks as check


                class Net(nn.Module):
                    def __init__(self, d=4):
                        super().__init__()
                        assert check.is_positive_int(d)
                        self.fc = nn.Linear(d, d)
            """,
        },
    )
    model = tmp_path / "modalias4/model.py"
    result = transpile(model.read_text(), to="jax", path=str(model))
    assert "from modalias4.utils import typechecks as check" in result.code
    assert "def is_positive_int" not in result.code


@on_both_targets
@pytest.mark.parametrize("prune", [True, False])
def test_a_sibling_module_read_by_name_becomes_a_namespace(tmp_path: Path, target: str, prune: bool) -> None:
    """kornia's RandAugment: `from . import ops`, then `getattr(ops, name)(...)`; the module was
    left imported, nothing said, and the output imported the torch package where it ran."""
    write_package(
        tmp_path,
        {
            "modalias5/sub/ops.py": "import torch\n\nSCALE = 3.0\n\n\ndef double(x):\n    return x * 2\n",
            "modalias5/sub/model.py": """
                import torch
                from torch import nn

                from . import ops


                class Net(nn.Module):
                    def __init__(self, name="double"):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)
                        self.pick = name

                    def forward(self, x):
                        return getattr(ops, self.pick)(self.fc(x)) * ops.SCALE
            """,
        },
    )
    model = tmp_path / "modalias5/sub/model.py"
    entry = {"entry": "Net()", "prune_to_entry": True} if prune else {}
    result = transpile(model.read_text(), to=target, path=str(model), **entry)
    assert "from . import ops" not in result.code and "ops = types.SimpleNamespace(**{" in result.code
    assert result.code.index("import types") < result.code.index("ops = types.SimpleNamespace")
    converted = model.parent / f"model_{target}.py"
    converted.write_text(result.code)
    verdict = verify_files(model, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"]))
    assert verdict.passed, verdict.failures


@on_both_targets
def test_a_copy_named_like_another_modules_function_keeps_both(tmp_path: Path, target: str) -> None:
    """kornia's AutoAugment: its policies module defines `equalize(probability, magnitude)`, which
    builds the operation whose forward calls kornia.enhance's `equalize(image)`. The copied
    policy replaced the import of the other for the whole file (and the output imported the
    torch package); each is copied now, the second under a name of its own."""
    write_package(
        tmp_path,
        {
            "modalias6/enhance.py": "import torch\n\n\ndef equalize(x):\n    return x - x.mean(-1, keepdim=True)\n",
            "modalias6/operations.py": """
                import torch
                from torch import nn

                from modalias6.enhance import equalize


                class Equalize(nn.Module):
                    def __init__(self, p):
                        super().__init__()
                        self.p = p

                    def forward(self, x):
                        return equalize(x) * self.p
            """,
            "modalias6/ops.py": """
                import torch

                from modalias6.operations import Equalize


                def equalize(probability, magnitude):
                    return Equalize(probability)
            """,
            "modalias6/model.py": """
                import torch
                from torch import nn

                from . import ops


                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)
                        self.op = getattr(ops, "equalize")(0.5, 3)

                    def forward(self, x):
                        return self.op(self.fc(x))
            """,
        },
    )
    model = tmp_path / "modalias6/model.py"
    result = transpile(model.read_text(), to=target, path=str(model), entry="Net()", prune_to_entry=True)
    assert "modalias6.enhance import" not in result.code and "def equalize_modalias6_enhance(x)" in result.code
    _verifies_without_torch(model, result.code, target)
