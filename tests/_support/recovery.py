"""What the kill-and-recover tests share (tests/run/test_recovery.py, test_recovery_dbos.py): the twin they count
served requests on, the uninterrupted run they compare with, the child they kill (durable_agent.py) and the check of
a recovered run."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segue import RunStore
from segue_twin.server import TwinServer
from tests._support import warm_children
from tests._support.durable_agent import LEASE_SECONDS, METADATA, build, served, twin_server
from tests._support.environment import fresh_pg_store

HERE = Path(__file__).resolve().parent


def lines(folder: Path, name: str) -> list[Any]:
    path = folder / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def tools(folder: Path) -> list[str]:
    return [entry["tool"] for entry in lines(folder, "tools.jsonl")]


def store_url(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path}/segue.db"
        RunStore(url).close()
        return url
    store = fresh_pg_store()
    url = store.url
    store.close()
    return url


@pytest.fixture
def twin() -> Iterator[TwinServer]:
    with twin_server() as server:
        yield server


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run as it goes without a kill: the requests the twin served, the tool log, answer, traces and cost."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    with twin_server() as server:
        agent = build(f"sqlite:///{folder}/segue.db", folder, server.url)
        result = asyncio.run(agent.run("settle order 7", metadata=METADATA))
        detail = agent.store.get_run(result.run_id)
        assert detail is not None and result.status == "success"
        return {"served": served(server), "tools": tools(folder), "result": result, "detail": detail}


def child(*args: str) -> subprocess.CompletedProcess[str]:
    """durable_agent.py run with `args` in a process of its own, forked from a parent that imported it, DBOS and
    segue's DBOS adapter once (tests/_support/warm_children.py): each kill is a real SIGKILL of a real process, and
    the process that recovers is another one, without importing them again for every kill (about 5 s of CPU each)."""
    return warm_children.run(HERE / "durable_agent.py", args, preload=PRELOAD, cwd=HERE.parents[1], timeout=120)


#: What durable_agent.py imports (segue, its Anthropic driver and the SDK, the twin) and the DBOS adapter with DBOS.
PRELOAD = ["anthropic", "segue", "segue.providers.anthropic", "segue_twin.server", "dbos", "segue.durable.dbos"]


def kill_at(point: str, url: str, folder: Path, twin_url: str, *dbos: str) -> None:
    done = child(url, str(folder), twin_url, point, *dbos)
    assert done.returncode == -signal.SIGKILL, f"the child was to be killed at {point}: {done.stderr[-2000:]}"
    if not dbos:
        time.sleep(LEASE_SECONDS + 0.1)  # its lease lapses


_TWIN_ID = re.compile(r"(?:toolu|msg)_[0-9a-f]{4}[0-9]{8}")


def _ids_as_given(body: Any) -> Any:
    """A request body with the ids the twin gave its answers and their tool calls as their order of appearance."""
    text = json.dumps(body, sort_keys=True)
    found: dict[str, str] = {}
    for match in _TWIN_ID.findall(text):
        found.setdefault(match, f"id{len(found) + 1}")
    for given, name in found.items():
        text = text.replace(given, name)
    return json.loads(text)


def check_recovered(
    point: str, folder: Path, server: TwinServer, store: RunStore, result: Any, uninterrupted: dict[str, Any]
) -> None:
    """The recovered run against the uninterrupted one, counted from the twin's served requests and the tool log:
    no finished model call or tool call happens twice, a charge in flight is not repeated, and the answer, the
    traces and the cost are the uninterrupted run's (but for the interrupted step)."""
    assert result.status == "success", point
    sent = served(server)
    base = uninterrupted["served"]
    if point == "model":
        # The call in flight was served, its answer lost: sent once more, byte-identical (at least once); the
        # twin names the new answer's call anew, so the next request matches with its ids as given.
        assert len(sent) == 4 and sent[:2] == base[:2] and sent[2] == sent[1], point
        assert _ids_as_given(sent[3]) == _ids_as_given(base[2]), point
    else:
        # Each finished model call sent once; the requests are the uninterrupted run's, byte for byte (the one
        # after an interrupted charge carries the result that says so instead of the charge's).
        same = 2 if point == "tool" else 3
        assert len(sent) == 3 and sent[:same] == base[:same], point
    expected_tools = {
        "tool": ["lookup", "charge"],  # the charge in flight is not repeated
        "tool_safe": ["lookup", "lookup", "charge"],  # the retry_safe lookup in flight runs again
    }.get(point, uninterrupted["tools"])
    assert tools(folder) == expected_tools, point

    detail = store.get_run(result.run_id)
    assert detail is not None and detail.status == "success"
    recorded = [c.provider_request for c in detail.llm_interactions]
    assert recorded == (sent[:1] + sent[2:] if point == "model" else sent), point
    previous = uninterrupted["detail"]
    traces = [t.message for t in detail.traces]
    if point == "tool":
        # The interrupted step: an error result that says so, and the answer quotes it.
        (charge,) = [c for c in detail.tool_calls if c.name == "charge"]
        assert charge.is_error and "interrupted" in (charge.result or "") and "not repeated" in charge.result
        assert "was not repeated" in (result.answer or "")
        return
    assert result.usage == uninterrupted["result"].usage, point
    assert result.cost == uninterrupted["result"].cost, point
    assert result.answer == uninterrupted["result"].answer, point
    assert [(c.name, c.result) for c in detail.tool_calls] == [(c.name, c.result) for c in previous.tool_calls], point
    if point != "model":  # (a re-sent call's answer names its call anew)
        assert traces == [t.message for t in previous.traces], point
