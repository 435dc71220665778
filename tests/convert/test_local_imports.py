"""torch imports that only function bodies still use move into those functions
(convert/local_imports.py): the converted model loads without torch.

Each case is a converted module (the input of the pass, as the rule engine leaves it) and
whether an import moves; the no-op cases are the uses that run when the module loads."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from precision_transpiler import transpile
from precision_transpiler.analysis.load_imports import TORCH_ROOTS, torch_imports_at_load
from precision_transpiler.convert.local_imports import MARK, localize_imports
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.helpers import convert_and_verify, on_both_targets

ZOO = """import torch
import torch.nn as nn
from torch.utils import model_zoo


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def load_pretrained(self, url):
        \"\"\"Download torch weights.\"\"\"
        self.load_state_dict(model_zoo.load_url(url))

    def forward(self, x):
        return self.fc(x)
"""


def _localize(code: str) -> tuple[str, list[str]]:
    module, moved = localize_imports(cst.parse_module(code), TORCH_ROOTS)
    return module.code, [m.statement for m in moved]


def test_an_import_used_only_in_a_method_moves_into_it() -> None:
    code, moved = _localize("from torch.utils import model_zoo\n\n\nclass A:\n    def load(self, u):\n"
                            '        """Doc."""\n        return model_zoo.load_url(u)\n')  # fmt: skip
    assert moved == ["from torch.utils import model_zoo"]
    assert code.startswith("class A:")  # the file's first line is the class now
    assert f'        """Doc."""\n        from torch.utils import model_zoo  {MARK}\n' in code


def test_every_function_that_uses_it_gets_its_own() -> None:
    code, moved = _localize("import torch\n\n\ndef f():\n    return torch.hub\n\n\ndef g():\n    return torch.cuda\n")
    assert moved == ["import torch"]
    assert code.count(f"    import torch  {MARK}\n") == 2


@pytest.mark.parametrize(
    "code",
    [
        "import torch\n\nx = torch.float32\n",  # module level
        "import torch\n\n\nclass A:\n    dtype = torch.float32\n",  # a class body
        "import torch\n\n\ndef f(x=torch.float32):\n    return x\n",  # a default value
        "import torch\n\n\n@torch.no_grad()\ndef f(x):\n    return x\n",  # a decorator
        "import torch\n\n\ndef f(x: torch.Tensor):\n    return x\n",  # an annotation
        "import numpy as np\n\n\ndef f():\n    return np.ones(1)\n",  # not torch
        "import torch\n\n__all__ = ['torch']\n",  # re-exported by name
        "from . import torch_utils\n\n\ndef f():\n    return torch_utils.x\n",  # relative
    ],
    ids=["module-level", "class-body", "default", "decorator", "annotation", "not-torch", "re-exported", "relative"],
)
def test_imports_used_at_load_time_stay(code: str) -> None:
    assert _localize(code) == (code, [])


def test_an_import_nothing_uses_goes() -> None:
    code, moved = _localize("import torch\nfrom torch import tensor\n\n\ndef f():\n    return 1\n")
    assert moved == ["import torch", "from torch import tensor"]
    assert code == "def f():\n    return 1\n"


def test_an_import_a_later_import_rebinds_is_no_use_of_it() -> None:
    """slot-attention's `from torch import einsum, nn` then `from einops import ..., einsum`:
    functions read einops' einsum, so torch's is not moved into them (where it would replace
    einops' at run time); a name nothing rebinds still moves."""
    source = (
        "from torch import einsum, cat\nfrom einops import einsum\n\n\n"
        "def f(a, b):\n    return cat([einsum(a, b, 'i, i ->')])\n"
    )
    code, moved = _localize(source)
    assert moved == ["from torch import einsum, cat"]
    assert f"def f(a, b):\n    from torch import cat  {MARK}\n" in code
    assert "from einops import einsum" in code


def test_a_parameter_named_like_the_import_is_no_use_of_it() -> None:
    """x-transformers' `def max_neg_value(tensor)` beside `from torch import tensor`: the import
    stayed (the parameter read as a use at load), and moving it into the function would rebind
    the parameter."""
    source = (
        "from torch import tensor\n\n\ndef max_neg_value(tensor):\n    return tensor.dtype\n\n\n"
        "def g(x):\n    return tensor(x)\n\n\nclass A:\n    def m(self, tensor=None):\n"
        "        def inner():\n            return tensor\n\n        return inner\n"
    )
    code, moved = _localize(source)
    assert moved == ["from torch import tensor"]
    assert code.count("from torch import tensor") == 1
    assert f"def g(x):\n    from torch import tensor  {MARK}\n" in code


@pytest.mark.parametrize("to", ["jax", "tf"])
def test_a_model_with_a_download_method_loads_and_verifies_without_torch(to: str, tmp_path: Path) -> None:
    original = tmp_path / "zoo.py"
    original.write_text(ZOO)
    result = transpile(ZOO, to=to, path=str(original))
    notes = [d for d in result.diagnostics if d.code == "import-localized"]
    assert [(d.line, d.severity) for d in notes] == [(3, "note")]
    assert torch_imports_at_load(result.code, original) == []
    converted = tmp_path / f"zoo_{to}.py"
    converted.write_text(result.code)
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True))
    assert verdict.passed, verdict.failures


