"""`history=` is typed to take what it accepts at run time: the vendor SDKs' TypedDicts (a `list[MessageParam]`
is not a `list[dict[str, Any]]` to a type checker) and their response objects, checked by mypy --strict."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests._support.environment import REPO

PROBE = """
import anthropic
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from segue import Agent, Message


async def use(
    agent: Agent,
    a: list[MessageParam],
    c: list[ChatCompletionMessageParam],
    r: list[ResponseInputItemParam],
    m: list[Message],
    reply: anthropic.types.Message,
) -> None:
    await agent.run("q", history=a)
    await agent.run("q", history=c)
    await agent.run("q", history=r)
    await agent.run("q", history=m)
    await agent.run("q", history=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    await agent.run("q", history=[reply])
    agent.run_sync("q", history=a)
    async for _ in agent.stream("q", history=c):
        pass
"""


@pytest.mark.slow  # mypy over the vendor SDKs' types: 99 s measured on a loaded machine with a cold .mypy_cache
def test_history_accepts_the_sdk_message_types_under_mypy_strict(tmp_path: Path) -> None:
    from mypy import api

    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    started = time.monotonic()
    out, err, status = api.run(
        ["--strict", "--python-version", "3.11", "--cache-dir", str(REPO / ".mypy_cache"), str(probe)]
    )
    assert status == 0, out + err
    assert "Success" in out, (out, time.monotonic() - started)
    # The check can fail: a wrong type is reported.
    probe.write_text(PROBE.replace("history=a)", "history=[1])", 1))
    out, _, status = api.run(["--strict", "--cache-dir", str(REPO / ".mypy_cache"), str(probe)])
    assert status == 1 and 'expected "Message | Mapping[str, Any] | SdkMessage"' in out
