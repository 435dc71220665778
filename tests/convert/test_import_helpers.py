"""Library helpers that import torch modules by name become import statements
(convert/import_helpers.py, the `import_helpers` of mappings/frameworks.yaml)."""

from __future__ import annotations

import libcst as cst

from precision_transpiler.convert.import_helpers import static_imports
from precision_transpiler.mappings import load_mappings

TORCH = load_mappings(()).frameworks["torch"]
ROOTS = frozenset({"torch", "einops"})


def _static(code: str) -> str | None:
    tree = static_imports(cst.parse_module(code), TORCH.import_helpers, ROOTS, "<string>")
    return None if tree is None else tree.code


def test_helper_calls_on_torch_modules_become_imports_on_their_line() -> None:
    code = (
        "import importlib\n"
        "from monai.utils import optional_import\n"
        'Rearrange, _ = optional_import("einops.layers.torch", name="Rearrange")  # the layer\n'
        'rearrange, has_einops = optional_import("einops", name="rearrange")\n'
        'first = optional_import("einops", name="repeat")[0]\n'
        'F = importlib.import_module("torch.nn.functional")\n'
    )
    assert _static(code) == (
        "import importlib\n"
        "from monai.utils import optional_import\n"
        "from einops.layers.torch import Rearrange  # the layer\n"
        "from einops import rearrange; has_einops = True\n"
        "from einops import repeat as first\n"
        "import torch.nn.functional as F\n"
    )


def test_other_libraries_and_names_built_at_run_time_stay() -> None:
    code = (
        "from monai.utils import optional_import\n"
        'trt, found = optional_import("tensorrt")\n'  # not a torch module: an optional dependency
        'net, _ = optional_import("monai.networks.nets", name=f"{name}")\n'  # not a literal
        'pair = optional_import("einops", name="rearrange")\n'  # the pair itself is kept
        'other, _ = some_import("einops", name="rearrange")\n'  # not a listed helper
    )
    assert _static(code) is None


def test_a_policy_within_torch_leaves_the_helpers_as_written() -> None:
    """`--to torch --policy mixed` changes precision only: the helper call stays."""
    from precision_transpiler import transpile

    code = (
        "import torch\nfrom monai.utils import optional_import\n\n"
        'Rearrange, _ = optional_import("einops.layers.torch", name="Rearrange")\n'
    )
    assert 'optional_import("einops.layers.torch"' in transpile(code, to="torch", policy="mixed").code
    assert 'optional_import("einops' not in transpile(code, to="jax").code  # imported, then unused: gone
