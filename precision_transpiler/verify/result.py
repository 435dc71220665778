"""What a verification found: the data behind the terminal tree, the JSON and the HTML report.

`VerificationResult.to_json()` is the documented JSON report (docs/verification.md); the
renderers (`render_text`, `render_html`) read only that dict, so a saved report can be
re-rendered later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class OutputRecord:
    """One flattened model output compared against the original's."""

    name: str
    shape_original: list[int]
    shape_converted: list[int]
    dtype_original: str
    dtype_converted: str
    expected_dtype: str
    max_abs_err: float | None
    rel_err: float | None  # relative L2 norm of the difference
    cosine: float | None
    argmax_agreement: float | None  # fraction of rows whose argmax over the last axis agrees
    nonfinite_original: int
    nonfinite_converted: int
    reference_err: float | None = None  # the framework's own mixed run, same metric
    nonfinite_new: int = 0  # non-finite in the converted where the original is finite


@dataclass
class LayerRecord:
    """One named submodule, paired by module path between the two runs."""

    path: str
    kind: str
    order: int  # execution order of its first call
    calls: int
    shape: list[int] | None
    rel_err: float | None
    max_abs_err: float | None
    reference_err: float | None  # error of the framework's own mixed run at this layer
    share: float | None  # the error this layer may have (see docs/verification.md)
    exceeded: bool
    nonfinite: bool  # the converted layer produced inf/nan where the original did not
    source: str | None  # file:line where the original model creates the layer (the user's own code)
    note: str | None = None  # "missing in converted", "shape (2, 3) vs (2, 4)", ...
    converted_source: str | None = None  # file:line where the converted model creates it


@dataclass
class VerificationResult:
    """The outcome of running the converted model against the original."""

    passed: bool
    source: str
    target: str
    policy: str
    original: str
    converted: str
    entry: str
    inputs: list[str]
    seed: int
    max_abs_err: float | None
    max_rel_err: float | None
    cosine: float | None
    argmax_agreement: float | None
    nonfinite: int  # non-finite values in the converted outputs that the original does not have
    tolerance: dict[str, Any]  # {"max_rel_err": X, "rule": "...", ...}
    failures: list[str] = field(default_factory=list)
    outputs: list[OutputRecord] = field(default_factory=list)
    layers: list[LayerRecord] = field(default_factory=list)
    first_bad_layer: str | None = None
    first_bad_source: str | None = None  # in the original file
    first_bad_converted_source: str | None = None  # in the converted file
    notes: list[str] = field(default_factory=list)
    param_bytes: dict[str, int] | None = None  # {"original": ..., "converted": ...} after the runs
    # --time N: median seconds of one compiled forward {"original", "converted", "reference", "repeat"}
    timing: dict[str, float] | None = None
    # --device auto: what the converted code decided where it ran ({"device", "requested", "compute", "reason"})
    device: dict[str, str] | None = None
    # the original's own outputs changed when it ran again under another seed (checked only when
    # the comparison failed): its forward draws random numbers, and no conversion can match them
    random_forward: bool = False
    # every output of the original is NaN/inf (weights left uninitialised by `torch.empty`, a
    # forward that overflows): nothing to compare, whatever the conversion did
    original_nonfinite: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
