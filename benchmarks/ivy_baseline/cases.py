"""The small models both transpilers convert, and what the two runners share.

The models are plain `torch.nn` code on purpose: Ivy's `ivy.transpile` takes the class object,
`ptranspile` takes the file, so both see exactly this source. The attention block is the
project's own example (`examples/attention_block.py`); the others are defined here. `HalfMLP`
and `AutocastMLP` carry the precision constructs the comparison is about: a `.half()` cast and a
`torch.autocast` region inside `forward`.

Everything below the models runs in both environments (Ivy's own venv and the project's), so it
needs nothing but the standard library, NumPy and torch.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, dim: int = 32, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.conv2(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class HalfMLP(nn.Module):
    def __init__(self, dim: int = 32, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x)).half()  # keep the hidden activations in fp16
        return self.fc2(h.float()).half()


class AutocastMLP(nn.Module):
    def __init__(self, dim: int = 32, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = F.relu(self.fc1(x))
        return self.fc2(h.float())


# -- shared by run_ivy.py and ours.py ------------------------------------------------------------

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TARGETS = ("jax", "tf")  # ptranspile's names; Ivy calls the second one "tensorflow"
SEED = 0
NOISE = 0.05  # weight perturbation, as ptranspile's verification does (constant inits hide branches)


@dataclass(frozen=True)
class Case:
    """One model: where its source is, which class, and the input it is run on."""

    name: str
    file: Path
    cls: str
    shape: tuple[int, ...]
    precision: bool = False  # carries .half()/torch.autocast: check that the conversion keeps them

    @property
    def input_spec(self) -> str:
        """The `--input` spec of ptranspile's verification."""
        return f"float32[{','.join(map(str, self.shape))}]"


CASES = [
    Case("mlp", HERE / "cases.py", "MLP", (4, 32)),
    Case("cnn", HERE / "cases.py", "SmallCNN", (2, 3, 16, 16)),
    Case("attention_block", REPO / "examples" / "attention_block.py", "AttentionBlock", (2, 16, 64)),
    Case("half_mlp", HERE / "cases.py", "HalfMLP", (4, 32), precision=True),
    Case("autocast_mlp", HERE / "cases.py", "AutocastMLP", (4, 32), precision=True),
]

# A generated source that keeps the constructs says so with one of these (case-insensitive).
PRECISION_MARKERS = ("autocast", "bfloat16", "float16", "half")

RESULT_KEYS = (
    "case",
    "target",
    "tool",
    "transpiled",
    "ran",
    "passed",
    "transpile_s",
    "files",
    "lines",
    "files_all",
    "lines_all",
    "max_abs_err",
    "rel_err",
    "weights",
    "out_dtype",
    "torch_dtype",
    "lowp_effect",
    "markers",
    "precision_kept",
    "error",
)


def select(names: str) -> list[Case]:
    """The cases whose name is in the comma-separated `names` (all when empty)."""
    wanted = [n for n in names.split(",") if n]
    unknown = set(wanted) - {c.name for c in CASES}
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(sorted(unknown))}; known: {', '.join(c.name for c in CASES)}")
    return [c for c in CASES if not wanted or c.name in wanted]


def load_class(case: Case) -> type:
    """The torch class of a case, imported from its file (Ivy reads its source with `inspect`)."""
    import importlib.util
    import sys

    module_name = f"ivy_baseline_case_{case.file.stem}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, case.file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return getattr(module, case.cls)


def build_torch(case: Case) -> tuple[torch.nn.Module, np.ndarray]:
    """The seeded, perturbed torch model in eval mode and its seeded input.

    Perturbing every parameter and buffer (LayerNorm's ones and zeros included) is what makes a
    wrong branch visible (docs/precision-reference.md#verification-with-random-weights)."""
    torch.manual_seed(SEED)
    model = load_class(case)().eval()
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point():
                spread = float(tensor.std()) if tensor.numel() > 1 else 0.0
                noise = NOISE * max(spread, 0.1) * torch.randn_like(tensor)
                tensor.add_(noise.abs() if "var" in _buffer_name(model, tensor) else noise)
    x = np.random.default_rng(SEED).standard_normal(case.shape).astype(np.float32)
    return model, x


def _buffer_name(model: torch.nn.Module, tensor: torch.Tensor) -> str:
    """The name of a parameter or buffer (running variances must stay positive)."""
    for name, value in [*model.named_parameters(), *model.named_buffers()]:
        if value is tensor:
            return name
    return ""


