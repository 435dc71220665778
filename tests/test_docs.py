"""The documentation's examples are tests: every command and Python example of README.md and
docs/*.md runs, and what the page shows must be what it prints.

Conventions (also in docs/architecture.md, "Documentation examples are tests"):

- **```console blocks** are terminal sessions. A line starting with `$ ` is a command (a line
  ending in `\\` continues it on the next line); the lines up to the next `$ ` are its output,
  stdout and stderr together in the order a terminal shows them. The commands of a block run one
  after another in bash as one session would (`cd` and `$?` carry over), with `.venv/bin` first on
  PATH, so `ptranspile` and `python` are the project's (PYTHONUNBUFFERED=1, so stdout and stderr
  interleave as on a terminal; COLUMNS=80). A command must print exactly what is shown: nothing
  shown means it prints nothing. A command that exits non-zero must show some of what it printed
  literally (the error, `would change: ...`) or be followed by a command that reads `$?`.
- **`...`** in shown output stands for any text (doctest's ELLIPSIS); a line holding only `...`
  for any number of lines. Use it to abbreviate long output and to hide what varies (times,
  temporary paths). Trailing spaces and leading or trailing blank lines are not compared, and the
  start-up log lines of TensorFlow and XLA (absl format) are left out of the actual output.
- **```python blocks** run in one Python process per page, in page order, sharing one namespace
  (a fresh one per page), in the page's directory. A block of `>>>` lines is a doctest (ELLIPSIS
  on). What a block prints (stdout and stderr) is compared only with an `output` block.
- **Each page has its own temporary directory**, with the repository's `examples/` and
  `benchmarks/` copied in; files written by earlier blocks of the page (commands, `file=` blocks,
  Python) are there for later ones. `$ cat FILE` of a FILE that does not exist yet introduces it: the shown text is
  written to FILE first (so pages show their inputs as a terminal would).
- **Directives**: an HTML comment right above a block, `<!-- docs-test: KEY=VALUE ... -->`
  (values with spaces in quotes; several comments add up):
  - `file=PATH`: write the block's text to PATH (a model file, a policy file, a table) instead of
    running it;
  - `output`: the block is what the closest Python block above it prints;
  - `output-of="CMD"` (with `exit=N` when CMD fails on purpose): the block is what the shell
    command CMD prints, for generated code and reports shown with syntax highlighting;
  - `setup="CMD"`: a shell command run in the page directory before the block, which must succeed
    (`$REPO` is the repository root);
  - `cwd=DIR`: the directory, relative to the page directory, a console block starts in;
  - `env="NAME=VALUE ..."`: environment variables for the block's commands;
  - `signature=MODULE`: the block's `def`/`class` stubs are checked against MODULE's real
    functions (parameter names, kinds, defaults, annotations) and dataclasses (fields, flags);
  - `excerpt=PATH`: every line of the block except those with `...` appears in PATH (relative to
    the repository), in this order;
  - `timeout=SECONDS` per command (default 300); `slow`: accepted, and implied (every block is
    `@pytest.mark.slow`: `make test` runs the examples, `make test-fast` does not);
  - `skip reason="..."`: not run. Rare, reasoned (a GPU, the network, minutes to hours of
    benchmarks, installing into the test environment) and counted: at most `MAX_SKIPPED` blocks
    may be skipped, and the list is printed by `test_skipped_blocks_are_few_and_reasoned`.

Blocks of other languages (```text, ```json, ```yaml, ```toml) are prose unless a directive uses them.
Each block is one test, named after its page and line: `pytest tests/test_docs.py -k cli.md`; a
block run on its own first runs the blocks before it on its page. When output changes on purpose,
`python -m tests.docs_examples --update docs/PAGE.md` writes the actual output over shown output
that differs and has no `...`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs_examples import PAGES, REPO, Block, Page, all_blocks, matches, parse_page

MAX_SKIPPED = 7

BLOCKS = all_blocks()
RUN_BLOCKS = [b for b in BLOCKS if b.kind != "ignored"]


def _param(block: Block) -> pytest.param:
    """Every block is `slow`: the blocks run commands and Python in subprocesses (seconds each),
    and a block runs its page's earlier blocks first, so no subset of a page is fast; `make
    test-fast` leaves the examples out, `make test` runs them (`--dist loadfile`: one xdist worker
    runs this file, so a page's blocks share one process and directory, in order)."""
    return pytest.param(block, id=block.id, marks=[pytest.mark.slow])


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Page]]:
    root = tmp_path_factory.mktemp("docs")
    opened: dict[str, Page] = {}

    class Pages(dict):
        def __missing__(self, page: str) -> Page:
            workdir = root / re.sub(r"[^A-Za-z0-9]+", "-", page)
            workdir.mkdir()
            opened[page] = Page(page, [b for b in BLOCKS if b.page == page], workdir)
            self[page] = opened[page]
            return opened[page]

    yield Pages()
    for page in opened.values():
        page.close()


@pytest.mark.parametrize("block", [_param(b) for b in RUN_BLOCKS])
def test_doc_block(block: Block, pages: dict[str, Page]) -> None:
    if block.kind == "skip":
        pytest.skip(f"{block.id}: {block.directives['reason']}")
    pages[block.page].run_up_to(block)


def test_skipped_blocks_are_few_and_reasoned() -> None:
    skipped = [b for b in BLOCKS if b.kind == "skip"]
    listing = "\n".join(f"  {b.id}: {b.directives['reason']}" for b in skipped)
    print(f"\n{len(skipped)} documentation block(s) skipped:\n{listing}")
    assert len(skipped) <= MAX_SKIPPED, f"too many skipped documentation blocks:\n{listing}"


def test_every_page_has_examples() -> None:
    for page in PAGES:
        assert any(b.page == page and b.kind != "ignored" for b in BLOCKS), page


# --------------------------------------------------------------------- the conventions themselves


def test_matching_conventions() -> None:
    assert matches("a\nb", "a\nb  \n\n")
    assert not matches("a\nb", "a\nc")
    assert matches("took ... s", "took 1.5 s")
    assert matches("head\n...\ntail", "head\ntail")
    assert matches("head\n...\ntail", "head\n1\n2\ntail")
    assert not matches("head\n...\ntail", "head\n1\n2\ntai")
    assert matches("a...", "a\nb\nc")
    assert not matches("x...y...z...w...v...u", "x" + "y z " * 5000)  # linear: no regex backtracking


def test_parsing_conventions(tmp_path: Path) -> None:
    text = (
        'intro\n\n<!-- docs-test: setup="touch x" cwd=sub -->\n```console\n$ echo a \\\n  b\nab\n$ false\n'
        '$ echo $?\n1\n```\n\n```text\nprose\n```\n<!-- docs-test: skip reason="needs a GPU" -->\n'
        "```python\nimport cupy\n```\n"
    )
    console, prose, skipped = parse_page("x.md", text)
    assert console.directives == {"setup": "touch x", "cwd": "sub"} and console.kind == "console"
    commands = console.commands()
    assert [c.text for c in commands] == ["echo a \\\n  b", "false", "echo $?"]
    assert commands[0].shown == ["ab"] and commands[1].shown == [] and commands[2].shown == ["1"]
    assert commands[0].line == 5
    assert prose.kind == "ignored" and skipped.kind == "skip"
    with pytest.raises(ValueError, match="unknown docs-test key"):
        parse_page("x.md", "<!-- docs-test: skp -->\n```python\n```\n")
    with pytest.raises(ValueError, match="needs reason"):
        parse_page("x.md", "<!-- docs-test: skip -->\n```python\n```\n")


