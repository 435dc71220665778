"""Extract the examples of README.md and docs/*.md and run them (used by tests/test_docs.py).

The conventions a page can use are described in tests/test_docs.py and docs/architecture.md
("Documentation examples are tests"). In short:

- ```console blocks are terminal sessions: a line starting with `$ ` is a command (a line ending
  in `\\` continues it), the lines up to the next `$ ` are what it prints (stdout and stderr, in the
  order a terminal shows them). `...` in shown output stands for any text; a line holding only
  `...` for any number of lines.
- ```python blocks run in one Python process per page (blocks of a page share a namespace, in page
  order); blocks of `>>>` lines are doctests.
- an HTML comment `<!-- docs-test: KEY=VALUE ... -->` right above a block changes what is done
  with it (`skip`, `file`, `output`, `output-of`, `setup`, `cwd`, `signature`, `excerpt`, ...).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import inspect
import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

# Pages whose examples are tests, relative to the repository root.
PAGES = ("README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md")))

KNOWN_KEYS = {
    "skip",  # skip reason="...": not run (counted and listed)
    "reason",
    "file",  # file=PATH: the block is written to PATH in the page directory, not run
    "output",  # the block is the expected output of the closest python block above it
    "output-of",  # output-of="CMD": the block is what CMD prints, run in the page directory
    "exit",  # exit=N: the exit status output-of's CMD must have (default 0)
    "setup",  # setup="CMD": a shell command run in the page directory before the block
    "cwd",  # cwd=DIR: the directory (in the page directory) a console block starts in
    "signature",  # signature=MODULE: the block's def/class stubs match MODULE's real objects
    "excerpt",  # excerpt=PATH: the block's lines appear, in order, in PATH (of the repository)
    "env",  # env="NAME=VALUE ...": environment variables for the block's commands
    "timeout",  # timeout=SECONDS for each command of the block (default 300)
    "slow",  # the block is marked @pytest.mark.slow
}

DEFAULT_TIMEOUT = 300.0

# Folders of the repository copied into every page's directory (commands name them relatively).
COPIED = ("examples", "benchmarks")

DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:(.*?)-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


class DocsExampleError(AssertionError):
    """A documentation example that did not do what its page says."""


@dataclass
class Command:
    line: int  # 1-based line of the `$ ` in the page
    text: str  # the command, continuation lines included
    shown: list[str] = field(default_factory=list)  # the output lines shown after it
    last_line: int = 0  # 1-based line of the command's last continuation line


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    directives: dict[str, str]

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        d = self.directives
        if "skip" in d:
            return "skip"
        if "file" in d:
            return "file"
        if "output" in d:
            return "output"
        if "output-of" in d:
            return "output-of"
        if "signature" in d:
            return "signature"
        if "excerpt" in d:
            return "excerpt"
        if self.lang == "console":
            return "console"
        if self.lang in ("python", "py", "pycon"):
            return "doctest" if re.search(r"^>>> ", self.text, re.M) else "python"
        return "ignored"

    @property
    def timeout(self) -> float:
        return float(self.directives.get("timeout", DEFAULT_TIMEOUT))

    def commands(self) -> list[Command]:
        return parse_console(self)


# ----------------------------------------------------------------------------------- parsing


def parse_directives(text: str, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for token in shlex.split(text):
        key, sep, value = token.partition("=")
        if key not in KNOWN_KEYS:
            raise ValueError(f"{where}: unknown docs-test key {key!r} (known: {', '.join(sorted(KNOWN_KEYS))})")
        out[key] = value if sep else ""
    if "skip" in out and not out.get("reason", "").strip():
        raise ValueError(f'{where}: a skipped block needs reason="..."')
    return out


def parse_page(page: str, text: str | None = None) -> list[Block]:
    """Every fenced block of a page with the docs-test directives right above it."""
    if text is None:
        text = (REPO / page).read_text(encoding="utf-8")
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: dict[str, str] = {}
    pending_line = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        m_dir = DIRECTIVE.match(line)
        if m_dir:
            pending.update(parse_directives(m_dir.group(1), f"{page}:{i + 1}"))
            pending_line = i + 1
            i += 1
            continue
        m = FENCE.match(line)
        if m:
            indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
            lang = info.split()[0] if info else ""
            body: list[str] = []
            j = i + 1
            closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
            while j < len(lines) and not closing.match(lines[j]):
                body_line = lines[j]
                body.append(body_line[len(indent) :] if body_line.startswith(indent) else body_line.lstrip())
                j += 1
            if j == len(lines):
                raise ValueError(f"{page}:{i + 1}: unclosed code fence")
            blocks.append(Block(page, i + 1, lang, "\n".join(body) + "\n", pending))
            pending = {}
            i = j + 1
            continue
        if pending and line.strip():
            raise ValueError(f"{page}:{pending_line}: a docs-test directive must come right before a code block")
        i += 1
    if pending:
        raise ValueError(f"{page}:{pending_line}: a docs-test directive must come right before a code block")
    return blocks


def parse_console(block: Block) -> list[Command]:
    commands: list[Command] = []
    continuing = False
    for offset, line in enumerate(block.text.splitlines()):
        if continuing:
            commands[-1].text += "\n" + line
            commands[-1].last_line = block.line + 1 + offset
            continuing = line.endswith("\\")
            continue
        if line.startswith("$ ") or line == "$":
            commands.append(Command(block.line + 1 + offset, line[2:], last_line=block.line + 1 + offset))
            continuing = line.endswith("\\")
        elif commands:
            commands[-1].shown.append(line)
        elif line.strip():
            raise DocsExampleError(f"{block.id}: console block text before the first `$ ` command: {line!r}")
    return commands


def all_blocks() -> list[Block]:
    blocks: list[Block] = []
    for page in PAGES:
        blocks.extend(parse_page(page))
    return blocks


# ---------------------------------------------------------------------------------- matching


# Start-up log lines of TensorFlow and XLA (absl/glog format), which vary by machine and which
# TF_CPP_MIN_LOG_LEVEL does not silence everywhere: left out of actual output before comparing.
FRAMEWORK_LOG = re.compile(
    r"^(?:[IWEF]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] .*"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR)$"
)


def drop_framework_log(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not FRAMEWORK_LOG.match(line))


def normalize(text: str) -> str:
    """Trailing spaces removed from every line, leading and trailing blank lines dropped."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").expandtabs().split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _literal_parts(expected: str) -> list[str]:
    """The literal text between the `...` wildcards of normalized expected output (each line ends
    in a newline; a line of just `...` is a wildcard that may also match no line)."""
    parts = [""]
    for line in expected.split("\n"):
        if line.strip() == "...":
            parts.append("")
            continue
        pieces = line.split("...")
        parts[-1] += pieces[0]
        parts.extend(pieces[1:])
        parts[-1] += "\n"
    return parts


