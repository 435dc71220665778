"""Verification: run a converted model against its original and say where they disagree.

This package is the only part of ptranspile that imports frameworks and runs user code; the
transpiler itself never does. Entry points: `verify_files` (one comparison), `search_policy`
(`--policy auto`), `emit_test` (`--emit-test`), and the renderers in `render`.
See docs/verification.md.
"""

from __future__ import annotations

from precision_transpiler.verify.result import LayerRecord, OutputRecord, VerificationResult
from precision_transpiler.verify.runner import VerifyOptions, verify_files

__all__ = ["LayerRecord", "OutputRecord", "VerificationResult", "VerifyOptions", "verify_files"]