@contextlib.contextmanager
def without_precision_constructs() -> Iterator[None]:
    """torch with `.half()` a no-op and `torch.autocast` a null context: the fp32 version of a
    precision case, to tell a conversion that kept the constructs from one that dropped them."""
    saved = (torch.Tensor.half, torch.autocast)
    torch.Tensor.half = lambda self, *a, **k: self  # type: ignore[method-assign]
    torch.autocast = lambda *a, **k: contextlib.nullcontext()  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.Tensor.half, torch.autocast = saved  # type: ignore[method-assign, misc]


def torch_outputs(case: Case, model: torch.nn.Module, x: np.ndarray) -> tuple[np.ndarray, float | None]:
    """The original's output and, for a precision case, how far the fp32 version is from it
    (relative L2): the effect a conversion that drops the constructs cannot reproduce."""
    with torch.no_grad():
        out = model(torch.from_numpy(x))
        effect = None
        if case.precision:
            with without_precision_constructs():
                plain = model(torch.from_numpy(x))
            effect = rel_l2(plain.float().numpy(), out.float().numpy())
    return out.detach().numpy(), effect


def to_float64(value: Any) -> np.ndarray:
    """Any framework's array as float64 NumPy (bfloat16 included, through ml_dtypes)."""
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    return np.asarray(value).astype(np.float64)


def dtype_name(value: Any) -> str:
    """'float32', 'float16', 'bfloat16' for a torch tensor, NumPy/JAX array or TF tensor."""
    dtype = getattr(value, "dtype", None)
    return str(getattr(dtype, "name", dtype)).replace("torch.", "")


def rel_l2(converted: Any, original: Any) -> float:
    """||converted - original|| / ||original||, in float64 (the headline metric of verification)."""
    a, b = to_float64(converted), to_float64(original)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def class_source(code: str, name_pattern: str) -> str:
    """The text of the top-level class whose name matches `name_pattern` (generated names vary:
    Ivy prefixes them), or '' when absent."""
    match = re.search(rf"^class (?:\w*?){name_pattern}\b.*?(?=^\S|\Z)", code, re.MULTILINE | re.DOTALL)
    return match.group(0) if match else ""


def markers_in(source: str) -> list[str]:
    """Which precision markers a class's generated source contains, as words: `_` separates
    (Ivy's `jax_half_frnt` counts), letters and digits do not (`bfloat16` is no `float16`, the
    class names `HalfMLP`/`AutocastMLP` are no markers)."""
    return [m for m in PRECISION_MARKERS if re.search(rf"(?<![a-z0-9]){m}(?![a-z0-9])", source, re.IGNORECASE)]


def precision_verdict(
    case: Case,
    ran: bool,
    rel_err: float | None,
    effect: float | None,
    dtype_ok: bool,
    rel_to_fp32: float | None = None,
) -> str:
    """Did the conversion keep the case's precision constructs? Judged from the run, not the text:
    the output dtype must match torch's, and the converted output must be much closer to the
    original than the fp32 version is (`effect`). When the distance of the converted output from
    the fp32 version is known (`rel_to_fp32`), a conversion that computes in low precision with
    its own rounding (farther from torch's low-precision output than half the effect, but as far
    from the fp32 version as torch is) counts as kept, and one that equals the fp32 version not."""
    if not case.precision:
        return "-"
    if not ran or rel_err is None:
        return "n/a"
    if not dtype_ok:
        return "no (output dtype)"
    if rel_to_fp32 is not None and effect:
        if rel_to_fp32 < 0.25 * effect:
            return f"no (matches the fp32 version: {rel_to_fp32:.1e} from it, effect {effect:.1e})"
        return f"yes (low precision: {rel_to_fp32:.1e} from the fp32 version, torch {effect:.1e})"
    if effect is not None and rel_err > 0.5 * effect:
        return f"no (matches the fp32 version: effect {effect:.1e})"
    return "yes"


def empty_result(case: Case, target: str, tool: str) -> dict[str, Any]:
    """A result row with every key, nothing measured yet."""
    row: dict[str, Any] = dict.fromkeys(RESULT_KEYS)
    row.update(case=case.name, target=target, tool=tool, transpiled=False, ran=False, markers=[], error="")
    return row


def first_line(text: str, limit: int = 200) -> str:
    """The first non-empty line of an error, shortened: tables carry it, tracebacks do not fit."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def versions(names: tuple[str, ...] = ("ivy", "torch", "jax", "flax", "tensorflow-cpu", "keras", "numpy")) -> dict:
    """Installed versions of the packages that matter, for the 'how produced' note."""
    import importlib.metadata as md
    import platform

    found = {"python": platform.python_version()}
    for name in names:
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return found
