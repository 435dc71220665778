"""The runtime beside the outputs (convert/runtime_module.py): a converted file's copied-in
runtime taken out into one module, read back in, and the module's version line and merging."""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.convert.runtime_module import (
    RUNTIME_MODULES,
    existing_names,
    is_current,
    plan_module,
    read_runtime_imports,
    runtime_module_source,
    split_runtime,
)
from precision_transpiler.convert.vendor import vendor_shims

MODEL = '''"""A block."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        # a convolution and a norm
        self.conv = nn.Conv1d(dim, dim, 3, padding=1)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(self.conv(x.transpose(1, 2)).transpose(1, 2))
'''


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_the_copied_runtime_becomes_one_import_and_the_file_keeps_its_shape(target: str) -> None:
    inline = transpile(MODEL, to=target).code
    split = split_runtime(inline, target)
    assert split is not None
    assert f"from {RUNTIME_MODULES[target]} import " in split.code
    assert "Conv1d" in split.names and "TorchModule" in split.names
    assert "# a convolution and a norm" in split.code and '"""A block."""' in split.code
    assert len(split.code.splitlines()) <= 2 * len(MODEL.splitlines()) < len(inline.splitlines())
    # the helpers the copies need come with the module, not the file
    assert "def _tuple" not in split.code
    module, gone = runtime_module_source(set(split.names), target)
    assert gone == [] and "class Conv1d" in module and "__all__" in module


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_reading_a_split_file_back_gives_the_self_contained_form(target: str) -> None:
    inline = transpile(MODEL, to=target).code
    split = split_runtime(inline, target)
    assert split is not None
    back = vendor_shims(read_runtime_imports(split.code))[0]
    assert "from _ptranspile_runtime" not in back
    assert split_runtime(back, target) == split  # a round trip changes nothing


def test_no_op_cases() -> None:
    plain = "import jax.numpy as jnp\n\nx = jnp.zeros(3)\n"
    assert split_runtime(plain, "jax") is None  # nothing copied in
    assert split_runtime(transpile(MODEL, to="torch").code, "torch") is None  # no runtime for torch
    assert read_runtime_imports(plain) == plain
    assert split_runtime(transpile("import torch\nx = torch.zeros(3)\n", to="jax").code, "jax") is None


def test_a_package_folder_imports_its_runtime_relatively() -> None:
    split = split_runtime(transpile(MODEL, to="jax").code, "jax", relative=True)
    assert split is not None and "from ._ptranspile_runtime_jax import " in split.code


def test_the_version_line_tells_a_current_module_from_a_stale_or_edited_one(tmp_path: Path) -> None:
    text, _ = runtime_module_source({"Conv1d"}, "jax")
    assert is_current(text)
    assert not is_current(text.replace("class Conv1d", "class Conv1d_"))  # edited by hand
    assert not is_current(text.replace("# ptranspile-runtime: ", "# ptranspile-runtime: 0.0.0-old ", 1)[:-1])
    (tmp_path / "_ptranspile_runtime_jax.py").write_text(text)
    assert existing_names(tmp_path / "_ptranspile_runtime_jax.py") == {"Conv1d"}


def test_a_folder_keeps_what_its_earlier_outputs_import(tmp_path: Path) -> None:
    first = plan_module(tmp_path, "jax", {"Conv1d"})
    assert first.changes
    first.path.write_text(first.text)
    again = plan_module(tmp_path, "jax", {"Conv1d"})
    assert not again.changes  # the same run again writes nothing new
    merged = plan_module(tmp_path, "jax", {"LayerNorm"})
    assert merged.changes and {"Conv1d", "LayerNorm"} <= existing_names_of(merged.text)
    first.path.write_text(first.text.replace('    "Conv1d",\n', '    "Conv1d",\n    "NoSuchLayer",\n'))
    stale = plan_module(tmp_path, "jax", set())
    assert stale.gone == ("NoSuchLayer",) and stale.changes and stale.stale
    assert not again.stale


def existing_names_of(text: str) -> set[str]:
    import ast

    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__":
            return set(ast.literal_eval(node.value))
    return set()


@pytest.mark.parametrize("target", ["jax", "tf"])
@pytest.mark.parametrize("policy", ["fp32", "mixed"])
def test_the_library_converts_straight_into_the_import_form(target: str, policy: str) -> None:
    """`runtime="module"`: the VendorRuntime stage writes the import, never a copy; the names are
    those a copy taken out again would import, and reading the file back and converting it again
    (a policy within the target) gives the same file."""
    direct = transpile(MODEL, to=target, policy=policy, runtime="module")
    assert "# ptranspile: torch-compatible definitions copied" not in direct.code
    split = split_runtime(transpile(MODEL, to=target, policy=policy).code, target)
    assert split is not None and direct.runtime_names == split.names
    again = transpile(direct.code, to=target, policy=policy, runtime="module")
    assert again.code == direct.code and again.runtime_names == direct.runtime_names


def test_an_unknown_runtime_is_a_usage_error() -> None:
    from precision_transpiler.errors import UsageError

    with pytest.raises(UsageError, match="unknown runtime 'shared'"):
        transpile(MODEL, to="jax", runtime="shared")
