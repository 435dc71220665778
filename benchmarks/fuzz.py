"""Reliability fuzzing of the `ptranspile` command on mutated real model code.

The command promises that no input crashes it or takes a run down, that bad input gets one line
per file and a non-zero exit (never a traceback or an "internal error"), that inputs are never
modified or lost, and that output bytes do not depend on PYTHONHASHSEED. Hand-written tests check
the inputs someone thought of; this script checks the promises on thousands of inputs nobody
wrote: slices and mutations of the model files of installed packages (torchvision, transformers,
torch.nn, Keras, Flax), plus generated deep, huge and oddly encoded files.

    python benchmarks/fuzz.py --count 10000 --seed 0 --minutes 60 --results /tmp/fuzz-results

Files are written into batch directories (`--batch-size` files each) and every batch is converted
twice by `python -m precision_transpiler`, under PYTHONHASHSEED=1 and 2, in one of several modes
(`-o OUT`, `--in-place` on a copy, stdin for a few files), to jax or tf, sometimes with `--policy
mixed`, always with `-j 2` (two cores: the parallelism is inside a batch, never across batches).
The mutated files are only ever read and parsed by the converter: nothing here imports or runs
them. Every violation is written to the results directory with the file that triggered it (found
by bisecting the batch, then shrunk line by line when that is quick), and a markdown table of the
counters ends the run. The exit status is 1 when any counter is not zero.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Exit codes the command may end with; anything else (a signal: negative, 139, ...) is a crash.
ALLOWED_EXIT = (0, 1, 2)
# Violations that end or abort a run, whichever form one takes.
SEVERE = frozenset({"crash", "traceback", "internal"})
# A batch that runs longer than this is a hang, counted with the crashes.
BATCH_TIMEOUT_S = 900.0
# Stdin mode converts this many files of its batch, one process each (a process costs ~1 s).
STDIN_FILES = 4


# ----------------------------------------------------------------------------------- sources


def _package_dir(package: str) -> Path | None:
    """The directory of an installed package, found without importing it (torchvision's import
    fails beside a CPU torch, and importing model code is not needed to read it)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


# (package, glob under it): real model code of every framework the converter reads.
SOURCE_GLOBS = (
    ("torchvision", "models/**/*.py"),
    ("transformers", "models/*/modeling_*.py"),
    ("torch", "nn/modules/*.py"),
    ("keras", "src/applications/*.py"),
    ("keras", "src/layers/*/*.py"),
    ("flax", "nnx/nn/*.py"),
    ("timm", "models/*.py"),
    ("diffusers", "models/**/*.py"),
)


def collect_sources(max_files: int = 0) -> list[tuple[str, bytes]]:
    """(label, bytes) of real model files of the installed packages, in a fixed order. Files over
    400 KB are left out (the huge-file benchmark covers size); `max_files` > 0 keeps a spread
    subset (transformers alone has ~500 modeling files)."""
    found: list[tuple[str, bytes]] = []
    for package, pattern in SOURCE_GLOBS:
        root = _package_dir(package)
        if root is None:
            continue
        for path in sorted(root.glob(pattern)):
            if path.name.endswith("_test.py") or not path.is_file():
                continue
            data = path.read_bytes()
            if 0 < len(data) <= 400_000:
                found.append((f"{package}/{path.relative_to(root).as_posix()}", data))
    if max_files > 0 and len(found) > max_files:
        step = len(found) / max_files
        found = [found[int(i * step)] for i in range(max_files)]
    return found


# ----------------------------------------------------------------------------------- mutations

