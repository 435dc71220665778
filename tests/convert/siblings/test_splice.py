"""convert/siblings/splice.py: copies put into the output, with imports dropped, hoisted,
added and renamed where they clash."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from precision_transpiler.convert.class_reach import LEFT_OUT
from precision_transpiler.convert.import_lines import lone_from_imports
from precision_transpiler.convert.siblings.resolve import import_bindings, parsed_source
from precision_transpiler.convert.siblings.splice import (
    MARKER,
    drop_imported,
    hoist_local_imports,
    insert_block,
    insert_imports,
    left_out_comment,
    postpone_annotations,
    rename_clashing_definitions,
    rename_names,
    rename_shadowing_helpers,
    resolve_clashes,
    restore_left_out,
)


def test_a_clashing_import_of_a_copy_gets_a_name_of_its_own() -> None:
    bound = import_bindings(ast.parse("import logging\nfrom torch import nn\n").body)
    piece = "logger = logging.get_logger(__name__)\n\n\ndef f():\n    return nn.Linear, 'logging'\n"
    renamed, imports = resolve_clashes(piece, ["from diffusers.utils import logging", "from torch import nn"], bound)
    assert imports == ["from diffusers.utils import logging as logging_diffusers_utils", "from torch import nn"]
    assert renamed.startswith("logger = logging_diffusers_utils.get_logger(__name__)")
    assert "'logging'" in renamed  # strings are not names
    assert bound["logging_diffusers_utils"] == imports[0]  # later copies see the new name taken
    same = "x = nn.Linear\n"
    assert resolve_clashes(same, ["from torch import nn"], bound) == (same, ["from torch import nn"])  # no clash


def test_a_copied_helper_named_like_an_import_of_the_output_is_renamed() -> None:
    bound = import_bindings(ast.parse("from inspect import Parameter\nfrom .aggr import Aggregation\n").body)
    piece = (
        "class Parameter:\n    pass\n\n\ndef signature():\n    return [Parameter()]\n\n\nclass Aggregation:\n    pass\n"
    )
    renamed = rename_shadowing_helpers(piece, {"signature"}, bound, "tg.inspector")
    assert "class Parameter_tg_inspector:" in renamed and "return [Parameter_tg_inspector()]" in renamed
    assert "class Aggregation:" in renamed  # the package's own name for it: the next round redirects
    assert rename_shadowing_helpers(piece, {"signature"}, {}, "tg.inspector") is piece  # nothing shadowed


def test_a_copied_definition_unlike_the_outputs_of_its_name_is_renamed_and_its_uses_follow() -> None:
    shared = "def exists(v):\n    return v is not None\n\n\ndef use(t):\n    return pad(t)\n\n\n"
    output = parsed_source(shared + "def pad(t):\n    return t, 1\n").body
    existing = {node.name: node for node in output if isinstance(node, ast.FunctionDef)}.get
    piece = shared + "def pad(t):\n    return 1, t\n\n\nclass Local:\n    def f(self, t):\n        return use(t)\n"
    renamed, renames = rename_clashing_definitions(piece, {"Local"}, existing, "la.attn", {})
    # `use`, word for word the output's, calls the copy's `pad`: once that is renamed, it differs
    assert renames == {"pad": "pad_la_attn", "use": "use_la_attn"}
    assert "def exists(v):" in renamed  # the same as the output's: shared
    assert "def pad_la_attn(t):\n    return 1, t" in renamed
    assert "def use_la_attn(t):\n    return pad_la_attn(t)" in renamed and "return use_la_attn(t)" in renamed
    # a later copy of the module: what it uses of an earlier copy follows its new name
    later = "def g(t):\n    return pad(t)\n"
    assert rename_clashing_definitions(later, {"g"}, existing, "la.attn", renames)[0] == (
        "def g(t):\n    return pad_la_attn(t)\n"
    )
    assert rename_clashing_definitions(piece, {"Local"}, lambda name: None, "la.attn", {}) == (piece, {})


def test_names_are_renamed_not_attributes_nor_strings() -> None:
    code = "a = b.a + a('a')  # a\nprint(a, é := a)\n"
    assert rename_names(code, {"a": "z"}) == "z = b.a + z('a')  # a\nprint(z, é := z)\n"
    assert rename_names(code, {}) is code
    scoped = (
        "def f(x, scale=scale):\n    return scale(x) + [scale for scale in x]\n\n\n"
        "def g(x):\n    from m import scale\n\n    return scale(x), lambda scale: scale\n\n\n"
        "def h(x):\n    return scale(x)\n\n\nclass A:\n    scale = scale\n"
    )
    assert rename_names(scoped, {"scale": "s2"}) == (
        "def f(x, scale=s2):\n    return scale(x) + [scale for scale in x]\n\n\n"  # the parameter is f's own
        "def g(x):\n    from m import scale\n\n    return scale(x), lambda scale: scale\n\n\n"  # so is g's import
        "def h(x):\n    return s2(x)\n\n\nclass A:\n    scale = s2\n"  # a class attribute keeps its name
    )


def test_local_imports_of_the_package_are_hoisted_and_relative_ones_made_absolute() -> None:
    converted = textwrap.dedent(
        """
        class Attention:
            def __init__(self):
                from .normalization import RMSNorm
                self.norm = RMSNorm()


        def deprecate():
            from .. import __version__
            return __version__


        def factory():
            from monai.blocks.activation import Swish
            import json
            return Swish, json
        """
    ).lstrip()
    code, hoisted = hoist_local_imports(converted, "monai.blocks.attention")
    assert hoisted == [
        ("Attention", "from monai.blocks.normalization import RMSNorm"),
        ("factory", "from monai.blocks.activation import Swish"),
    ]
    assert "from .normalization" not in code and "from monai.blocks.activation" not in code
    assert "    from monai import __version__\n" in code  # imported when called, as written, made absolute
    assert "    import json\n" in code
    ast.parse(code)
    plain = "def f():\n    import json\n    return json\n"
    assert hoist_local_imports(plain, "pkg.mod") == (plain, [])  # nothing of the package: unchanged


def test_relative_imports_of_functions_in_a_function_are_hoisted(tmp_path: Path) -> None:
    # spikingjelly's `voltage_reset` does `from ..._ops.reset import voltage`: left in place, the
    # converted function imported the torch package when called; a value (`__version__`) stays
    root = tmp_path / "sj"
    (root / "_ops").mkdir(parents=True)
    (root / "functional").mkdir()
    for init in (root, root / "_ops", root / "functional"):
        (init / "__init__.py").write_text('__version__ = "1.0"\n')
    (root / "_ops/reset.py").write_text("def voltage(v, spike):\n    return v - spike\n\nLIMIT = 1.0\n")
    neuron = root / "functional/neuron.py"
    converted = textwrap.dedent(
        """
        def voltage_reset(v, spike):
            \"\"\"Reset.\"\"\"
            from .._ops.reset import voltage
            return voltage(v, spike)


        def limit():
            from .._ops.reset import LIMIT
            from .. import __version__
            return LIMIT, __version__
        """
    ).lstrip()
    neuron.write_text(converted)
    code, hoisted = hoist_local_imports(converted, "sj.functional.neuron", path=neuron)
    assert hoisted == [("voltage_reset", "from sj._ops.reset import voltage")]
    assert "import voltage" not in code
    assert "    from sj._ops.reset import LIMIT\n" in code and "    from sj import __version__\n" in code
    ast.parse(code)


OUTPUT = '''"""A model."""
import torch
from torch import nn  # the layers
from .layers import (  # copied below
    Block,
    Helper as H,
)


class Net(nn.Module):
    pass
'''


def test_imports_that_copies_replace_are_dropped_and_the_block_goes_after_the_imports() -> None:
    lone = lone_from_imports(OUTPUT, ast.parse(OUTPUT))  # `from torch ...` and `from .layers ...`
    dropped = drop_imported(OUTPUT, lone, {1: {"Block"}})
    assert "from .layers import (  # copied below\n    Helper as H)\n" in dropped  # comments kept
    dropped = drop_imported(OUTPUT, lone, {1: {"Block", "H"}})
    assert ".layers" not in dropped and "from torch import nn  # the layers\n" in dropped
    assert drop_imported(OUTPUT, lone, {}) is OUTPUT
    block = MARKER.format(module="pkg.layers") + "\nclass Block(nn.Module):\n    pass"
    inserted = insert_block(dropped, ast.parse(dropped), ["from pkg.util import scale"], block)
    assert inserted.index("from torch import nn") < inserted.index("from pkg.util import scale")
    assert inserted.index("from pkg.util import scale") < inserted.index(MARKER.format(module="pkg.layers"))
    assert inserted.index("class Block") < inserted.index("class Net")
    ast.parse(inserted)


def test_imports_alone_go_after_the_last_import() -> None:
    tree = ast.parse(OUTPUT)
    added = insert_imports(OUTPUT, tree, ["from pkg.ops.misc import MLP"])
    assert added.index("Helper as H,\n)\nfrom pkg.ops.misc import MLP\n") > 0
    assert insert_imports(OUTPUT, tree, []) is OUTPUT


def test_postponed_annotations_go_after_the_docstring() -> None:
    postponed = postpone_annotations(OUTPUT, ast.parse(OUTPUT))
    assert postponed.startswith('"""A model."""\nfrom __future__ import annotations\nimport torch\n')


def test_left_out_methods_come_back_once_the_output_reaches_them(tmp_path: Path) -> None:
    sibling = tmp_path / "aggr.py"
    converted = textwrap.dedent(
        """
        import math


        class Aggregation:
            def __call__(self, x):
                return self.reduce(x)

            def reduce(self, x):
                return math.fsum(x)

            def reset(self):
                pass
        """
    ).lstrip()
    comment = LEFT_OUT.format(names="reduce, reset")
    output = f"class Aggregation:\n    {comment}\n    def __call__(self, x):\n        return x\n\n\n"
    output += "class Max(Aggregation):\n    def __call__(self, x):\n        return self.reduce(x)\n"
    cls = parsed_source(output).body[0]
    assert isinstance(cls, ast.ClassDef) and left_out_comment(output, cls) == (2, "    ", ["reduce", "reset"])
    trimmed = {"Aggregation": (sibling, "pkg.aggr")}
    restored = restore_left_out(output, trimmed, {sibling: (converted, [])})
    assert "    def reduce(self, x):\n        return math.fsum(x)\n" in restored
    assert LEFT_OUT.format(names="reset") in restored and "def reset" not in restored  # still unreached
    assert restored.startswith("import math\n")  # what the method needs, imported (the next round copies it)
    ast.parse(restored)
    assert restore_left_out(output, {}, {}) is output  # nothing trimmed: unchanged
