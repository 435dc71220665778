"""Error metrics between an original and a converted array, computed in float64.

Relative L2 (`||converted - original|| / ||original||`) is the headline metric: absolute
differences mean nothing on random-init models whose activations vanish or explode
(docs/precision-reference.md#verification-with-random-weights). Non-finite values are counted separately and
excluded from the norms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Errors:
    max_abs_err: float | None
    rel_err: float | None
    cosine: float | None
    argmax_agreement: float | None
    nonfinite_original: int
    nonfinite_converted: int
    new_nonfinite: int = 0  # non-finite in the converted where the original is finite
    finite_original: int = 0  # entries finite in the original: those compared


def compare(original: np.ndarray, converted: np.ndarray) -> Errors:
    """Errors of `converted` against `original`; both must have the same shape. The entries
    compared are those finite in the original: a non-finite converted value there counts in
    `new_nonfinite`, and the norms are taken over the entries finite in both. With no finite
    entry in the original the metrics are None (nothing was compared: never a pass)."""
    a = np.asarray(original, dtype=np.float64)
    b = np.asarray(converted, dtype=np.float64)
    bad_a = ~np.isfinite(a)
    bad_b = ~np.isfinite(b)
    finite = ~(bad_a | bad_b)
    counts = {
        "nonfinite_original": int(bad_a.sum()),
        "nonfinite_converted": int(bad_b.sum()),
        "new_nonfinite": int((bad_b & ~bad_a).sum()),
        "finite_original": int((~bad_a).sum()),
    }
    argmax = _argmax_agreement(a, b) if a.ndim >= 1 and a.shape[-1] > 1 else None
    if not finite.any():
        return Errors(None, None, None, argmax, **counts)
    fa, fb = a[finite], b[finite]
    diff = fb - fa
    norm_a = float(np.linalg.norm(fa))
    norm_d = float(np.linalg.norm(diff))
    rel = norm_d / norm_a if norm_a > 0 else (0.0 if norm_d == 0 else float("inf"))
    norm_b = float(np.linalg.norm(fb))
    cosine = float(np.dot(fa, fb) / (norm_a * norm_b)) if norm_a > 0 and norm_b > 0 else (1.0 if norm_d == 0 else 0.0)
    return Errors(float(np.max(np.abs(diff))), rel, cosine, argmax, **counts)


def _argmax_agreement(a: np.ndarray, b: np.ndarray) -> float:
    rows_a = a.reshape(-1, a.shape[-1])
    rows_b = b.reshape(-1, b.shape[-1])
    with np.errstate(invalid="ignore"):
        return float(np.mean(np.argmax(rows_a, axis=-1) == np.argmax(rows_b, axis=-1)))


def relative_error(original: np.ndarray, converted: np.ndarray) -> float | None:
    """Relative L2 error only (the per-layer metric)."""
    return compare(original, converted).rel_err
