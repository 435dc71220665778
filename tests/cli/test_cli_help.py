"""The help texts agree with the parsers: every option a help text names is one its command accepts,
and the policy help lists every policy the command knows."""

from __future__ import annotations

import argparse
import re

import pytest

from precision_transpiler.cli import build_parser
from precision_transpiler.cli_verify import build_verify_parser
from precision_transpiler.cli_weights import build_weights_parser
from precision_transpiler.precision.policy import BUILTIN_POLICIES, _builtin_specs

PARSERS = {
    "ptranspile": build_parser,
    "ptranspile verify": build_verify_parser,
    "ptranspile weights": build_weights_parser,
}
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _help_texts(parser: argparse.ArgumentParser) -> str:
    """What --help prints, before wrapping (argparse breaks lines at hyphens too)."""
    texts = [parser.description or "", parser.epilog or ""]
    texts += [group.description or "" for group in parser._action_groups]
    texts += [action.help or "" for action in parser._actions]
    return "\n".join(texts)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_option_named_in_help_is_accepted(name: str) -> None:
    parser = PARSERS[name]()
    own = set(parser._option_string_actions)
    text = _help_texts(parser)
    # the main command's epilog quotes the subcommands' command lines, with options of their own
    text = re.sub(r"'ptranspile (verify|weights) [^']*'", "", text)
    named = set(OPTION.findall(text))
    assert named, text
    assert not named - own, f"{name} --help names options it rejects: {sorted(named - own)}"


def test_policy_help_lists_every_builtin_policy_and_auto() -> None:
    parser = build_parser()
    (action,) = [a for a in parser._actions if "--policy" in a.option_strings]
    names = set(BUILTIN_POLICIES) | set(_builtin_specs()) | {"auto"}
    listed = set(re.findall(r"[a-z0-9][a-z0-9-]*", action.help or ""))
    assert not names - listed, f"--policy help omits {sorted(names - listed)}"
