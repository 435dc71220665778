"""Feature-detection imports of torch resolve to the path the conversion took
(convert/feature_detection.py): the guarded code stays, the import and its ImportError fallback
go, and the converted module loads without torch. No-op cases: what still needs the import."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from precision_transpiler import transpile
from precision_transpiler.analysis.load_imports import TORCH_ROOTS, torch_imports_at_load
from precision_transpiler.convert.feature_detection import resolve_accelerator_branches, resolve_feature_detection
from precision_transpiler.verify import VerifyOptions, verify_files
from tests.helpers import on_both_targets

ROOTS = TORCH_ROOTS

SOURCE = """import torch
from torch import nn

try:
    from torch.nn.functional import scaled_dot_product_attention
    HAS_SDPA = True
except ImportError:
    scaled_dot_product_attention = None
    HAS_SDPA = False

try:
    # torch 1.7 and newer
    import torch.fft

    def spectrum(x):
        return torch.fft.rfft(x, dim=-1).abs()
except ImportError:
    def spectrum(x):
        return torch.rfft(x, 1)[..., 0]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        q = self.fc(x)
        if HAS_SDPA:
            q = scaled_dot_product_attention(q, q, q)
        return spectrum(q)
"""


def _resolve(code: str, converts: frozenset[str] = frozenset()) -> tuple[str, list[str]]:
    """Resolved as for a target whose tables convert the torch names `converts`."""
    module, resolved = resolve_feature_detection(cst.parse_module(code), ROOTS, code, converts.__contains__)
    return module.code, [r.imports[0] for r in resolved]


def test_a_converted_guard_keeps_its_code_and_loses_its_fallback() -> None:
    code, resolved = _resolve(
        "try:\n    # new\n    import torch.fft\n\n    def f(x):\n        return jnp.fft.rfft(x)\nexcept ImportError:\n"
        "    def f(x):\n        return torch.rfft(x, 1)\n"
    )
    assert resolved == ["import torch.fft"]
    assert code == "# new\n\ndef f(x):\n    return jnp.fft.rfft(x)\n"


@pytest.mark.parametrize(
    "code",
    [
        "try:\n    import torch.fft\n    y = 1\nexcept Exception:\n    y = None\n",  # not only ImportError
        "try:\n    import numpy\n    y = 1\nexcept ImportError:\n    y = None\n",  # not torch
        "try:\n    import torch.fft\n    y = 1\nexcept ImportError:\n    y = None\nfinally:\n    z = 2\n",  # finally
        # a torch the module requires (ncps): the handler raises, so the feature is not optional
        "try:\n    import torch.fft\n    y = torch.fft.rfft\nexcept ImportError:\n    raise ImportWarning('no')\n",
        # the handler's path needs torch too
        "try:\n    import torch.fft\n    y = torch.fft.rfft\nexcept ImportError:\n    import torch\n    y = 1\n",
    ],
    ids=["broad-handler", "not-torch", "finally", "handler-raises", "handler-imports-torch"],
)
def test_guards_that_must_stay(code: str) -> None:
    assert _resolve(code) == (code, [])


def test_an_export_whose_feature_the_target_has_keeps_torchs_path() -> None:
    # the fallback is the package's, not always torch's equal (an approximate gelu): where the
    # target converts the feature, the `try` stays as written (an importer of the name gets
    # torch's, converted: convert/torch_reexports.py), and with no tables to ask, too
    code = "try:\n    from torch.nn.functional import gelu\nexcept ImportError:\n\n    def gelu(x):\n        return x\n"
    assert _resolve(code, frozenset({"torch.nn.functional.gelu"})) == (code, [])
    module, resolved = resolve_feature_detection(cst.parse_module(code), ROOTS, code)
    assert (module.code, resolved) == (code, [])


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("try:\n    import torch.fft\n    y = torch.fft.rfft\nexcept ImportError:\n    y = None\n", "y = None\n"),
        (
            "f = None\n\ntry:\n    from torch import flex\n    f = flex\nexcept ImportError:\n    pass\nz = f\n",
            "f = None\nz = f\n",
        ),
        (  # an export other modules import (diffusers' maybe_allow_in_graph): its fallback
            "try:\n    from torch._dynamo import allow_in_graph as m\nexcept ImportError:\n\n"
            "    def m(cls):\n        return cls\n",
            "def m(cls):\n    return cls\n",
        ),
    ],
    ids=["still-used", "pass-handler", "exported-with-fallback"],
)
def test_a_torch_import_the_rules_left_takes_its_import_error_path(code: str, expected: str) -> None:
    """A torch import still there once the rules ran has no counterpart in the target (titans'
    flex attention): the module takes the path of a torch without that feature."""
    assert _resolve(code) == (expected, [code.split("try:\n    ")[1].split("\n")[0]])


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_the_converted_model_loads_and_verifies_without_torch(tmp_path: Path, target: str) -> None:
    original = tmp_path / "detect.py"
    original.write_text(SOURCE, encoding="utf-8")
    result = transpile(SOURCE, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]  # the fallback's went with it
    notes = [d.line for d in result.diagnostics if d.code == "feature-detection-resolved"]
    assert notes == [4, 11]
    assert torch_imports_at_load(result.code, original) == []
    assert "torch.rfft" not in result.code and "# torch 1.7 and newer" in result.code
    converted = tmp_path / f"detect_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,8]"], torch_free=True))
    assert verdict.passed, verdict.failures


ACCELERATOR = """import torch
import torch.nn as nn

