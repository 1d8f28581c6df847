"""The README's two set-up commands stay the ones CI and users actually run."""

from __future__ import annotations

import re

from conftest import REPO


def _commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text, flags=re.S)


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = _commands()
    assert len(commands) == 2
    assert all("\n" not in c for c in commands), "each set-up step is one command line"


def test_ci_runs_the_readme_test_command() -> None:
    test_command = _commands()[1]
    ci = (REPO / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()
