"""Vendor and tool faults inside full agent runs: real drivers on the official SDK clients over
httpx2.MockTransport, a real Agent and a temp-file RunStore.

What must hold for every fault: the run row ends in a terminal status with the vendor's own words in its error,
earlier iterations stay intact (traces, llm_interactions, tool_calls), nothing hangs (each run is bounded with
asyncio.wait_for), and a failed run can be retried once the vendor is healthy again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

import httpx2
import pytest

from segue import Agent, RunStore, tool
from segue._core.contracts import Provider
from segue.generated import RunDetail, RunEvent
from segue.providers import AnthropicProvider, Failover, OpenAIChatProvider, OpenAIResponsesProvider
from segue.tools import TRUNCATION_MARKER
from tests._support.anthropic_bodies import MODEL, answer, anthropic_events, streamed_tool_use, tool_use
from tests._support.helpers import lookup, stored_meta
from tests._support.openai_chat_bodies import completion
from tests._support.responses_bodies import MODEL as RESPONSES_MODEL
from tests._support.vendor_http import Recorder, anthropic_client, json_response, openai_client, sse

T = TypeVar("T")
BOUND = 10.0  # seconds: a fault must end the run long before this; hitting it means a hang

RATE_LIMITED = "Number of request tokens has exceeded your per-minute rate limit"
SERVER_DOWN = "Internal server error while sampling"
VENDOR_ERRORS: dict[int, tuple[str, dict[str, Any]]] = {
    429: ("rate_limit", {"type": "error", "error": {"type": "rate_limit_error", "message": RATE_LIMITED}}),
    500: ("server", {"type": "error", "error": {"type": "api_error", "message": SERVER_DOWN}}),
}
TOO_LONG = "prompt is too long: 212345 tokens > 200000 maximum"


# -- builders -------------------------------------------------------------------------------------------------


async def bounded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, BOUND)


async def collect(events: AsyncIterator[RunEvent]) -> list[RunEvent]:
    return [e async for e in events]


def cut_stream(events: Iterable[tuple[str, Any]], error: Exception | None) -> httpx2.Response:
    """An SSE body that sends `events` and then either ends early (error None) or fails while being read."""
    chunks = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
        if error is not None:
            raise error

    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def anthropic_agent(store: RunStore, rec: Recorder, tools: Iterable[Any] = (lookup,)) -> Agent:
    return Agent(AnthropicProvider(MODEL, client=anthropic_client(rec)), "You look things up.", list(tools), store)


def detail(store: RunStore, run_id: str) -> RunDetail:
    found = store.get_run(run_id)
    assert found is not None, f"run {run_id} was not stored"
    return found


def assert_first_iteration_intact(run: RunDetail, rec: Recorder) -> None:
    """Iteration 1 (a successful lookup) is stored exactly as it happened, whatever failed after it."""
    assert [t.message.role for t in run.traces] == ["user", "assistant", "tool"]
    (first,) = run.llm_interactions
    assert (first.iteration, first.vendor, first.model) == (1, "anthropic", MODEL)
    assert first.provider_request == json.loads(rec.requests[0].content)
    (record,) = run.tool_calls
    assert (record.name, record.result, record.is_error) == ("lookup", "facts about x", False)


# -- vendor errors on iteration 2 ----------------------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(VENDOR_ERRORS))
async def test_vendor_error_on_iteration_two_ends_the_run_in_error(sqlite_store: RunStore, status: int) -> None:
    kind, body = VENDOR_ERRORS[status]
    rec = Recorder(tool_use(("toolu_1", "lookup", {"q": "x"})), json_response(body, status))
    result = await bounded(anthropic_agent(sqlite_store, rec).run("find x"))

    message = body["error"]["message"]
    assert (result.status, result.iterations) == ("error", 2)
    assert message in (result.error or "") and f"{kind} error from anthropic" in (result.error or "")
    assert len(rec.requests) == 2, "max_retries=0: the SDK must not have retried"
    run = detail(sqlite_store, result.run_id)
    assert run.status == "error" and run.error == result.error and run.finished_at is not None
    assert_first_iteration_intact(run, rec)


async def test_sdk_retries_a_429_then_gives_up_on_the_500_that_follows(sqlite_store: RunStore) -> None:
    import anthropic

    _, limited = VENDOR_ERRORS[429]
    _, down = VENDOR_ERRORS[500]
    rec = Recorder(
        tool_use(("toolu_1", "lookup", {"q": "x"})),
        httpx2.Response(429, json=limited, headers={"retry-after-ms": "1"}),
        httpx2.Response(500, json=down, headers={"retry-after-ms": "1"}),
    )
    client = anthropic.AsyncAnthropic(
        api_key="sk-ant-test", http_client=httpx2.AsyncClient(transport=rec.transport()), max_retries=1
    )
    agent = Agent(AnthropicProvider(MODEL, client=client), "p", [lookup], sqlite_store)
    result = await bounded(agent.run("find x"))

    assert len(rec.requests) == 3, "the client's one retry was spent on the 429"
    assert result.status == "error" and SERVER_DOWN in (result.error or "")
    assert RATE_LIMITED not in (result.error or ""), "the error is the last failure, not the retried one"
    assert_first_iteration_intact(detail(sqlite_store, result.run_id), rec)


def failover_pair(primary: Recorder, secondary: Recorder) -> Failover:
    return Failover(
        [
            AnthropicProvider(MODEL, client=anthropic_client(primary)),
            OpenAIChatProvider("gpt-4.1", client=openai_client(secondary)),
        ]
    )


@pytest.mark.parametrize("status", sorted(VENDOR_ERRORS))
async def test_failover_serves_iteration_two_and_records_who_served(sqlite_store: RunStore, status: int) -> None:
    kind, body = VENDOR_ERRORS[status]
    primary = Recorder(tool_use(("toolu_1", "lookup", {"q": "x"})), json_response(body, status))
    secondary = Recorder(json_response(completion({"content": "x is well documented."}, model="gpt-4.1")))
    agent = Agent(failover_pair(primary, secondary), "p", [lookup], sqlite_store)
    result = await bounded(agent.run("find x"))

    assert (result.status, result.answer, result.iterations) == ("success", "x is well documented.", 2)
    assert (len(primary.requests), len(secondary.requests)) == (2, 1)
    run = detail(sqlite_store, result.run_id)
    served = [(i.iteration, i.vendor, i.model) for i in run.llm_interactions]
    assert served == [(1, "anthropic", MODEL), (2, "openai", "gpt-4.1")]
    # Each interaction records the body its own vendor received.
    assert run.llm_interactions[0].provider_request == json.loads(primary.requests[0].content)
    assert run.llm_interactions[1].provider_request == json.loads(secondary.requests[0].content)
    # The secondary got iteration 1's tool call and its result, in its own wire format.
    wire = json.loads(secondary.requests[0].content)["messages"]
    assert wire[-2]["tool_calls"][0]["id"] == "toolu_1"
    assert wire[-1] == {"role": "tool", "tool_call_id": "toolu_1", "content": "facts about x"}
    (note,) = stored_meta(run)["segue.notes"]
    assert note["kind"] == "failover" and (note["iteration"], note["count"]) == (2, 1)
    assert f"anthropic/{MODEL} failed ({kind}: {body['error']['message']})" in note["message"]
    assert result.notes is not None and result.notes[0].message == note["message"]
    assert (run.vendor, run.model) == ("openai", "gpt-4.1"), "the run row names the model that finished it"


async def test_context_length_does_not_fail_over_and_keeps_the_vendors_message(sqlite_store: RunStore) -> None:
    too_long = {"type": "error", "error": {"type": "invalid_request_error", "message": TOO_LONG}}
    primary = Recorder(tool_use(("toolu_1", "lookup", {"q": "x"})), json_response(too_long, 400))
    secondary = Recorder()  # any request to it fails the test (Recorder raises on an unexpected request)
    agent = Agent(failover_pair(primary, secondary), "p", [lookup], sqlite_store)
    result = await bounded(agent.run("find x"))

    assert result.status == "error" and secondary.requests == []
    error = result.error or ""
    assert TOO_LONG in error and "context_overflow error from anthropic" in error
    assert "replay fewer runs" in error, "the error says what to do"
    assert "failed over" not in error
    run = detail(sqlite_store, result.run_id)
    assert "segue.notes" not in stored_meta(run) and result.notes is None
    assert_first_iteration_intact(run, primary)


# -- timeouts -------------------------------------------------------------------------------------------------


def timing_out(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ReadTimeout("timed out reading the response", request=request)


DRIVERS: dict[str, Callable[[Recorder], Provider]] = {
    "anthropic": lambda rec: AnthropicProvider(MODEL, client=anthropic_client(rec)),
    "openai-chat": lambda rec: OpenAIChatProvider("gpt-4.1", client=openai_client(rec)),
    "openai-responses": lambda rec: OpenAIResponsesProvider(RESPONSES_MODEL, client=openai_client(rec)),
}


@pytest.mark.parametrize("driver", sorted(DRIVERS))
async def test_timeout_ends_the_run_with_kind_timeout(sqlite_store: RunStore, driver: str) -> None:
    rec = Recorder(timing_out)
    provider = DRIVERS[driver](rec)
    started = time.perf_counter()
    result = await bounded(Agent(provider, "p", [lookup], sqlite_store).run("find x"))

    assert time.perf_counter() - started < BOUND / 2
    assert result.status == "error"
    assert f"timeout error from {provider.vendor}" in (result.error or "")
    assert "raise the client's timeout" in (result.error or "")
    run = detail(sqlite_store, result.run_id)
    assert run.status == "error" and [t.message.role for t in run.traces] == ["user"] and run.llm_interactions == []


async def test_timeout_while_reading_a_stream_is_kind_timeout(sqlite_store: RunStore) -> None:
    events = anthropic_events([{"type": "text", "text": "Partial"}], "end_turn")[:3]
    rec = Recorder(cut_stream(events, httpx2.ReadTimeout("timed out reading the stream")))
    out = await bounded(collect(anthropic_agent(sqlite_store, rec).stream("find x")))

    last = out[-1]
    assert last.type == "RUN_ERROR" and last.meta["error_type"] == "ProviderError"
    assert "timeout error from anthropic" in (last.error or "")
    assert detail(sqlite_store, last.run_id).status == "error"


class StallingVendor:
    """A loopback HTTP server that accepts each request and then stops answering: before the response headers,
    or after the first SSE events of a stream. Only the client's own timeout can end the wait."""

    def __init__(self, events: list[tuple[str, Any]] | None) -> None:
        self.events = events
        self.stop = asyncio.Event()
        self.requests = 0

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.close()
        await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.requests += 1
        if self.events is not None:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            for name, data in self.events:
                chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
        await self.stop.wait()
        writer.close()


