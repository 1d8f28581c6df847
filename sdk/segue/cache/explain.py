"""Why a request missed the prompt cache: compare each provider request with the one before it (pure logic).

For every iteration of a run, `explain_run` compares the exact body the vendor received with the previous body
of the conversation: the previous iteration of the same run, or, for iteration 1, the last request of the run it
`continued_from`. A prefix cache can only reuse what the two share from the start, so the result says how many
bytes of the previous request are a prefix of this one, where the first divergence is, and why:

- `system`: the system prompt (or stable head) changed;
- `tools`: the tool definitions changed;
- `window`: a replayed run went from full to question + answer, or one replayed before is left out (moved window);
- `fragment`: the trailing runtime-state fragment of the previous request is gone (replace layout);
- `messages`: some other message changed at messages[i];
- `model` / `vendor`: another model or vendor served it (no shared cache).

Bodies are compared in prompt order, the order the vendor reads them (Anthropic: tools, system, messages;
OpenAI Responses: instructions, tools, input; Chat Completions: tools, messages), each part rendered as canonical
JSON (sorted keys, compact). Two things never count as a change: cache breakpoint markers (`cache_control`,
`prompt_cache_breakpoint`), which move to the newest message every turn without changing the cached text, and
segue's own `meta` on messages, which never reaches a vendor. Other request settings (max_tokens, temperature, ...)
are not part of the prompt. The bodies are read through segue.wire.stored (the generated wire parsers).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, get_args

import attrs

from segue._core.contracts import FRAGMENT_META_KEY
from segue._core.hashing import canonical_json
from segue.cache.layout import FRAGMENT_TAG
from segue.cache.reasons import agreement, below_minimum, stored_cause, verdict_line
from segue.generated import (
    Divergence,
    ExplainCause,
    ExplainSection,
    IterationExplanation,
    LlmInteraction,
    Message,
    RunDetail,
    RunExplanation,
    TextBlock,
)
from segue.generated.wire import shared
from segue.wire import stored
from segue.wire.common import USER
from segue.wire.stored_message import StoredMessage

__all__ = [
    "BREAK_CAUSES",
    "Cause",
    "Divergence",
    "IterationExplanation",
    "RunExplanation",
    "Section",
    "compare_bodies",
    "explain_run",
    "is_fragment",
    "is_fragment_message",
    "is_fragment_text",
    "miss_cause",
    "own_messages_start",
    "prompt_messages",
]

Section = ExplainSection
Cause = ExplainCause
#: Causes that mean the request broke the prefix of the previous one (what `segue runs explain` exits 1 on).
BREAK_CAUSES: frozenset[str] = frozenset(get_args(ExplainCause)) - {"first", "missing", "extends"}

_EXCERPT = 80


def is_fragment_text(text: str) -> bool:
    """True for the text of a trailing runtime-state fragment (`<segue-runtime-state>` ..., see segue.cache.layout)."""
    return text.lstrip().startswith(f"<{FRAGMENT_TAG}>")


def prefix_share(it: IterationExplanation) -> float | None:
    """Share of the previous request reused as this request's prefix (None when there was nothing before)."""
    if not it.previous_bytes:
        return None
    return it.prefix_bytes / it.previous_bytes


def breaks(explanation: RunExplanation) -> list[IterationExplanation]:
    """The requests that broke the previous request's prefix (what `segue runs explain` exits 1 on)."""
    return [i for i in explanation.iterations if i.cause in BREAK_CAUSES]


# -- wire shapes ----------------------------------------------------------------------------------------------
# Which parts a body has, in which order the vendor reads them, and what its messages say: segue.wire.stored reads
# them through the generated parsers. Here they become canonical-JSON segments.

_MODEL, _TOOLS, _SYSTEM, _MESSAGES = get_args(ExplainSection)
_META = attrs.fields(Message).meta.name


@attrs.frozen(kw_only=True)
class _Segment:
    path: str
    section: Section
    value: Any
    text: str
    fragment: bool
    message: StoredMessage | None = None