try:
    from apex.normalization import FusedLayerNorm as _FusedLayerNorm

    class FastNorm(_FusedLayerNorm):
        def forward(self, x):
            with torch.cuda.device(x.device):
                return super().forward(x)

except ImportError:
    from torch.nn import LayerNorm as FastNorm


class Block(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.norm = FastNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(self.norm(x))
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_an_optional_accelerator_takes_the_torch_fallback(tmp_path: Path, target: str) -> None:
    """fair-esm's `try: from apex... class ESM1bLayerNorm(FusedLayerNorm)` / `except ImportError:
    from torch.nn import LayerNorm as ESM1bLayerNorm`: the converted module takes torch's layer,
    and what was said of the accelerator's code goes with it."""
    original = tmp_path / "fused.py"
    original.write_text(ACCELERATOR, encoding="utf-8")
    result = transpile(ACCELERATOR, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert [d.line for d in result.diagnostics if d.code == "feature-detection-resolved"] == [4]
    assert torch_imports_at_load(result.code, original) == [] and "apex" not in result.code
    converted = tmp_path / f"fused_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    options = VerifyOptions(entry="Block()", inputs=["float32[2,16]"], torch_free=True)
    assert verify_files(original, converted, options).passed


def test_an_accelerator_whose_names_are_read_elsewhere_stays() -> None:
    code = (
        "try:\n    from apex import Fused\n\n    class Norm(Fused):\n        pass\n"
        "except ImportError:\n    from torch.nn import LayerNorm as Norm\nbase = Fused\n"
    )
    assert _resolve(code) == (code, [])


def test_an_unread_torch_fallback_goes_too() -> None:
    """With `--prune-to-entry` the fallback's users may be left out: nothing of the `try` stays."""
    head = "try:\n    from apex import Fused\n\n    class Norm(Fused):\n        pass\nexcept ImportError:\n"
    code, resolved = _resolve(head + "    from torch.nn import LayerNorm as Norm\nx = 1\n")
    assert (code, resolved) == ("x = 1\n", ["from apex import Fused"])
    code, _ = _resolve(head + "    from torch.nn import LayerNorm as Norm\nx = Norm\n")
    assert code == "from torch.nn import LayerNorm as Norm\nx = Norm\n"


FLEX = """import torch
from torch import nn

flex_attention = None

try:
    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    if torch.cuda.is_available():
        flex_attention = torch.compile(flex_attention)
except ImportError:
    pass


class Attn(nn.Module):
    def __init__(self, dim=8, use_flex=False):
        super().__init__()
        assert not (use_flex and flex_attention is None)
        self.use_flex = use_flex
        self.qkv = nn.Linear(dim, dim * 3)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.use_flex:
            return flex_attention(q, k, v)
        return nn.functional.scaled_dot_product_attention(q, k, v)
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_a_torch_feature_without_counterpart_takes_its_fallback_and_loads_without_torch(
    tmp_path: Path, target: str
) -> None:
    """titans' flex attention: the converted module binds `flex_attention = None` as torch
    without the feature does, loads without torch, and what still uses the feature is reported."""
    original = tmp_path / "flex.py"
    original.write_text(FLEX, encoding="utf-8")
    result = transpile(FLEX, to=target, path=str(original))
    assert [d.line for d in result.diagnostics if d.code == "feature-detection-resolved"] == [6]
    assert all(d.line > 12 for d in result.unsupported), [d.format() for d in result.unsupported]
    assert torch_imports_at_load(result.code, original) == []
    converted = tmp_path / f"flex_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    options = VerifyOptions(entry="Attn()", inputs=["float32[1,4,8]"], torch_free=True)
    assert verify_files(original, converted, options).passed


ACCELERATORS = frozenset({"xformers", "apex"})


def _branches(code: str) -> tuple[str, list[str]]:
    module, resolved = resolve_accelerator_branches(cst.parse_module(code), ACCELERATORS, code)
    return module.code, [r.imports[0] for r in resolved]


def test_an_optional_extension_imported_under_if_takes_the_else_branch() -> None:
    # diffusers' attention_processor.py: the converted module never uses xformers, and left as
    # it was it imported xformers (and torch) wherever xformers was installed
    code = (
        "# probed\nif is_xformers_available():\n    import xformers\n    import xformers.ops\n"
        "else:\n    xformers = None\n"
    )
    assert _branches(code) == ("# probed\nxformers = None\n", ["import xformers"])


@pytest.mark.parametrize(
    "code",
    [
        "if ok():\n    import xformers\n",  # no else
        "if ok():\n    import numpy\nelse:\n    numpy = None\n",  # not a torch package
        "if ok():\n    import xformers\n    y = 1\nelse:\n    xformers = None\n",  # more than imports
        "if ok():\n    import xformers\nelse:\n    import apex as xformers\n",  # the else needs one too
        "if ok():\n    import xformers\nelif other():\n    xformers = 1\nelse:\n    xformers = None\n",  # elif
    ],
    ids=["no-else", "not-a-torch-package", "more-than-imports", "else-imports-one", "elif"],
)
def test_branches_that_stay(code: str) -> None:
    assert _branches(code) == (code, [])


@on_both_targets
def test_an_accelerator_branch_converts_and_verifies_without_torch(tmp_path: Path, target: str) -> None:
    source = (
        "import torch\nfrom torch import nn\n\n\ndef is_xformers_available():\n    return False\n\n\n"
        "if is_xformers_available():\n    import xformers.ops\nelse:\n    xformers = None\n\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(8, 8)\n\n    def forward(self, x):\n"
        "        if xformers is not None:\n            return xformers.ops.memory_efficient_attention(x, x, x)\n"
        "        return self.fc(x)\n"
    )
    original = tmp_path / "net.py"
    original.write_text(source, encoding="utf-8")
    result = transpile(source, to=target, path=str(original))
    assert torch_imports_at_load(result.code, original) == []
    assert [d.line for d in result.diagnostics if d.code == "feature-detection-resolved"] == [9]  # the `if`
    converted = tmp_path / f"net_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,8]"]))
    assert verdict.passed, verdict.failures