@pytest.mark.parametrize("streaming", [False, True], ids=["before-headers", "mid-stream"])
async def test_vendor_that_stops_answering_is_ended_by_the_clients_timeout(
    sqlite_store: RunStore, streaming: bool
) -> None:
    import anthropic

    events = anthropic_events([{"type": "text", "text": "Partial"}], "end_turn")[:3] if streaming else None
    vendor = StallingVendor(events)
    async with vendor as base_url:
        client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=base_url, max_retries=0, timeout=0.3)
        agent = Agent(AnthropicProvider(MODEL, client=client), "p", [lookup], sqlite_store)
        started = time.perf_counter()
        if streaming:
            out = await bounded(collect(agent.stream("find x")))
            assert out[-1].type == "RUN_ERROR" and out[-1].meta["error_type"] == "ProviderError"
            assert "".join(e.text or "" for e in out if e.type == "TEXT_DELTA") == "Partial"
            run_id, error = out[-1].run_id, out[-1].error or ""
        else:
            result = await bounded(agent.run("find x"))
            run_id, error = result.run_id, result.error or ""
        elapsed = time.perf_counter() - started
        await client.close()

    assert vendor.requests == 1 and elapsed < 3, f"the 0.3 s client timeout ended the wait ({elapsed:.2f} s)"
    assert "timeout error from anthropic" in error
    run = detail(sqlite_store, run_id)
    assert run.status == "error" and run.error == error


