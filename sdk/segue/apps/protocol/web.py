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

- Each run is produced into the server's run log (segue.apps.protocol.run_logs) and each stream reads it: every
  frame carries the id `<run_id>:<seq>` of the event it encodes (`.<i>` on an event's frames before its last), and
  `GET /{route}/{agent}/{thread}/stream` with Last-Event-ID resumes after it (docs/web.md).

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
from segue.apps.protocol.run_logs import STALLED, Behind, RunLog, RunLogs, Stalled, run_position
from segue.apps.protocol.web_encoders import AgUiEncoder, AiSdkEncoder, Part, final_metadata, tool_output
from segue.generated import RunEvent
from segue.store.records import TERMINAL

#: The app metadata key under which each run records its thread.
THREAD_KEY = "thread_id"
#: The app metadata key under which each run records its turn in the thread (1 + the runs it replayed).
TURN_KEY = "thread_turn"
#: Runs of one thread replayed at most (the oldest beyond it are left out of the prompt).
MAX_THREAD_RUNS = 500
Route = Literal["ag-ui", "ai-sdk"]
ROUTES: tuple[Route, ...] = ("ag-ui", "ai-sdk")
#: How long a web run goes on without a reader, by default (web_resume_seconds): none, so a run never outlives
#: its reader (docs/reliability.md, R1) unless the config gives a client time to come back.
RESUME_SECONDS = 0.0
__all__ = ["ROUTES", "AgUiEncoder", "AiSdkEncoder", "Web", "WebError", "final_metadata", "parse", "tool_output"]


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
    """The two routes over the agents of one ServeApp: a POST starts a run, a GET of its thread resumes its stream."""

    def __init__(
        self,
        app: ServeApp,
        run_slot: Callable[[], Callable[[], None]] | None = None,
        *,
        logs: RunLogs | None = None,
        resume_seconds: float = RESUME_SECONDS,
    ) -> None:
        self.app = app
        #: Takes one of the server's max_concurrent_runs slots (RpcError ServerBusy when none is free).
        self.run_slot = run_slot
        #: The server's run logs: each web run is produced into one, and its streams read it.
        self.logs = logs if logs is not None else RunLogs()
        #: How long a run goes on without a reader (web_resume_seconds).
        self.resume_seconds = resume_seconds

    async def open(
        self, route: Route, agent: str, body: bytes, principal: Principal | None
    ) -> tuple[dict[str, str], AsyncGenerator[bytes]]:
        """The response headers and its event frames; WebError when the request is refused (nothing stored)."""
        request = parse(route, body)
        entry = self._entry(agent)
        tenant = _tenant_of(principal, request.tenant_id)
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
        run = self.logs.open(
            first.run_id,
            tenant,
            agent,
            thread=request.thread_id,
            client_run_id=request.client_run_id,
            abandon_after=self.resume_seconds,
            origin="web",
        )
        self.logs.start(run, _following(first, events), release)
        return _headers(route), read(route, run, None)

    def resume(
        self,
        route: Route,
        agent: str,
        thread: str,
        query: dict[str, list[str]],
        last_event_id: str | None,
        principal: Principal | None,
    ) -> tuple[dict[str, str], AsyncGenerator[bytes]] | None:
        """`GET /{route}/{agent}/{thread}/stream`: the stream of the thread's run this server holds, after the frame
        `Last-Event-ID` names (from the run's first frame without one); None (204) when it holds no such run: no
        run of the thread going on, or the named run is not this tenant's thread's (nothing tells which)."""
        self._entry(agent)
        tenant = _tenant_of(principal, _tenant(_first(query, "tenant_id"), "?tenant_id"))
        position = run_position(last_event_id)
        if position is not None:
            run = self.logs.get(position[0], principal)
            if run is None or (run.agent, run.tenant, run.thread) != (agent, tenant, thread):
                return None
        else:
            run = self.logs.active(agent, tenant, thread)
            if run is None:
                return None
        if run.client_run_id is None and route == "ag-ui":  # a run recovered at start: the client names its runId
            run.client_run_id = _first(query, "runId")
        return _headers(route), read(route, run, position[1:] if position is not None else None)

    def _entry(self, agent: str) -> AgentEntry:
        entry = self.app.agents.get(agent)
        if entry is None:
            known = ", ".join(sorted(self.app.agents))
            raise WebError(404, f"no agent {agent!r} in the server's config; configured: {known}")
        return entry


def _tenant_of(principal: Principal | None, requested: str | None) -> str:
    try:
        return principal.tenant_for(requested) if principal else requested or DEFAULT_TENANT
    except TenantNotAllowed as e:
        raise WebError(403, str(e)) from None


def _first(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


def _headers(route: Route) -> dict[str, str]:
    if route == "ag-ui":
        return {"Content-Type": "text/event-stream"}
    return {"Content-Type": "text/event-stream", "x-vercel-ai-ui-message-stream": "v1"}


async def read(route: Route, run: RunLog, after: tuple[int, int | None] | None) -> AsyncGenerator[bytes]:
    """A reader of the run in its route's protocol: every frame after position `after` ((seq, part), part None: the
    event's last frame), each with the id of its event. The encoder is given every event the log holds, so its
    state is the one the client had; frames up to `after` are skipped. A recovered run continues after the seq its
    RUN_STARTED names: what the client got past it is superseded, and sent again."""
    thread = run.thread or ""
    encoder: AgUiEncoder | AiSdkEncoder
    if route == "ag-ui":
        encoder = AgUiEncoder(thread, run.client_run_id or thread, started=after is not None)
    else:
        encoder = AiSdkEncoder(started=after is not None)
    seen = (after[0], after[1] or _LAST) if after is not None else None
    gap_checked = False  # whether the first event the log holds follows the client's last
    with run.reading():
        try:
            async for event in run.follow():
                if event is None:
                    yield b": keep-alive\n\n"
                    continue
                seq = event.seq or 0
                restart = event.meta.get("after") if event.type == "RUN_STARTED" else None
                if seen is not None and isinstance(restart, int) and restart < seen[0]:
                    seen = (restart, _LAST)
                if seen is not None and not gap_checked and seq > seen[0] + 1:
                    yield f": the run's events after seq {seen[0]} up to {seq - 1} are not held here\n\n".encode()
                gap_checked = True
                parts = encoder.event(event)
                for i, part in enumerate(parts, 1):
                    last = i == len(parts)
                    if seen is not None and (seq, _LAST if last else i) <= seen:
                        continue
                    yield _sse(part, f"{run.run_id}:{seq}" if last else f"{run.run_id}:{seq}.{i}")
        except Behind as e:
            yield f": {e}; closing the stream\n\n".encode()
            return
        except Stalled:
            run.cause = STALLED
            return
        # Not a run event: a run cut short (cancelled, the server stopping) ends with the protocol's error, which
        # carries no id (there is nothing after it to resume).
        for part in encoder.close(run.cut_short):
            yield _sse(part)


#: An event's last frame, after all its others.
_LAST = 1 << 30


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


def _sse(part: Part, event_id: str | None = None) -> bytes:
    data = part if isinstance(part, str) else json.dumps(part, separators=(",", ":"), ensure_ascii=False)
    return (f"id: {event_id}\n" if event_id else "").encode() + f"data: {data}\n\n".encode()
