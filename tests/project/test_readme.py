"""The README's two set-up commands stay the ones CI and users actually run."""

from __future__ import annotations

import re
from pathlib import Path

from tests._support.environment import REPO


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


def test_the_test_command_needs_no_node_and_pytest_installs_nothing() -> None:
    """Issue 30 item 6: the test command stopped before pytest without npm, and pytest ran a second `npm ci` (the
    network) that the README did not mention. Node packages are installed beforehand, by .ci/run; tests that need
    them skip without them, naming the install line (conftest.NODE_INSTALL)."""
    from tests._support.environment import NODE_INSTALL

    assert "npm" not in _commands()[1]
    assert NODE_INSTALL in (REPO / "README.md").read_text().replace("\n", " ")
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    install = next(i for i, line in enumerate(ci) if "npm ci" in line)
    assert install < ci.index(_commands()[1]), ".ci/run installs the Node packages before the tests"
    installers = re.compile(r"""["'](npm|npx|yarn|pnpm)["']""")
    for test in (REPO / "tests").rglob("*.py"):
        if test == Path(__file__) or "node_modules" in test.parts:
            continue
        assert not installers.search(test.read_text(encoding="utf-8")), f"{test} runs a package installer"


def test_the_readme_examples_second_turn_reads_from_the_cache(tmp_path: Path) -> None:
    """Issue 40 item 2: the README's example cached nothing (both turns under claude-sonnet-4-6's 1,024-token
    minimum). Its first block, run as pasted, prints one line per turn; the second says what it read from the
    cache, as the README quotes it."""
    import subprocess
    import sys

    from tests._support.docs_blocks import RUNNER, blocks, offline_env

    page = tmp_path / "readme.md"
    page.write_text(f"```python\n{blocks(REPO / 'README.md').blocks[0].source}```\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(page), "README.md"],
        cwd=tmp_path,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = re.findall(
        r"^turn (\d): ([\d,]+) of ([\d,]+) input tokens read from the cache \((\d+)%\)$", done.stdout, re.M
    )
    assert [turn for turn, *_ in lines] == ["1", "2"], done.stdout
    read, total, share = int(lines[1][1].replace(",", "")), int(lines[1][2].replace(",", "")), int(lines[1][3])
    assert read > 0 and share == round(100 * read / total) and share >= 50
    assert "below" not in done.stderr, "no turn warns that its prompt is below the minimum cacheable length"
    printed = re.search(r"^turn 2: .*$", done.stdout, re.M)
    assert printed is not None and f"`{printed.group(0)}`" in (REPO / "README.md").read_text(), "the README quotes it"


def test_checks_ci_runs_as_steps_run_once_and_pytest_shows_its_slowest_tests() -> None:
    """Issue 40 item 7: `python -m codegen --check` and mypy over the golden records ran both as CI steps and as
    tests that spawned them, twice per CI run; the README did not say how long its test command takes."""
    import tomllib

    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert ".venv/bin/python -m codegen --check" in ci
    assert any("python -m codegen --write-golden" in line for line in ci)
    assert any(line.startswith('MYPYPATH="$GOLDEN_OUT" .venv/bin/python -m mypy') for line in ci)
    spawns = re.compile(r"""sys\.executable,\s*["']-m["'],\s*["'](mypy["']|codegen["'],\s*["']--check)""")
    for test in (REPO / "tests").rglob("*.py"):
        if "node_modules" not in test.parts:
            assert not spawns.search(test.read_text(encoding="utf-8")), f"{test} spawns a check CI runs as a step"
    addopts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert "--durations=15" in addopts.split()
    assert "The tests take about 5 minutes on two idle cores" in (REPO / "README.md").read_text()


def test_files_marked_slow_are_handed_to_the_workers_first() -> None:
    """Issue 40 item 7: pytest-xdist queued whole files by their number of tests, so the kill-and-recover files (few
    tests, each starting processes) began near the end and ran alone on one worker. tests/conftest.py now puts the
    files holding a `slow` test first, each file's tests in their order, and xdist keeps that order."""
    import tomllib
    from types import SimpleNamespace

    from tests.conftest import pytest_collection_modifyitems

    addopts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert {"--dist", "loadfile", "--no-loadscope-reorder"} <= set(addopts.split())

    def item(path: str, name: str, slow: bool = False) -> SimpleNamespace:
        marks = {"slow"} if slow else set()
        return SimpleNamespace(path=Path(path), name=name, get_closest_marker=lambda n: marks & {n} or None)

    items = [item("a.py", "a1"), item("a.py", "a2"), item("b.py", "b1"), item("b.py", "b2", slow=True)]
    items.append(item("c.py", "c"))
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["b1", "b2", "a1", "a2", "c"]
