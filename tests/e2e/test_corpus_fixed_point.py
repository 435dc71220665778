"""Outputs of the real-model corpus (benchmarks/corpus.yaml) are fixed points: converting one
again with the same target and policy changes nothing (what `ptranspile OUT --to T --policy P
--check` answers with exit 0). benchmarks/fixed_point.py checks the whole corpus and prints the
table in docs/benchmarks.md; this runs its check on every torchvision case and on the
transformers cases the corpus marks quick, to JAX and Keras at fp32 and mixed and within torch
under mixed (docs/reliability.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.corpus import DEFAULT_CASES, load_cases  # noqa: E402
from benchmarks.fixed_point import TARGETS, check  # noqa: E402

PAIRS = [tuple(p.split(":")) for p in TARGETS.split(",")]
# each transformers file pulls in its library's helpers (seconds to convert); the quick one stands for them
CASES = [c for c in load_cases(DEFAULT_CASES) if c.package == "torchvision" or c.quick]

pytestmark = pytest.mark.slow  # every case converted twice per target and policy


@pytest.mark.parametrize(("to", "policy"), PAIRS, ids=[f"{t}-{p}" for t, p in PAIRS])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_output_converts_to_itself(case, to: str, policy: str) -> None:
    row = check(case, to, policy)
    assert row.fixed_point, f"converting the output again changed it:\n{row.diff[:4000]}"
