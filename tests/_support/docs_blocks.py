"""Run a documentation page's Python blocks as a reader pastes them into `python -m asyncio`.

`python tests/_support/docs_blocks.py PAGE` runs every ```python block of PAGE (a Markdown file) in order, in one
namespace, in one event loop, with top-level `await` allowed, in the current working directory. A block preceded by
`<!-- no-run: reason -->` is skipped. Line numbers in tracebacks are the page's own (the file name is the page).
Before each block it prints `BLOCK index line` so a caller that has to stop a hung page can say which block hung;
on a failure it prints `FAILED index line: error` and exits 1.

`--batch OUT PAGE SHOWN ...` runs many pages, each in a child forked from one process that imported segue and the
vendor SDKs once (importing them is most of a small page's time), each in its own directory under OUT.
`tests/project/test_docs_blocks.py` imports `blocks()` to check the markers, and runs every page through `--batch`.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import codeop
import importlib
import inspect
import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_NO_RUN = re.compile(r"^\s*<!--\s*no-run\s*:(?P<reason>.*?)-->\s*$")
_NO_RUN_LOOSE = re.compile(r"^\s*<!--\s*no-run\b", re.IGNORECASE)
#: This file, run by the tests as a script.
RUNNER = Path(__file__)
#: Environment variables that would point an example at a real vendor.
_VENDOR_ENV = re.compile(
    r"^(.*_API_KEY|ANTHROPIC_AUTH_TOKEN|(ANTHROPIC|OPENAI|OPENROUTER)_BASE_URL|SEGUE_CATALOG_PATH)$"
)


def offline_env() -> dict[str, str]:
    """This process's environment without what would point a page at a real vendor, as on a fresh install."""
    env = {k: v for k, v in os.environ.items() if not _VENDOR_ENV.match(k)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass(frozen=True)
class Block:
    index: int  #: 1-based, among the page's Python blocks
    line: int  #: 1-based line of the opening fence
    source: str
    no_run: str | None  #: the marker's reason ("" when the marker has none); None: the block runs


@dataclass(frozen=True)
class Page:
    blocks: list[Block]
    #: Problems with the page's markers: (line, what is wrong).
    marker_errors: list[tuple[int, str]]


def blocks(path: Path) -> Page:
    """The page's ```python blocks, each with its no-run reason if a marker precedes it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    errors: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None  # a no-run marker waiting for its block: (line, reason)
    i = 0
    while i < len(lines):
        text = lines[i]
        marker = _NO_RUN.match(text)
        if marker:
            if pending is not None:
                errors.append((pending[0], "no-run marker not followed by a ```python block"))
            pending = (i + 1, marker.group("reason").strip())
            i += 1
            continue
        if _NO_RUN_LOOSE.search(text):
            errors.append((i + 1, "malformed marker: write it alone on its line as <!-- no-run: reason -->"))
        fence = _FENCE.match(text)
        if fence is None:
            if text.strip() and pending is not None:
                errors.append((pending[0], "no-run marker not followed by a ```python block"))
                pending = None
            i += 1
            continue
        # A fenced block of any language: find its end so fences inside it are not read as blocks.
        opening, indent = fence.group("fence"), len(fence.group("indent"))
        end = i + 1
        while end < len(lines):
            closing = _FENCE.match(lines[end])
            if closing and closing.group("fence")[0] == opening[0] and len(closing.group("fence")) >= len(opening):
                if not closing.group("info").strip():
                    break
            end += 1
        language = fence.group("info").strip().split(" ")[0].lower()
        if language in ("python", "py"):
            body = [line[indent:] if line[:indent].strip() == "" else line for line in lines[i + 1 : end]]
            no_run = pending[1] if pending is not None else None
            found.append(Block(len(found) + 1, i + 1, "\n".join(body) + "\n", no_run))
        elif pending is not None:
            errors.append((pending[0], f"no-run marker precedes a ```{language} block, not a ```python one"))
        pending = None
        i = end + 1
    if pending is not None:
        errors.append((pending[0], "no-run marker not followed by a ```python block"))
    return Page(found, errors)


async def run_page(path: Path, shown: str) -> int:
    """Run the page's blocks in one namespace, as `python -m asyncio` would; 0 if all ran, else 1."""
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__}
    for block in blocks(path).blocks:
        if block.no_run is not None:
            print(f"SKIPPED {block.index} {block.line}: {block.no_run}", flush=True)
            continue
        print(f"BLOCK {block.index} {block.line}", flush=True)
        try:
            for code in repl_statements(block, shown):
                outcome = eval(code, namespace)
                if inspect.CO_COROUTINE & code.co_flags:
                    await outcome
        except BaseException as exc:
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
                tb = tb.tb_next  # the reader's traceback starts at the page, as in the REPL
            if isinstance(exc, SyntaxError):
                tb = None  # raised by the compiler, not by the page's code
            traceback.print_exception(type(exc), exc, tb)
            where = exc.lineno if isinstance(exc, SyntaxError) else _page_line(exc, shown)
            at = f", page line {where}" if where is not None else ""
            why = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, SyntaxError):
                why += (
                    " (as pasted into python -m asyncio: a statement right after an indented block needs a blank line)"
                )
            print(f"FAILED {block.index} {block.line}{at}: {why}", flush=True)
            return 1
    return 0