def prompt_messages(body: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """(key, items) of the conversation part of a body: `messages`, or `input` for OpenAI Responses."""
    read = stored.read(body)
    return read.conversation_key, read.items


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in stored.BREAKPOINT_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _texts(message: StoredMessage) -> list[str]:
    return [b.text for b in message.blocks if isinstance(b, TextBlock)]


def is_fragment(message: StoredMessage) -> bool:
    """True for a stored message that is a trailing runtime-state fragment."""
    if message.kind != USER:
        return False
    if message.meta is not None and message.meta.get(FRAGMENT_META_KEY) is True:
        return True
    # Only a message made of fragment text; a fragment merged next to other blocks is found block by block.
    return bool(message.blocks) and all(isinstance(b, TextBlock) and is_fragment_text(b.text) for b in message.blocks)


def is_fragment_message(message: Any) -> bool:
    """True for a wire (or canonical) message dict that is a trailing runtime-state fragment."""
    return is_fragment(stored.read_any_message(message))


def _segment(path: str, section: Section, value: Any, message: StoredMessage | None = None) -> _Segment:
    if message is not None and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != _META}
    value = _strip(value)
    fragment = message is not None and is_fragment(message)
    return _Segment(
        path=path, section=section, value=value, text=canonical_json(value), fragment=fragment, message=message
    )


def _segments(body: Mapping[str, Any], served_model: str | None) -> list[_Segment]:
    read = stored.read(body)
    out: list[_Segment] = []
    for key, section in read.prompt:
        value = body.get(key)
        if section == _MODEL:
            model = value or served_model
            if model is not None:
                out.append(_segment(key, section, model))
        elif key == read.conversation_key:
            leading = True
            for i, (item, m) in enumerate(zip(read.items, read.messages(), strict=True)):
                leading = leading and m.kind == _SYSTEM
                out.append(_segment(f"{key}[{i}]", _SYSTEM if leading else _MESSAGES, item, m))
        elif isinstance(value, list):
            out.extend(_segment(f"{key}[{i}]", section, v) for i, v in enumerate(value))
        elif value is not None:
            out.append(_segment(key, section, value))
    return out


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _rendered_bytes(segments: Sequence[_Segment]) -> int:
    # Parts are joined by one separator byte, as in a JSON array.
    return sum(_bytes(s.text) for s in segments) + max(len(segments) - 1, 0)


