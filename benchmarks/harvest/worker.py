"""One package's harvest, in a process of its own (started by harvest.py).

A package's imports and constructors may do anything (hang in C code, exhaust memory, crash the
interpreter), so each package is harvested in a child process that writes one JSON line per step
to a results file and flushes it: its parent sees how far it got, and when the child dies or
stalls it records the class that was running and starts a new child after it (`--start`).

    python benchmarks/harvest/worker.py IMPORT_NAME --out FILE.jsonl [--start K] [--site DIR]

Lines: {"kind": "discovered", ...} once per start, then {"kind": "begin", "index": i} and
{"kind": "class", "index": i, ...} for each class from K on, and {"kind": "done"} at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]  # this folder's modules (build, rules, ...) must not shadow a library's imports
MEMORY_LIMIT_BYTES = 8 * 1024**3  # address space of one worker: a constructor that allocates more fails fast


def _setup(site: str | None) -> None:
    """The pinned stack first, the harvested packages after it; one thread; no network; a
    scratch working folder (constructors that write files write there)."""
    sys.path.insert(0, str(REPO))
    import benchmarks.harvest.build  # noqa: F401 - before the site: a `benchmarks` package there must not win

    if site:
        sys.path.append(site)
    for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("TORCH_HOME", tempfile.mkdtemp(prefix="harvest-torch-"))
    os.chdir(tempfile.mkdtemp(prefix="harvest-cwd-"))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    import torch

    torch.set_num_threads(1)
    from tests.real_models import import_torchvision

    import_torchvision()  # before any package imports torchvision (the project's work-around)
    from benchmarks.harvest.build import block_downloads

    block_downloads()


def _write(out: IO[str], record: dict[str, Any]) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("import_name")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--site", default=None)
    parser.add_argument("--limit", type=int, default=0, help="harvest at most this many classes (0: all)")
    args = parser.parse_args(argv)
    _setup(args.site)
    from benchmarks.harvest.build import harvest_class
    from benchmarks.harvest.discover import discover

    with args.out.open("a", encoding="utf-8") as out:
        found = discover(args.import_name)
        _write(
            out,
            {
                "kind": "discovered",
                "modules": found.modules,
                "failed": found.failed,
                "classes": [[c.name, c.file, c.line] for c in found.classes],
                "unimported": found.unimported,
            },
        )
        stop = len(found.classes) if args.limit <= 0 else min(len(found.classes), args.limit)
        for index in range(args.start, stop):
            item = found.classes[index]
            _write(out, {"kind": "begin", "index": index})
            namespace = vars(sys.modules[item.module])
            try:
                record = asdict(harvest_class(item.cls, namespace, item.qualname))
            except Exception as exc:  # a bug of the harvester's own: recorded, the harvest goes on
                detail = f"{type(exc).__name__}: {exc}"[:200]
                record = {"status": "not buildable", "reason": "harvester error", "detail": detail}
            _write(out, {"kind": "class", "index": index, **record})
        _write(out, {"kind": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