TORCH_TOKENS = (
    "torch.half",
    "torch.float16",
    "torch.bfloat16",
    "torch.float64",
    "torch.int64",
    "torch.finfo(torch.float16).max",
    "nn.Linear",
    "nn.Conv2d(3, 8, 3)",
    "nn.LayerNorm",
    "nn.BatchNorm2d",
    "nn.MultiheadAttention",
    "torch.nn.functional.softmax",
    "F.gelu",
    "torch.autocast",
    "torch.cuda.amp.autocast",
    "x.float()",
    "x.half().to(torch.float32)",
    "x.type_as(y)",
    "torch.tensor([1, 2], dtype=torch.int8)",
    "torch.zeros(2, device='cuda')",
    "self",
    "super().__init__()",
    "None",
    "...",
    "lambda: 0",
    "await x",
    "yield",
    "*args",
    "**kwargs",
    "__class__",
    "print",
    "nonlocal_name",
)
SUFFIXES = (".float()", ".half()", ".to(torch.bfloat16)", ".cuda()", ".type(torch.float64)", "[0]", "()", ".T")
NUMBERS = ("0", "-1", "1e309", "0x10", "1_000", "3.5j", "10**100", "0.0", "2**31", "1e-45", "00", "1__0")
DELIMS = ("(", ")", "[", "]", "{", "}", ":", ",", "=", '"', "'", '"""', "\\", "@", "#", "\t")
NON_ASCII = ("é", "ß", "名前", "λ", "\u200b", "\u00a0", "\U0001f600", "\ufeff", "\u2028", "Å", "ﬁ")


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _token_positions(line: bytes) -> list[tuple[int, int]]:
    """Spans of identifier-like runs in a line (a cheap stand-in for tokenizing)."""
    spans: list[tuple[int, int]] = []
    start = -1
    for i, b in enumerate(line + b" "):
        word = chr(b).isalnum() or b in b"_."
        if word and start < 0:
            start = i
        elif not word and start >= 0:
            spans.append((start, i))
            start = -1
    return spans


