"""What the `ptranspile` commands (convert, `verify`, `weights`) share: exit codes, framework
names and an argument parser whose errors are one line.

A module of its own so that the subcommands' modules do not import the main command's (and the
main command imports them only when a subcommand runs)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from precision_transpiler.mappings.model import FRAMEWORKS

FRAMEWORK_CHOICES: tuple[str, ...] = FRAMEWORKS
EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse prints a usage block then the error; we print one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see --help)\n")
