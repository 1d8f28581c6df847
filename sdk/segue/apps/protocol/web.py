"""Agents in a web page: `POST /ag-ui/{agent}` (AG-UI) and `POST /ai-sdk/{agent}` (the Vercel AI SDK UI message
stream) on `segue serve --http`, both built from the agent's RunEvent stream.

- The request names a thread: AG-UI's `threadId`, the AI SDK chat's `id`. A thread is a conversation of one
  tenant: each run of it is stored with the app metadata `{"thread_id": ..., "thread_turn": n}`, and the next turn
  replays the tenant's finished runs of the thread (`runs=`, in turn order), so its prompt starts with the bytes
  the vendor cached on the previous turn. The
  client's copy of the earlier messages is not sent to the model: the store's runs are the conversation.
- The new user message is the request's last user message (its text).
- Tenancy and auth are the JSON-RPC protocol's (segue.apps.protocol.auth): the bearer token is checked by the HTTP
  server, and the tenant is `forwardedProps.tenant_id` (AG-UI) or the body's `tenant_id` (AI SDK), which the token
  must allow; without one, the token's only tenant or "default". Another tenant's thread of the same id is
  another thread: nothing tells whether it exists.
- Whatever is wrong before the run starts (a body that is not the protocol's input, an unknown agent, a tenant
  the token may not act for, input the agent refuses: its first event) is an HTTP error with a JSON body naming
  the problem, and nothing is stored (segue.apps.protocol.web_stream maps the server's own failures to 5xx).
  Once the stream is open, a failed run ends with the protocol's error event (AG-UI RUN_ERROR,
  AI SDK `error`).
- The final event carries the run as segue knows it (AG-UI's `RUN_FINISHED.metadata`, the AI SDK's `finish`
  messageMetadata): segue's run id, status, usage, cached_share, cost and the replay summary.

The agent's own tools run on the server; a client-side tool pauses the run (waiting_approval, as over JSON-RPC)
and the stream ends with the pending calls in its final event's metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Literal, TypeGuard

import attrs

from segue.apps.protocol.auth import DEFAULT_TENANT, Principal, TenantNotAllowed
from segue.apps.protocol.config import AgentEntry, ServeApp
from segue.apps.protocol.errors import RpcError
from segue.catalog.costs import price_ref
from segue.generated import ChildRun, RunEvent, RunResult, get_converter
from segue.store.records import TERMINAL

#: The app metadata key under which each run records its thread.
THREAD_KEY = "thread_id"
#: The app metadata key under which each run records its turn in the thread (1 + the runs it replayed).
TURN_KEY = "thread_turn"
#: Runs of one thread replayed at most (the oldest beyond it are left out of the prompt).
MAX_THREAD_RUNS = 500
Route = Literal["ag-ui", "ai-sdk"]
ROUTES: tuple[Route, ...] = ("ag-ui", "ai-sdk")
#: One event of either stream: a JSON object, or the AI SDK's literal `[DONE]`.
Part = dict[str, Any] | str


class WebError(Exception):
    """A request refused before its run started: the HTTP status and what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@attrs.frozen(kw_only=True)
class WebRequest:
    """What a web request asks, in either protocol."""

    thread_id: str
    input: str
    tenant_id: str | None
    #: AG-UI's runId, which the run's boundary events echo (None on the AI SDK route).
    client_run_id: str | None = None