class Mutator:
    """Mutated files, reproducibly: file `i` of seed `s` is always the same bytes."""

    def __init__(self, sources: list[tuple[str, bytes]], seed: int) -> None:
        self.sources = sources
        self.seed = seed

    def make(self, index: int) -> tuple[bytes, str]:
        """The bytes of fuzz file `index` and a description of how they were made."""
        rng = random.Random(f"{self.seed}:{index}")
        roll = rng.random()
        if roll < 0.08 or not self.sources:
            data, how = self._generated(rng)
        else:
            label, whole = rng.choice(self.sources)
            lines = _lines(whole)
            if roll < 0.16 and len(lines) <= 1500:
                data, how = whole, f"whole {label}"
            else:
                size = rng.randint(20, 400)
                start = rng.randrange(max(1, len(lines) - size + 1))
                data = b"".join(lines[start : start + size])
                how = f"{label} lines {start + 1}-{start + size}"
            steps = []
            for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 4))):
                mutation = rng.choice(self.RARE_MUTATIONS if rng.random() < 0.02 else self.MUTATIONS)
                data = mutation(self, rng, data)
                steps.append(mutation.__name__.lstrip("_"))
            if steps:
                how += ", " + ", ".join(steps)
        if rng.random() < 0.12:
            encode = rng.choice(self.ENCODINGS)
            data = encode(self, rng, data)
            how += f", {encode.__name__.lstrip('_')}"
        return data, how

    # ---- line mutations

    def _delete_lines(self, rng: random.Random, data: bytes) -> bytes:
        lines = _lines(data)
        if not lines:
            return data
        start = rng.randrange(len(lines))
        del lines[start : start + rng.randint(1, 5)]
        return b"".join(lines)

    def _duplicate_lines(self, rng: random.Random, data: bytes) -> bytes:
        lines = _lines(data)
        if not lines:
            return data
        start = rng.randrange(len(lines))
        chunk = lines[start : start + rng.randint(1, 8)]
        at = rng.randrange(len(lines) + 1)
        return b"".join(lines[:at] + chunk * rng.randint(1, 3) + lines[at:])

    def _swap_lines(self, rng: random.Random, data: bytes) -> bytes:
        lines = _lines(data)
        if len(lines) < 2:
            return data
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
        return b"".join(lines)

    def _dedent_or_indent(self, rng: random.Random, data: bytes) -> bytes:
        lines = _lines(data)
        if not lines:
            return data
        i = rng.randrange(len(lines))
        lines[i] = lines[i].lstrip(b" ") if rng.random() < 0.5 else b"    " * rng.randint(1, 3) + lines[i]
        return b"".join(lines)

    # ---- token mutations

    def _edit_token(self, rng: random.Random, data: bytes) -> bytes:
        lines = _lines(data)
        for _ in range(rng.randint(1, 6)):
            if not lines:
                break
            i = rng.randrange(len(lines))
            spans = _token_positions(lines[i])
            if not spans:
                continue
            a, b = rng.choice(spans)
            kind = rng.random()
            if kind < 0.5:
                new = rng.choice(TORCH_TOKENS).encode()
            elif kind < 0.7:
                new = lines[i][a:b] + rng.choice(SUFFIXES).encode()
            elif kind < 0.85:
                new = rng.choice(NUMBERS).encode()
            else:
                new = b""
            lines[i] = lines[i][:a] + new + lines[i][b:]
        return b"".join(lines)

    def _delete_delimiter(self, rng: random.Random, data: bytes) -> bytes:
        positions = [i for i, b in enumerate(data) if b in b"()[]{}:,"]
        if not positions:
            return data
        i = rng.choice(positions)
        return data[:i] + data[i + 1 :]

    def _insert_delimiter(self, rng: random.Random, data: bytes) -> bytes:
        i = rng.randrange(len(data) + 1)
        return data[:i] + rng.choice(DELIMS).encode() + data[i:]

    def _deep_nesting(self, rng: random.Random, data: bytes) -> bytes:
        depth = rng.choice((50, 150, 199, 200, 201, 250, 600, 1300, 3000))
        opener, closer = rng.choice((("(", ")"), ("[", "]"), ("{", "}"), ("f(", ")"), ("x[", "]")))
        expr = opener * depth + "torch.half" + closer * depth
        return self._insert_statement(rng, data, f"y = {expr}")

    def _long_chain(self, rng: random.Random, data: bytes) -> bytes:
        n = rng.choice((100, 990, 1100, 1999, 2001, 3000, 6000, 12000))
        kind = rng.randrange(7)
        if kind == 0:
            expr = " + ".join(["x.half()"] * n)
        elif kind == 1:
            expr = "not " * n + "x"
        elif kind == 2:
            expr = "x" + ".float()" * n
        elif kind == 3:
            expr = "x" + "[0]" * n
        elif kind == 4:
            expr = "- " * n + "x"
        elif kind == 5:
            expr = " ".join(['"a"'] * n)
        else:
            expr = "x" + ".a" * n
        return self._insert_statement(rng, data, f"y = {expr}")

    def _insert_statement(self, rng: random.Random, data: bytes, statement: str) -> bytes:
        lines = _lines(data)
        at = rng.randrange(len(lines) + 1)
        indent = b""
        if at < len(lines):
            line = lines[at]
            indent = line[: len(line) - len(line.lstrip(b" \t"))]
        return b"".join([*lines[:at], indent + statement.encode() + b"\n", *lines[at:]])

    def _non_ascii(self, rng: random.Random, data: bytes) -> bytes:
        text = rng.choice(NON_ASCII)
        where = rng.random()
        if where < 0.4:
            return self._insert_statement(rng, data, f"# {text}")
        if where < 0.7:
            return self._insert_statement(rng, data, f"{text}x = '{text}'")
        i = rng.randrange(len(data) + 1)
        return data[:i] + text.encode() + data[i:]

    def _huge_line(self, rng: random.Random, data: bytes) -> bytes:
        # Sizes stay moderate: benchmarks/huge_files.py measures size; here a long line is one
        # odd input among many, and a 100k-element list of dtypes would take minutes to rewrite.
        kind = rng.randrange(3)
        if kind == 0:
            statement = "s = '" + "a" * rng.choice((10_000, 200_000)) + "'"
        elif kind == 1:
            statement = "t = [" + "torch.half, " * rng.choice((100, 1000)) + "]"
        else:
            statement = "# " + "x" * rng.choice((10_000, 1_000_000))
        return self._insert_statement(rng, data, statement)

    def _truncate(self, rng: random.Random, data: bytes) -> bytes:
        return data[: rng.randrange(len(data) + 1)]

    MUTATIONS: tuple[Callable[[Mutator, random.Random, bytes], bytes], ...] = (
        _delete_lines,
        _duplicate_lines,
        _swap_lines,
        _dedent_or_indent,
        _edit_token,
        _edit_token,
        _edit_token,
        _delete_delimiter,
        _insert_delimiter,
        _deep_nesting,
        _long_chain,
        _non_ascii,
        _non_ascii,
        _truncate,
    )
    # Rarer: long lines cost time without finding more than a few of them do.
    RARE_MUTATIONS: tuple[Callable[[Mutator, random.Random, bytes], bytes], ...] = (_huge_line,)

    # ---- encodings and junk

    def _bom(self, rng: random.Random, data: bytes) -> bytes:
        return b"\xef\xbb\xbf" + data

    def _crlf(self, rng: random.Random, data: bytes) -> bytes:
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")

    def _cr_only(self, rng: random.Random, data: bytes) -> bytes:
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")

    def _mixed_endings(self, rng: random.Random, data: bytes) -> bytes:
        lines = _lines(data)
        return b"".join(
            line.rstrip(b"\r\n") + rng.choice((b"\n", b"\r\n", b"\r")) if line.endswith(b"\n") else line
            for line in lines
        )

    def _latin1_header(self, rng: random.Random, data: bytes) -> bytes:
        header = rng.choice(
            (
                b"# -*- coding: latin-1 -*-\n",
                b"# coding=iso-8859-15\n",
                b"#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\n",
            )
        )
        text = data.decode("utf-8", "replace")
        body = ("# caf\u00e9 na\u00efve\n" + text).encode("latin-1", "replace")
        return header + body

    def _bad_coding(self, rng: random.Random, data: bytes) -> bytes:
        header = rng.choice(
            (
                b"# coding: klingon\n",
                b"# coding: utf-16\n",
                b"# -*- coding: ascii -*-\n# \xc3\xa9\n",
                b"# coding: utf-8\n\xff\xfe\n",
            )
        )
        return header + data

    def _binary_junk(self, rng: random.Random, data: bytes) -> bytes:
        junk = bytes(rng.randrange(256) for _ in range(rng.choice((1, 16, 512, 4096))))
        i = rng.randrange(len(data) + 1)
        return data[:i] + junk + data[i:]

    def _utf16(self, rng: random.Random, data: bytes) -> bytes:
        return data.decode("utf-8", "replace").encode("utf-16")

    def _nul(self, rng: random.Random, data: bytes) -> bytes:
        i = rng.randrange(len(data) + 1)
        return data[:i] + b"\x00" + data[i:]

    def _form_feed_and_tabs(self, rng: random.Random, data: bytes) -> bytes:
        return data.replace(b"\n    ", rng.choice((b"\n\t", b"\n\x0c    ", b"\n \t  "))) + b"\x0c\n"

    ENCODINGS: tuple[Callable[[Mutator, random.Random, bytes], bytes], ...] = (
        _bom,
        _bom,
        _crlf,
        _crlf,
        _cr_only,
        _mixed_endings,
        _latin1_header,
        _latin1_header,
        _bad_coding,
        _binary_junk,
        _utf16,
        _nul,
        _form_feed_and_tabs,
    )

    # ---- generated inputs

    def _generated(self, rng: random.Random) -> tuple[bytes, str]:
        kind = rng.randrange(14)
        head = "import torch\nimport torch.nn as nn\n\n"
        if kind == 0:
            return b"", "empty"
        if kind == 1:
            return rng.choice((b"\n\n", b"   \n\t\n", b"\xef\xbb\xbf", b"\r\n", b"#", b"\\", b"\x0c")), "blank"
        if kind == 2:
            n = rng.randint(1, 8192)
            return bytes(rng.randrange(256) for _ in range(n)), f"{n} random bytes"
        if kind == 3:
            depth = rng.choice((100, 199, 200, 201, 1000, 5000, 50000))
            opener, closer = rng.choice((("(", ")"), ("[", "]"), ("{", "}")))
            return f"{head}y = {opener * depth}torch.half{closer * depth}\n".encode(), f"{depth} nested {opener}"
        if kind == 4:
            n = rng.choice((1000, 2000, 2001, 5000, 20000, 100000))
            op = rng.choice((" + ", " * ", " and ", " | ", " @ ", " ** ", " < "))
            return f"{head}y = {op.join(['x.half()'] * n)}\n".encode(), f"{n}-operand chain of{op.strip()}"
        if kind == 5:
            n = rng.choice((500, 3000, 20000, 100000))
            return f"{head}y = x{'.float()' * n}\n".encode(), f"{n} chained calls"
        if kind == 6:
            depth = rng.choice((20, 99, 100, 101, 150, 1000))
            body = "".join("    " * i + f"if x{i}:\n" for i in range(depth)) + "    " * depth + "y = torch.half\n"
            return (head + body).encode(), f"{depth} nested ifs"
        if kind == 7:
            n = rng.choice((2_000, 5_000))  # benchmarks/huge_files.py measures size
            return (head + "y = torch.float16\n" * n).encode(), f"{n} lines"
        if kind == 8:
            n = rng.choice((100_000, 1_000_000))
            return f"{head}s = '{'é' * n}'\n".encode(), f"{n}-character line"
        if kind == 9:
            depth = rng.choice((50, 200, 1100, 2000, 20000))
            return f"{head}f = {'lambda: ' * depth}torch.half\n".encode(), f"{depth} nested lambdas"
        if kind == 10:
            n = rng.choice((100, 3000, 30000))
            return f"{head}y = {'x if c else ' * n}x\n".encode(), f"{n} chained conditionals"
        if kind == 11:
            depth = rng.choice((10, 100, 300))
            return (head + "y = " + "f'{" * depth + "x" + "}'" * depth + "\n").encode(), f"{depth} nested f-strings"
        if kind == 12:
            n = rng.choice((10, 100, 300))
            methods = "".join(f"    def f{i}(self, x):\n        return x.half()\n" for i in range(n))
            return f"{head}class M(nn.Module):\n{methods}".encode(), f"class with {n} methods"
        n = rng.choice((300, 3000))
        decorators = "@d\n" * n
        return f"{head}{decorators}def f():\n    pass\n".encode(), f"{n} decorators"


