"""The web streams' encoders: a run's RunEvents as AG-UI events and as Vercel AI SDK UI message stream parts.

Each encoder is a function of the events it was given, in order: a reader that follows a run from its first event
(segue.apps.protocol.run_logs) gets the same parts as every other reader, so a reader that resumes after a frame's
id skips exactly the frames its client had. Block and message ids derive from the event that opened them (its
seq), never from a per-reader counter. A recovered run's RUN_STARTED (`meta.recovered`) opens nothing for a client
that already saw the run start; the ids of what follows it name the seq it continues after, because the events of
a model call the crash interrupted are numbered again (segue.run.events).
"""

from __future__ import annotations

import json
from typing import Any

from segue.catalog.costs import price_ref
from segue.generated import ChildRun, RunEvent, RunResult, get_converter

#: One event of either stream: a JSON object, or the AI SDK's literal `[DONE]`.
Part = dict[str, Any] | str


def _block_id(event: RunEvent, run_id: str, kind: str, restart: int | None) -> str:
    """The id of a text message, tool result message or block opened by `event`."""
    again = f"-after-{restart}" if restart is not None else ""
    return f"{event.run_id or run_id}-{kind}-{event.seq or 0}{again}"


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

    def __init__(self, thread_id: str, run_id: str, *, started: bool = False) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self.message: str | None = None  # the text message open now
        self.started = started  # the client saw the run start (a reader that resumes)
        self.restart: int | None = None  # the seq a recovered run continues after
        self.ended = False

    def _new_id(self, event: RunEvent, kind: str) -> str:
        return _block_id(event, self.run_id, kind, self.restart)

    def _end_text(self) -> list[Part]:
        if self.message is None:
            return []
        done, self.message = self.message, None
        return [{"type": "TEXT_MESSAGE_END", "messageId": done}]

    def event(self, event: RunEvent) -> list[Part]:
        if event.type == "RUN_STARTED":
            if _recovered(event):
                self.restart = _restart(event)
                if self.started:  # the client's run goes on: AG-UI allows one RUN_STARTED per run
                    return self._end_text()
            self.started = True
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

    def close(self, why: str | None = None) -> list[Part]:
        """The end of a run cut short (`why`, when known) before its own end event."""
        if self.ended:
            return []
        return [*self._end_text(), {"type": "RUN_ERROR", "message": why or "the run ended without a result event"}]


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

    def __init__(self, *, started: bool = False) -> None:
        self.open: dict[str, str] = {}  # part kind ("text", "reasoning") -> the id of the block open now
        self.step: int | None = None
        self.started = started  # the client saw the run start (a reader that resumes)
        self.restart: int | None = None  # the seq a recovered run continues after
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
            self.open[kind] = _block_id(event, "", kind, self.restart)
            out.append({"type": f"{kind}-start", "id": self.open[kind]})
        return [*out, {"type": f"{kind}-delta", "id": self.open[kind], "delta": event.text}]

    def event(self, event: RunEvent) -> list[Part]:
        if event.type == "RUN_STARTED":
            if _recovered(event):
                self.restart = _restart(event)
                if self.started:  # the client's message goes on: its open step ends before the next one
                    self.step = -1
                    return self._close("text", "reasoning")
            self.started = True
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

    def close(self, why: str | None = None) -> list[Part]:
        """The end of a run cut short (`why`, when known) before its own end event."""
        if self.ended:
            return []
        return [*self._finish_step(), {"type": "error", "errorText": why or "the run ended without a result event"}]


def _recovered(event: RunEvent) -> bool:
    return bool(event.meta.get("recovered"))


def _restart(event: RunEvent) -> int | None:
    after = event.meta.get("after")
    return after if isinstance(after, int) else None