OPTIONAL = """import torch.nn as nn

try:
    from torchvision.models.utils import load_state_dict_from_url
except ImportError:
    from torch.utils.model_zoo import load_url as load_state_dict_from_url


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


def pretrained(url):
    net = Net()
    net.load_state_dict(load_state_dict_from_url(url))
    return net
"""


def test_an_optional_import_moves_whole_into_its_users() -> None:
    code, moved = _localize(
        "try:\n    from torchvision.models.utils import load_state_dict_from_url\nexcept ImportError:\n"
        "    from torch.hub import load_state_dict_from_url\n\n\ndef f(u):\n    return load_state_dict_from_url(u)\n"
    )
    assert moved == ["from torchvision.models.utils import load_state_dict_from_url"]
    assert code == (
        f"def f(u):\n    try:  {MARK}\n        from torchvision.models.utils import load_state_dict_from_url\n"
        "    except ImportError:\n        from torch.hub import load_state_dict_from_url\n"
        "    return load_state_dict_from_url(u)\n"
    )


@pytest.mark.parametrize(
    "code",
    [
        "try:\n    import torch\nexcept ImportError:\n    torch = None\n\n\ndef f():\n    return torch\n",  # a fallback
        "try:\n    import torch\nexcept ImportError:\n    pass\nx = torch\n",  # used at load time
        "try:\n    import numpy\nexcept ImportError:\n    pass\n\n\ndef f():\n    return numpy\n",  # not torch
    ],
    ids=["fallback-value", "load-time", "not-torch"],
)
def test_optional_imports_that_must_stay(code: str) -> None:
    assert _localize(code) == (code, [])


@pytest.mark.parametrize("to", ["jax", "tf"])
@pytest.mark.parametrize("prune", [False, True])
def test_an_optional_torchvision_import_leaves_the_output_torch_free(to: str, prune: bool, tmp_path: Path) -> None:
    original = tmp_path / "optional.py"
    original.write_text(OPTIONAL)
    pruning = {"entry": "Net()", "prune_to_entry": True} if prune else {}
    result = transpile(OPTIONAL, to=to, path=str(original), **pruning)
    # pruned, nothing uses the import: the feature-detection stage resolves the `try` away first
    code = "feature-detection-resolved" if prune else "import-localized"
    notes = [d.message for d in result.diagnostics if d.code == code]
    assert len(notes) == 1 and ("fallback" if prune else "moved into pretrained") in notes[0], notes
    assert torch_imports_at_load(result.code, original) == []
    assert ("load_state_dict_from_url" in result.code) is not prune
    converted = tmp_path / f"optional_{to}.py"
    converted.write_text(result.code)
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True))
    assert verdict.passed, verdict.failures


def test_an_import_goes_into_the_one_branch_that_needs_it() -> None:
    code, moved = _localize(
        "import torch\n\n\ndef qr(x, new):\n"
        '    """A version check."""\n'
        "    y = x\n"
        "    if new:\n        q = jnp.linalg.qr(y)\n"
        "    else:\n        for _ in range(1):\n            q = torch.qr(y)\n"
        "    return q\n"
    )
    assert moved == ["import torch"]
    assert code == (
        "def qr(x, new):\n"
        '    """A version check."""\n'
        "    y = x\n"
        "    if new:\n        q = jnp.linalg.qr(y)\n"
        f"    else:\n        for _ in range(1):\n            import torch  {MARK}\n            q = torch.qr(y)\n"
        "    return q\n"
    )


@pytest.mark.parametrize(
    ("body", "placed"),
    [
        ("    if torch.cuda:\n        pass\n", 0),  # used in the test: before the if
        ("    if a:\n        torch.x\n    else:\n        torch.y\n", 0),  # both branches: before the if
        ("    a = 1\n    if a: torch.x\n", 1),  # a one-line branch: before that statement
    ],
    ids=["in-the-test", "both-branches", "one-line-branch"],
)
def test_an_import_stays_before_a_statement_whose_header_or_several_branches_use_it(body: str, placed: int) -> None:
    code, moved = _localize(f"import torch\n\n\ndef f(a):\n{body}")
    lines = code.splitlines()[1:]
    assert moved == ["import torch"] and lines[placed] == f"    import torch  {MARK}", code


VERSION_SWITCH = """import torch
from torch import nn

TORCH_VERSION = tuple(int(v) for v in torch.__version__.split(".")[:2])
if TORCH_VERSION >= (1, 11):
    from torch.ao.quantization import fuse_modules
else:
    from torch.quantization import fuse_modules


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)

    def convert(self):
        fuse_modules(self, [["lin"]], inplace=True)
"""


