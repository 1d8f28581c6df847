"""Every iteration of a run fits the context window, not only its first request.

The plan fits the replayed runs to the room the run's own part leaves (segue.run.window); each later iteration
appends the run's tool calls and results, which can outgrow it. Before a request is laid out, its messages are
counted (segue's token approximation, the one the plan uses; each message once, by identity) against the
tightest serving path's room for messages. Over it, the results of the run's earlier tool calls are clipped,
oldest first, to a note naming the tool and the tokens left out, then, where that is not enough, the replayed
runs' tool results, then whole replayed runs, oldest first (the cached prefix moves from there, once: they stay
clipped or left out for the rest of the run); the latest tool
results (what the model is answering now) are never clipped, and a call keeps its result block, so a call and its
result are never split. A clipped message is the same object on every later request of the run, so the request
still extends the one before it from there on. The stored traces keep every result whole: clipping is what the
requests sent (a `context-clipped` note says so once per run).

A request that does not fit with every earlier result clipped ends the run with a ProviderError of kind
`context_overflow`, before anything is sent, naming what to change.
"""

from __future__ import annotations

import attrs

from segue._core.contracts import REPLAYED_META_KEY, ProviderNote
from segue._core.tokens import count_tokens
from segue.errors import ProviderError
from segue.generated import Message, ToolCallBlock, ToolResultBlock
from segue.run.state import RunState
from segue.run.window import Room


def fit_iteration(state: RunState, room: Room, prefix: list[Message]) -> tuple[list[Message], list[Message]]:
    """The request's prefix and the run's own messages, clipped where the whole would not fit `room.messages`:
    the run's earlier tool results first, then (only when that is not enough) the replayed runs' tool results,
    oldest first, then whole replayed runs, oldest first; each moves the cached prefix from there, once."""
    prefix = [state.clipped_prefix.get(i, m) for i, m in enumerate(prefix)]
    own = [state.clipped.get(i, m) for i, m in enumerate(state.own)]
    total = _tokens(state, prefix[state.prefix_cut :]) + _tokens(state, own)
    if total <= room.messages:
        return prefix[state.prefix_cut :], own
    latest = max((i for i, m in enumerate(own) if m.role == "tool"), default=len(own))
    names = {b.id: b.name for m in [*prefix, *own] for b in m.content if isinstance(b, ToolCallBlock)}
    clipped: list[str] = []
    for messages, done, start, end, where in (
        (own, state.clipped, 0, latest, "earlier"),
        (prefix, state.clipped_prefix, state.prefix_cut, len(prefix), "replayed"),
    ):
        for i, m in enumerate(messages[:end]):
            if i < start:
                continue
            if total <= room.messages:
                break
            if m.role != "tool" or i in done:
                continue
            short = _clip(m, names)
            total -= state.tokens_of(m) - state.tokens_of(short)
            done[i] = messages[i] = short
            clipped.extend(
                f"{names.get(b.tool_call_id, b.tool_call_id)} ({where})"
                for b in m.content
                if isinstance(b, ToolResultBlock)
            )
    if total > room.messages:
        before = state.prefix_cut
        left = _leave_out(state, prefix, total - room.messages)
        total -= sum(state.tokens_of(m) for m in prefix[before : state.prefix_cut])
        if left:
            clipped.append(f"replayed runs left out: {', '.join(left)}")
    prefix = prefix[state.prefix_cut :]
    if total > room.messages:
        raise ProviderError(
            f"iteration {state.iteration} of run {state.run_id} does not fit {room.why()}: its request comes to about "
            f"{total + room.window - room.output - room.messages:,} tokens with every earlier tool result clipped and "
            "every replayed run left out; "
            "replay less (a Compaction policy, replay_keep, or a lower replay_budget_tokens), return smaller tool "
            "results, lower max_iterations or model_settings.max_tokens, or serve it on a model with a larger window",
            vendor=room.path.split("/", 1)[0],
            kind="context_overflow",
        )
    if clipped:
        state.pending_notes.append(
            ProviderNote(
                kind="context-clipped",
                message=f"tool results clipped in the requests of iteration {state.iteration} on to fit {room.why()}: "
                f"{', '.join(clipped)}",
            )
        )
    return prefix, own


def _leave_out(state: RunState, prefix: list[Message], over: int) -> list[str]:
    """Leave whole replayed runs out of the front of the prefix (oldest first) until `over` tokens are gone;
    their ids. A run is its consecutive messages marked with its id, user turn first, so roles still alternate."""
    left: list[str] = []
    i = state.prefix_cut
    while over > 0 and i < len(prefix):
        run_id = (prefix[i].meta or {}).get(REPLAYED_META_KEY)
        if not isinstance(run_id, str):
            break  # history= follows the replayed runs: it is the app's, not left out
        j = i
        while j < len(prefix) and (prefix[j].meta or {}).get(REPLAYED_META_KEY) == run_id:
            over -= state.tokens_of(prefix[j])
            j += 1
        left.append(run_id)
        i = j
    if i != state.prefix_cut:
        state.prefix_cut = i
        state.wire_prefix = None  # the wire's prefix is built again from the messages that remain
    return left


def _tokens(state: RunState, messages: list[Message]) -> int:
    return sum(state.tokens_of(m) for m in messages)


def _clip(message: Message, names: dict[str, str]) -> Message:
    blocks = [
        attrs.evolve(
            b,
            content=f"(result of {names.get(b.tool_call_id, 'the tool')} clipped to fit the context window: "
            f"{count_tokens(b.content):,} tokens left out; call it again if you need it)",
        )
        if isinstance(b, ToolResultBlock)
        else b
        for b in message.content
    ]
    return attrs.evolve(message, content=blocks)
