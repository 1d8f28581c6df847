"""Every ```python block in README.md and docs/*.md runs as pasted, offline, with no API key.

Each page runs in its own process (forked by `tests/_support/docs_blocks.py --batch` from one that imported segue and
the vendor SDKs, and ran nothing), in a fresh working directory (so `segue.db` and other files of one page never meet
another's), its blocks in order in one namespace with top-level `await` allowed, as in `python -m asyncio`. Vendor
keys are removed from the environment, as on a fresh install: a driver built without `client=` then refuses, so a
page runs offline only where it visibly passes a twin client (`client=Twin().anthropic_client()`); nothing here
stands the twin in for it. Pages run in parallel, one per core; each page is one test.

A block that cannot run offline is preceded by `<!-- no-run: reason -->`; such blocks stay under 10% of all
blocks and each marker gives its reason. The rule is written down for doc authors in README.md ("Contributing").
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest

from tests._support.docs_blocks import RUNNER, blocks, offline_env
from tests._support.environment import REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
#: The pages with at least one block to run; each is one test.
RUNNABLE = [page for page in PAGES if any(block.no_run is None for block in blocks(page).blocks)]
#: A page that takes longer than this has hung (a server that never returns); the test names the block.
PAGE_TIMEOUT = 120
#: Share of blocks that may be marked no-run.
NO_RUN_SHARE = 0.10


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


@cache
def _results() -> dict[Path, tuple[int | None, str, str]]:
    """Every page with runnable blocks, run once: (exit code, or None when it hung; stdout; stderr)."""
    runnable = RUNNABLE
    with tempfile.TemporaryDirectory(prefix="segue-docs-") as out:
        pairs = [arg for page in runnable for arg in (str(page), _name(page))]
        subprocess.run(
            [sys.executable, str(RUNNER), "--batch", out, "--timeout", str(PAGE_TIMEOUT), *pairs],
            cwd=out,
            env=offline_env(),
            timeout=PAGE_TIMEOUT * len(runnable) + 60,
            check=True,
        )
        folder, results = Path(out), {}
        for number, page in enumerate(runnable):
            rc = (folder / f"{number}.rc").read_text()
            output = (folder / f"{number}.out").read_text(encoding="utf-8", errors="replace")
            errors = (folder / f"{number}.err").read_text(encoding="utf-8", errors="replace")
            results[page] = (None if rc == "timeout" else int(rc), output, errors)
        return results


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_page_blocks_run_as_pasted(page: Path) -> None:
    code, out, err = _results()[page]
    if code == 0:
        assert "FAILED" not in out
        return
    started = re.findall(r"^BLOCK (\d+) (\d+)$", out, re.MULTILINE)
    failed = re.search(r"^FAILED (\d+) (\d+)(.*)$", out, re.MULTILINE)
    tail = "\n".join(err.strip().splitlines()[-25:])
    if code is None:
        index, line = started[-1] if started else ("?", "?")
        pytest.fail(f"{_name(page)} block {index} (line {line}) did not finish in {PAGE_TIMEOUT} s\n{tail}")
    if failed:
        pytest.fail(f"{_name(page)} block {failed.group(1)} (line {failed.group(2)}){failed.group(3)}\n\n{tail}")
    pytest.fail(f"{_name(page)}: the runner exited {code}\n{out}\n{tail}")


def test_no_run_markers_are_rare_and_explained() -> None:
    total, skipped, problems = 0, [], []
    for page in PAGES:
        parsed = blocks(page)
        total += len(parsed.blocks)
        problems += [f"{_name(page)} line {line}: {what}" for line, what in parsed.marker_errors]
        for block in parsed.blocks:
            if block.no_run is None:
                continue
            skipped.append(f"{_name(page)} block {block.index} (line {block.line}): {block.no_run or '(no reason)'}")
            if not block.no_run:
                problems.append(
                    f"{_name(page)} block {block.index} (line {block.line}): no-run marker without a reason"
                )
    assert not problems, "\n".join(problems)
    assert total > 0
    assert len(skipped) < NO_RUN_SHARE * total, (
        f"{len(skipped)} of {total} python blocks are marked no-run (must stay under {NO_RUN_SHARE:.0%}):\n"
        + "\n".join(skipped)
    )


def _page(folder: Path, text: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A page written into ``folder`` and run there on its own, shown as page.md."""
    page = folder / "page.md"
    page.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(page), "page.md"], cwd=folder, capture_output=True, text=True
    )
    return page, done


