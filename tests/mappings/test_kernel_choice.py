"""torch's kernel selection regions (`torch.backends.cuda.sdp_kernel(...)`,
`torch.nn.attention.sdpa_kernel(SDPBackend.MATH)`, `torch.backends.cudnn.flags(...)`) become the
runtime's no-op region `torch_kernel_choice` (mappings/layers/torch_nn.yaml `symbols:`): the
target picks its own kernels, and the forward pass no longer imports torch for them."""

from __future__ import annotations

from pathlib import Path

from precision_transpiler import transpile
from tests.helpers import convert_and_verify, on_both_targets

SOURCE = """import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        q = self.proj(x).reshape(x.shape[0], 1, 2, 4)
        with torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True):
            out = F.scaled_dot_product_attention(q, q, q)
        with sdpa_kernel(SDPBackend.MATH), torch.backends.cudnn.flags(enabled=False):
            out = out + F.scaled_dot_product_attention(q, q, q)
        return out.reshape(x.shape)
"""


@on_both_targets
def test_kernel_regions_run_their_body(tmp_path: Path, target: str) -> None:
    result = transpile(SOURCE, to=target)
    assert not result.unsupported, [d.format() for d in result.unsupported]
    assert "with torch_kernel_choice(TorchSDPBackend.MATH), torch_kernel_choice(enabled=False):" in result.code
    verdict = convert_and_verify(tmp_path, SOURCE, target, "Net()", ["float32[2,8]"], name="kernels")
    assert verdict.passed, verdict
