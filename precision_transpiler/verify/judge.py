"""The verdict on a model's outputs: each output of the converted model against the original's
(dtype, shape, errors), the tolerance the policy allows (derived from the frameworks' own mixed
precision, the autocast regions' own error, or `--tolerance`), and the failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from precision_transpiler.precision.policy import Policy
from precision_transpiler.verify.adapters import Capture
from precision_transpiler.verify.metrics import compare
from precision_transpiler.verify.result import OutputRecord, VerificationResult

if TYPE_CHECKING:
    from precision_transpiler.verify.runner import VerifyOptions

REFERENCE_NAMES = {
    "torch": "torch.autocast(cpu, {compute})",
    "jax": "Flax layers with dtype={compute}",
    "tf": "Keras dtype policy mixed_{compute}",
}


@dataclass
class _Yardsticks:
    """The other runs' outputs by name, and the largest relative error each showed."""

    reference: dict[str, np.ndarray]  # the source framework's own mixed precision
    regions: dict[str, np.ndarray]  # the original with its autocast regions disabled
    target: dict[str, np.ndarray]  # the target framework's own mixed precision
    target_regions: dict[str, np.ndarray]  # the converted model with its regions disabled
    float64: dict[str, np.ndarray] = field(default_factory=dict)  # the original in float64
    ref_err: float = 0.0
    region_err: float = 0.0
    target_err: float = 0.0
    float64_err: float = 0.0


def judge(
    base: Capture,
    result: Capture,
    reference: Capture | None,
    policy: Policy,
    options: VerifyOptions,
    target: str,
    source: str,
    regions: Capture | None = None,
    target_reference: Capture | None = None,
    target_regions: Capture | None = None,
    float64: Capture | None = None,
) -> VerificationResult:
    """`float64`: the original run in float64, under a full-precision policy: its distance
    from the original's float32 outputs is what float32 itself costs on them (an output that
    cancels down to rounding noise is off by 100 % in torch too), the yardstick then.
    `regions`: the original run with its torch.autocast regions disabled (None: it has none);
    its error against the original is the regions' own, and the tolerance grows with it as with
    a mixed policy. `target_reference`: the target framework's own mixed precision on the fp32
    conversion (`_target_reference`); the larger of its error and the source's is the yardstick.
    `target_regions`: the converted model run with its regions disabled; its distance from the
    converted output is the target's own error of the regions, counted like the original's."""
    failures: list[str] = []
    base_out = {name: (array, dtype) for name, array, dtype in base.outputs}
    conv_out = {name: (array, dtype) for name, array, dtype in result.outputs}
    if not base_out:
        failures.append("the original model returned no tensors")
    missing = [n for n in base_out if n not in conv_out]
    extra = [n for n in conv_out if n not in base_out]
    if missing or extra:
        failures.append(f"output structure differs: missing {missing or '[]'}, unexpected {extra or '[]'}")
    sticks = _Yardsticks(
        _arrays(reference), _arrays(regions), _arrays(target_reference), _arrays(target_regions), _arrays(float64)
    )
    records = [
        _compare_output(name, base_out[name], conv_out[name], policy, target, sticks, failures)
        for name in base_out
        if name in conv_out
    ]
    tolerance, derived = _tolerance(
        sticks, policy, options, source, target, reference is not None, target_reference is not None, regions
    )
    threshold = derived
    if options.tolerance is not None:
        threshold = options.tolerance
        tolerance["derived"] = derived
        tolerance["rule"] = f"--tolerance {options.tolerance:g} (derived would be {derived:.3g})"
    tolerance["max_rel_err"] = threshold
    for record in records:
        failures.extend(_record_failures(record, threshold))
    if records and all(_empty(r) for r in records):  # never PASSED on nothing compared
        failures.append("every output is empty (no elements): nothing to compare")
    nonfinite = [r for r in records if _all_nonfinite(r)]
    if records and len(nonfinite) == len(records):  # never PASSED on nothing compared
        total = sum(r.nonfinite_original for r in records)
        failures.append(f"the original's outputs are all non-finite ({total} NaN/inf): nothing to compare")
    verdict = _verdict(policy, records, tolerance, failures)
    verdict.original_nonfinite = bool(records) and len(nonfinite) == len(records)
    return verdict


