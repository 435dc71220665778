"""convert/siblings/extract.py: the definitions a copy takes from a sibling, and the imports
they need, from the sibling's one tree."""

from __future__ import annotations

import textwrap
from pathlib import Path

from precision_transpiler.convert.siblings.extract import (
    conditional_globals,
    extract_definitions,
    imports_inside,
    model_names,
    registration_statements,
    torch_bindings,
    uses_torch,
)
from precision_transpiler.convert.siblings.resolve import parsed_source
from tests.convert.siblings.packages import write_package

LAYERS = textwrap.dedent(
    """
    import math

    import torch
    from torch import nn

    from .config import WIDTH
    from ..utils import log

    SCALE = 2.0


    def _init(layer):
        nn.init.zeros_(layer.bias)
        return layer


    def make_ntuple(x, n):
        return (x,) * n


    class Block(nn.Module):
        def __init__(self, d=WIDTH):
            super().__init__()
            self.fc = _init(nn.Linear(d, d))

        def forward(self, x):
            return self.fc(x) * SCALE

        def export(self):
            log("export")
            return math.pi


    class Unrelated(nn.Module):
        pass


    def build(d):
        return nn.Sequential(Block(d), Block(d))
    """
).lstrip()


def test_a_name_comes_with_the_definitions_it_reaches_and_their_imports() -> None:
    tree = parsed_source(LAYERS)
    piece, imports, ranges = extract_definitions(LAYERS, ["Block"], "pkg.models.layers", tree)
    assert piece is not None
    assert "class Block(nn.Module):" in piece and "def _init(layer):" in piece and "SCALE = 2.0" in piece
    assert "class Unrelated" not in piece and "def build" not in piece and "make_ntuple" not in piece
    # methods nothing reaches are left out, and so are the imports only they needed
    assert "def export" not in piece and "from pkg.utils import log" not in imports
    assert "from pkg.models.config import WIDTH" in imports  # made absolute for the copy
    assert "from torch import nn" in imports
    assert ranges  # the original lines taken: diagnostics of the sibling there are the copy's
    # what the converting file reaches as an attribute is kept
    kept, kept_imports, _ = extract_definitions(
        LAYERS, ["Block"], "pkg.models.layers", tree, reached=frozenset({"export"})
    )
    assert kept is not None and "def export" in kept
    assert {"import math", "from pkg.utils import log"} <= set(kept_imports)


def test_nothing_is_taken_for_names_the_sibling_does_not_define() -> None:
    assert extract_definitions(LAYERS, ["Missing"], "pkg.layers", parsed_source(LAYERS)) == (None, [], [])


def test_names_held_or_present_are_not_copied_again() -> None:
    tree = parsed_source(LAYERS)
    piece, imports, _ = extract_definitions(LAYERS, ["build"], "pkg.layers", tree, held=frozenset({"pkg.layers.Block"}))
    assert piece is not None and "class Block" not in piece
    assert "from pkg.layers import Block" in imports  # the library's own class, imported
    present, _, _ = extract_definitions(LAYERS, ["build"], "pkg.layers", tree, present=frozenset({"Block"}))
    assert present is not None and "class Block" not in present and "def build" in present


def test_a_registry_comes_with_what_fills_it() -> None:
    source = textwrap.dedent(
        """
        from torch import nn


        class Registry(dict):
            def factory(self, name):
                def add(cls):
                    self[name] = cls
                    return cls

                return add


        ACTS = Registry()
        ACTS["relu"] = nn.ReLU
        ACTS.update(gelu=nn.GELU)


        @ACTS.factory("swish")
        class Swish(nn.Module):
            pass


        class Other(nn.Module):
            pass


        def get(name):
            return ACTS[name]
        """
    ).lstrip()
    tree = parsed_source(source)
    assert set(registration_statements(tree)) == {"ACTS"}
    piece, _, _ = extract_definitions(source, ["get"], "pkg.registry", tree)
    assert piece is not None
    assert 'ACTS["relu"] = nn.ReLU' in piece and "ACTS.update(gelu=nn.GELU)" in piece
    assert "class Swish" in piece and "class Registry" in piece  # what the registry decorates, its class
    assert "class Other" not in piece


