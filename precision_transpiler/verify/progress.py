"""Short progress lines on stderr while verification runs (`ptranspile: verify: running the
original`): a model that takes half a minute must show a sign of life. Printed at once when
stderr is a terminal; otherwise only once verification has taken longer than a few seconds
(`PTRANSPILE_PROGRESS_AFTER`, default 3): the step under way then, and each step after it. Never
under `-q` (the caller does not create one)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import TextIO

DEFAULT_AFTER_SECONDS = 3.0


class Progress:
    def __init__(self, stream: TextIO | None = None, after: float | None = None) -> None:
        self.stream = stream or sys.stderr
        if after is None:
            try:
                after = float(os.environ.get("PTRANSPILE_PROGRESS_AFTER", DEFAULT_AFTER_SECONDS))
            except ValueError:
                after = DEFAULT_AFTER_SECONDS
        self.started = time.monotonic()
        self.step_name: str | None = None
        self.done = False
        self.lock = threading.Lock()
        try:
            self.live = self.stream.isatty()
        except (AttributeError, ValueError):
            self.live = False
        self.timer: threading.Timer | None = None
        if not self.live:
            self.timer = threading.Timer(max(0.0, after), self._wake)
            self.timer.daemon = True
            self.timer.start()

    def _print(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            print(f"ptranspile: verify: {text} ({time.monotonic() - self.started:.0f} s)", file=self.stream, flush=True)

    def _wake(self) -> None:
        with self.lock:
            if self.done:
                return
            self.live = True
            if self.step_name is not None:
                self._print(self.step_name)

    def step(self, name: str) -> None:
        """Verification is now doing `name` ("running the original")."""
        with self.lock:
            if self.done:
                return
            self.step_name = name
            if self.live:
                self._print(name)

    def close(self) -> None:
        with self.lock:
            self.done = True
        if self.timer is not None:
            self.timer.cancel()
