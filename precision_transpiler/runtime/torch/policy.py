"""Precision policies on torch code at run time: what a policy's generated block binds.

The torch policy pass (precision/passes/torch.py) decorates every `forward` of an nn.Module
subclass with `@_ptranspile_policy` and puts the inputs of keep-fp32 ops through
`_ptranspile_fp32(x)`; the file's generated block holds only what is the file's own:

    _ptranspile_policy = TorchPolicy("mixed", device="cpu", param=torch.float32, ...)
    _ptranspile_fp32 = fp32_island

The definitions here are copied into the file (torch outputs carry their runtime inline). They
import what they use inside the functions, so copying them adds no import line that `--policy
fp32` (which strips the block) would leave behind.
"""

from precision_transpiler.runtime.device import cpu_has_bf16, pick_compute_dtype
from precision_transpiler.runtime.policy import call_nested, path_matches, warn_recompute


def device_compute_dtype(requested):
    """`--device auto`: (device type for torch.autocast, compute dtype) for a policy asking for
    `requested` (runtime/device.py).

    On a CPU, torch itself reports native bf16 kernels (`torch.cpu._is_avx512_bf16_supported`,
    `_is_amx_tile_supported`, both private, so guarded) and whether its own kernels may use
    AVX-512 (`get_cpu_capability`, which ATEN_CPU_CAPABILITY caps)."""
    import torch

    if torch.cuda.is_available():
        return "cuda", getattr(torch, pick_compute_dtype("torch", requested, "gpu", torch.cuda.is_bf16_supported()))
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    native = None  # not an x86 build of torch: the CPU's own flags decide
    if all(checks):
        capability = torch.backends.cpu.get_cpu_capability()
        native = capability == "AVX512" and any(check() for check in checks) and cpu_has_bf16()
    return "cpu", getattr(torch, pick_compute_dtype("torch", requested, "cpu", False, native))


def cast_floating(value, dtype):
    """Cast the floating tensors in a (nested) output to `dtype`."""
    import torch
    from torch.utils import _pytree

    def cast(t):
        return t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t

    return _pytree.tree_map_only(torch.Tensor, cast, value)


def fp32_island(x):
    """fp32 island: run the op that consumes `x` in float32 (autocast on CPU would not)."""
    import torch

    if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float32:
        return x.float()
    return x


def all_finite(value):
    import torch
    from torch.utils import _pytree

    leaves = _pytree.tree_leaves(value)
    return all(torch.isfinite(t).all() for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point())


class TorchPolicy:
    """One file's policy, as `@_ptranspile_policy` on every `forward`: the forward runs inside
    `torch.autocast(device_type=device, dtype=compute)` (linear, conv, matmul, attention in low
    precision); parameters are cast once when the policy stores them in low precision (`param`),
    `fp32_modules` (layer classes) kept in float32; the outermost module casts its floating
    outputs to `output`; nested modules see autocast already on and just run. Overrides keep
    modules in float32 by class name (`fp32_classes`) or module path glob (`fp32_paths`);
    `nan_fallback` computes a non-finite output again in float32."""

    def __init__(
        self,
        name,
        device,
        param,
        compute,
        output,
        nan_fallback=False,
        fp32_paths=(),
        fp32_classes=(),
        fp32_modules=(),
    ):
        self.name = name
        self.device = device
        self.param = param
        self.compute = compute
        self.output = output
        self.nan_fallback = nan_fallback
        self.fp32_paths = tuple(fp32_paths)
        self.fp32_classes = tuple(fp32_classes)
        self.fp32_modules = tuple(fp32_modules)
        self.depth = 0  # > 0 while a module under the policy runs

    def is_fp32_module(self, module):
        """Whether an override keeps this module in float32 (by class name or module path glob)."""
        if type(module).__name__ in self.fp32_classes:
            return True
        path = getattr(module, "_ptranspile_path", None)
        if path is None or not self.fp32_paths:
            return False
        return path_matches(path, self.fp32_paths)

    def fp32_forward(self, forward):
        """A layer an override keeps in float32 (e.g. `path: layer1.0.conv1`): autocast off,
        float32 inputs. Set on the instance, so library layers such as nn.Conv2d work too."""
        import torch

        def run(*args, **kwargs):
            with torch.autocast(device_type=self.device, enabled=False):
                args, kwargs = cast_floating((args, kwargs), torch.float32)
                return forward(*args, **kwargs)

        return run

    def __call__(self, forward):
        """Run `forward` under the policy. Only the outermost module casts."""
        policy = self

        def run(self, *args, **kwargs):
            return policy.run(forward, self, args, kwargs)

        run.__name__ = forward.__name__
        run.__doc__ = forward.__doc__
        run.__wrapped__ = forward
        return run

    def run(self, forward, module, args, kwargs):
        import torch

        if self.compute == self.param == torch.float32 and not self.nan_fallback:
            # nothing computes in low precision here (--device auto chose float32): outputs only
            if self.depth:
                return forward(module, *args, **kwargs)
            return cast_floating(call_nested(self, forward, module, *args, **kwargs), self.output)
        if self.depth:  # inside a module that already applies the policy
            if not self.is_fp32_module(module):
                return forward(module, *args, **kwargs)
            self.depth += 1
            try:
                with torch.autocast(device_type=self.device, enabled=False):
                    args, kwargs = cast_floating((args, kwargs), torch.float32)
                    return forward(module, *args, **kwargs)
            finally:
                self.depth -= 1
        self.prepare(module)
        if self.param != torch.float32:
            args, kwargs = cast_floating((args, kwargs), self.compute)
        self.depth += 1
        try:
            low = self.compute != torch.float32 and not self.is_fp32_module(module)
            with torch.autocast(device_type=self.device, dtype=self.compute, enabled=low):
                if not low:
                    args, kwargs = cast_floating((args, kwargs), torch.float32)
                out = forward(module, *args, **kwargs)
            cast = cast_floating(out, self.output)
            if self.nan_fallback and not all_finite(cast):
                return self.recompute_fp32(forward, module, args, kwargs)
        finally:
            self.depth -= 1
        return cast

    def prepare(self, module):
        """Before the outermost call: the path overrides' float32 forwards, and the parameters
        in the policy's dtype (the float32 classes and overrides in float32), once per module."""
        import torch

        if self.fp32_paths and not getattr(module, "_ptranspile_paths", False):
            for name, sub in module.named_modules():
                sub._ptranspile_path = name
                forward_fn = getattr(type(sub).forward, "__wrapped__", None)
                if name and forward_fn is None and self.is_fp32_module(sub):
                    sub.forward = self.fp32_forward(sub.forward)
            module._ptranspile_paths = True
        if self.param != torch.float32 and not getattr(module, "_ptranspile_params", False):
            module.to(self.param)
            for sub in module.modules():
                if isinstance(sub, self.fp32_modules) or self.is_fp32_module(sub):
                    sub.float()
            module._ptranspile_params = True

    def recompute_fp32(self, forward, module, args, kwargs):
        """The NaN fallback: `forward` again in float32 (parameters too), the result in float32."""
        import torch

        warn_recompute(self.name, module)
        if self.param != torch.float32:
            module.float()
            module._ptranspile_params = False
        with torch.autocast(device_type=self.device, enabled=False):
            args32, kwargs32 = cast_floating((args, kwargs), torch.float32)
            out = forward(module, *args32, **kwargs32)
        return cast_floating(out, torch.float32)
