"""Progress on a terminal while files are converted.

A directory of hundreds of files, or one generated file of several megabytes (minutes of work:
conversion takes 5-8 s per 100 KB), must show a sign of life. When stderr is a terminal:

- several files: one line, rewritten in place, counting the files done (`[12/340] path`),
  cleared before the diagnostics and the summary are printed;
- a file larger than 1 MB, or one that takes longer than a few seconds
  (`PTRANSPILE_PROGRESS_AFTER`, default 3, as verification's progress in verify/progress.py):
  the stage it is in (`ptranspile: big.py: converting (12 s)`), on the counter's line when
  there is one.

Nothing at all when stderr is not a terminal (CI logs, pre-commit, pipes: their output must stay
the diagnostics alone), and never under `-q` (the command line then creates none).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import TextIO

#: As verify/progress.py's (not imported from there: the verify package imports much more).
DEFAULT_AFTER_SECONDS = 3.0
#: A file at least this large shows its stages from the start.
LARGE_FILE_BYTES = 1_000_000
_CLEAR = "\r\x1b[K"  # back to the start of the line, erase it


class ConversionProgress:
    """What `api.transpile_paths(progress=...)` tells as it converts (see the module docstring)."""

    def __init__(self, stream: TextIO | None = None, after: float | None = None) -> None:
        self.stream = stream or sys.stderr
        if after is None:
            try:
                after = float(os.environ.get("PTRANSPILE_PROGRESS_AFTER", DEFAULT_AFTER_SECONDS))
            except ValueError:
                after = DEFAULT_AFTER_SECONDS
        self.after = max(0.0, after)
        try:
            self.live = self.stream.isatty()
        except (AttributeError, ValueError):
            self.live = False
        self.lock = threading.Lock()
        self.total = 0
        self.done_count = 0
        self.path: str | None = None
        self.stage_name: str | None = None
        self.started = time.monotonic()
        self.showing_stages = False
        self.line_open = False  # a counter line without its newline is on the screen
        self.timer: threading.Timer | None = None

    # -- what transpile_paths calls ------------------------------------------------------------

    def begin(self, total: int) -> None:
        self.total = total

    def start(self, path: str) -> None:
        """Conversion of `path` begins."""
        if not self.live:
            return
        self._cancel()
        with self.lock:
            self.path = path
            self.stage_name = None
            self.started = time.monotonic()
            self.showing_stages = _size(path) >= LARGE_FILE_BYTES or self.after == 0
        if not self.showing_stages:
            self.timer = threading.Timer(self.after, self._wake)
            self.timer.daemon = True
            self.timer.start()

    def stage(self, name: str) -> None:
        """The file being converted is now in stage `name` ("converting")."""
        if not self.live:
            return
        with self.lock:
            self.stage_name = name
            if self.showing_stages:
                self._show_stage()

    def done(self, path: str) -> None:
        """`path` is converted (or was skipped)."""
        if not self.live:
            return
        self._cancel()
        with self.lock:
            self.done_count += 1
            self.path = None
            self.showing_stages = False
            if self.total > 1:
                self._write(f"{_CLEAR}[{self.done_count}/{self.total}] {path}")
                self.line_open = True

    def close(self) -> None:
        self._cancel()
        with self.lock:
            if self.line_open:
                self._write(_CLEAR)
                self.line_open = False
            self.live = False

    # -- internals ------------------------------------------------------------------------------

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _wake(self) -> None:
        with self.lock:
            if not self.live or self.path is None:
                return
            self.showing_stages = True
            if self.stage_name is not None:
                self._show_stage()

    def _show_stage(self) -> None:
        """Print the current stage (the lock is held)."""
        elapsed = f"{self.stage_name} ({time.monotonic() - self.started:.0f} s)"
        if self.total > 1:
            self._write(f"{_CLEAR}[{self.done_count}/{self.total}] {self.path}: {elapsed}")
            self.line_open = True
        else:
            self._write(f"ptranspile: {self.path}: {elapsed}\n")

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text)
            self.stream.flush()


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
