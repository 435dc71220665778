"""convert/siblings/resolve.py: which module files and names an import of a sibling means,
read as files (nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from precision_transpiler.convert.siblings.resolve import (
    absolute_import,
    absolute_module,
    expand_star_imports,
    framework_through_package,
    imports_a_sibling,
    installed_module_file,
    locator,
    package_module_file,
    package_of,
    parsed_source,
    reexport_sources,
    relative_module_file,
    star_exports,
    star_source,
    top_level_definitions,
    top_level_from_imports,
)
from tests.convert.siblings.packages import write_package

VISION = {
    "vis/models/vit.py": """
        import torch
        from ..ops.misc import MLP
        from ..ops import StochasticDepth
        from vis.ops.misc import Conv
        """,
    "vis/ops/__init__.py": """
        from .stochastic_depth import StochasticDepth
        from .conv import *
        """,
    "vis/ops/misc.py": """
        import torch
        from torch import nn


        class MLP(nn.Module):
            pass


        class Conv(nn.Module):
            pass
        """,
    "vis/ops/stochastic_depth.py": """
        import torch


        def StochasticDepth(x):
            return x
        """,
    "vis/ops/conv.py": """
        from torch import nn

        __all__ = ["Conv3d"]


        class Conv3d(nn.Module):
            pass


        class Hidden(nn.Module):
            pass
        """,
}


def test_relative_and_package_imports_name_files_of_the_package(tmp_path: Path) -> None:
    write_package(tmp_path, VISION)
    vit = tmp_path / "vis/models/vit.py"
    assert package_of(vit) == ["vis", "models"]
    assert relative_module_file(vit, 2, "ops.misc") == (tmp_path / "vis/ops/misc.py", "vis.ops.misc")
    assert relative_module_file(vit, 2, "ops") == (tmp_path / "vis/ops/__init__.py", "vis.ops")
    assert relative_module_file(vit, 1, "missing") == (None, "vis.models.missing")
    assert relative_module_file(vit, 3, "x") == (None, "")  # above the package
    assert package_module_file(vit, "vis.ops.misc") == (tmp_path / "vis/ops/misc.py", "vis.ops.misc")
    assert package_module_file(vit, "other.misc") == (None, "other.misc")  # not the file's own package
    assert absolute_module(str(vit), 2, "ops.misc") == "vis.ops.misc"
    assert absolute_module(str(vit), 0, "torch") == "torch"


def test_a_file_outside_any_package_has_no_siblings(tmp_path: Path) -> None:
    lone = tmp_path / "model.py"
    lone.write_text("from .layers import Block\n")
    assert package_of(lone) == []
    assert relative_module_file(lone, 1, "layers") == (None, "")


def test_torch_libraries_of_other_distributions_are_found_on_the_search_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_package(
        tmp_path,
        {
            "torchlib/nn.py": "import torch\n\n\nclass Sequential(torch.nn.Module):\n    pass\n",
            "torchlib/__init__.py": "from torchlib.nn import Sequential\n",
            # timm's deprecated `timm.models.layers`: re-exports another package of its distribution
            "torchlib/old/layers/__init__.py": "from torchlib.nn import Sequential\nimport warnings\n",
            "torchlib/old/__init__.py": "",
            "plainlib/util.py": "def helper():\n    return 1\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    mapped = frozenset({"torch", "einops"})
    assert installed_module_file("torchlib.nn", mapped) == (tmp_path / "torchlib/nn.py", "torchlib.nn")
    # a package whose `__init__.py` re-exports its own modules is followed there
    assert installed_module_file("torchlib", mapped) == (tmp_path / "torchlib/__init__.py", "torchlib")
    old = installed_module_file("torchlib.old.layers", mapped)
    assert old == (tmp_path / "torchlib/old/layers/__init__.py", "torchlib.old.layers")
    assert installed_module_file("plainlib.util", mapped) == (None, "plainlib.util")  # no torch: stays imported
    assert installed_module_file("torchlib.nn", frozenset({"torchlib"})) == (None, "torchlib.nn")  # mapped
    assert installed_module_file("json", mapped) == (None, "json")  # the standard library


def test_reexports_and_star_imports_lead_to_the_defining_module(tmp_path: Path) -> None:
    write_package(tmp_path, VISION)
    init = tmp_path / "vis/ops/__init__.py"
    tree = parsed_source(init.read_text())
    sources = reexport_sources(tree, "vis.ops", init)
    assert sources["StochasticDepth"] == "vis.ops.stochastic_depth"
    assert sources["Conv3d"] == "vis.ops.conv"  # through `from .conv import *`, which `__all__` limits
    assert "Hidden" not in sources
    assert reexport_sources(tree, "vis.ops") == {"StochasticDepth": "vis.ops.stochastic_depth"}  # no path: no stars
    conv = parsed_source((tmp_path / "vis/ops/conv.py").read_text())
    assert star_exports(conv) == {"Conv3d"}
    assert star_source(tree, init, "vis.ops", "Conv3d") == "vis.ops.conv"
    assert star_source(tree, init, "vis.ops", "Missing") is None


def test_star_imports_are_spelled_out_on_their_line(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "act/create.py": "from torch import nn\nimport math\n\n\ndef unused():\n    return math.pi\n",
            "act/blocks.py": "from .create import *\n\n\nclass Block(nn.Module):\n    pass\n",
        },
    )
    blocks = tmp_path / "act/blocks.py"
    text = blocks.read_text()
    expanded = expand_star_imports(text, parsed_source(text), blocks, "act.blocks")
    assert expanded.splitlines()[0] == "from .create import *; from torch import nn"  # what the module uses only
    assert len(expanded.splitlines()) == len(text.splitlines())  # diagnostics keep their lines
    plain = "import torch\n"
    assert expand_star_imports(plain, parsed_source(plain), blocks, "act.blocks") is plain  # nothing to spell


def test_the_framework_of_a_file_that_builds_on_its_package(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "seg/decoders/model.py": "from ..base import SegmentationModel\nfrom .decoder import Decoder\n",
            "seg/decoders/decoder.py": "class Decoder:\n    pass\n",
            "seg/base.py": "import torch\n\n\nclass SegmentationModel(torch.nn.Module):\n    pass\n",
            "plain/a.py": "from .b import f\n",
            "plain/b.py": "def f():\n    return 1\n",
        },
    )

    def detect(text: str) -> str | None:
        return "torch" if "import torch" in text else None

    model = tmp_path / "seg/decoders/model.py"
    assert framework_through_package(model, model.read_text(), detect) == ("torch", tmp_path / "seg/base.py")
    plain = tmp_path / "plain/a.py"
    assert framework_through_package(plain, plain.read_text(), detect) is None


def test_from_imports_are_read_from_the_text_without_parsing() -> None:
    code = "import os\nfrom ..ops import MLP\nfrom torch import nn\nfromage = 1\n"
    assert top_level_from_imports(code) == [(2, "ops"), (0, "torch")]
    assert top_level_from_imports("from \\\n    a import b\n") is None  # unsure: the caller parses
    assert top_level_from_imports("x = 1\n") == []


def test_each_text_is_parsed_once() -> None:
    text = "class A:\n    pass\n\n\nB = A\n"
    assert parsed_source(text) is parsed_source(text)
    assert list(top_level_definitions(parsed_source(text))) == ["A", "B"]


def test_relative_imports_are_made_absolute_for_copies() -> None:
    node = ast.parse("from ..ops.misc import MLP, Conv as C").body[0]
    assert absolute_import(node, "C", "vis.models.vit") == "from vis.ops.misc import Conv as C"
    package_init = ast.parse("from .timm_universal import Encoder").body[0]
    assert absolute_import(package_init, "Encoder", "smp.encoders", package=True) == (
        "from smp.encoders.timm_universal import Encoder"
    )


def test_a_locator_finds_siblings_and_installed_libraries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_package(tmp_path / "src", VISION)
    write_package(tmp_path / "site", {"torchlib/nn.py": "import torch\n"})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    vit = tmp_path / "src/vis/models/vit.py"
    locate = locator(vit, frozenset({"torch"}))
    assert locate(2, "ops.misc") == (tmp_path / "src/vis/ops/misc.py", "vis.ops.misc")
    assert locate(0, "vis.ops.misc") == (tmp_path / "src/vis/ops/misc.py", "vis.ops.misc")
    assert locate(0, "torchlib.nn") == (tmp_path / "site/torchlib/nn.py", "torchlib.nn")
    assert locator(vit, None)(0, "torchlib.nn") == (None, "torchlib.nn")  # other distributions only when asked
    assert imports_a_sibling(vit, vit.read_text(), locate)
    assert not imports_a_sibling(vit, "import torch\nfrom torch import nn\n", locate)
    assert not imports_a_sibling(vit, "from .vit import x\n", locate)  # the file itself
