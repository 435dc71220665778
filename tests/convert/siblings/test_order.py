"""convert/siblings/order.py: where copies go, and definitions moved above the statements that
need them when they run (nothing else moves)."""

from __future__ import annotations

import ast
from pathlib import Path

from precision_transpiler.convert.siblings import inline_siblings
from precision_transpiler.convert.siblings.order import copies_line, imports_line, order_definitions
from tests.convert.siblings.packages import unchanged, write_package

OUT_OF_ORDER = """import x


class B(A):
    y = C()


def f(a=K):
    return Z


class A(Base):
    pass


K = 3


class C:
    pass


Base = object
"""


def test_bases_class_body_values_and_defaults_come_first() -> None:
    ordered = order_definitions(OUT_OF_ORDER)
    namespace: dict[str, object] = {"x": None}
    exec(compile(ordered.replace("import x\n", ""), "ordered.py", "exec"), namespace)  # runs top to bottom
    assert ordered.index("Base = object") < ordered.index("class A(") < ordered.index("class B(")
    assert ordered.index("class C:") < ordered.index("class B(") and ordered.index("K = 3") < ordered.index("def f(")


def test_a_file_that_runs_is_unchanged() -> None:
    source = "class A:\n    def f(self):\n        return B()\n\n\nclass B(A):\n    pass\n"
    assert order_definitions(source) == source  # `B` in a method body is read when called


def test_imports_and_assignment_targets_read_nothing() -> None:
    """`from m import f` names `f` without reading it, and `x = 1` binds `x`: neither may pull a
    later definition of the same name above it (a copied helper above the file's imports)."""
    source = "from m import f\nimport collections.abc\nx = 1\nprint(x)\n\n\n"
    source += "def f():\n    return 1\n\n\ndef x():\n    pass\n"
    assert order_definitions(source) == source


def test_a_function_called_while_defining_brings_what_its_body_reads() -> None:
    """timm's `@register_notrace_module` adds the class to `_leaf_modules`: moved above the
    class it decorates, the set it fills must come first too."""
    source = "TABLE = dict(norm=Norm)\n\n_leaf = set()\n\n\n"
    source += "def register(cls):\n    _leaf.add(cls)\n    return cls\n\n\n"
    source += "@register\nclass Norm:\n    pass\n"
    ordered = order_definitions(source)
    namespace: dict[str, object] = {}
    exec(compile(ordered, "ordered.py", "exec"), namespace)
    assert namespace["TABLE"] == {"norm": namespace["Norm"]} and namespace["_leaf"] == {namespace["Norm"]}


def test_annotations_run_with_the_def_unless_postponed() -> None:
    """torch-geometric's `def get_options(options: Options)`, where `Options` is an alias copied
    from another module in a later round; a function moved up because a decorator calls it brings
    what its annotations name too. Under `from __future__ import annotations` nothing moves."""
    source = "@decorate\ndef f(x: Alias = None) -> Alias:\n    return x\n\n\n"
    source += "def decorate(fn):\n    return fn if enabled() else fn\n\n\n"
    source += "def enabled(options: Options = None) -> bool:\n    return True\n\n\n"
    source += "Options = int\nAlias = str\n"
    ordered = order_definitions(source)
    exec(compile(ordered, "ordered.py", "exec"), {})
    postponed = "from __future__ import annotations\n" + source.replace("@decorate\n", "")
    assert order_definitions(postponed) == postponed


def test_an_if_block_that_defines_globals_waits_for_what_it_calls() -> None:
    """monai's activation module defines `monai_swish` under `if optional_import(...)[1]:`;
    copied in, the block landed above the copy of `optional_import` (NameError at import)."""
    source = (
        "if available('silu'):\n\n    def swish(x):\n        return x\n\nelse:\n\n    def swish(x):\n"
        "        return -x\n\n\ndef available(name):\n    return name == 'silu'\n"
    )
    ordered = order_definitions(source)
    assert ordered.index("def available(") < ordered.index("if available(")
    namespace: dict[str, object] = {}
    exec(compile(ordered, "ordered.py", "exec"), namespace)
    assert namespace["swish"](2) == 2  # type: ignore[operator]