def _glob_match(parts: list[str], text: str) -> bool:
    """Whether `text` is parts[0] ANY parts[1] ANY ... parts[-1]. With `*`-only patterns, taking
    each middle part at its leftmost place is optimal, so this is linear (no backtracking)."""
    if len(parts) == 1:
        return text == parts[0]
    first, last = parts[0], parts[-1]
    end = len(text) - len(last)
    if not text.startswith(first) or not text.endswith(last) or end < len(first):
        return False
    position = len(first)
    for middle in parts[1:-1]:
        found = text.find(middle, position, end)
        if found < 0:
            return False
        position = found + len(middle)
    return True


def matches(expected: str, actual: str) -> bool:
    """doctest-style comparison: `...` is any text, a line of just `...` any number of lines."""
    exp, act = normalize(expected), normalize(actual)
    if "..." not in exp:
        return exp == act
    return _glob_match(_literal_parts(exp), act + "\n")


def literal_text(shown: str) -> str:
    """What shown output says literally, `...` left out."""
    return normalize(shown.replace("...", ""))


def mismatch(where: str, what: str, expected: str, actual: str) -> str:
    diff = difflib.unified_diff(
        normalize(expected).splitlines(), normalize(actual).splitlines(), "shown in the docs", "actual", lineterm=""
    )
    return f"{where}: {what} differs from the docs\n" + "\n".join(diff) + f"\n--- actual, in full ---\n{actual}"


# ------------------------------------------------------------------------------- environment


