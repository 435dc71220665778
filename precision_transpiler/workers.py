"""Worker processes that never outlive the process that started them.

`transpile_paths(jobs=N)` (`ptranspile -j N`) converts files in forked worker processes. Between
files a worker waits on the pool's call queue, a pipe whose write end every forked worker holds
too, so a parent that is killed outright (SIGKILL, the out-of-memory killer) leaves its workers
waiting forever, or converting the rest of their chunk first. `watch_parent`, the pool's
initializer, ties each worker to its parent: on Linux the kernel sends it SIGKILL when the parent
dies (`prctl(PR_SET_PDEATHSIG)`), and everywhere a daemon thread polls the parent's pid and ends
the worker once it has changed. Workers only compute results (the parent writes every file), so
ending one abruptly loses nothing. (The kernel's signal follows the thread that forked the worker:
`transpile_paths` keeps its pool within the call, so that thread outlives the pool.)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def watch_parent(parent_pid: int) -> None:
    """End this (worker) process as soon as `parent_pid`, its parent, is gone."""
    if sys.platform.startswith("linux"):
        _kill_on_parent_death()
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_poll_parent, args=(parent_pid,), name="ptranspile-parent-watch", daemon=True).start()


def _kill_on_parent_death() -> None:
    """Ask the kernel for SIGKILL when the parent exits; silently nothing where it cannot."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _poll_parent(parent_pid: int) -> None:
    """The portable fallback: a worker's parent pid changes (to init or a subreaper) when the
    parent dies; `os._exit` skips the interpreter's shutdown, which would wait on the pool."""
    while True:
        if os.getppid() != parent_pid:
            os._exit(1)
        time.sleep(POLL_SECONDS)
