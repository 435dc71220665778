"""`--device auto` for torch code: where the model runs and its compute dtype (see runtime/device.py)."""

import torch

from precision_transpiler.runtime.device import _ptranspile_cpu_bf16, _ptranspile_pick


def _ptranspile_torch_device(requested):
    """(device type for torch.autocast, compute dtype) for a policy asking for `requested`.

    On a CPU, torch itself reports native bf16 kernels (`torch.cpu._is_avx512_bf16_supported`,
    `_is_amx_tile_supported`, both private, so guarded) and whether its own kernels may use
    AVX-512 (`get_cpu_capability`, which ATEN_CPU_CAPABILITY caps)."""
    if torch.cuda.is_available():
        return "cuda", getattr(torch, _ptranspile_pick("torch", requested, "gpu", torch.cuda.is_bf16_supported()))
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    native = None  # not an x86 build of torch: the CPU's own flags decide
    if all(checks):
        capability = torch.backends.cpu.get_cpu_capability()
        native = capability == "AVX512" and any(check() for check in checks) and _ptranspile_cpu_bf16()
    return "cpu", getattr(torch, _ptranspile_pick("torch", requested, "cpu", False, native))