def _common_chars(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_prefix(a: str, b: str) -> int:
    """Bytes (UTF-8) of the longest common prefix."""
    return _bytes(a[: _common_chars(a, b)])


def _first_diff(a: Any, b: Any, path: str) -> tuple[str, Any, Any]:
    """The deepest path where `a` and `b` differ, walking dicts in sorted-key order and lists by index."""
    missing = object()
    if isinstance(a, dict) and isinstance(b, dict):
        if any(a.get(k) != b.get(k) for k in shared.DISCRIMINATORS):
            return path, a, b  # another kind of block or message: the whole of it differs
        for k in sorted(set(a) | set(b)):
            va, vb = a.get(k, missing), b.get(k, missing)
            if va is missing or vb is missing:
                return f"{path}.{k}", None if va is missing else va, None if vb is missing else vb
            if va != vb:
                return _first_diff(va, vb, f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                return f"{path}[{i}]", a[i] if i < len(a) else None, b[i] if i < len(b) else None
            if a[i] != b[i]:
                return _first_diff(a[i], b[i], f"{path}[{i}]")
    return path, a, b


def _excerpts(before: Any, after: Any) -> tuple[str | None, str | None]:
    """Short excerpts of both values, starting a little before the first character where they differ."""
    texts = [None if v is None else v if isinstance(v, str) else canonical_json(v) for v in (before, after)]
    start = 0
    if texts[0] is not None and texts[1] is not None:
        start = max(_common_chars(texts[0], texts[1]) - _EXCERPT // 3, 0)

    def cut(text: str | None) -> str | None:
        if text is None:
            return None
        shown = ("…" if start else "") + text[start:]
        return shown if len(shown) <= _EXCERPT else shown[: _EXCERPT - 1] + "…"

    return cut(texts[0]), cut(texts[1])


@attrs.frozen(kw_only=True)
class _Comparison:
    prefix_bytes: int
    previous_bytes: int
    request_bytes: int
    divergence: Divergence | None
    previous_segment: _Segment | None
    current_segment: _Segment | None


def _compare(previous: Sequence[_Segment], current: Sequence[_Segment]) -> _Comparison:
    offset = 0
    for i in range(max(len(previous), len(current))):
        p = previous[i] if i < len(previous) else None
        c = current[i] if i < len(current) else None
        if p is not None and c is not None and p.text == c.text:
            offset += _bytes(p.text) + 1
            continue
        if p is None:
            break  # every part of the previous request is a prefix of this one
        within = _common_prefix(p.text, c.text) if c is not None else 0
        if c is not None and p.path == c.path:
            path, before, after = _first_diff(p.value, c.value, c.path)
        elif c is None:
            path, before, after = p.path, p.value, None
        else:
            path, before, after = (c.path, p.value, c.value) if _rank(c) <= _rank(p) else (p.path, p.value, c.value)
        section = min(p.section, c.section, key=_SECTION_ORDER.index) if c is not None else p.section
        shown = _excerpts(before, after)
        return _Comparison(
            prefix_bytes=offset + within,
            previous_bytes=_rendered_bytes(previous),
            request_bytes=_rendered_bytes(current),
            divergence=Divergence(
                path=path,
                section=section,
                byte_offset=offset + within,
                previous=shown[0],
                current=shown[1],
            ),
            previous_segment=p,
            current_segment=c,
        )
    total = _rendered_bytes(previous)
    return _Comparison(
        prefix_bytes=total,
        previous_bytes=total,
        request_bytes=_rendered_bytes(current),
        divergence=None,
        previous_segment=None,
        current_segment=None,
    )


_SECTION_ORDER: tuple[Section, ...] = get_args(ExplainSection)


def _rank(segment: _Segment) -> int:
    return _SECTION_ORDER.index(segment.section)


def compare_bodies(
    previous: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    previous_model: str | None = None,
    model: str | None = None,
) -> tuple[int, int, Divergence | None]:
    """(prefix bytes, previous bytes, first divergence or None when `current` extends `previous`)."""
    result = _compare(_segments(previous, previous_model), _segments(current, model))
    return result.prefix_bytes, result.previous_bytes, result.divergence


# -- causes ---------------------------------------------------------------------------------------------------


_INDEX = re.compile(r"\.[^.\[]+\[(\d+)\]")


def _dropped_fragment(comparison: _Comparison) -> bool:
    p, d = comparison.previous_segment, comparison.divergence
    if p is None or d is None or p.section != _MESSAGES:
        return False
    if p.fragment:
        return True
    # A fragment merged into a message with other blocks (Anthropic puts it next to the tool results): the first
    # change is at or before a fragment block of the message's content.
    found = _INDEX.match(d.path, len(p.path)) if d.path.startswith(p.path) else None
    if found is None or p.message is None:
        return False
    blocks = p.message.blocks[int(found.group(1)) :]
    return any(isinstance(b, TextBlock) and is_fragment_text(b.text) for b in blocks)


def _window_move(run: RunDetail, previous: RunDetail | None) -> tuple[str, str | None] | None:
    """How the window moved since `previous`: (what, the collapsed run) for the first run that went from full to
    question + answer, else for the oldest run replayed before (or the previous run) now left out; else None."""
    if previous is None or run.replay is None:
        return None
    replay, earlier = run.replay, previous.replay
    made = replay.compaction
    if made is not None and (earlier is None or earlier.compaction != made):
        if made.vendor is not None:
            return (
                f"{made.vendor}'s compaction block in run {made.run_id}'s response now stands for the first "
                f"{made.runs} runs ({made.first} to {made.last}): the turn replays from that run, the vendor "
                "having dropped what precedes the block (a new compaction moves the prefix once)",
                None,
            )
        return (
            f"compaction {made.run_id} now stands for the first {made.runs} runs ({made.first} to {made.last}): its "
            "summary is replayed in their place (a new compaction moves the prefix once)",
            None,
        )
    full_before = {previous.run_id, *(earlier.runs_full if earlier else [])}
    collapsed = next((r for r in replay.runs_text if r in full_before), None)
    if collapsed is not None:
        return f"run {collapsed} went in full before and is now replayed as question + answer", collapsed
    now, asked = {*replay.runs_text, *replay.runs_full}, replay.knobs.runs if replay.knobs else []
    before = [*(earlier.runs_text + earlier.runs_full if earlier else []), previous.run_id]
    left = next((r for r in before if r in asked and r not in now), None)
    return (f"run {left} was replayed before and is now left out (replay_keep)", None) if left else None


def _layout_mode(run: RunDetail) -> str | None:
    layout = run.meta.segue_layout if run.meta is not None else None
    return layout.mode if layout is not None else None


def _classify(
    comparison: _Comparison,
    run: RunDetail,
    previous_run: RunDetail | None,
    iteration: int,
    before: LlmInteraction,
    now: LlmInteraction,
) -> tuple[Cause, str, str | None]:
    d = comparison.divergence
    if before.vendor != now.vendor:
        return "vendor", f"another vendor served it ({before.vendor} → {now.vendor}); vendors share no cache", None
    if d is None:
        return (
            "extends",
            f"extends the previous request: all {comparison.previous_bytes:,} bytes of it are reused",
            None,
        )
    if d.section == _MODEL:
        return d.section, f"the model changed ({d.previous} → {d.current}); each model has its own cache", None
    if d.section == _TOOLS:
        return d.section, f"tool definitions changed at {d.path}", None
    if d.section == _SYSTEM:
        return d.section, f"system prompt changed at {d.path}", None
    if _dropped_fragment(comparison):
        mode = _layout_mode(run)
        why = f" (layout {mode})" if mode else ""
        return (
            "fragment",
            f"a dropped fragment: the runtime-state fragment the previous request had at {d.path} is gone{why}; "
            "the appendOnly layout keeps earlier fragments in place",
            None,
        )
    moved = _window_move(run, previous_run) if iteration == 1 else None
    if moved is not None:
        return "window", f"a moved window: {moved[0]} (first change at {d.path})", moved[1]
    return _MESSAGES, f"messages changed at {d.path}", None


def explain_run(run: RunDetail, previous: RunDetail | None = None) -> RunExplanation:
    """Explain every provider request of `run`. `previous` is the run it continued_from (None if unknown)."""
    interactions = list(run.llm_interactions)
    before_first = previous.llm_interactions[-1] if previous is not None and previous.llm_interactions else None
    out: list[IterationExplanation] = []
    below, before_below = below_minimum(run), below_minimum(previous)
    for i, now in enumerate(interactions):
        before = interactions[i - 1] if i > 0 else before_first
        current = _segments(now.provider_request, now.model)
        if before is None:
            cause: Cause = "first"
            reason = "the first request of the conversation: nothing came before it"
            if run.continued_from is not None and previous is None:
                cause = "missing"
                reason = f"the run it continued from ({run.continued_from}) is not readable here: nothing to compare"
            elif previous is not None:
                reason = f"the run it continued from ({previous.run_id}) made no provider request to compare with"
            out.append(
                IterationExplanation(
                    iteration=now.iteration,
                    cause=cause,
                    reason=reason,
                    request_bytes=_rendered_bytes(current),
                    prefix_bytes=0,
                    note=stored_cause(cause, now.usage, below),
                    usage=now.usage,
                    vendor_verdict=now.cache_verdict,
                    agreement=agreement(cause, now.cache_verdict),
                )
            )
            continue
        comparison = _compare(_segments(before.provider_request, before.model), current)
        previous_run = previous if i == 0 else None
        found, reason, collapsed = _classify(comparison, run, previous_run, now.iteration, before, now)
        out.append(
            IterationExplanation(
                iteration=now.iteration,
                cause=found,
                reason=reason,
                request_bytes=comparison.request_bytes,
                prefix_bytes=comparison.prefix_bytes,
                previous_bytes=comparison.previous_bytes,
                previous_run_id=previous.run_id if i == 0 and previous is not None else run.run_id,
                previous_iteration=before.iteration,
                divergence=comparison.divergence,
                collapsed_run=collapsed,
                note=stored_cause(found, now.usage, below, before.usage, before_below if i == 0 else below),
                usage=now.usage,
                vendor_verdict=now.cache_verdict,
                agreement=agreement(found, now.cache_verdict),
            )
        )
    return RunExplanation(
        run_id=run.run_id,
        continued_from=run.continued_from,
        layout=run.meta.segue_layout if run.meta is not None else None,
        iterations=out,
    )


def miss_cause(explanation: RunExplanation) -> str | None:
    """One line saying why the run missed the cache: the vendor's own verdict first where it named a change, then
    its first request that broke the prefix (the change and where), else its first stored cause (a prompt below the
    minimum, its numbers first). None when nothing was missed."""
    for it in explanation.iterations:
        if it.vendor_verdict is not None and it.vendor_verdict.status == "changed":
            return f"request {it.iteration}: {verdict_line(it)}"
    for it in explanation.iterations:
        if it.cause in BREAK_CAUSES:
            return f"request {it.iteration}: {it.reason}"
    return next((f"request {it.iteration}: {it.note}" for it in explanation.iterations if it.note), None)


def own_messages_start(run: RunDetail) -> int | None:
    """Index in the request's messages (or input items) where this run's own messages begin.

    Everything before it was replayed from earlier runs or passed as history. It is read from iteration 1's
    request, where the run's own part is just its new user message (and maybe a trailing fragment): the last user
    message that is not a fragment and carries text (not only tool results). None when there is no request.
    """
    if not run.llm_interactions:
        return None
    messages = stored.read(run.llm_interactions[0].provider_request).messages()
    for index in range(len(messages) - 1, -1, -1):
        m = messages[index]
        if m.kind == USER and any(not is_fragment_text(t) for t in _texts(m)):
            return index
    return None