def test_attributes_set_on_a_class_after_it_come_with_it() -> None:
    # hyper-connections: `Conn.get_init_and_expand_reduce_stream_functions = staticmethod(...)`
    # after the class; a copy of the class without it raised AttributeError at construction
    source = textwrap.dedent(
        """
        from torch import nn


        def make_pair(n):
            return n, n


        class Conn(nn.Module):
            pass


        Conn.make_pair = staticmethod(make_pair)
        Conn.__doc__ = "streams"


        class Other(nn.Module):
            pass


        Other.unused = 1
        """
    ).lstrip()
    tree = parsed_source(source)
    assert set(registration_statements(tree)) == {"Conn", "Other"}
    piece, _, _ = extract_definitions(source, ["Conn"], "pkg.conn", tree)
    assert piece is not None
    assert "Conn.make_pair = staticmethod(make_pair)" in piece and "def make_pair(n):" in piece
    assert piece.index("class Conn") < piece.index("Conn.make_pair =")  # after the class, as in the source
    assert "Other" not in piece


def test_a_global_bound_under_a_relative_import_keeps_the_name_imported() -> None:
    source = textwrap.dedent(
        """
        import sys

        try:
            from .fast import kernel
        except ImportError:
            kernel = None

        if sys.platform == "linux":
            FLAG = False


        def run(x):
            return kernel(x)


        def check():
            return FLAG
        """
    ).lstrip()
    tree = parsed_source(source)
    assert set(conditional_globals(tree)) == {"kernel", "FLAG"}
    assert extract_definitions(source, ["run"], "pkg.ops", tree) == (None, [], [])  # stays imported
    piece, _, _ = extract_definitions(source, ["check"], "pkg.ops", tree)
    assert piece is not None and 'if sys.platform == "linux":' in piece  # a plain `if` comes along
    assert "kernel" not in piece


def test_model_code_and_torch_helpers_are_told_from_utilities(tmp_path: Path) -> None:
    tree = parsed_source(LAYERS)
    assert {"Block", "Unrelated", "build"} <= model_names(LAYERS)
    assert "make_ntuple" not in model_names(LAYERS)
    assert torch_bindings(tree) == {"torch", "nn"}
    assert uses_torch(LAYERS, "_init", "pkg.layers", tree, {"torch", "nn"})
    assert not uses_torch(LAYERS, "make_ntuple", "pkg.layers", tree, {"torch", "nn"})
    # a helper that imports a name from a torch module of its own library is torch code
    write_package(
        tmp_path,
        {
            "lib/arch.py": "from lib.layers import get_act\n\n\ndef decode(x):\n    return get_act(x)\n",
            "lib/layers/__init__.py": "from .create_act import get_act\n",
            "lib/layers/create_act.py": "import torch\n\n\ndef get_act(name):\n    return torch.nn.ReLU\n",
        },
    )
    arch = (tmp_path / "lib/arch.py").read_text()

    def locate(level: int, module: str | None) -> tuple[Path | None, str]:
        parts = (module or "").split(".")
        for candidate in (tmp_path.joinpath(*parts).with_suffix(".py"), tmp_path.joinpath(*parts) / "__init__.py"):
            if candidate.is_file():
                return candidate, module or ""
        return None, module or ""

    assert uses_torch(arch, "decode", "lib.arch", parsed_source(arch), set(), locate)
    assert not uses_torch(arch, "decode", "lib.arch", parsed_source(arch), set())  # without a way to look


def test_imports_inside_functions_of_the_package_are_seen() -> None:
    assert imports_inside("def f():\n    from .activation import Swish\n    return Swish\n", "pkg.blocks")
    assert imports_inside("def f():\n    from pkg.activation import Swish\n", "pkg.blocks")
    assert not imports_inside("def f():\n    from json import dumps\n", "pkg.blocks")
    assert not imports_inside("from .activation import Swish\n", "pkg.blocks")  # top level: the usual way
    # a version switch at module level (beartype.typing) runs at load: its names are the module's own
    switch = "import sys\nif sys.version_info >= (3, 9):\n    from beartype.typing._abc import List\n"
    assert not imports_inside(switch, "beartype.typing")
    assert not imports_inside("try:\n    from .fast import kernel\nexcept ImportError:\n    kernel = None\n", "pkg.ops")
