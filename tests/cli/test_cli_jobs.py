"""`-j N`: worker processes never outlive the command.

The workers of `ptranspile DIR -j N` are forked children blocked on the pool's queue between
files; killed outright (SIGKILL, an out-of-memory kill) the parent cannot tell them to stop. Each
worker watches its parent and exits as soon as it is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

MODULE = """import torch
from torch import nn


class Block{i}(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.norm(x).half()
        h = torch.relu(self.fc1(h.float()))
        return x + self.fc2(h).to(torch.bfloat16).float() * torch.finfo(torch.float16).eps
"""


def _alive(pid: int) -> bool:
    """A process that still runs (a zombie has exited: it only waits to be reaped)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(sys.platform == "win32", reason="workers are forked")
def test_workers_exit_when_the_parent_is_killed(tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    src.mkdir()
    body = "".join(MODULE.format(i=i) for i in range(12))
    for n in range(60):  # tens of seconds of work at -j 2
        (src / f"m{n:03d}.py").write_text(body)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "precision_transpiler", str(src), "--to", "jax", "-j", "2", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
            workers = [child.pid for child in parent.children(recursive=True)]
            time.sleep(0.05)
        assert len(workers) >= 2, "the -j 2 workers did not start"
        time.sleep(0.5)  # the workers are converting
        assert proc.poll() is None, "the run ended before it could be killed: give it more files"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in workers if _alive(pid)]
        assert left == [], f"workers still running 10 s after the parent was killed: {left}"
    finally:
        for pid in [proc.pid, *workers]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    leftovers = [p.name for p in out.rglob("*") if p.name.endswith(".tmp")] if out.exists() else []
    assert leftovers == []


FALLBACK = """
import os, sys, threading, time
from precision_transpiler import workers

parent = os.getpid()
child = os.fork()
if child == 0:  # the portable watch alone, without the kernel's parent-death signal
    threading.Thread(target=workers._poll_parent, args=(parent,), daemon=True).start()
    time.sleep(120)
    os._exit(0)
print(child, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="needs os.fork")
def test_the_portable_watch_ends_a_worker_whose_parent_died() -> None:
    proc = subprocess.Popen([sys.executable, "-c", FALLBACK], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        assert _alive(child)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        for pid in (proc.pid, child):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


class _CrashingJob:
    """A real conversion job whose worker dies of a real segmentation fault on files named
    `crash*.py`: the native crash a C extension (LibCST's parser) could have on some input."""

    def __init__(self) -> None:
        from precision_transpiler.api import Options, _Job

        self.job = _Job(Options.build(to="jax"))

    def __call__(self, item: tuple[Path, bool]) -> object:
        if item[0].name.startswith("crash"):
            import ctypes

            ctypes.string_at(0)  # SIGSEGV in this worker
        return self.job(item)

    def failed(self, path: Path, message: str) -> object:
        return self.job.failed(path, message)


def test_a_worker_killed_by_a_native_crash_costs_only_its_file(tmp_path: Path) -> None:
    """-j N: the file whose conversion crashed its process gets an error; every other file still
    gets its own result, in order, from fresh workers (no BrokenProcessPool for the whole run)."""
    from precision_transpiler.api import _in_workers

    names = ["a.py", "b.py", "crash1.py", "c.py", "d.py", "crash2.py", "e.py"]
    items = []
    for name in names:
        (tmp_path / name).write_text("import torch\nx = torch.zeros(2, dtype=torch.half)\n")
        items.append((tmp_path / name, False))
    results = list(_in_workers(_CrashingJob(), items, 2))  # type: ignore[arg-type]
    assert [Path(r.path).name for r in results] == names
    for name, result in zip(names, results, strict=True):
        if name.startswith("crash"):
            assert [d.code for d in result.errors] == ["internal-error"]
            assert "process crashed on this file" in result.errors[0].message
        else:
            assert not result.errors and "jnp.float16" in result.code, result.diagnostics