# ----------------------------------------------------------------------------------- running


@dataclasses.dataclass
class Counters:
    """What the table reports; every counter but files, batches and seconds should be zero."""

    files: int = 0  # converted (a stdin batch converts only its first STDIN_FILES)
    batches: int = 0
    tracebacks: int = 0
    internal_errors: int = 0
    crashed_batches: int = 0
    modified_inputs: int = 0
    missing_verdicts: int = 0
    nondeterministic_outputs: int = 0
    seconds: float = 0.0

    def violations(self) -> int:
        return (
            self.tracebacks
            + self.internal_errors
            + self.crashed_batches
            + self.modified_inputs
            + self.missing_verdicts
            + self.nondeterministic_outputs
        )

    def table(self) -> str:
        rows = [
            ("files", self.files),
            ("batches", self.batches),
            ("tracebacks", self.tracebacks),
            ("internal errors", self.internal_errors),
            ("crashed batches", self.crashed_batches),
            ("modified inputs", self.modified_inputs),
            ("files without a verdict", self.missing_verdicts),
            ("nondeterministic outputs", self.nondeterministic_outputs),
            ("seconds", f"{self.seconds:.0f}"),
        ]
        head = "| " + " | ".join(name for name, _ in rows) + " |"
        rule = "|" + "|".join("---:" for _ in rows) + "|"
        body = "| " + " | ".join(str(value) for _, value in rows) + " |"
        return f"{head}\n{rule}\n{body}"


