"""The replayed prefix is built once per run (contracts.WirePrefix): every later request of the run continues from
the wire the first one built, and the bodies stay byte-identical to a body built from scratch."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

import segue.replay.planner
import segue.replay.prefix_rule
import segue.store.rows
from segue import Agent, RunStore
from segue._core.contracts import FRAGMENT_META_KEY, REPLAYED_META_KEY, ProviderRequest, WirePrefix
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from segue.generated.wire import anthropic as g_anthropic
from segue.providers import AnthropicProvider
from segue.wire.anthropic import request as anthropic
from segue.wire.breakpoints import BreakpointCache
from segue.wire.openai_chat import request as openai_chat
from segue.wire.openai_responses import request as openai_responses
from segue.wire.openrouter import request as openrouter
from tests._support.anthropic_bodies import MODEL, TOOLS, response
from tests._support.vendor_http import Recorder, anthropic_client, json_response

# --- every wire: a prefix built once, the bodies unchanged -----------------------------------------------------


def reasoning(i: int) -> list[ReasoningBlock]:
    """One reasoning block per vendor: each wire replays its own and drops the others."""
    return [
        ReasoningBlock(vendor="anthropic", model=MODEL, format="anthropic.thinking", text=f"t{i}", signature=f"s{i}"),
        ReasoningBlock(
            vendor="openai", format="openai.reasoning_item", id=f"rs_{i}", summary=[f"t{i}"], encrypted_content="E"
        ),
        ReasoningBlock(
            vendor="openrouter",
            format="openrouter.reasoning_details",
            text=f"t{i}",
            native={"type": "reasoning.text", "text": f"t{i}", "signature": f"s{i}", "index": 0},
        ),
    ]


def turn(i: int, run: str | None) -> list[Message]:
    meta = {REPLAYED_META_KEY: run} if run else None
    call = ToolCallBlock(id=f"call_{i}", name="run_query", arguments={"sql": f"SELECT {i}"})
    return [
        Message(role="assistant", content=[*reasoning(i), call], meta=meta),
        Message(role="tool", content=[ToolResultBlock(tool_call_id=call.id, content=f"[[{i}]]")], meta=meta),
    ]


def prefix_messages() -> list[Message]:
    """Two replayed runs (question, reasoning + call, result, answer each) and a history message."""
    out: list[Message] = []
    for r in range(2):
        run = f"run-{r}"
        out += [Message(role="user", content=[TextBlock(text=f"question {r}")], meta={REPLAYED_META_KEY: run})]
        out += turn(r, run)
        out += [Message(role="assistant", content=[TextBlock(text=f"answer {r}")], meta={REPLAYED_META_KEY: run})]
    return [*out, Message(role="user", content=[TextBlock(text="from history")])]


def fragment(i: int) -> Message:
    return Message(role="user", content=[TextBlock(text=f"<state>{i}</state>")], meta={FRAGMENT_META_KEY: True})


BREAKPOINTS = BreakpointCache(mode="explicit", ttl="30m", max_breakpoints=4)
WIRES: dict[str, Callable[[ProviderRequest], dict[str, Any]]] = {
    "anthropic": lambda r: (
        anthropic.build_request(
            r, model=MODEL, max_tokens=1024, cache_ttl="5m", thinking={"type": "enabled", "budget_tokens": 1024}
        ).body
    ),
    "openai_responses": lambda r: (
        openai_responses.build_request(
            r, model="gpt-5.6", reasoning={"effort": "low"}, store=False, cache_key_prefix=None, breakpoints=BREAKPOINTS
        ).body
    ),
    "openai_chat": lambda r: (
        openai_chat.build_request(r, model="gpt-5.6", vendor="openai", breakpoints=BREAKPOINTS).body
    ),
    "openrouter": lambda r: (
        openrouter.build_request(
            r,
            model="anthropic/claude-sonnet-4.5",
            provider_order=None,
            allow_fallbacks=True,
            plugins=None,
            reasoning=None,
            cache_ttl="1h",
        ).body
    ),
}


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_each_wire_builds_the_run_prefix_once_and_sends_the_bodies_it_would_build_from_scratch(
    wire: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = WIRES[wire]
    builds: Counter[int] = Counter()
    original = WirePrefix.built

    def counted(self: WirePrefix, key: Any, messages: Any, fn: Any) -> Any:
        def counting(head: Any) -> Any:
            builds[len(head)] += 1
            return fn(head)

        return original(self, key, messages, counting)

    monkeypatch.setattr(WirePrefix, "built", counted)
    prefix = prefix_messages()
    memo = WirePrefix(len(prefix))
    own = [Message(role="user", content=[TextBlock(text="the new question")])]
    bodies: list[tuple[dict[str, Any], str]] = []
    for i in range(1, 4):  # three iterations: each appends a call and its result, the fragment goes last
        messages = [*prefix, *own, fragment(i)]
        request = ProviderRequest(
            system="sys",
            stable_head="head",
            messages=messages,
            tools=TOOLS,
            replay_end=len(prefix) - 2,
            wire_prefix=memo,
        )
        body = build(request)
        assert json.dumps(body) == json.dumps(build(ProviderRequest(**{**vars_of(request), "wire_prefix": None})))
        bodies.append((body, json.dumps(body)))
        own += turn(10 + i, None)
    assert builds == {len(prefix): 1}, "the prefix was built on the first request only"
    # A marker set on one request's copy never reaches another request's body (they share the prefix's blocks).
    assert [json.dumps(body) for body, _ in bodies] == [sent for _, sent in bodies]
    assert json.dumps(bodies[0][0]) != json.dumps(bodies[1][0])


def vars_of(request: ProviderRequest) -> dict[str, Any]:
    return {a.name: getattr(request, a.name) for a in ProviderRequest.__attrs_attrs__}


def test_a_prefix_that_differs_by_one_message_is_built_again_never_served_stale() -> None:
    prefix = prefix_messages()
    memo = WirePrefix(len(prefix))
    first = WIRES["anthropic"](ProviderRequest(system="s", messages=[*prefix], wire_prefix=memo))
    changed = [*prefix[:-1], Message(role="user", content=[TextBlock(text="other history")])]
    second = WIRES["anthropic"](ProviderRequest(system="s", messages=changed, wire_prefix=memo))
    assert second["messages"][-1]["content"][-1]["text"] == "other history"
    assert first["messages"][-1]["content"][-1]["text"] == "from history"


# --- end to end: a replayed run of several iterations -------------------------------------------------------------


class Vendor:
    """Anthropic over MockTransport: every question gets `calls` thinking + tool_use turns, then an answer."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.n = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        own = 0
        for m in reversed(body["messages"]):
            if m["role"] == "user" and all(b["type"] == "text" for b in m["content"]):
                break
            own += m["role"] == "assistant"
        self.n += 1
        if own < self.calls:
            content: list[dict[str, Any]] = [
                {"type": "thinking", "thinking": f"step {self.n}", "signature": f"sig-{self.n}"},
                {"type": "tool_use", "id": f"toolu_{self.n}", "name": "run_query", "input": {"sql": "SELECT 1"}},
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": f"answer {self.n}"}], "end_turn"
        return json_response(response(content, stop=stop))


def run_query(sql: str) -> str:
    """Run a read-only query."""
    return "[[1]]"


@pytest.mark.asyncio
async def test_a_replayed_run_serializes_and_hashes_its_replayed_region_once_however_many_iterations(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor = Vendor(calls=2)
    rec = Recorder(*[vendor] * 100)
    thinking = {"type": "enabled", "budget_tokens": 1024}
    provider = AnthropicProvider(MODEL, thinking=thinking, client=anthropic_client(rec))
    agent = Agent(provider, "You answer from the database.", [run_query], RunStore(f"sqlite:///{tmp_path}/s.db"))
    ids: list[str] = []
    for i in range(3):
        result = await agent.run(f"question {i}", runs=ids or None, replay_last="all")
        assert result.status == "success" and result.iterations == 3
        ids.append(result.run_id)
    replayed_calls = {f"toolu_{n}" for n in range(1, vendor.n + 1)} - {f"toolu_{n}" for n in (3, 6, 9)}

    serialized: Counter[str] = Counter()
    content_block = g_anthropic.content_block

    def counting_block(block: Any) -> Any:
        if isinstance(block, ToolCallBlock):
            serialized[block.id] += 1
        return content_block(block)

    hashed: Counter[str] = Counter()

    def counting_hash(original: Callable[[Message], str]) -> Callable[[Message], str]:
        def count(m: Message) -> str:
            text = original(m)
            hashed[text] += 1
            return text

        return count

    for module in (segue.replay.planner, segue.replay.prefix_rule, segue.store.rows):
        monkeypatch.setattr(module, "message_json", counting_hash(module.message_json))
    monkeypatch.setattr(g_anthropic, "content_block", counting_block)
    built: list[tuple[ProviderRequest, dict[str, Any], Any]] = []
    wire = AnthropicProvider._wire

    def recording(self: AnthropicProvider, request: ProviderRequest, *, stream: bool) -> Any:
        out = wire(self, request, stream=stream)
        built.append((request, out.body, out.comparison))
        return out

    monkeypatch.setattr(AnthropicProvider, "_wire", recording)
    sent_before = len(rec.requests)

    result = await agent.run("one more", runs=ids, replay_last="all")
    assert result.status == "success" and result.iterations == 3
    assert result.replay is not None and result.replay.reasoning_kept == ids
    # Each replayed tool call went on the wire three times but was serialized at most once: the last run's once,
    # the earlier ones not at all (the prefix the last turn built is continued, segue.wire.anthropic.request).
    assert {c: serialized[c] for c in replayed_calls} == {c: int(c in ("toolu_7", "toolu_8")) for c in replayed_calls}
    assert hashed and max(hashed.values()) == 1, f"a replayed message was hashed more than once: {hashed}"

    # Byte-identical to building each request from scratch, including what was sent over HTTP.
    assert len(built) == 3
    sent = [json.loads(r.content) for r in rec.requests[sent_before:]]
    for (request, body, comparison), on_the_wire in zip(built, sent, strict=True):
        fresh = anthropic.build_request(
            ProviderRequest(**{**vars_of(request), "wire_prefix": None}),
            model=MODEL,
            max_tokens=4096,
            cache_ttl="5m",
            thinking={"type": "enabled", "budget_tokens": 1024},
            comparison=comparison,  # the cache-diagnostics ask the driver made (segue.providers._cache.comparison)
        ).body
        assert json.dumps(body) == json.dumps(fresh)
        assert on_the_wire == json.loads(json.dumps(fresh))
