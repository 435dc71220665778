"""Copy the CI slices of the wild and the harvested corpus out of the pinned distributions.

The test-suite converts and verifies a few cases of each corpus on every CI run, without
installing their distributions: their files are kept in benchmarks/wild/vendored/ and
benchmarks/harvest/vendored/, copied verbatim by this script from the installed, pinned
distributions (each corpus' vendored.yaml says which files, its requirements.txt pins the
versions), next to each distribution's licence.

    python benchmarks/wild/vendor.py            # (re)write benchmarks/wild/vendored/
    python benchmarks/wild/vendor.py --check    # exit 1 if a copy differs from the installed file
    python benchmarks/wild/vendor.py --corpus harvest --site build/harvest-site [--check]

Refreshing a slice after a version bump is `make bench-wild` (or `make bench-harvest`, which
installs into a folder of its own: `--site`) and this.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
SPEC = HERE / "vendored.yaml"
ROOT = HERE / "vendored"
PINS = HERE / "requirements.txt"
#: corpus -> (its folder under benchmarks/, the command that installs its pins)
CORPORA = {"wild": (HERE, "make bench-wild"), "harvest": (HERE.parent / "harvest", "make bench-harvest")}


@dataclass
class Vendored:
    """One distribution's share of the slice (an entry of vendored.yaml)."""

    distribution: str
    package: str
    licence: str
    files: list[str]
    stubs: list[str] = field(default_factory=list)


def load(spec: Path = SPEC) -> list[Vendored]:
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    return [Vendored(**item) for item in data["packages"]]


def pins(path: Path = PINS) -> dict[str, str]:
    """distribution -> pinned version, from `name==version` lines."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\s*([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


def stub_text(item: Vendored, rel: str, pins_path: Path = PINS) -> str:
    return (
        f'"""{item.distribution} {pins(pins_path)[item.distribution]}: this package\'s own {rel} is not vendored '
        '(it imports modules the CI slice does not carry)."""\n'
    )


def _licence_file(dist: md.Distribution, licence: str) -> Path:
    for entry in dist.files or ():
        if ".dist-info/" in str(entry) and str(entry).split(".dist-info/", 1)[1] == licence:
            return Path(str(dist.locate_file(entry)))
    raise FileNotFoundError(f"{dist.metadata['Name']}: no {licence} in its .dist-info")


def sources(item: Vendored, corpus: str = "wild", site: str | None = None) -> dict[Path, Path | str]:
    """Destination under vendored/ -> the installed file to copy (or a stub's text); `site`: the
    folder the corpus' distributions are installed in, when not on sys.path."""
    folder, install = CORPORA[corpus]
    root, pins_path = folder / "vendored", folder / "requirements.txt"
    found = list(md.distributions(name=item.distribution, path=[site])) if site else []
    try:
        dist = found[0] if found else md.distribution(item.distribution)
    except md.PackageNotFoundError:
        raise SystemExit(f"{item.distribution} is not installed: `{install}` first") from None
    wanted = pins(pins_path)[item.distribution]
    if dist.version != wanted:
        raise SystemExit(f"{item.distribution} {dist.version} is installed, the pin is {wanted}: `{install}` first")
    package_root = Path(str(dist.locate_file(item.package)))
    plan: dict[Path, Path | str] = {root / item.package / rel: package_root / rel for rel in item.files}
    plan.update({root / item.package / rel: stub_text(item, rel, pins_path) for rel in item.stubs})
    plan[root / item.package / "LICENSE"] = _licence_file(dist, item.licence)
    return plan


def readme(items: list[Vendored], corpus: str = "wild") -> str:
    folder = CORPORA[corpus][0]
    name = "the wild corpus" if corpus == "wild" else "the harvested corpus"
    spec = f"benchmarks/{folder.name}/vendored.yaml"
    flags = "" if corpus == "wild" else f" --corpus {corpus}"
    lines = [
        f"# Vendored slice of {name}",
        "",
        f"Written by `python benchmarks/wild/vendor.py{flags}` from {spec}; do not edit.",
        "The files are verbatim copies from these distributions, each under its own licence",
        "(the LICENSE file in its folder); the `__init__.py` stubs replace package initialisers",
        "that import modules the slice does not carry.",
        "",
        "| distribution | version | package | files |",
        "|---|---|---|---|",
    ]
    versions = pins(folder / "requirements.txt")
    for item in items:
        lines.append(
            f"| {item.distribution} | {versions[item.distribution]} | {item.package} | {', '.join(item.files)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare the copies with the installed files")
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="wild")
    parser.add_argument("--site", help="the folder the distributions are installed in (the harvest's --site)")
    args = parser.parse_args(argv)
    folder = CORPORA[args.corpus][0]
    root = folder / "vendored"
    items = load(folder / "vendored.yaml")
    plan: dict[Path, Path | str] = {}
    for item in items:
        plan.update(sources(item, args.corpus, args.site))
    plan[root / "README.md"] = readme(items, args.corpus)
    differ = []
    for dest, origin in sorted(plan.items()):
        text = origin if isinstance(origin, str) else origin.read_text(encoding="utf-8")
        if args.check:
            if not dest.is_file() or dest.read_text(encoding="utf-8") != text:
                differ.append(dest.relative_to(root))
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
    if args.check:
        for path in differ:
            print(f"{path}: differs from the pinned distribution", file=sys.stderr)
        return 1 if differ else 0
    print(f"wrote {len(plan)} files under {root.relative_to(HERE.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