# -- streams that break -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind", "says"),
    [
        (httpx2.RemoteProtocolError("peer closed connection without sending complete message body"), "connection", ""),
        (None, "stream", "before message_stop"),
    ],
    ids=["connection-reset", "body-ends-early"],
)
async def test_stream_cut_mid_answer_is_a_run_error_and_retry_recovers(
    sqlite_store: RunStore, error: Exception | None, kind: str, says: str
) -> None:
    partial = anthropic_events([{"type": "text", "text": "The facts about x are"}], "end_turn")[:4]
    rec = Recorder(
        sse(streamed_tool_use("toolu_1", "x")),
        cut_stream(partial, error),
        # the vendor is healthy again when the app retries
        tool_use(("toolu_9", "lookup", {"q": "x"})),
        answer("x is well documented."),
    )
    agent = anthropic_agent(sqlite_store, rec)
    out = await bounded(collect(agent.stream("find x")))

    types = [e.type for e in out]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_ERROR" and types.count("RUN_ERROR") == 1
    assert "".join(e.text or "" for e in out if e.type == "TEXT_DELTA" and e.iteration == 2) == "The facts about x are"
    failed = out[-1]
    assert failed.meta["error_type"] == "ProviderError" and failed.iteration == 2
    assert f"{kind} error from anthropic" in (failed.error or "") and says in (failed.error or "")
    assert failed.result is not None and failed.result.status == "error"
    run = detail(sqlite_store, failed.run_id)
    assert run.status == "error" and run.error == failed.error
    assert_first_iteration_intact(run, rec)
    assert run.llm_interactions[0].provider_request["stream"] is True

    retried = await bounded(agent.retry(failed.run_id))
    assert (retried.status, retried.answer) == ("success", "x is well documented.")
    again = detail(sqlite_store, retried.run_id)
    assert again.retry_of == failed.run_id and again.input == "find x"
    assert [i.iteration for i in again.llm_interactions] == [1, 2]
    assert detail(sqlite_store, failed.run_id).status == "error", "the failed run stays as it was"


