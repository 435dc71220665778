"""PyTorch side of verification: eval mode, seeded perturbation, BatchNorm calibration,
`state_dict` copy, forward hooks for per-layer capture, and torch.autocast as the reference.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from precision_transpiler.errors import VerifyError
from precision_transpiler.verify.adapters.base import Capture, flatten_outputs
from precision_transpiler.verify.sources import layer_source

_TORCH_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16", "float64": "float64"}


def _torch() -> Any:
    import torch

    return torch


def to_numpy(tensor: Any) -> np.ndarray:
    torch = _torch()
    tensor = tensor.detach().cpu()
    if tensor.is_floating_point() and tensor.dtype not in (torch.float32, torch.float64):
        tensor = tensor.float()
    # A copy: the next layer may work in place (ReLU(inplace=True)) on the captured tensor.
    return tensor.numpy().copy()


def dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def flatten(value: Any, name: str = "out") -> list[tuple[str, Any]]:
    """(name, tensor) for every tensor in a (nested) torch output (see `flatten_outputs`)."""
    torch = _torch()
    return flatten_outputs(value, lambda v: isinstance(v, torch.Tensor), name)


def _first_float(value: Any) -> Any | None:
    for _, tensor in flatten(value):
        if tensor.is_floating_point():
            return tensor
    return None


class TorchAdapter:
    name = "torch"

    def is_model(self, obj: Any) -> bool:
        return isinstance(obj, _torch().nn.Module)

    def prepare(self, model: Any, inputs: list[np.ndarray], *, seed: int, perturb: bool, calibrate_bn: bool) -> None:
        torch = _torch()
        if perturb:
            gen = torch.Generator().manual_seed(seed)
            # Only what the state_dict carries: a non-persistent buffer (Llama's rotary `inv_freq`)
            # is computed by each side's constructor and never transferred, so it is not perturbed.
            saved = set(model.state_dict().keys())
            with torch.no_grad():
                for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
                    if not tensor.is_floating_point() or name not in saved:
                        continue
                    noise = torch.randn(tensor.shape, generator=gen, dtype=torch.float32).to(tensor.dtype)
                    if name.endswith("running_var"):
                        tensor.mul_(1 + 0.05 * noise.abs())  # stays positive
                        continue
                    spread = float(tensor.float().std()) if tensor.numel() > 1 else 0.0
                    tensor.add_(noise * 0.05 * (spread if spread > 0 else 1.0))
        if calibrate_bn:
            self._calibrate(model, inputs)
        model.eval()

    def _calibrate(self, model: Any, inputs: list[np.ndarray]) -> None:
        """Running statistics := the statistics of this batch (momentum None = cumulative mean)."""
        torch = _torch()
        norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if not norms:
            return
        saved = [(m, m.momentum) for m in norms]
        for module in norms:
            module.reset_running_stats()
            module.momentum = None
        model.train()
        try:
            with torch.no_grad():
                model(*self._inputs(inputs))
        finally:
            for module, momentum in saved:
                module.momentum = momentum
            model.eval()

    def copy_weights(self, source: Any, target: Any) -> None:
        try:
            target.load_state_dict(source.state_dict())
        except RuntimeError as exc:
            first = str(exc).splitlines()
            detail = " ".join(line.strip() for line in first[:3])
            raise VerifyError(f"the converted model does not take the original's state_dict: {detail}") from None
        target.eval()

    def _inputs(self, inputs: list[np.ndarray]) -> list[Any]:
        torch = _torch()
        # copies: a forward that changes its input in place (`return x.add_(y)`) must not change
        # the arrays the next run, and the converted model, are given
        return [torch.from_numpy(np.array(array, copy=True, order="C")) for array in inputs]

    def run(self, model: Any, inputs: list[np.ndarray], *, capture: bool, compiled: bool = False) -> Capture:
        # eager torch runs prebuilt kernels: nothing to gain from compiling one forward
        return self._run(model, self._inputs(inputs), capture=capture)

    def _run(self, model: Any, tensors: list[Any], *, capture: bool, autocast: Any = None) -> Capture:
        torch = _torch()
        result = Capture(outputs=[])
        handles = []
        if capture:
            for path, module in model.named_modules():
                if not path:
                    continue
                result.kinds[path] = type(module).__name__
                handles.append(module.register_forward_hook(self._hook(path, result)))
        try:
            with torch.no_grad():
                if autocast is not None:
                    with torch.autocast(device_type="cpu", dtype=autocast):
                        out = model(*tensors)
                else:
                    out = model(*tensors)
        finally:
            for handle in handles:
                handle.remove()
        result.outputs = [(name, to_numpy(t), dtype_name(t)) for name, t in flatten(out)]
        return result

    @staticmethod
    def _hook(path: str, result: Capture) -> Callable[..., None]:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            tensor = _first_float(output)
            if tensor is None:
                return
            if path not in result.layers:
                result.layers[path] = []
                result.order.append(path)
            result.layers[path].append(to_numpy(tensor).astype(np.float32, copy=False))

        return hook

    def run_reference(
        self,
        model: Any,
        rebuild: Callable[[], Any],
        inputs: list[np.ndarray],
        *,
        compute: str,
        param: str,
        capture: bool,
    ) -> Capture:
        torch = _torch()
        low = getattr(torch, compute)
        tensors = self._inputs(inputs)
        if param == "float32":
            return self._run(model, tensors, capture=capture, autocast=low)
        pure = copy.deepcopy(model).to(low)
        tensors = [t.to(low) if t.is_floating_point() else t for t in tensors]
        return self._run(pure, tensors, capture=capture)

    def run_float64(self, model: Any, inputs: list[np.ndarray]) -> Capture:
        """The original in float64 (a copy of it, float inputs too): how far its own float32
        result is from the exact one, for outputs that cancel down to rounding noise."""
        torch = _torch()
        exact = copy.deepcopy(model).to(torch.float64)
        tensors = [t.to(torch.float64) if t.is_floating_point() else t for t in self._inputs(inputs)]
        return self._run(exact, tensors, capture=False)

    def timed_forward(self, model: Any, inputs: list[np.ndarray], *, compute: str | None = None) -> Callable[[], Any]:
        torch = _torch()
        tensors = self._inputs(inputs)
        model.eval()

        def forward() -> Any:
            with torch.no_grad():
                if compute is None:
                    return model(*tensors)
                with torch.autocast("cpu", dtype=getattr(torch, compute)):
                    return model(*tensors)

        return forward

    def param_bytes(self, model: Any) -> int:
        """Bytes of parameters and buffers as the model holds them now (after a forward, so a
        policy's one-time parameter cast has happened)."""
        tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}
        return sum(t.numel() * t.element_size() for t in tensors.values())

    def build_draws(self, model: Any, again: Any) -> list[tuple[str, str, np.ndarray]]:
        """The tensors `model` holds as plain attributes (neither parameters nor buffers, so not
        in its state dict) that `again`, the same entry built under another seed, holds with other
        values or not at all: what the model drew when it was built (torchdyn's `self.A =
        A_dist.sample(...)`), as (module path, attribute, values) (verify/build_draws.py)."""
        torch = _torch()
        others = dict(again.named_modules())
        draws = []
        for path, module in model.named_modules():
            other = vars(others[path]) if path in others else {}
            for name, value in vars(module).items():
                if not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter):
                    continue
                mine, theirs = to_numpy(value), other.get(name)
                if isinstance(theirs, torch.Tensor):
                    nan = mine.dtype.kind in "fc"
                    if np.array_equal(mine, to_numpy(theirs), equal_nan=nan):
                        continue
                draws.append((path, name, mine))
        return draws

    def layer_source(self, model: Any, path: str) -> str | None:
        chain: list[tuple[str, object]] = [("", model)]
        current = model
        for part in path.split("."):
            current = getattr(current, part, None) if not part.isdigit() else _child(current, part)
            if current is None:
                return None
            chain.append((part, current))
        return layer_source(chain)


def _child(module: Any, name: str) -> Any:
    return dict(module.named_children()).get(name)
