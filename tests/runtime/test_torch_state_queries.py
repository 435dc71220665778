"""torch's questions about its own machinery, answered as eager torch answers them on a CPU.

Model code asks whether torch.compile is tracing (`torch.compiler.is_dynamo_compiling()`,
`torch._C._are_functorch_transforms_active()`), whether a size is symbolic
(`isinstance(n, (int, torch.SymInt))`), whether a tensor is pinned or shared, and whether it
carries a forward-mode tangent (`forward_ad.unpack_dual(x).tangent is None`), whether it is an
inference tensor and how often it was changed in place (`x.is_inference()`, `x._version`). A
converted array is none of these and never changed in place, so each converts to the eager
answer and the model runs torch-free; the rest of forward-mode autograd stays reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from precision_transpiler import transpile
from precision_transpiler.verify import VerifyOptions, verify_files

pytestmark = [pytest.mark.needs_torch, pytest.mark.needs_jax, pytest.mark.needs_tf]

MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        n = x.shape[0]
        if isinstance(n, (int, torch.SymInt)) and not x.is_pinned() and not x.is_shared():
            x = x * 2
        if isinstance(n, torch.SymFloat) or torch._C._are_functorch_transforms_active():
            x = x + 100
        if torch.compiler.is_dynamo_compiling() or torch.compiler.is_exporting():
            x = x + 100
        torch._assert_async(torch.isfinite(x).all(), "finite inputs")  # checked eagerly
        if torch.autograd.forward_ad.unpack_dual(x).tangent is None:
            x = x + 1
        # kornia's params snapshot: the version counter of each tensor value, -1 for other values
        versions = [v._version if isinstance(v, torch.Tensor) and not v.is_inference() else -1 for v in (x, n)]
        return self.lin(x) + torch.autograd.forward_ad.unpack_dual(x).primal + sum(versions)
"""


@pytest.mark.parametrize("target", ["jax", "tf"])
def test_eager_answers_convert_and_verify(tmp_path: Path, target: str) -> None:
    original = tmp_path / "model.py"
    original.write_text(MODEL, encoding="utf-8")
    result = transpile(MODEL, to=target, path=str(original))
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert "not False and not False" in result.code
    assert "0 if isinstance(v, " in result.code and "not False else -1" in result.code
    converted = tmp_path / f"model_{target}.py"
    converted.write_text(result.code, encoding="utf-8")
    verdict = verify_files(original, converted, VerifyOptions(entry="Net()", inputs=["float32[2,4]"], torch_free=True))
    assert verdict.passed, verdict.failures


def test_the_rest_of_forward_mode_autograd_stays_reported() -> None:
    source = "import torch\n\n\ndef f(x, t):\n    return torch.autograd.forward_ad.make_dual(x, t)\n"
    (diagnostic,) = transpile(source, to="jax", path="m.py").unsupported
    assert diagnostic.format().startswith("m.py:5:12: unsupported: torch.autograd.forward_ad.make_dual")
    assert "jax.jvp" in diagnostic.format()


def test_a_tensor_method_without_mapping_is_reported_where_isinstance_shows_a_tensor() -> None:
    """`if isinstance(x, torch.Tensor):` and `isinstance(x, torch.Tensor) and ...` make x a tensor
    there, though nothing else says so: a tensor method no table maps is reported, not left to
    fail at run time."""
    source = (
        "import torch\n\n\ndef f(x, y):\n    if isinstance(x, torch.Tensor):\n        x = x.kthvalue(1)\n"
        "    return isinstance(y, torch.Tensor) and y.kthvalue(2), "
        "y.kthvalue(3) if isinstance(y, torch.Tensor) else y\n"
    )
    result = transpile(source, to="jax", path="m.py")
    found = sorted(d.format().split(": unsupported")[0] for d in result.unsupported if "kthvalue" in d.message)
    assert found == ["m.py:6:13", "m.py:7:44", "m.py:7:59"], [d.format() for d in result.diagnostics]
    unnarrowed = transpile("import torch\n\n\ndef f(x):\n    return x.kthvalue(1)\n", to="jax", path="m.py")
    assert not unnarrowed.unsupported  # x may be anything: another object's method of that name