async def test_malformed_sse_event_is_a_clear_stream_error(sqlite_store: RunStore) -> None:
    events = anthropic_events([{"type": "text", "text": "Hello"}], "end_turn")[:2]
    rec = Recorder(sse([*events, ("content_block_delta", '{"type": "content_block_delta", "index": 0, ')]))
    out = await bounded(collect(anthropic_agent(sqlite_store, rec).stream("find x")))

    last = out[-1]
    assert last.type == "RUN_ERROR" and last.meta["error_type"] == "ProviderError"
    assert "stream error from anthropic: anthropic stream could not be read" in (last.error or "")
    assert "retry the call" in (last.error or "")
    run = detail(sqlite_store, last.run_id)
    assert run.status == "error" and run.llm_interactions == []


def chat_chunks(arguments: str) -> list[tuple[str | None, Any]]:
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1"}
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    return [
        (None, {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]}),
        (None, {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]


@pytest.mark.parametrize("driver", ["anthropic", "openai-chat"])
async def test_truncated_tool_call_json_in_a_stream_is_a_clear_error(sqlite_store: RunStore, driver: str) -> None:
    cut = '{"q": "ab'
    if driver == "anthropic":
        block = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "partial_json": cut}
        rec = Recorder(sse(anthropic_events([block], "tool_use")))
    else:
        rec = Recorder(sse(chat_chunks(cut), done=True))
    provider = DRIVERS[driver](rec)
    out = await bounded(collect(Agent(provider, "p", [lookup], sqlite_store).stream("find ab")))

    last = out[-1]
    assert last.type == "RUN_ERROR" and last.meta["error_type"] == "ProviderError"
    error = last.error or ""
    assert f"stream error from {provider.vendor}" in error and "not valid JSON" in error
    assert repr(cut) in error, "the error shows the truncated arguments"
    if driver == "anthropic":
        assert "'lookup' (toolu_1)" in error
    run = detail(sqlite_store, last.run_id)
    assert run.status == "error" and run.tool_calls == [], "a half-received call is never executed"


# -- tools that fail ----------------------------------------------------------------------------------------------


async def test_failing_hanging_and_huge_tools_become_results_the_model_sees(sqlite_store: RunStore) -> None:
    @tool
    def boom(q: str) -> str:
        """Always fails.

        Args:
            q: ignored
        """
        raise ValueError("disk on fire")

    @tool(timeout=0.2)
    async def stall(q: str) -> str:
        """Never answers in time.

        Args:
            q: ignored
        """
        await asyncio.sleep(60)
        return "too late"

    @tool(max_result_chars=100)
    def dump(q: str) -> str:
        """Returns far too much.

        Args:
            q: ignored
        """
        return "x" * 5000

    rec = Recorder(
        tool_use(("t_boom", "boom", {"q": "a"}), ("t_stall", "stall", {"q": "b"}), ("t_dump", "dump", {"q": "c"})),
        answer("Two tools failed; the dump was cut."),
    )
    started = time.perf_counter()
    result = await bounded(anthropic_agent(sqlite_store, rec, [boom, stall, dump]).run("try everything"))

    assert time.perf_counter() - started < 5, "the stalled tool was abandoned at its timeout"
    assert (result.status, result.iterations) == ("success", 2)
    marker = TRUNCATION_MARKER.format(total=5000, kept=100)
    # What the model saw on iteration 2:
    sent = json.loads(rec.requests[1].content)["messages"][-1]["content"]
    seen = {b["tool_use_id"]: b for b in sent if b["type"] == "tool_result"}
    assert seen["t_boom"]["is_error"] is True and "tool boom raised ValueError: disk on fire" in str(seen["t_boom"])
    assert seen["t_stall"]["is_error"] is True and "did not finish within 0.2 s" in str(seen["t_stall"])
    assert not seen["t_dump"].get("is_error") and marker.strip() in str(seen["t_dump"])
    # What the store recorded:
    records = {r.name: r for r in detail(sqlite_store, result.run_id).tool_calls}
    assert records["boom"].is_error and records["boom"].result == "tool boom raised ValueError: disk on fire"
    assert records["stall"].is_error and records["stall"].duration_ms < 2000
    assert records["stall"].result == "tool stall did not finish within 0.2 s and was abandoned"
    assert not records["dump"].is_error and records["dump"].result == "x" * 100 + marker
