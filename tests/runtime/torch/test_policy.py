"""runtime/torch/policy.py on real torch (CPU): what a torch policy's generated block binds.

The policy pass decorates every `forward` with the file's `TorchPolicy` and wraps keep-fp32 inputs
in `fp32_island`; these tests build such modules by hand and check the run-time half: autocast
and the outermost output cast, fp32 islands, float32 overrides by class and path, parameters
stored in low precision, the NaN fallback's recomputation, and the `--device auto` decision. The
last test copies the definitions as a conversion does and runs the copy.
"""

from __future__ import annotations

import logging

import pytest

from precision_transpiler.runtime import device
from tests.runtime import run_copied

pytestmark = pytest.mark.needs_torch

torch = pytest.importorskip("torch")
tp = pytest.importorskip("precision_transpiler.runtime.torch.policy")
nn = torch.nn


def _policy(**options: object) -> object:
    settings = {"device": "cpu", "param": torch.float32, "compute": torch.bfloat16, "output": torch.float32}
    return tp.TorchPolicy("mixed", **{**settings, **options})


def _net(policy: object) -> nn.Module:
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.norm = nn.LayerNorm(4)

        @policy
        def forward(self, x):
            h = self.fc(x)
            self.seen = h.dtype
            return self.norm(tp.fp32_island(h))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(4, 2)

        @policy
        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            self.inner = x.dtype
            return {"logits": self.head(x)}

    return Net()


def test_forward_runs_under_autocast_and_the_outermost_module_casts() -> None:
    policy = _policy()
    net = _net(policy)
    out = net(torch.randn(3, 4))
    assert net.blocks[0].seen == torch.bfloat16  # the Linear under autocast
    assert out["logits"].dtype == torch.float32 and policy.depth == 0
    assert type(net).forward.__wrapped__.__name__ == "forward"


def test_fp32_island_casts_floating_tensors_only() -> None:
    assert tp.fp32_island(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.float32
    assert tp.fp32_island(torch.arange(2)).dtype == torch.int64
    assert tp.fp32_island(1.5) == 1.5
    nested = tp.cast_floating({"a": torch.ones(2), "n": torch.arange(2)}, torch.float16)
    assert nested["a"].dtype == torch.float16 and nested["n"].dtype == torch.int64


def test_overrides_keep_modules_in_float32_by_path_and_by_class() -> None:
    policy = _policy(fp32_paths=("blocks.1",))
    net = _net(policy)
    net(torch.randn(3, 4))
    assert net.blocks[0].seen == torch.bfloat16 and net.blocks[1].seen == torch.float32
    by_class = _policy(fp32_classes=("Block",))
    net = _net(by_class)
    net(torch.randn(3, 4))
    assert net.blocks[0].seen == torch.float32 and net.blocks[1].seen == torch.float32


def test_low_precision_parameters_keep_fp32_modules_in_float32() -> None:
    policy = _policy(param=torch.bfloat16, output=torch.bfloat16, fp32_modules=(nn.LayerNorm,))
    net = _net(policy)
    out = net(torch.randn(3, 4))
    assert net.head.weight.dtype == torch.bfloat16 and net.blocks[0].norm.weight.dtype == torch.float32
    assert out["logits"].dtype == torch.bfloat16


def test_nan_fallback_recomputes_in_float32(caplog: pytest.LogCaptureFixture) -> None:
    policy = _policy(compute=torch.float16, param=torch.float16, output=torch.float16, nan_fallback=True)

    class Big(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            nn.init.ones_(self.fc.weight)

        @policy
        def forward(self, x):
            return self.fc(x) * 1e5

    model = Big()
    with caplog.at_level(logging.WARNING, logger="ptranspile"):
        out = model(torch.ones(1, 4))
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert "Big: non-finite output under policy mixed; recomputing in float32" in caplog.text
    assert model.fc.weight.dtype == torch.float32 and policy.depth == 0


def test_a_float32_decision_only_casts_outputs() -> None:
    policy = _policy(compute=torch.float32, output=torch.float16)
    net = _net(policy)
    out = net(torch.randn(3, 4))
    assert net.blocks[0].seen == torch.float32 and out["logits"].dtype == torch.float16


def test_device_compute_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device, "COMPUTE_DECISIONS", {})
    monkeypatch.setenv("PTRANSPILE_COMPUTE_DTYPE", "bfloat16")
    assert tp.device_compute_dtype("half") == ("cpu", torch.bfloat16)
    assert device.COMPUTE_DECISIONS["torch"]["reason"] == "PTRANSPILE_COMPUTE_DTYPE is set"
    monkeypatch.setattr(device, "COMPUTE_DECISIONS", {})
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.delenv("PTRANSPILE_COMPUTE_DTYPE")
    assert tp.device_compute_dtype("half") == ("cpu", torch.float32)  # no native bf16 kernels


def test_copied_into_a_file_the_definitions_run_with_no_import_of_their_own() -> None:
    block = (
        "import torch\nimport precision_transpiler\n\n"
        '_PTRANSPILE_DEVICE = precision_transpiler.runtime.torch.policy.device_compute_dtype("half")\n'
        "_ptranspile_policy = precision_transpiler.runtime.torch.policy.TorchPolicy(\n"
        '    "mixed", device=_PTRANSPILE_DEVICE[0], param=torch.float32, compute=_PTRANSPILE_DEVICE[1],'
        " output=torch.float32\n)\n"
    )
    namespace = run_copied(block)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        @namespace["_ptranspile_policy"]
        def forward(self, x):
            return self.fc(x)

    assert Net()(torch.ones(1, 2)).dtype == torch.float32
