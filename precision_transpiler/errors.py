"""Exceptions the library raises. The CLI turns each into a one-line error and exit code 2."""

from __future__ import annotations


class PtranspileError(Exception):
    """Base class: a problem with the user's input or configuration, not a bug."""


class MappingError(PtranspileError):
    """A mapping table is malformed. The message names the file, line and key."""


class PolicyError(PtranspileError):
    """A precision policy is unknown or malformed."""


class UsageError(PtranspileError):
    """Options that do not fit together or name something unknown."""


class VerifyError(PtranspileError):
    """Verification could not run: a model file fails to import, the entry expression fails,
    the entry returns no model, or the two models do not fit together."""


class WriteError(PtranspileError):
    """An output or report that cannot be written (a read-only directory, a parent that is a
    file). The message names the path the user gave, not a temporary file beside it."""