@dataclasses.dataclass
class Run:
    """One run of the command: how it ended and what it left."""

    code: int
    out: bytes
    err: str
    tree: dict[str, str]  # path relative to the output root -> sha256
    report: dict | None


@dataclasses.dataclass
class BatchSpec:
    mode: str  # "output", "in-place" or "stdin"
    to: str
    policy: str | None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tree(root: Path) -> dict[str, str]:
    if not root.exists():
        return {}
    if root.is_file():
        return {".": _sha(root.read_bytes())}
    return {p.relative_to(root).as_posix(): _sha(p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


def _env(hashseed: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = str(hashseed)
    env.pop("PTRANSPILE_DEBUG", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    return env


def _command(spec: BatchSpec, jobs: int) -> list[str]:
    cmd = [sys.executable, "-m", "precision_transpiler", "--to", spec.to, "-q", "-j", str(jobs)]
    if spec.policy:
        cmd += ["--policy", spec.policy]
    return cmd


def run_once(spec: BatchSpec, batch: Path, work: Path, hashseed: int, jobs: int, timeout: float) -> Run:
    """Convert `batch` once in `spec`'s mode under PYTHONHASHSEED=`hashseed`, in `work`."""
    work.mkdir(parents=True, exist_ok=True)
    report = work / "report.json"
    base = [*_command(spec, jobs), "--report-json", str(report)]
    env = _env(hashseed)
    if spec.mode == "stdin":
        out = b""
        errs = []
        code = 0
        tree: dict[str, str] = {}
        for path in sorted(batch.iterdir())[:STDIN_FILES]:
            try:
                proc = subprocess.run(
                    [*_command(spec, 1), "-"],
                    input=path.read_bytes(),
                    capture_output=True,
                    env=env,
                    cwd=work,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                return Run(-999, out, "\n".join(errs) + f"\n{path.name}: timed out", tree, None)
            tree[path.name] = _sha(proc.stdout)
            err = proc.stderr.decode("utf-8", "replace")
            errs.append(f"[{path.name}]\n{err}")
            if proc.returncode not in ALLOWED_EXIT:
                return Run(proc.returncode, out, "\n".join(errs), tree, None)
            code = max(code, proc.returncode)
        return Run(code, out, "\n".join(errs), tree, None)
    if spec.mode == "in-place":
        target = work / "tree"
        shutil.copytree(batch, target)
        cmd = [*base, "--in-place", "tree"]
        root = target
    else:
        target = work / "out"
        cmd = [*base, "-o", "out", str(batch)]
        root = target
    try:
        proc = subprocess.run(cmd, capture_output=True, env=env, cwd=work, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        err = (exc.stderr or b"").decode("utf-8", "replace")
        return Run(-999, b"", err + "\n(timed out)", _tree(root), None)
    loaded = None
    if report.exists():
        try:
            loaded = json.loads(report.read_text(encoding="utf-8"))
        except ValueError:
            loaded = None
    return Run(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace"), _tree(root), loaded)


def _problems(spec: BatchSpec, batch: Path, run: Run, names: list[str]) -> dict[str, list[str]]:
    """Violations of one run by kind: crash, traceback, internal error, missing verdict."""
    found: dict[str, list[str]] = {}
    if run.code not in ALLOWED_EXIT:
        found.setdefault("crash", []).append(f"exit {run.code}")
    if "Traceback" in run.err:
        found.setdefault("traceback", []).append(run.err[-4000:])
    if "internal error" in run.err:
        found.setdefault("internal", []).extend(ln for ln in run.err.splitlines() if "internal error" in ln)
    if spec.mode == "stdin" or run.code not in ALLOWED_EXIT:
        return found
    reported = {}
    for entry in (run.report or {}).get("files", []):
        reported[Path(entry["path"]).name] = entry
    missing = []
    for name in names:
        entry = reported.get(name)
        if entry is None:
            missing.append(f"{name}: not in --report-json")
            continue
        errors = [d for d in entry["diagnostics"] if d["severity"] == "error"]
        if errors and name not in run.err:
            missing.append(f"{name}: errors in the report but no line on stderr")
        if spec.mode == "output" and not errors and name not in run.tree:
            missing.append(f"{name}: no error and not written to -o")
    if missing:
        found["verdict"] = missing
    return found


def _differences(a: Run, b: Run) -> list[str]:
    """Paths (or streams) whose bytes differ between two runs."""
    diffs = sorted(p for p in set(a.tree) | set(b.tree) if a.tree.get(p) != b.tree.get(p))
    if a.code != b.code:
        diffs.append(f"<exit {a.code} vs {b.code}>")
    if a.err != b.err:
        diffs.append("<stderr>")
    if a.out != b.out:
        diffs.append("<stdout>")
    return diffs


def _fails(spec: BatchSpec, files: dict[str, bytes], kind: str, jobs: int, timeout: float) -> bool:
    """Whether converting just `files` (in a fresh directory) shows a violation of `kind`."""
    with tempfile.TemporaryDirectory(prefix="ptranspile-fuzz-") as tmp:
        batch = Path(tmp) / "batch"
        batch.mkdir()
        for name, data in files.items():
            (batch / name).write_bytes(data)
        run = run_once(spec, batch, Path(tmp) / "work", 1, jobs, timeout)
        found = _problems(spec, batch, run, sorted(files))
        # A crash in a -j worker is an internal error (BrokenProcessPool) of the whole batch, and
        # the same file alone crashes the process itself: each is the other's sign.
        return bool(SEVERE & found.keys()) if kind in SEVERE else kind in found


def _culprit(spec: BatchSpec, files: dict[str, bytes], kind: str, jobs: int, timeout: float) -> dict[str, bytes]:
    """The smallest set found by halving `files` that still shows the violation (one file when a
    single file causes it)."""
    current = dict(files)
    while len(current) > 1:
        names = sorted(current)
        half = len(names) // 2
        for part in (names[:half], names[half:]):
            subset = {n: current[n] for n in part}
            if _fails(spec, subset, kind, jobs, timeout):
                current = subset
                break
        else:
            break
    return current


def _shrink(spec: BatchSpec, name: str, data: bytes, kind: str, jobs: int, budget: int) -> bytes:
    """Drop chunks of lines while the violation stays, within `budget` runs."""
    lines = _lines(data)
    chunk = max(1, len(lines) // 2)
    runs = 0
    while chunk >= 1 and runs < budget:
        i = 0
        while i < len(lines) and runs < budget:
            candidate = lines[:i] + lines[i + chunk :]
            runs += 1
            if candidate and _fails(spec, {name: b"".join(candidate)}, kind, jobs, 120):
                lines = candidate
            else:
                i += chunk
        chunk //= 2
    return b"".join(lines)


@dataclasses.dataclass
class Options:
    count: int = 10000
    seed: int = 0
    batch_size: int = 200
    jobs: int = 2
    minutes: float = 0.0
    results: Path | None = None
    max_sources: int = 0
    minimise: bool = True
    log: Callable[[str], None] = print


def _specs(rng: random.Random) -> BatchSpec:
    roll = rng.random()
    mode = "in-place" if roll < 0.2 else "stdin" if roll < 0.3 else "output"
    policy = "mixed" if rng.random() < 0.3 else None
    return BatchSpec(mode, rng.choice(("jax", "tf")), policy)


def _batches(options: Options, mutator: Mutator) -> Iterator[tuple[int, dict[str, tuple[bytes, str]]]]:
    index = 0
    number = 0
    while index < options.count:
        files = {}
        for i in range(index, min(options.count, index + options.batch_size)):
            data, how = mutator.make(i)
            files[f"f{i:05d}.py"] = (data, how)
        yield number, files
        index += options.batch_size
        number += 1


def fuzz(options: Options) -> Counters:
    """Run the fuzz and return its counters; violations are written under options.results."""
    start = time.monotonic()
    deadline = start + options.minutes * 60 if options.minutes > 0 else None
    results = options.results or Path(tempfile.mkdtemp(prefix="ptranspile-fuzz-results-"))
    results.mkdir(parents=True, exist_ok=True)
    sources = collect_sources(options.max_sources)
    options.log(f"fuzz: {len(sources)} real model files, {options.count} files, results in {results}")
    mutator = Mutator(sources, options.seed)
    counters = Counters()
    violations = []
    with tempfile.TemporaryDirectory(prefix="ptranspile-fuzz-") as tmp:
        for number, files in _batches(options, mutator):
            if deadline is not None and time.monotonic() > deadline:
                options.log(f"fuzz: --minutes {options.minutes:g} reached after {counters.batches} batches")
                break
            spec = _specs(random.Random(f"{options.seed}:batch:{number}"))
            batch = Path(tmp) / f"batch{number:04d}"
            batch.mkdir()
            for name, (data, _) in files.items():
                (batch / name).write_bytes(data)
            before = _tree(batch)
            t0 = time.monotonic()
            runs = [
                run_once(spec, batch, Path(tmp) / f"work{number:04d}-{seed}", seed, options.jobs, BATCH_TIMEOUT_S)
                for seed in (1, 2)
            ]
            after = _tree(batch)
            counters.batches += 1
            counters.files += min(len(files), STDIN_FILES) if spec.mode == "stdin" else len(files)
            names = sorted(files)
            found: dict[str, list[str]] = {}
            for run in runs:
                for kind, items in _problems(spec, batch, run, names).items():
                    found.setdefault(kind, []).extend(items)
            modified = sorted(n for n in names if before.get(n) != after.get(n))
            if spec.mode == "in-place":
                # A file the command reported with an error, or left unchanged, keeps its bytes.
                for run in runs:
                    for entry in (run.report or {}).get("files", []):
                        name = Path(entry["path"]).name
                        if not entry["changed"] and run.tree.get(name) != before.get(name):
                            modified.append(name)
                    modified += [n for n in names if n not in run.tree]
            diffs = _differences(*runs)
            counters.tracebacks += "traceback" in found
            counters.internal_errors += len(found.get("internal", []))
            counters.crashed_batches += "crash" in found
            counters.modified_inputs += len(set(modified))
            counters.missing_verdicts += len(found.get("verdict", []))
            counters.nondeterministic_outputs += len(diffs)
            options.log(
                f"batch {number}: {len(files)} files, {spec.mode} --to {spec.to}"
                f"{' --policy ' + spec.policy if spec.policy else ''}, exit {runs[0].code}/{runs[1].code}, "
                f"{time.monotonic() - t0:.1f} s"
                + (f", PROBLEMS {sorted(found)}" if found else "")
                + (f", modified {sorted(set(modified))[:5]}" if modified else "")
                + (f", differ {diffs[:5]}" if diffs else "")
            )
            if found or modified or diffs:
                violations.append(
                    _record(options, results, number, spec, files, found, sorted(set(modified)), diffs, runs)
                )
            for run_dir in Path(tmp).glob(f"work{number:04d}-*"):
                shutil.rmtree(run_dir, ignore_errors=True)
            shutil.rmtree(batch, ignore_errors=True)
    counters.seconds = time.monotonic() - start
    (results / "summary.json").write_text(
        json.dumps({"counters": dataclasses.asdict(counters), "violations": violations}, indent=2)
    )
    (results / "table.md").write_text(counters.table() + "\n")
    return counters


def _record(
    options: Options,
    results: Path,
    number: int,
    spec: BatchSpec,
    files: dict[str, tuple[bytes, str]],
    found: dict[str, list[str]],
    modified: list[str],
    diffs: list[str],
    runs: list[Run],
) -> dict:
    """Write one batch's violations, with the files that trigger them, under `results`."""
    where = results / f"batch{number:04d}"
    where.mkdir(parents=True, exist_ok=True)
    for i, run in enumerate(runs, 1):
        (where / f"stderr-seed{i}.txt").write_text(run.err)
    culprits: dict[str, list[str]] = {}
    raw = {n: d for n, (d, _) in files.items()}
    for kind in ("crash", "traceback", "internal"):
        if kind not in found:
            continue
        subset = _culprit(spec, raw, kind, options.jobs, BATCH_TIMEOUT_S) if options.minimise else raw
        culprits[kind] = sorted(subset)
        for name, data in subset.items():
            (where / name).write_bytes(data)
            if options.minimise and len(subset) == 1:
                small = _shrink(spec, name, data, kind, 1, budget=40)
                (where / f"{name}.min.py").write_bytes(small)
    named = set(modified) | {d for d in diffs if not d.startswith("<")}
    for item in found.get("verdict", []):
        named.add(item.split(":", 1)[0])
    for name in named:
        if name in raw:
            (where / name).write_bytes(raw[name])
    record = {
        "batch": number,
        "mode": spec.mode,
        "to": spec.to,
        "policy": spec.policy,
        "exit": [r.code for r in runs],
        "problems": found,
        "culprits": culprits,
        "modified": modified,
        "differ": diffs,
        "how": {n: files[n][1] for n in sorted(set().union(*culprits.values(), named)) if n in files},
    }
    (where / "violation.json").write_text(json.dumps(record, indent=2))
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10000, help="mutated files to convert (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the mutations (same seed, same files)")
    parser.add_argument("--batch-size", type=int, default=200, help="files per batch directory (default 200)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="-j of each conversion run (default 2)")
    parser.add_argument(
        "--minutes", type=float, default=0.0, help="stop starting batches after this long (0: no limit)"
    )
    parser.add_argument(
        "--results", type=Path, default=None, help="directory for violations (default: a new temporary one)"
    )
    parser.add_argument("--max-sources", type=int, default=0, help="use at most this many real model files (0: all)")
    parser.add_argument("--no-minimise", action="store_true", help="do not bisect batches to the triggering file")
    args = parser.parse_args(argv)
    options = Options(
        count=args.count,
        seed=args.seed,
        batch_size=args.batch_size,
        jobs=args.jobs,
        minutes=args.minutes,
        results=args.results,
        max_sources=args.max_sources,
        minimise=not args.no_minimise,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    counters = fuzz(options)
    print(counters.table())
    return 1 if counters.violations() else 0


if __name__ == "__main__":
    sys.exit(main())
