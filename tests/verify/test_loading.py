"""Importing the original for verification: a package is the one under the model's folder,
even when a package of the same name was imported earlier in the process from elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from precision_transpiler.verify.loading import import_original
from tests.convert.siblings.packages import write_package

NAME = "samenamepkg"


def _package(root: Path, width: int, init: bool = True) -> Path:
    files = {f"{NAME}/layers.py": f"WIDTH = {width}\n", f"{NAME}/model.py": "from .layers import WIDTH\n"}
    if init:
        files[f"{NAME}/__init__.py"] = ""
    write_package(root, files)
    return root / NAME / "model.py"


@pytest.mark.parametrize("init", [True, False], ids=["package", "namespace-package"])
def test_a_same_named_package_from_another_folder_is_not_reused(tmp_path: Path, init: bool) -> None:
    first = _package(tmp_path / "one", 3, init)
    second = _package(tmp_path / "two", 5, init)
    try:
        assert import_original(first).WIDTH == 3
        assert import_original(second).WIDTH == 5
        assert Path(sys.modules[f"{NAME}.layers"].__file__).parent == second.parent
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == NAME]:
            del sys.modules[name]


def test_the_same_package_imported_twice_is_imported_once(tmp_path: Path) -> None:
    model = _package(tmp_path, 3)
    try:
        module = import_original(model)
        assert import_original(model) is module
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == NAME]:
            del sys.modules[name]


def test_converted_code_is_run_without_the_verifiers_future_imports(tmp_path: Path) -> None:
    """The verifier runs converted text as Python imports it: its own `from __future__ import
    annotations` must not make the converted code's annotations lazy, or an annotation that
    fails when the file is imported (`(lambda: 0) | None`) would pass unseen."""
    from precision_transpiler.verify.loading import _exec_module

    with pytest.raises(TypeError):
        _exec_module("def f(x: (lambda: 0) | None = None):\n    return x\n", "_ptx_eager_annotations", None, "a.py")
    module = _exec_module("def f(x: int | None = None):\n    return x\n", "_ptx_fine_annotations", None, "b.py")
    assert module.f.__annotations__["x"] == int | None
    sys.modules.pop("_ptx_fine_annotations", None)
