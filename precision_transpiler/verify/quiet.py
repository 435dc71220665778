"""Keep TensorFlow's start-up log lines off the terminal while verifying.

Importing TensorFlow writes C++ log lines to stderr that say nothing about the user's model:
cpu_feature_guard's "This TensorFlow binary is optimized to use available CPU instructions ...",
the oneDNN notice ("oneDNN custom operations are on ...") and absl's "WARNING: All log messages
before absl::InitializeLog() is called are written to STDERR". Verification imports TensorFlow to
run a model converted to Keras, so `ptranspile --verify` would print them between its own lines.

The supported switches come first: `TF_CPP_MIN_LOG_LEVEL=2` (TensorFlow's C++ INFO and WARNING
lines) and absl's Python logging at ERROR. Recent TensorFlow builds log the oneDNN notice through
absl before either is read, so the import itself runs with stderr (the file descriptor, which C++
writes to) caught, and every caught line that is not one of those notices is written back.

All of it only when the user has not set `TF_CPP_MIN_LOG_LEVEL` (whoever sets it wants to choose
what TensorFlow prints), and only here, on the verifier's way to TensorFlow: importing
precision_transpiler or converting a file changes no environment variable.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator

LOG_LEVEL = "2"  # TensorFlow's C++ logging: 0 all, 1 no INFO, 2 no INFO/WARNING, 3 no ERROR either

# Lines of TensorFlow's start-up notices (the CPU-instructions one takes two lines).
_NOTICES = (
    "cpu_feature_guard",
    "This TensorFlow binary is optimized to use available CPU instructions",
    "rebuild TensorFlow with the appropriate compiler flags",
    "oneDNN custom operations are on",
    "All log messages before absl::InitializeLog() is called",
)


def quiet_tensorflow_env() -> bool:
    """Set `TF_CPP_MIN_LOG_LEVEL` unless the user did; True when it was set here."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return False
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = LOG_LEVEL
    return True


def import_tensorflow_quietly() -> None:
    """Import TensorFlow (when installed and not imported yet) without its start-up notices."""
    if "tensorflow" in sys.modules or not quiet_tensorflow_env():
        return
    with contextlib.suppress(ImportError):
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.ERROR)
    if importlib.util.find_spec("tensorflow") is None:
        return
    with _without_notices_on_stderr():
        import tensorflow  # noqa: F401


def drop_notices(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not any(n in line for n in _NOTICES))


@contextlib.contextmanager
def _without_notices_on_stderr() -> Iterator[None]:
    """Catch what is written to file descriptor 2 meanwhile; write back all but the notices."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to speak of
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = drop_notices(caught.read().decode("utf-8", "replace"))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()