def command_env(page_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PRE_COMMIT"))}
    env.pop("PYTHONPATH", None)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.update(
        PYTHONUNBUFFERED="1",  # stdout and stderr interleave as in a terminal
        PYTHONDONTWRITEBYTECODE="1",
        TF_CPP_MIN_LOG_LEVEL="3",  # TensorFlow's C++ start-up log lines vary by machine
        JAX_PLATFORMS="cpu",
        PRE_COMMIT_COLOR="never",
        PRE_COMMIT_HOME=str(page_dir.parent / "pre-commit-home"),
        NO_COLOR="1",
        COLUMNS="80",  # a common terminal width (pytest and argparse wrap to it)
        REPO=str(REPO),
    )
    return env


def run_shell(command: str, cwd: Path, env: dict[str, str], last_status: int, timeout: float) -> tuple[int, str, Path]:
    """Run one command as a persistent shell would: `$?` and `cd` carry over. (status, output, cwd)."""
    pwd_file = Path(env["DOCS_TEST_STATE"]) / "pwd"
    script = f"(exit {last_status})\n{command}\n__docs_rc=$?\npwd > {shlex.quote(str(pwd_file))}\nexit $__docs_rc\n"
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = drop_framework_log(proc.stdout)
    new_cwd = cwd
    if pwd_file.is_file():
        new_cwd = Path(pwd_file.read_text().strip() or str(cwd))
        pwd_file.unlink()
    return proc.returncode, output, new_cwd


# ------------------------------------------------------------------------------ python kernel

KERNEL = r'''
import doctest, io, json, os, sys, traceback

proto_in = sys.stdin
proto_out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # anything written to fd 1 from C goes to the log, not into the protocol


class Capture(io.TextIOBase):
    """sys.stdout and sys.stderr, written in order into the current block's buffer."""

    buffer_ = io.StringIO()

    def write(self, s):
        return Capture.buffer_.write(s)

    def writable(self):
        return True

    def isatty(self):
        return False

    @property
    def encoding(self):
        return "utf-8"


sys.stdout = sys.stderr = Capture()
sys.path.insert(0, os.getcwd())
namespace = {"__name__": "__main__", "__builtins__": __builtins__}

for request in proto_in:
    req = json.loads(request)
    Capture.buffer_ = io.StringIO()
    error = None
    try:
        if req["mode"] == "doctest":
            test = doctest.DocTestParser().get_doctest(req["code"], namespace, req["name"], req["file"], req["line"])
            report = []
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            result = runner.run(test, out=report.append, clear_globs=False)
            if result.failed:
                error = "".join(report)
        else:
            code = "\n" * req["line"] + req["code"]
            exec(compile(code, req["file"], "exec"), namespace)
    except BaseException:
        error = traceback.format_exc()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    proto_out.write(json.dumps({"output": Capture.buffer_.getvalue(), "error": error}) + "\n")
    proto_out.flush()
'''


class Kernel:
    """One Python process per page; its blocks run in it in order, sharing one namespace."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.log = cwd.parent / f"{cwd.name}.kernel.log"
        self._log_file = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", KERNEL],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            bufsize=1,
        )

    def run(self, block: Block, mode: str) -> tuple[str, str | None]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {
            "code": block.text,
            "mode": mode,
            "name": block.id,
            "file": str(REPO / block.page),
            "line": block.line,
        }
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], block.timeout)
        if not ready:
            self.close()
            raise DocsExampleError(f"{block.id}: python block did not finish in {block.timeout:.0f} s")
        reply = self.proc.stdout.readline()
        if not reply:
            log = self.log.read_text(errors="replace")[-4000:]
            raise DocsExampleError(f"{block.id}: the page's Python process died:\n{log}")
        data = json.loads(reply)
        return data["output"], data["error"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log_file.close()


# -------------------------------------------------------------------------------- the runner


class Page:
    """A page's working directory (examples/ and benchmarks/ copied in), Python process, progress."""

    def __init__(self, page: str, blocks: list[Block], workdir: Path) -> None:
        self.page = page
        self.blocks = blocks
        self.dir = workdir
        self.state = workdir.parent / f"{workdir.name}.state"
        self.state.mkdir(exist_ok=True)
        for folder in COPIED:
            shutil.copytree(REPO / folder, workdir / folder, ignore=shutil.ignore_patterns("__pycache__"))
        self.env = command_env(workdir)
        self.env["DOCS_TEST_STATE"] = str(self.state)
        self.kernel: Kernel | None = None
        self.next = 0  # index of the next block to run
        self.last_python: tuple[Block, str] | None = None  # the last python block and its output
        # With update=True, shown output without `...` that differs is recorded here, not raised:
        # (first line, last line, new lines), 1-based and inclusive (an empty range: last < first).
        self.update = False
        self.updates: list[tuple[int, int, list[str]]] = []

    def _differs(self, where: str, what: str, shown: str, actual: str, first: int, last: int) -> None:
        if self.update and "..." not in shown:
            self.updates.append((first, last, normalize(actual).split("\n") if normalize(actual) else []))
            return
        raise DocsExampleError(mismatch(where, what, shown, actual))

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.close()

    def run_up_to(self, block: Block) -> None:
        """Run the page's blocks before `block` that have not run yet (their failures are kept
        for their own tests), then `block` itself."""
        index = self.blocks.index(block)
        while self.next < index:
            earlier = self.blocks[self.next]
            self.next += 1
            with contextlib.suppress(Exception):
                self._run(earlier)
        if self.next > index:
            raise DocsExampleError(f"{block.id}: already run (tests of one page must run in page order)")
        self.next = index + 1
        self._run(block)

    # -- one block

    def _run(self, block: Block) -> None:
        kind = block.kind
        if kind in ("skip", "ignored"):
            return
        if "setup" in block.directives:
            self._setup(block, block.directives["setup"])
        getattr(self, "_run_" + kind.replace("-", "_"))(block)

    def _setup(self, block: Block, command: str) -> None:
        status, output, _ = run_shell(command, self.dir, self.env, 0, block.timeout)
        if status != 0:
            raise DocsExampleError(f"{block.id}: setup {command!r} failed ({status}):\n{output}")

    def _run_file(self, block: Block) -> None:
        target = self.dir / block.directives["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text, encoding="utf-8")

    def _run_console(self, block: Block) -> None:
        commands = block.commands()
        if not commands:
            raise DocsExampleError(f"{block.id}: console block without a `$ ` command")
        cwd = self.dir / block.directives.get("cwd", ".")
        env = self._env(block)
        status = 0
        for index, command in enumerate(commands):
            where = f"{block.page}:{command.line}"
            shown = "\n".join(command.shown)
            self._introduce_file(command, cwd, shown, where)
            try:
                status, output, cwd = run_shell(command.text, cwd, env, status, block.timeout)
            except subprocess.TimeoutExpired as exc:
                raise DocsExampleError(f"{where}: `{command.text}` did not finish in {block.timeout:.0f} s") from exc
            if not matches(shown, output):
                first = command.last_line + 1
                self._differs(
                    where, f"the output of `{command.text}`", shown, output, first, first + len(command.shown) - 1
                )
            following = commands[index + 1].text if index + 1 < len(commands) else ""
            if status != 0 and not literal_text(shown) and "$?" not in following:
                raise DocsExampleError(
                    f"{where}: `{command.text}` exited {status}, which the docs do not show: show the "
                    f"message that says so, or follow it with `echo $?`:\n{output}"
                )

    def _env(self, block: Block) -> dict[str, str]:
        extra = dict(item.split("=", 1) for item in shlex.split(block.directives.get("env", "")))
        return {**self.env, **extra}

    def _introduce_file(self, command: Command, cwd: Path, shown: str, where: str) -> None:
        """`$ cat FILE` of a FILE that does not exist yet introduces it: the shown text is written."""
        words = shlex.split(command.text, comments=True)
        if len(words) != 2 or words[0] != "cat":
            return
        target = cwd / words[1]
        if target.exists():
            return
        if "..." in shown:
            raise DocsExampleError(f"{where}: `cat {words[1]}` introduces the file but its text is abbreviated")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(normalize(shown) + "\n", encoding="utf-8")

    def _kernel(self) -> Kernel:
        if self.kernel is None:
            self.kernel = Kernel(self.dir, self.env)
        return self.kernel

    def _run_python(self, block: Block) -> None:
        output, error = self._kernel().run(block, "exec")
        self.last_python = (block, output)
        if error:
            raise DocsExampleError(f"{block.id}: python block raised:\n{error}\n--- output ---\n{output}")

    def _run_doctest(self, block: Block) -> None:
        output, error = self._kernel().run(block, "doctest")
        if error:
            raise DocsExampleError(f"{block.id}: doctest failed:\n{error}{output}")

    def _run_output(self, block: Block) -> None:
        if self.last_python is None:
            raise DocsExampleError(f"{block.id}: `output` block without a python block above it")
        source, output = self.last_python
        if not matches(block.text, output):
            what = f"the output of the python block at line {source.line}"
            self._differs(block.id, what, block.text, output, block.line + 1, block.line + block.text.count("\n"))

    def _run_output_of(self, block: Block) -> None:
        command = block.directives["output-of"]
        status, output, _ = run_shell(command, self.dir, self._env(block), 0, block.timeout)
        if not matches(block.text, output):
            what = f"the output of `{command}`"
            self._differs(block.id, what, block.text, output, block.line + 1, block.line + block.text.count("\n"))
        expected_status = int(block.directives.get("exit", "0"))
        if status != expected_status:
            raise DocsExampleError(f"{block.id}: `{command}` exited {status}, not {expected_status}:\n{output}")

    def _run_excerpt(self, block: Block) -> None:
        check_excerpt(block, REPO / block.directives["excerpt"])

    def _run_signature(self, block: Block) -> None:
        check_signatures(block, block.directives["signature"])


# ------------------------------------------------------------------------- excerpt and stubs


def check_excerpt(block: Block, path: Path) -> None:
    """Every line of the block that is not elided (`...`) appears in `path`, in this order."""
    source = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    position = 0
    for line in block.text.splitlines():
        wanted = line.strip()
        if not wanted or "..." in wanted:
            continue
        try:
            position = source.index(wanted, position) + 1
        except ValueError:
            raise DocsExampleError(
                f"{block.id}: excerpt line {wanted!r} is not in {path.relative_to(REPO)} (after line {position})"
            ) from None


def _annotation(node: ast.expr | None) -> str | None:
    return None if node is None else ast.unparse(node)


def _compare_function(where: str, name: str, stub: ast.FunctionDef, real: Any) -> list[str]:
    problems: list[str] = []
    sig = inspect.signature(real)
    # Private parameters (`_name`) are not part of the documented interface.
    real_params = [p for p in sig.parameters.values() if not p.name.startswith("_")]
    args = stub.args
    stub_params: list[tuple[str, str, ast.expr | None, ast.expr | None]] = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults, strict=True):
        stub_params.append((arg.arg, "POSITIONAL_OR_KEYWORD", default, arg.annotation))
    if args.vararg:
        stub_params.append((args.vararg.arg, "VAR_POSITIONAL", None, args.vararg.annotation))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        stub_params.append((arg.arg, "KEYWORD_ONLY", default, arg.annotation))
    if args.kwarg:
        stub_params.append((args.kwarg.arg, "VAR_KEYWORD", None, args.kwarg.annotation))
    documented = [p[0] for p in stub_params]
    actual = [p.name for p in real_params]
    if documented != actual:
        return [f"{where}: {name}{sig}: documented parameters {documented}, real {actual}"]
    for (pname, kind, default, annotation), param in zip(stub_params, real_params, strict=True):
        if kind != param.kind.name:
            problems.append(
                f"{where}: {name}: parameter {pname} is {param.kind.name.lower()}, documented {kind.lower()}"
            )
        real_default = param.default
        if default is None:
            if real_default is not inspect.Parameter.empty:
                problems.append(f"{where}: {name}: parameter {pname} has default {real_default!r}, documented none")
        else:
            try:
                documented_default = ast.literal_eval(default)
            except ValueError:
                documented_default = ast.unparse(default)
            if real_default is inspect.Parameter.empty or documented_default != real_default:
                shown = ast.unparse(default)
                problems.append(f"{where}: {name}: parameter {pname} defaults to {real_default!r}, documented {shown}")
        if annotation is not None and param.annotation is not inspect.Parameter.empty:
            real_ann = (
                param.annotation if isinstance(param.annotation, str) else inspect.formatannotation(param.annotation)
            )
            if _squash(ast.unparse(annotation)) != _squash(real_ann):
                problems.append(
                    f"{where}: {name}: parameter {pname} is `{real_ann}`, documented `{ast.unparse(annotation)}`"
                )
    if stub.returns is not None and sig.return_annotation is not inspect.Signature.empty:
        real_ret = sig.return_annotation
        real_ret = real_ret if isinstance(real_ret, str) else inspect.formatannotation(real_ret)
        if _squash(ast.unparse(stub.returns)) != _squash(real_ret):
            problems.append(f"{where}: {name} returns `{real_ret}`, documented `{ast.unparse(stub.returns)}`")
    return problems


def _squash(annotation: str) -> str:
    return re.sub(r"\s+", "", annotation).replace("'", '"')


def check_signatures(block: Block, module_name: str) -> None:
    """The block's `def` and `class` stubs say what the real objects of `module_name` are."""
    import dataclasses
    import importlib

    module = importlib.import_module(module_name)
    text = block.text
    if re.search(r"\)\s*(->\s*[^:\n]+)?\s*$", text.rstrip()) and not text.rstrip().endswith(":"):
        text = text.rstrip() + ": ..."  # a bare signature without a body
    tree = ast.parse(textwrap.dedent(text))
    problems: list[str] = []
    for node in tree.body:
        where = f"{block.page}:{block.line + node.lineno}"
        if isinstance(node, ast.FunctionDef):
            real = getattr(module, node.name, None)
            if real is None:
                problems.append(f"{where}: {module_name} has no {node.name}")
                continue
            problems += _compare_function(where, node.name, node, real)
        elif isinstance(node, ast.ClassDef):
            real = getattr(module, node.name, None)
            if real is None:
                problems.append(f"{where}: {module_name} has no {node.name}")
                continue
            fields = [n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
            if fields:
                real_fields = [f.name for f in dataclasses.fields(real)]
                if fields != real_fields:
                    problems.append(f"{where}: {node.name} fields are {real_fields}, documented {fields}")
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and ast.unparse(deco.func) == "dataclass":
                    params = real.__dataclass_params__
                    for kw in deco.keywords:
                        if getattr(params, kw.arg) != ast.literal_eval(kw.value):
                            problems.append(f"{where}: {node.name}: dataclass {kw.arg} is {getattr(params, kw.arg)}")
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    method = getattr(real, item.name, None)
                    if method is None:
                        problems.append(f"{where}: {node.name} has no method {item.name}")
                    else:
                        problems += _compare_function(where, f"{node.name}.{item.name}", item, method)
        elif isinstance(node, ast.ImportFrom | ast.Import | ast.Expr):
            continue
        else:
            problems.append(f"{where}: a signature block holds only def and class stubs")
    if problems:
        raise DocsExampleError("\n".join(problems))


# ------------------------------------------------------------------- regenerating shown output


def update_page(page: str, workdir: Path) -> int:
    """Run a page's blocks and write the actual output over shown output that differs and has no
    `...` (abbreviated output is left for a person to edit). Returns the number of places changed.
    `python -m tests.docs_examples --update docs/cli.md`; review the result with `git diff`."""
    before = (REPO / page).read_text(encoding="utf-8")
    runner = Page(page, parse_page(page, before), workdir)
    runner.update = True
    try:
        for block in runner.blocks:
            try:
                runner.run_up_to(block)
            except DocsExampleError as exc:
                print(exc, file=sys.stderr)
    finally:
        runner.close()
    if (REPO / page).read_text(encoding="utf-8") != before:
        raise SystemExit(f"{page} changed while its examples ran; nothing written")
    lines = before.split("\n")
    for first, last, new in sorted(runner.updates, reverse=True):
        lines[first - 1 : last] = new
    (REPO / page).write_text("\n".join(lines), encoding="utf-8")
    return len(runner.updates)


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", metavar="PAGE", nargs="+", required=True, help="pages to regenerate")
    for name in parser.parse_args().update:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "page").mkdir()
            print(f"{name}: {update_page(name, Path(tmp) / 'page')} place(s) updated")