def test_the_block_reader_finds_markers_and_page_lines(tmp_path: Path) -> None:
    page, done = _page(
        tmp_path,
        "# t\n\n```python\nx = 1\n```\n\n````md\n```python\nnot a block\n```\n````\n\n"
        "<!-- no-run: serves forever -->\n```python\nwhile True: pass\n```\n\n<!-- no-run: -->\n\n```sh\nls\n```\n\n"
        "```python\nraise ValueError(x)\n```\n",
    )
    parsed = blocks(page)
    assert [(b.index, b.line, b.no_run) for b in parsed.blocks] == [
        (1, 3, None),
        (2, 14, "serves forever"),
        (3, 24, None),
    ]
    assert parsed.marker_errors == [(18, "no-run marker precedes a ```sh block, not a ```python one")]
    assert done.returncode == 1
    assert "FAILED 3 24, page line 25: ValueError: 1" in done.stdout
    assert "SKIPPED 2 14: serves forever" in done.stdout
    assert 'File "page.md", line 25' in done.stderr


def test_top_level_await_and_one_namespace_per_page(tmp_path: Path) -> None:
    _, done = _page(
        tmp_path,
        "```python\nimport asyncio\n\nvalue = await asyncio.sleep(0, result=41)\n```\n\n"
        "```python\nassert value + 1 == 42\nloop = asyncio.get_running_loop()\n```\n\n"
        "```python\nassert await asyncio.sleep(0, result=loop) is asyncio.get_running_loop()\n```\n",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["BLOCK 1 1", "BLOCK 2 7", "BLOCK 3 12"]


def test_a_hung_page_is_stopped_and_the_others_still_run(tmp_path: Path) -> None:
    hung, fine = tmp_path / "hung.md", tmp_path / "fine.md"
    hung.write_text("```python\nx = 1\n```\n\n```python\nimport time\n\ntime.sleep(60)\n```\n", encoding="utf-8")
    fine.write_text("```python\nprint('ran')\n```\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    args = ["--batch", str(out), "--timeout", "3", str(hung), "hung.md", str(fine), "fine.md"]
    subprocess.run([sys.executable, str(RUNNER), *args], check=True, timeout=60)
    assert (out / "0.rc").read_text() == "timeout"
    assert (out / "0.out").read_text().splitlines() == ["BLOCK 1 1", "BLOCK 2 5"]  # the test names block 2
    assert (out / "1.rc").read_text() == "0" and (out / "1.out").read_text() == "BLOCK 1 1\nran\n"


def test_a_paste_the_repl_would_reject_fails_like_the_repl(tmp_path: Path) -> None:
    """`python -m asyncio` reads a paste line by line: a statement right after an indented block is a SyntaxError
    there, although the same lines run as a file. Expressions print their value, as at the prompt."""
    _, done = _page(
        tmp_path,
        "```python\nfor i in range(2):\n    x = i\n\nx + 40\n```\n\n```python\nif x:\n    y = 1\nprint(y)\n```\n",
    )
    assert done.returncode == 1
    assert done.stdout.splitlines()[:3] == ["BLOCK 1 1", "41", "BLOCK 2 8"]
    assert "FAILED 2 8, page line 11: SyntaxError: invalid syntax" in done.stdout
    assert "needs a blank line" in done.stdout


def test_a_block_without_a_twin_client_fails_offline_rather_than_meeting_a_hidden_twin(tmp_path: Path) -> None:
    """The runner adds no stand-in: a driver a page builds without `client=` refuses in the offline environment,
    naming the key and the twin client the page should show."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nfrom segue.providers import AnthropicProvider\n\nAnthropicProvider('claude-sonnet-4-6')\n```\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(RUNNER), str(page), "page.md"],
        cwd=tmp_path,
        env=offline_env(),
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED 1 1" in done.stdout and "ProviderError" in done.stdout, done.stdout
    assert "ANTHROPIC_API_KEY" in done.stdout + done.stderr and "Twin().anthropic_client()" in done.stderr
