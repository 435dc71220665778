"""docs/architecture.md is checked against the code it describes: the rule table against
`RULE_ORDER`, the plan table against `PLANS`, the flow against `PREPARE`, the runtime's file list
against the runtime's directories, and every path it names against the tree."""

from __future__ import annotations

import re

from precision_transpiler import pipeline
from precision_transpiler.rules import RULE_ORDER
from tests.helpers import REPO

DOC = REPO / "docs" / "architecture.md"
PACKAGE = REPO / "precision_transpiler"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _rows(section: str, header: str) -> list[list[str]]:
    """The cells of the markdown table whose header row starts with `header`."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header}"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_rule_table_is_rule_order() -> None:
    rows = _rows(_section("Rules"), "rule (`name`)")
    documented = [(name.strip("`"), file.strip("`")) for name, file, *_ in rows]
    assert documented == [(name, f"rules/{module}.py") for name, module in RULE_ORDER]


def test_the_plan_table_is_plans() -> None:
    rows = _rows(_section("The flow"), "source → target")
    documented = {pair: re.findall(r"`(\w+)`", stages) for pair, stages in rows}
    expected = {f"{a} → {b}": [stage.__name__ for stage in stages] for (a, b), stages in pipeline.PLANS.items()}
    expected["otherwise"] = [stage.__name__ for stage in pipeline.OTHERWISE]
    assert documented == expected


def test_the_flow_names_every_prepared_stage_in_order() -> None:
    flow = _section("The flow")
    block = flow[flow.index("```text") : flow.index("```", flow.index("```text") + 3)]
    named = re.findall(r"├─ (\w+)", block)
    assert named[: len(pipeline.PREPARE)] == [stage.__name__ for stage in pipeline.PREPARE]


def test_the_runtime_file_list_is_the_runtime() -> None:
    section = _section("The runtime copied into outputs")
    named = set(re.findall(r"`((?:runtime/)?[\w/]+\.py)`", section))
    for twin in ("flax", "keras"):
        files = {p.name for p in (PACKAGE / "runtime" / twin).glob("*.py") if p.name != "__init__.py"}
        missing = sorted(f for f in files if f not in named and f"runtime/{twin}/{f}" not in named)
        assert missing == [], f"runtime/{twin}/ files the section does not list"
    shared = {f"runtime/{p.name}" for p in (PACKAGE / "runtime").glob("*.py") if p.name != "__init__.py"}
    assert shared <= named
    numbers = re.findall(r"the same (\w+) files", section)
    words = {"twelve": 12, "thirteen": 13, "fourteen": 14, "twenty-four": 24}
    for number in numbers:
        count = len([p for p in (PACKAGE / "runtime" / "flax").glob("*.py") if p.name != "__init__.py"])
        assert words.get(number, int(number) if number.isdigit() else -1) == count, number


def test_every_package_path_the_page_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:[\w]+/)*[\w]+\.py)`", text))
    missing = []
    for path in sorted(named):
        candidates = [PACKAGE / path, REPO / path]
        if not any(c.is_file() for c in candidates) and "/" in path:
            missing.append(path)
    assert missing == []