@on_both_targets
def test_a_version_switch_between_torch_imports_moves_whole(tmp_path: Path, target: str) -> None:
    """pytorchvideo's `if TORCH_VERSION >= (1, 11): from torch.ao.quantization import fuse_modules
    / else: from torch.quantization import ...`, used by a deploy-time method only: the whole
    `if` moves into that method, so the model loads and verifies without torch."""
    code = transpile(VERSION_SWITCH, to=target).code
    method = code.index("    def convert(self):")
    assert code.index("if TORCH_VERSION >= (1, 11):") > method
    verdict = convert_and_verify(tmp_path, VERSION_SWITCH, target, "Block()", ["float32[2,4]"], name="switch")
    assert verdict.passed, verdict


def test_imports_of_a_package_built_on_torch_move_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spikingjelly's Triton kernels, imported for a branch only a GPU precision setting takes:
    a distribution that requires torch counts as torch (`torch_roots`), so its import moves into
    the function that uses it and the module loads without it."""
    from precision_transpiler.analysis import load_imports

    site = tmp_path / "site"
    (site / "kernellib").mkdir(parents=True)
    kernels = "import torch\n\ntry:\n    import tritonish\n\n    def fused(x):\n        return x\n"
    kernels += "except ImportError:\n    fused = None\n"
    (site / "kernellib" / "__init__.py").write_text(kernels)  # bound under `try`: left imported
    info = site / "kernellib-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kernellib\nVersion: 1.0\nRequires-Dist: torch\n")
    (info / "top_level.txt").write_text("kernellib\n")
    monkeypatch.syspath_prepend(str(site))
    load_imports.torch_distribution.cache_clear()
    load_imports._distributions.cache_clear()
    try:
        source = (
            "import torch\nfrom kernellib import fused\n\n\ndef step(x, fast=False):\n"
            "    if fast:\n        return fused(x)\n    return torch.relu(x)\n"
        )
        original = tmp_path / "step.py"
        original.write_text(source)
        result = transpile(source, to="jax", path=str(original))
        assert torch_imports_at_load(result.code, original) == [], result.code
        assert "from kernellib import fused  " + MARK in result.code, result.code
    finally:
        load_imports.torch_distribution.cache_clear()
        load_imports._distributions.cache_clear()


def test_a_torch_package_the_model_builds_with_is_a_warning_not_a_note() -> None:
    """llama's `from fairscale.nn.model_parallel.layers import ColumnParallelLinear` (fairscale not
    installed here, known from mappings/torch_surface.yaml `packages:`): moved into `__init__`,
    the module loads without torch but the model does not build without it, which is said as a
    warning at the import."""
    source = (
        "from fairscale.nn.model_parallel.layers import ColumnParallelLinear\nfrom torch import nn\n\n\n"
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = ColumnParallelLinear(4, 4)\n\n    def forward(self, x):\n        return self.lin(x)\n"
    )
    result = transpile(source, to="jax")
    said = [d for d in result.diagnostics if d.code == "import-localized"]
    assert [(d.severity, d.line) for d in said] == [("warning", 1)], [d.format() for d in said]
    assert "building or running the model (__init__) still imports it and needs torch" in said[0].message


def test_imports_of_torch_packages_inside_functions_are_reported() -> None:
    """An import inside a function that needs torch does not run at load, but whenever the
    function runs (spikingjelly's `voltage_reset` imported the package's own `voltage` there):
    a warning at it (`torch-when-called`), a note where a `try` catches ImportError around it
    (an optional kernel the code runs without). Imports moved there by the conversion are said
    once, by `import-localized`."""
    source = (
        "import torch\nfrom torch import nn\n\n\ndef helper(x):\n    from fairscale.nn import checkpoint\n"
        "    return checkpoint(x)\n\n\nclass M(nn.Module):\n    def __init__(self, fast=False):\n"
        "        super().__init__()\n        self.lin = nn.Linear(4, 4)\n        if fast:\n            try:\n"
        "                from apex.normalization import FusedLayerNorm\n"
        "                from fairscale.nn import wrap\n            except ImportError:\n                pass\n\n"
        "    def forward(self, x):\n        return torch.relu(self.lin(x))\n"
    )
    result = transpile(source, to="jax")
    said = {(d.severity, d.line): d.message for d in result.diagnostics if d.code == "torch-when-called"}
    assert set(said) == {("warning", 6), ("note", 16), ("note", 17)}, [d.format() for d in result.diagnostics]
    assert "in helper still imports torch (fairscale.nn is a package built on torch" in said[("warning", 6)]
    assert "imported only when that branch runs" in said[("note", 17)]
    assert not [d for d in result.diagnostics if d.code == "torch-at-load"]