def parse(route: Route, body: bytes) -> WebRequest:
    """The request of a body, or WebError 400 naming what is missing."""
    try:
        data = json.loads(body.decode("utf-8"))
    except Exception as e:
        raise WebError(400, f"the body is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise WebError(400, f"the body must be a JSON object, not {type(data).__name__}")
    if route == "ag-ui":
        return _parse_ag_ui(data)
    return _parse_ai_sdk(data)


def _parse_ag_ui(data: dict[str, Any]) -> WebRequest:
    """RunAgentInput: threadId, runId, messages (the last user message is the input), forwardedProps."""
    what = "a RunAgentInput"
    thread, run = _text(data, "threadId", what), _text(data, "runId", what)
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise WebError(400, f"{what} needs `messages`, a list (got {_shown(messages)})")
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise WebError(400, f"{what}'s messages hold no user message: add the user's question as the last message")
    content = users[-1].get("content")
    if isinstance(content, list):  # input content parts: their text parts, in order
        content = _joined(content, "the last user message's content")
    if not isinstance(content, str) or not content.strip():
        raise WebError(400, f"{what}'s last user message has no text (content {_shown(content)})")
    props = data.get("forwardedProps")
    tenant = _tenant(props.get("tenant_id") if isinstance(props, dict) else None, "forwardedProps.tenant_id")
    return WebRequest(thread_id=thread, input=content, tenant_id=tenant, client_run_id=run)


def _parse_ai_sdk(data: dict[str, Any]) -> WebRequest:
    """useChat's body: id (the chat), messages (UIMessage: role and parts), and the app's own fields."""
    what = "an AI SDK chat request"
    thread = _text(data, "id", what)
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise WebError(400, f"{what} needs `messages`, a list of UI messages (got {_shown(messages)})")
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise WebError(400, f"{what}'s messages hold no user message: send the user's message last")
    parts = users[-1].get("parts")
    text = _joined(parts, "the last user message's parts") if isinstance(parts, list) else ""
    if not text.strip():
        raise WebError(400, f"{what}'s last user message has no text part (parts {_shown(parts)})")
    return WebRequest(thread_id=thread, input=text, tenant_id=_tenant(data.get("tenant_id"), "tenant_id"))


def _joined(parts: list[Any], where: str) -> str:
    """The text of a message's text parts, in order; WebError 400 naming a text part whose `text` is no string."""
    texts = []
    for i, part in enumerate(parts):
        if isinstance(part, dict) and part.get("type") == "text":
            value = part.get("text", "")
            if not isinstance(value, str):
                raise WebError(400, f"{where}[{i}] is a text part whose `text` is {_shown(value)}, not a string")
            texts.append(value)
    return "".join(texts)


def _text(data: dict[str, Any], key: str, what: str) -> str:
    value = data.get(key)
    if not _identifier(value):
        raise WebError(
            400, f"{what} needs `{key}`, a non-empty string of at most 200 characters, valid Unicode ({_shown(value)})"
        )
    return value


def _tenant(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not _identifier(value):
        raise WebError(
            400, f"{where} must be a non-empty string of at most 200 characters, valid Unicode, not {_shown(value)}"
        )
    return value


def _identifier(value: Any) -> TypeGuard[str]:
    """A thread id or tenant a store can hold and look up: 1 to 200 characters (the store's identifier limit),
    not only spaces, without lone surrogates (which UTF-8 cannot encode)."""
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(value: Any) -> str:
    return "nothing" if value is None else json.dumps(value, default=str)[:80]


class Web:
    """The two routes over the agents of one ServeApp."""

    def __init__(self, app: ServeApp, run_slot: Callable[[], Callable[[], None]] | None = None) -> None:
        self.app = app
        #: Takes one of the server's max_concurrent_runs slots (RpcError ServerBusy when none is free).
        self.run_slot = run_slot

    async def open(
        self, route: Route, agent: str, body: bytes, principal: Principal | None
    ) -> tuple[dict[str, str], AsyncGenerator[bytes]]:
        """The response headers and its event frames; WebError when the request is refused (nothing stored)."""
        request = parse(route, body)
        entry = self.app.agents.get(agent)
        if entry is None:
            known = ", ".join(sorted(self.app.agents))
            raise WebError(404, f"no agent {agent!r} in the server's config; configured: {known}")
        try:
            tenant = principal.tenant_for(request.tenant_id) if principal else request.tenant_id or DEFAULT_TENANT
        except TenantNotAllowed as e:
            raise WebError(403, str(e)) from None
        runs = await asyncio.to_thread(_thread_runs, entry, agent, request.thread_id, tenant)
        try:
            release = self.run_slot() if self.run_slot is not None else None
        except RpcError as e:
            raise WebError(503, str(e)) from None
        metadata = {THREAD_KEY: request.thread_id, TURN_KEY: len(runs) + 1}
        events = entry.pausing.stream(request.input, runs=runs, tenant_id=tenant, metadata=metadata)
        try:
            # The agent checks the request before it writes anything; a refusal is its first event: an HTTP error.
            first = await anext(events)
            if not first.run_id and first.type == "RUN_ERROR":
                raise _refused(first)
        except BaseException:
            await events.aclose()  # type: ignore[attr-defined]
            if release is not None:
                release()
            raise
        encoder: AgUiEncoder | AiSdkEncoder
        if route == "ag-ui":
            encoder = AgUiEncoder(request.thread_id, request.client_run_id or request.thread_id)
            headers = {"Content-Type": "text/event-stream"}
        else:
            encoder = AiSdkEncoder()
            headers = {"Content-Type": "text/event-stream", "x-vercel-ai-ui-message-stream": "v1"}
        return headers, _frames(_following(first, events), encoder.event, encoder.close, release)


#: Refusals the agent finds before a run row exists, by error type: the HTTP status (400 otherwise).
_REFUSAL_STATUS = {"ToolSourceError": 503}


def _refused(event: RunEvent) -> WebError:
    kind = event.meta.get("error_type")
    status = _REFUSAL_STATUS.get(kind, 400) if isinstance(kind, str) else 400
    return WebError(status, event.error or "the request was refused")


async def _following(first: RunEvent, events: AsyncIterator[RunEvent]) -> AsyncGenerator[RunEvent]:
    """`first`, then the rest of `events`, which closing this closes."""
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        yield first
        async for event in events:
            yield event


def _thread_runs(entry: AgentEntry, agent: str, thread_id: str, tenant: str) -> list[str]:
    """The finished runs of this agent in the tenant's thread, in turn order. A thread id is the tenant's own: the
    same id in another tenant is another thread, and nothing here tells whether it exists."""
    found = entry.store.list_runs(tenant_id=tenant, metadata_filter={THREAD_KEY: thread_id}, limit=MAX_THREAD_RUNS)
    mine = [r for r in reversed(found) if r.agent_name == agent and r.status in TERMINAL]
    # Turn order, not id order: run ids follow the clock of the process that started each run, which may step back.
    mine.sort(key=lambda r: _turn(r.metadata))  # stable: runs of one turn (sent at once) keep id order
    return [r.run_id for r in mine]


def _turn(metadata: Any) -> int:
    turn = metadata.get(TURN_KEY) if isinstance(metadata, dict) else None
    return turn if isinstance(turn, int) and not isinstance(turn, bool) else 0


async def _frames(
    events: AsyncIterator[RunEvent],
    encode: Callable[[RunEvent], list[Part]],
    close: Callable[[], list[Part]],
    release: Callable[[], None] | None,
) -> AsyncGenerator[bytes]:
    try:
        async for event in events:
            for part in encode(event):
                yield _sse(part)
        for part in close():
            yield _sse(part)
    finally:
        try:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            if release is not None:
                release()


def _sse(part: Part) -> bytes:
    data = part if isinstance(part, str) else json.dumps(part, separators=(",", ":"), ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def tool_output(content: str) -> Any:
    """A tool result for the AI SDK's `output` (a JSON value): the object or array a tool returned as JSON text
    (segue sends structured results to the model as compact JSON), else the text as it is, so a tool that
    returned the string "42" still shows a string."""
    try:
        value = json.loads(content)
    except ValueError:
        return content
    return value if isinstance(value, dict | list) else content


def final_metadata(result: RunResult | None) -> dict[str, Any]:
    """The run as segue knows it, for the final event: run id, status, usage, the vendor's cache verdict (first
    where a miss is explained), cached_share, cost, replay."""
    if result is None:
        return {}
    shown = get_converter().unstructure(result)
    keep = ("run_id", "status", "usage", "cache_verdict", "cached_share", "cost", "replay_text", "iterations", "error")
    out = {k: shown[k] for k in keep if shown.get(k) is not None}
    if result.cost is not None:  # each price's source in short: a browser gets no path or notes of the server's
        short = (
            {"model": p.model, "vendor": p.vendor, "source": price_ref(p), "self_hosted": p.self_hosted}
            for p in result.cost.prices
        )
        out["cost"]["prices"] = [{k: v for k, v in price.items() if v is not None} for price in short]
    if result.pending_approvals:
        out["pending_approvals"] = shown["pending_approvals"]
    # The run as a tree: each sub-run (an agent called as a tool, a fork) with its cache share and own cost, and
    # the run's total with them (segue.run.subrun).
    if result.children:
        out["children"] = [_child_metadata(c) for c in result.children]
    if result.total_cost is not None:
        total = result.total_cost
        out["total_cost"] = {k: v for k, v in (("usd", total.usd), ("twin_usd", total.twin_usd)) if v is not None}
    return out


def _child_metadata(child: ChildRun) -> dict[str, Any]:
    cost = child.total_cost or child.cost
    shown = {
        "run_id": child.run_id,
        "agent_name": child.agent_name,
        "call_id": child.call_id,
        "status": child.status,
        "cached_share": child.cached_share,
        "cost_usd": cost.usd if cost is not None else None,
        "fork": child.fork,
    }
    return {k: v for k, v in shown.items() if v is not None}


class AgUiEncoder:
    """RunEvent to AG-UI events: a text message per stretch of text, a tool call as start/args/end then its
    result, RUN_FINISHED or RUN_ERROR last."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self.message: str | None = None  # the text message open now
        self.count = 0
        self.ended = False

    def _new_id(self, event: RunEvent, kind: str) -> str:
        self.count += 1
        return f"{event.run_id or self.run_id}-{kind}-{self.count}"

    def _end_text(self) -> list[Part]:
        if self.message is None:
            return []
        done, self.message = self.message, None
        return [{"type": "TEXT_MESSAGE_END", "messageId": done}]

    def event(self, event: RunEvent) -> list[Part]:
        if event.type == "RUN_STARTED":
            started = {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}
            return [{**started, "metadata": {"run_id": event.run_id}}]
        if event.type == "TEXT_DELTA" and event.text:
            out = []
            if self.message is None:
                self.message = self._new_id(event, "text")
                out.append({"type": "TEXT_MESSAGE_START", "messageId": self.message, "role": "assistant"})
            return [*out, {"type": "TEXT_MESSAGE_CONTENT", "messageId": self.message, "delta": event.text}]
        if event.type == "TOOL_CALL" and event.tool_call is not None:
            call, parent = event.tool_call, self.message
            start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call.id, "toolCallName": call.name}
            if parent is not None:
                start["parentMessageId"] = parent
            return [
                *self._end_text(),
                start,
                {"type": "TOOL_CALL_ARGS", "toolCallId": call.id, "delta": json.dumps(call.arguments)},
                {"type": "TOOL_CALL_END", "toolCallId": call.id},
            ]
        if event.type == "TOOL_RESULT" and event.tool_result is not None:
            result = event.tool_result
            return [
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": self._new_id(event, "tool"),
                    "toolCallId": result.tool_call_id,
                    "content": result.content,
                    "role": "tool",
                }
            ]
        if event.type in ("RUN_COMPLETED", "RUN_PAUSED"):
            self.ended = True
            finished = {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}
            return [*self._end_text(), {**finished, "metadata": final_metadata(event.result)}]
        if event.type == "RUN_ERROR":
            self.ended = True
            return [*self._end_text(), _ag_ui_error(event)]
        return []  # reasoning stays on the server: AG-UI clients show the answer and the tool calls

    def close(self) -> list[Part]:
        if self.ended:
            return []
        return [*self._end_text(), {"type": "RUN_ERROR", "message": "the run ended without a result event"}]


def _ag_ui_error(event: RunEvent) -> dict[str, Any]:
    kind = event.meta.get("error_type")
    error: dict[str, Any] = {"type": "RUN_ERROR", "message": event.error or "the run failed"}
    if isinstance(kind, str):
        error["code"] = kind
    if event.result is not None:
        error["metadata"] = final_metadata(event.result)
    return error


class AiSdkEncoder:
    """RunEvent to AI SDK UI message stream parts: start, one step per provider call with its text, reasoning and
    tool parts, finish (with the run's metadata) or error, then `[DONE]`."""

    def __init__(self) -> None:
        self.open: dict[str, str] = {}  # part kind ("text", "reasoning") -> the id of the block open now
        self.step: int | None = None
        self.count = 0
        self.ended = False

    def _close(self, *kinds: str) -> list[Part]:
        return [{"type": f"{k}-end", "id": self.open.pop(k)} for k in kinds if k in self.open]

    def _step(self, event: RunEvent) -> list[Part]:
        """finish-step / start-step when the event belongs to the next provider call."""
        if self.step == event.iteration:
            return []
        out = [*self._close("text", "reasoning"), {"type": "finish-step"}] if self.step is not None else []
        self.step = event.iteration
        return [*out, {"type": "start-step"}]

    def _delta(self, kind: str, other: str, event: RunEvent) -> list[Part]:
        out = [*self._step(event), *self._close(other)]
        if kind not in self.open:
            self.count += 1
            self.open[kind] = f"{event.run_id}-{kind}-{self.count}"
            out.append({"type": f"{kind}-start", "id": self.open[kind]})
        return [*out, {"type": f"{kind}-delta", "id": self.open[kind], "delta": event.text}]

    def event(self, event: RunEvent) -> list[Part]:
        if event.type == "RUN_STARTED":
            return [{"type": "start", "messageId": event.run_id, "messageMetadata": {"run_id": event.run_id}}]
        if event.type == "TEXT_DELTA" and event.text:
            return self._delta("text", "reasoning", event)
        if event.type == "REASONING_DELTA" and event.text:
            return self._delta("reasoning", "text", event)
        if event.type == "TOOL_CALL" and event.tool_call is not None:
            call = event.tool_call
            return [
                *self._step(event),
                *self._close("text", "reasoning"),
                {"type": "tool-input-start", "toolCallId": call.id, "toolName": call.name},
                {"type": "tool-input-available", "toolCallId": call.id, "toolName": call.name, "input": call.arguments},
            ]
        if event.type == "TOOL_RESULT" and event.tool_result is not None:
            result = event.tool_result
            if result.is_error:
                return [{"type": "tool-output-error", "toolCallId": result.tool_call_id, "errorText": result.content}]
            output = tool_output(result.content)
            return [{"type": "tool-output-available", "toolCallId": result.tool_call_id, "output": output}]
        if event.type in ("RUN_COMPLETED", "RUN_PAUSED"):
            self.ended = True
            return [*self._finish_step(), {"type": "finish", "messageMetadata": final_metadata(event.result)}, "[DONE]"]
        if event.type == "RUN_ERROR":
            self.ended = True
            error = {"type": "error", "errorText": event.error or "the run failed"}
            return [*self._finish_step(), error, "[DONE]"]
        return []

    def _finish_step(self) -> list[Part]:
        return [*self._close("text", "reasoning"), {"type": "finish-step"}] if self.step is not None else []

    def close(self) -> list[Part]:
        if self.ended:
            return []
        return [*self._finish_step(), {"type": "error", "errorText": "the run ended without a result event"}]