def repl_statements(block: Block, shown: str) -> Iterator[CodeType]:
    """The block's code as `python -m asyncio` compiles it when the block is pasted: line by line, each statement
    run as soon as it is complete ("single" mode: an expression's value is printed), `await` allowed. As in that
    REPL, a statement right after an indented block, with no blank line between, is a SyntaxError. Line numbers
    are the page's own."""
    compiler = codeop.CommandCompiler()
    compiler.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    lines = block.source.splitlines()
    start, buffer = 0, []
    for number, line in enumerate([*lines, ""]):  # the reader presses Enter once more after pasting
        if not buffer and not line.strip():
            continue
        if not buffer:
            start = number
        buffer.append(line)
        # Pad with newlines so the compiled code's line numbers are the page's own (the block starts after its fence).
        code = compiler("\n" * (block.line + start) + "\n".join(buffer), shown, "single")
        if code is not None:
            yield code
            buffer = []


def _page_line(exc: BaseException, shown: str) -> int | None:
    """The innermost line of the page that the traceback passes through."""
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == shown]
    return lines[-1] if lines else None


#: What `--batch` imports once before it forks a child per page: importing these is most of a small page's time.
PRELOAD = (
    "anthropic",
    "openai",
    "segue",
    "segue.catalog",
    "segue.apps.dashboard",
    "segue.providers.anthropic",
    "segue.providers.openai_chat",
    "segue.providers.openai_responses",
    "segue.twin",
)


def batch(out: Path, timeout: float, jobs: int, pages: list[tuple[Path, str]]) -> None:
    """Run pages in forked children, `jobs` at a time, each in its own directory `out/N.cwd`, writing `out/N.out`,
    `out/N.err` and `out/N.rc` (the exit code, or `timeout`). The children start from a process that has imported
    segue and the vendor SDKs but run nothing, so each page still starts from a fresh interpreter's state."""
    for name in PRELOAD:
        importlib.import_module(name)
    waiting = list(enumerate(pages))
    running: dict[int, tuple[int, float]] = {}  # pid -> (page number, deadline)
    while waiting or running:
        while waiting and len(running) < jobs:
            number, (path, shown) = waiting.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(path, shown, out / str(number))
            running[pid] = (number, time.monotonic() + timeout)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            number, _ = running.pop(pid)
            (out / f"{number}.rc").write_text(str(os.waitstatus_to_exitcode(status)))
            continue
        for pid, (number, deadline) in list(running.items()):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                running.pop(pid)
                (out / f"{number}.rc").write_text("timeout")
        time.sleep(0.02)


def _child(path: Path, shown: str, stem: Path) -> None:
    code = 1
    try:
        cwd = stem.with_suffix(".cwd")
        cwd.mkdir()
        os.chdir(cwd)
        for fd, suffix in ((1, ".out"), (2, ".err")):
            target = os.open(stem.with_suffix(suffix), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        code = asyncio.run(run_page(path, shown))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Run a Markdown page's Python blocks as pasted.")
    parser.add_argument("page", nargs="*", help="PAGE.md [SHOWN_NAME] (one page), or with --batch: PAGE SHOWN ...")
    parser.add_argument("--batch", type=Path, metavar="OUT", help="run pairs of PAGE SHOWN into folder OUT")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a page may take (--batch)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="pages at a time (--batch)")
    args = parser.parse_args(argv[1:])
    if args.batch is not None:
        if not args.page or len(args.page) % 2:
            parser.error("--batch takes pairs of PAGE SHOWN_NAME")
        pairs = [(Path(args.page[i]), args.page[i + 1]) for i in range(0, len(args.page), 2)]
        batch(args.batch, args.timeout, max(1, args.jobs), pairs)
        return 0
    if len(args.page) not in (1, 2):
        parser.error("give PAGE.md and optionally the name to show for it")
    path = Path(args.page[0])
    return asyncio.run(run_page(path, args.page[1] if len(args.page) == 2 else str(path)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