def test_a_global_a_called_function_assigns_is_still_read_from_the_module() -> None:
    """diffusers' logging: `global _default_handler` then `if _default_handler:` in a function that
    the module calls while loading; the annotated global must come first."""
    code = (
        "def _configure():\n    global _handler\n    if _handler:\n        return\n    _handler = 1\n\n\n"
        "def get_logger():\n    _configure()\n    return _handler\n\n\n"
        "logger = get_logger()\n\n\n"
        "_handler: int | None = None\n"
    )
    ordered = order_definitions(code)
    namespace: dict[str, object] = {}
    exec(compile(ordered, "ordered.py", "exec"), namespace)
    assert namespace["logger"] == 1
    assert ordered.index("_handler: int | None = None") < ordered.index("logger = get_logger()")


def test_an_unpacking_assignment_is_moved_for_each_name_it_binds() -> None:
    """diffusers' `_flash_attn_available, _flash_attn_version = _is_package_available(...)`."""
    code = "def available():\n    return _ok\n\n\nCAN = available()\n\n\n_ok, _version = (True, 1)\n"
    ordered = order_definitions(code)
    namespace: dict[str, object] = {}
    exec(compile(ordered, "ordered.py", "exec"), namespace)
    assert namespace["CAN"] is True


def test_an_if_block_that_binds_a_needed_global_moves_above_its_reader() -> None:
    """diffusers' import_utils: `if USE_TORCH: _torch_available, _torch_version = ...` below a
    statement that calls `is_torch_version()` at once."""
    code = (
        "def version():\n    return _torch_version\n\n\nNEW = version() >= 2\n\n\n"
        "USE = True\nif USE:\n    _torch_version = 2\nelse:\n    _torch_version = 0\n"
    )
    ordered = order_definitions(code)
    namespace: dict[str, object] = {}
    exec(compile(ordered, "ordered.py", "exec"), namespace)
    assert namespace["NEW"] is True


def test_copies_go_after_the_leading_imports_and_lone_imports_after_the_last() -> None:
    code = '"""Doc."""\nimport torch\nfrom torch import nn\n\n\nclass Net:\n    pass\n\n\nimport json\n'
    tree = ast.parse(code)
    assert copies_line(tree) == 3  # after `from torch import nn`, above the first definition
    assert imports_line(tree) == 10  # after the last import, wherever it is


def test_a_base_copied_in_a_later_round_ends_above_its_subclass(tmp_path: Path) -> None:
    """normflows: the file imports `Flow` and `Masked`; `Masked(Autoregressive)` brings
    `Autoregressive(Flow)` in the next round, above the earlier block that holds `Flow`."""
    write_package(
        tmp_path,
        {
            "flows/base.py": "from torch import nn\n\n\nclass Flow(nn.Module):\n    pass\n",
            "flows/auto.py": "import torch\nfrom .base import Flow\n\n\nclass Autoregressive(Flow):\n    pass\n",
            "flows/masked.py": "import torch\nfrom .auto import Autoregressive\n\n\nclass Masked(Autoregressive): ...",
            "flows/model.py": "from .base import Flow\nfrom .masked import Masked\n\nMODEL = Masked()\n",
        },
    )
    model = tmp_path / "flows/model.py"
    code, report = inline_siblings(str(model), model.read_text(), unchanged)
    assert report.inlined == ["flows.base.Flow", "flows.masked.Masked", "flows.auto.Autoregressive"]
    assert code.index("class Flow(") < code.index("class Autoregressive(") < code.index("class Masked(")
    namespace: dict[str, object] = {}
    exec(compile(code, "model.py", "exec"), namespace)  # every class statement finds its base
    assert type(namespace["MODEL"]).__mro__[2].__name__ == "Flow"
