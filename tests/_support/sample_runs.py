"""Run databases for the CLI, explain and dashboard tests, made by running real agents.

`CachingProvider` answers like segue.testing.ScriptedProvider but reports cache numbers the way a byte-prefix
cache would: the longest prefix shared with any earlier request of the same provider is read from the cache, the
rest is written. `build_store` runs a three-run conversation (a moved window on the third run), a fourth run after
a system-prompt edit, and a run of another tenant.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from segue import Agent, RunStore
from segue._core.contracts import Provider, ProviderRequest, ProviderResponse, StreamDone, StreamEvent
from segue._core.hashing import canonical_json
from segue._core.tokens import count_tokens
from segue.generated import Message, TextBlock, ToolResultBlock, Usage, get_converter
from segue.testing import call, canonical_messages, text, wire_body
from tests._support.environment import REPO

SCRIPT_ANSWER = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
PROMPT = "You are the order desk of a small shop. Look orders up before answering."
EDITED_PROMPT = "You are the order desk of a small shop. Look orders up before answering. Be brief."


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@attrs.define(kw_only=True)
class CachingProvider(Provider):
    """A scripted model (a policy function) behind an exact byte-prefix cache."""

    policy: Callable[[ProviderRequest], Message]
    vendor: str = "scripted"
    model: str = "scripted-1"
    requires_stable_reasoning_prefix: bool = False
    seen: list[str] = attrs.field(factory=list)

    def _respond(self, request: ProviderRequest) -> ProviderResponse:
        message = self.policy(request)
        body = wire_body(request)
        prompt = canonical_json([body["tools"], body["system"], canonical_messages(request)])
        reused = max((_common(prompt, s) for s in self.seen), default=0)
        self.seen.append(prompt)
        total = count_tokens(prompt)
        read = reused // 4
        usage = Usage(
            input_tokens=total,
            output_tokens=count_tokens(canonical_json(get_converter().unstructure(message, Message))),
            cache_read_tokens=read,
            cache_write_tokens=total - read,
        )
        return ProviderResponse(
            message=message,
            usage=usage,
            stop_reason="end_turn",
            vendor=self.vendor,
            model=self.model,
            request_body=body,
            response_body={"ok": True},
        )

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        return self._respond(request)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        yield StreamDone(response=self._respond(request))


def shop_policy(request: ProviderRequest) -> Message:
    """Questions naming an order -> a lookup call; a tool result -> an answer; anything else -> a direct answer."""
    last = request.messages[-1]
    if last.role == "tool":
        result = next(b.content for b in last.content if isinstance(b, ToolResultBlock))
        return text(f"Here is what I found: {result}.")
    question = "".join(b.text for b in last.content if isinstance(b, TextBlock))
    found = re.search(r"order (\d+)", question)
    if found:
        return call("lookup_order", {"order": int(found.group(1))}, id=f"call_{found.group(1)}")
    if "script" in question:
        return text(SCRIPT_ANSWER)
    return text(f"Answering {question!r} from what we looked up.")


def lookup_order(order: int) -> str:
    """Look an order up.

    Args:
        order: the order number
    """
    return f"order {order} shipped on day {order % 7 + 1}"


@attrs.frozen(kw_only=True)
class SampleRuns:
    url: str
    first: str  # looks up order 42
    second: str  # replays [first] in full, looks up order 43
    third: str  # replays [first, second] with replay_last=1: first collapses (a moved window); <script> answer
    edited: str  # continues third after a system-prompt edit
    other_tenant: str  # tenant "globex"


async def build_runs(url: str) -> SampleRuns:
    store = RunStore(url)
    try:
        provider = CachingProvider(policy=shop_policy)
        agent = Agent(provider, PROMPT, [lookup_order], store, name="order-desk")
        first = await agent.run("Where is order 42?")
        second = await agent.run("And order 43?", runs=[first.run_id], replay_last="all")
        third = await agent.run(
            "Show me a script tag", runs=[first.run_id, second.run_id], replay_last=1, metadata={"user": "ann"}
        )
        edited_agent = Agent(provider, EDITED_PROMPT, [lookup_order], store, name="order-desk")
        edited = await edited_agent.run(
            "Where is order 44?", runs=[first.run_id, second.run_id, third.run_id], replay_last="all"
        )
        other_agent = Agent(CachingProvider(policy=shop_policy), PROMPT, [lookup_order], store, name="billing")
        other = await other_agent.run("Where is order 7?", tenant_id="globex")
    finally:
        store.close()
    for r in (first, second, third, edited, other):
        assert r.status == "success", r
    return SampleRuns(
        url=url,
        first=first.run_id,
        second=second.run_id,
        third=third.run_id,
        edited=edited.run_id,
        other_tenant=other.run_id,
    )


def build_store(path: Path) -> SampleRuns:
    return asyncio.run(build_runs(f"sqlite:///{path}"))


def copy_store(sample: SampleRuns, path: Path) -> str:
    """A private copy of the sample database (SQLite's backup API also copies what is still in the WAL)."""
    with sqlite3.connect(sample.url.removeprefix("sqlite:///")) as src, sqlite3.connect(path) as dst:
        src.backup(dst)
    return f"sqlite:///{path}"


# -- schema validation of --json output and JSON endpoints ----------------------------------------------------

_SCHEMAS = [json.loads(p.read_text()) for p in sorted((REPO / "schemas").glob("*.schema.json"))]
_REGISTRY: Registry[Any] = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in _SCHEMAS)


def validate(instance: Any, type_name: str, schema: str = "runs") -> None:
    """Raise if `instance` is not a valid `type_name` of schemas/<schema>.schema.json."""
    ref = {"$ref": f"urn:segue:schema:{schema}:1#/$defs/{type_name}"}
    Draft202012Validator(ref, registry=_REGISTRY).validate(instance)
