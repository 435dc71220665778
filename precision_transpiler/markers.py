"""Comments ptranspile writes into its outputs and recognises when it reads one again.

They live apart from the code that writes them, so that every part that meets them can depend on
this module alone: the policy passes mark the imports their helpers need (precision/strip.py
removes exactly those lines again), and copying the runtime into an output (convert/vendor.py)
leaves those lines alone.
"""

from __future__ import annotations

#: trailing comment of an import line a precision policy inserted for its helpers
POLICY_IMPORT_MARKER = "# ptranspile: policy helpers"
