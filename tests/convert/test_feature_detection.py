"""Feature-detection imports of torch resolve to the path the conversion took
(convert/feature_detection.py): the guarded code stays, the import and its ImportError fallback
go, and the converted module loads without torch. No-op cases: what still needs the import."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from precision_transpiler import transpile
from precision_transpiler.analysis.load_imports import TORCH_ROOTS, torch_imports_at_load
from precision_transpiler.convert.feature_detection import resolve_feature_detection
from precision_transpiler.verify import VerifyOptions, verify_files

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


def _resolve(code: str) -> tuple[str, list[str]]:
    module, resolved = resolve_feature_detection(cst.parse_module(code), ROOTS, code)
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
        "try:\n    import torch.fft\n    y = torch.fft.rfft\nexcept ImportError:\n    y = None\n",  # still used
        "try:\n    import torch.fft\n    y = 1\nexcept Exception:\n    y = None\n",  # not only ImportError
        "try:\n    import numpy\n    y = 1\nexcept ImportError:\n    y = None\n",  # not torch
        "try:\n    from torch import sdpa\n    y = 1\nexcept ImportError:\n    sdpa = None\nz = sdpa\n",  # elsewhere
        "try:\n    import torch.fft\n    y = 1\nexcept ImportError:\n    y = None\nfinally:\n    z = 2\n",  # finally
    ],
    ids=["still-used", "broad-handler", "not-torch", "read-elsewhere", "finally"],
)
def test_guards_that_must_stay(code: str) -> None:
    assert _resolve(code) == (code, [])


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