def test_corpus_tables_are_the_kept_results() -> None:
    """The real-model corpus tables of docs/benchmarks.md are what `benchmarks/corpus.py --render`
    prints from the kept `benchmarks/results/corpus.json`, line for line."""
    proc = subprocess.run(
        [sys.executable, "benchmarks/corpus.py", "--render", "benchmarks/results/corpus.json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    page = set((REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines())
    rendered = [line for line in proc.stdout.splitlines() if line.strip()]
    missing = [line for line in rendered if line not in page]
    assert rendered and not missing, "not in docs/benchmarks.md:\n" + "\n".join(missing)


def _heading_anchors(text: str) -> set[str]:
    """The anchors GitHub makes for a page's headings (lowercase, punctuation dropped, spaces to
    hyphens, `-1`, `-2` for repeats)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in re.sub(r"^```.*?^```", "", text, flags=re.M | re.S).splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_links_point_at_existing_files_and_headings() -> None:
    """Every relative link of README.md and docs/*.md names a file that exists and, with `#`, a
    heading of that page."""
    broken = []
    for page in PAGES:
        path = REPO / page
        text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
        text = re.sub(r"`[^`\n]*`", "", text)  # code spans hold no links
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(f"{page}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in _heading_anchors(dest.read_text(encoding="utf-8")):
                broken.append(f"{page}: {target}: no such heading")
    assert not broken, "\n".join(broken)


# ------------------------------------------------------------------ no pointers users cannot follow

CHECKED_TREES = ("README.md", "docs", "precision_transpiler", "mappings", "benchmarks", "examples")
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".txt", ".sh", ".cfg", ".ini"}
FORBIDDEN = re.compile(r"(?<![\w-])REFERENCE\.md|\.\./shared|\bissues? #?\d+", re.IGNORECASE)


def _shipped_text_files() -> Iterator[Path]:
    for name in CHECKED_TREES:
        path = REPO / name
        if path.is_file():
            yield path
            continue
        for file in sorted(path.rglob("*")):
            if file.is_file() and file.suffix in TEXT_SUFFIXES and "__pycache__" not in file.parts:
                yield file


def test_no_pointers_to_files_users_do_not_have() -> None:
    """Facts the project relies on are in docs/precision-reference.md with their original
    sources: nothing points at a file outside the repository or at issue numbers users cannot
    look up."""
    found = []
    for file in _shipped_text_files():
        for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                found.append(f"{file.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