def _empty(record: OutputRecord) -> bool:
    """An output with no elements in both models, of the same shape (compressive-transformer's
    memories while the sequence is shorter than the memory: `torch.empty(b, 0, d)`): equal as
    far as it goes, with nothing to compare."""
    return record.shape_original == record.shape_converted and 0 in record.shape_original


def _all_nonfinite(record: OutputRecord) -> bool:
    """Every value of the original's output is NaN or inf, so no value was compared."""
    return record.rel_err is None and record.max_abs_err is None and record.nonfinite_original > 0


def _arrays(capture: Capture | None) -> dict[str, np.ndarray]:
    return {name: array for name, array, _ in capture.outputs} if capture else {}


def _compare_output(
    name: str,
    original: tuple[np.ndarray, str],
    converted: tuple[np.ndarray, str],
    policy: Policy,
    target: str,
    sticks: _Yardsticks,
    failures: list[str],
) -> OutputRecord:
    """One output's record: dtype and shape checks (into `failures`), its errors, and the other
    runs' errors on it (into `sticks`)."""
    array, dtype = original
    conv_array, conv_dtype = converted
    floating = np.issubdtype(array.dtype, np.floating)
    expected = policy.output if floating and not policy.is_full_precision else dtype
    record = OutputRecord(
        name, list(array.shape), list(conv_array.shape), dtype, conv_dtype, expected, None, None, None, None, 0, 0
    )
    if conv_dtype != expected and not same_kind_across_frameworks(dtype, conv_dtype, target):
        failures.append(f"{name}: dtype {conv_dtype}, expected {expected}")
    if array.shape != conv_array.shape:
        failures.append(f"{name}: shape {tuple(conv_array.shape)}, original {tuple(array.shape)}")
        return record
    errors = compare(array, conv_array)
    record.max_abs_err, record.rel_err, record.cosine = errors.max_abs_err, errors.rel_err, errors.cosine
    record.argmax_agreement = errors.argmax_agreement
    record.nonfinite_original, record.nonfinite_converted = errors.nonfinite_original, errors.nonfinite_converted
    record.nonfinite_new = errors.new_nonfinite
    if name in sticks.reference and sticks.reference[name].shape == array.shape:
        ref = compare(array, sticks.reference[name])
        record.reference_err = ref.rel_err
        if ref.rel_err is not None:
            sticks.ref_err = max(sticks.ref_err, ref.rel_err)
    if name in sticks.target and sticks.target[name].shape == array.shape:
        own = compare(array, sticks.target[name]).rel_err
        if own is not None:
            sticks.target_err = max(sticks.target_err, own)
            record.reference_err = max(record.reference_err or 0.0, own)
    if name in sticks.target_regions and sticks.target_regions[name].shape == conv_array.shape:
        own = compare(sticks.target_regions[name], conv_array).rel_err
        if own is not None:
            sticks.region_err = max(sticks.region_err, own)
            record.reference_err = max(record.reference_err or 0.0, own)
    if name in sticks.regions and sticks.regions[name].shape == array.shape:
        own = compare(array, sticks.regions[name]).rel_err
        if own is not None:
            sticks.region_err = max(sticks.region_err, own)
            record.reference_err = max(record.reference_err or 0.0, own)
    if name in sticks.float64 and sticks.float64[name].shape == array.shape:
        own = compare(sticks.float64[name], array.astype(np.float64)).rel_err
        if own is not None:
            sticks.float64_err = max(sticks.float64_err, own)
            record.reference_err = max(record.reference_err or 0.0, own)
    return record


def _tolerance(
    sticks: _Yardsticks,
    policy: Policy,
    options: VerifyOptions,
    source: str,
    target: str,
    referenced: bool,
    target_referenced: bool,
    regions: Capture | None,
) -> tuple[dict[str, Any], float]:
    """The tolerance record (for the report) and the derived tolerance."""
    tolerance: dict[str, Any] = {"fp32": options.fp32_tolerance}
    factor, fp32 = options.mixed_factor, options.fp32_tolerance
    ref_err, region_err, target_err = sticks.ref_err, sticks.region_err, sticks.target_err
    if referenced:
        derived = factor * max(ref_err, region_err, target_err) + fp32
        compute = policy.compute if policy.compute != "float32" else "bfloat16"
        tolerance.update(
            reference=REFERENCE_NAMES.get(source, "framework mixed precision").format(compute=compute),
            reference_err=ref_err,
            factor=factor,
            rule=f"{factor:g} x the reference's error ({ref_err:.3g}) + {fp32:g}",
        )
        if target_referenced:
            tolerance.update(
                target_reference=REFERENCE_NAMES.get(target, "framework mixed precision").format(compute=compute)
                + " on the fp32 conversion",
                target_reference_err=target_err,
            )
            if target_err > max(ref_err, region_err):
                tolerance.update(
                    reference_err=target_err,
                    rule=f"{factor:g} x the target framework's own mixed-precision error ({target_err:.3g}, above "
                    f"the source's {ref_err:.3g}) + {fp32:g}",
                )
        if regions is not None and region_err > max(ref_err, target_err):
            tolerance.update(
                reference_err=region_err,
                rule=f"autocast regions: {factor:g} x their own error (either model against a run with them "
                f"disabled) ({region_err:.3g}, above the references' {max(ref_err, target_err):.3g}) + {fp32:g}",
            )
    elif regions is not None:
        derived = factor * region_err + fp32
        tolerance.update(
            reference="the original with its torch.autocast regions disabled",
            reference_err=region_err,
            factor=factor,
            rule=f"autocast regions: {factor:g} x their own error (either model against a run with them disabled) "
            f"({region_err:.3g}) + {fp32:g}",
        )
    elif sticks.float64 and factor * sticks.float64_err > 0:
        own = sticks.float64_err
        derived = factor * own + fp32
        tolerance.update(
            reference="the original in float64",
            reference_err=own,
            factor=factor,
            rule=f"full-precision policy: {factor:g} x the original's own float32 error against float64 "
            f"({own:.3g}) + {fp32:g}",
        )
    else:
        derived = fp32
        tolerance["rule"] = f"full-precision policy: relative L2 error <= {fp32:g}"
    return tolerance, derived


def _record_failures(record: OutputRecord, threshold: float) -> list[str]:
    failures = []
    if record.rel_err is not None and record.rel_err > threshold:
        failures.append(f"{record.name}: relative error {record.rel_err:.3g} > tolerance {threshold:.3g}")
    if record.nonfinite_new > 0:
        failures.append(f"{record.name}: {record.nonfinite_new} non-finite values where the original's are finite")
    if _empty(record):
        return failures
    if record.rel_err is None and record.shape_original == record.shape_converted and record.max_abs_err is None:
        if record.nonfinite_original == 0:
            failures.append(f"{record.name}: no finite values to compare")
        elif record.nonfinite_converted < record.nonfinite_original:
            failures.append(
                f"{record.name}: the original's outputs are all non-finite ({record.nonfinite_original} NaN/inf), "
                f"{record.nonfinite_original - record.nonfinite_converted} of the converted's are finite"
            )
        # else non-finite in both, as entries non-finite in the original are skipped in any
        # output: it agrees, and `judge` fails a run whose every output is like this
    return failures


def _verdict(
    policy: Policy, records: list[OutputRecord], tolerance: dict[str, Any], failures: list[str]
) -> VerificationResult:
    rels = [r.rel_err for r in records if r.rel_err is not None]
    cosines = [r.cosine for r in records if r.cosine is not None]
    argmaxes = [r.argmax_agreement for r in records if r.argmax_agreement is not None]
    abs_errs = [r.max_abs_err for r in records if r.max_abs_err is not None]
    return VerificationResult(
        passed=not failures,
        source="",
        target="",
        policy=policy.name,
        original="",
        converted="",
        entry="",
        inputs=[],
        seed=0,
        max_abs_err=max(abs_errs) if abs_errs else None,
        max_rel_err=max(rels) if rels else None,
        cosine=min(cosines) if cosines else None,
        argmax_agreement=min(argmaxes) if argmaxes else None,
        nonfinite=sum(r.nonfinite_new for r in records),
        tolerance=tolerance,
        failures=failures,
        outputs=records,
    )


def same_kind_across_frameworks(original: str, converted: str, target: str) -> bool:
    """JAX computes 64-bit integers in 32 bits unless x64 is on
    (docs/precision-reference.md#framework-defaults-that-differ): an int64 torch output and an
    int32 JAX output are the same result."""
    return target == "jax" and original == "int64" and converted == "int32"
