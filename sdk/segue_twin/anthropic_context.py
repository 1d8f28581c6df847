"""Anthropic's context management in the twin: context editing and server-side compaction, per the vendor's docs.

Rules and their sources (docs/twin.md, "Fidelity rules"):
- `context_management` edits need their betas: "use the beta header context-management-2025-06-27" (the
  context-editing page) for `clear_tool_uses_20250919` / `clear_thinking_20251015`, and "Include the beta header
  compact-2026-01-12 in your API requests to use this feature" (the compaction page) for `compact_20260112`.
- Context editing is "Applied before the prompt reaches Claude" (platform.claude.com context-editing): the twin
  edits the prompt before answering and before its cache accounting, so an applied edit moves the cached prefix
  (the page's prompt-caching section, read in its zh-CN and es versions: clearing tool results invalidates the
  cached prompt prefix when content is cleared; clear_at_least makes a clearing worth the new cache write).
  `clear_tool_uses_20250919` (same page, paraphrased): past its `trigger` the API clears the oldest tool results in
  chronological order, replacing them with placeholder text, keeping the most recent `keep` tool uses and every
  use of `exclude_tools` (the pinned SDK: "Tool names whose uses are preserved from clearing"); with
  `clear_tool_inputs` the calls' inputs too; with `clear_at_least` ("Context will only be modified if at least
  this many tokens can be removed", the pinned SDK) only when that many input tokens go. The
  response reports `context_management.applied_edits` (the pinned SDK's BetaContextManagementResponse). The
  placeholder's wording is the twin's own (no source gives the vendor's). A trigger or keep the request leaves
  unset is not emulated (no source in reach gives the vendor's defaults): the twin clears nothing and says so.
- `clear_thinking_20251015` keeps the thinking blocks of the last `keep` assistant turns ("Number of most recent
  assistant turns to keep thinking blocks for. Older turns will have their thinking blocks removed", the pinned
  SDK's BetaClearThinking20251015EditParam; `{"type": "all"}` or "all": every one). Left unset, one turn: the
  context-editing page (its zh-CN and ja versions, read 2026-12-06) gives the default as equivalent to
  `keep: {type: "thinking_turns", value: 1}`, and recommends `keep: "all"` to maximize cache hits.
- Compaction (`compact_20260112`): "Detects when input tokens exceed your specified trigger threshold. Generates a
  summary of the current conversation. Creates a compaction block containing the summary. Continues the response
  with the compacted context" (the compaction page, as mirrored at learn-ai.blindshot.kz); the trigger "Defaults to
  150000 input tokens" (the pinned SDK's BetaCompact20260112EditParam); with `pause_after_compaction` the
  response holds the compaction block alone with stop_reason `compaction` (the pinned SDK's BetaStopReason has
  it). The summary's sampling is a `usage.iterations` entry of type `compaction`, not counted in the top-level
  usage (BetaUsage.iterations).
- On later requests "The API automatically drops all message blocks prior to the compaction block" (the
  compaction page): the twin answers from, and caches, the prompt from the last compaction block on.
The twin's summary is not a model's: it keeps each turn's text and each tool call with its result, cut to
SUMMARY_CHARS characters each, so a conversation the twin summarized still shows what was found. The compacted
context it continues from is the summary plus the request's last user message (what its policy answers); the
summary's own sampling is accounted against the block cache like any request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from segue_twin.errors import bad_request

EDITING_BETA = "context-management-2025-06-27"
COMPACTION_BETA = "compact-2026-01-12"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"
#: "Defaults to 150000 input tokens" (the pinned SDK's BetaCompact20260112EditParam.trigger).
DEFAULT_COMPACTION_TRIGGER = 150_000
#: clear_thinking_20251015's `keep` when the edit leaves it out: the context-editing page's default, "equivalent to
#: keep: {type: "thinking_turns", value: 1}" (its zh-CN and ja versions; see the module notes).
DEFAULT_THINKING_KEEP = {"type": "thinking_turns", "value": 1}
#: The twin's own placeholder for a cleared tool result (the vendor's wording is not documented in reach).
CLEARED = "[tool result cleared by context editing]"
#: How much of each turn's text and tool result the twin's summary keeps.
SUMMARY_CHARS = 200
_BETAS = {CLEAR_TOOL_USES: EDITING_BETA, CLEAR_THINKING: EDITING_BETA, COMPACT: COMPACTION_BETA}


@attrs.frozen
class ContextManagement:
    """The edits a request asked for, validated."""

    clear_tool_uses: Mapping[str, Any] | None = None
    clear_thinking: Mapping[str, Any] | None = None
    compact: Mapping[str, Any] | None = None

    @property
    def compaction_trigger(self) -> int:
        trigger = (self.compact or {}).get("trigger")
        return int(trigger["value"]) if isinstance(trigger, Mapping) else DEFAULT_COMPACTION_TRIGGER


def parse_context_management(body: Mapping[str, Any], headers: Mapping[str, str]) -> ContextManagement:
    """The request's `context_management`, refused (400) when an edit's type is unknown or its beta is missing."""
    raw = body.get("context_management")
    if raw is None:
        return ContextManagement()
    if not isinstance(raw, Mapping) or not isinstance(raw.get("edits"), list):
        raise bad_request("context_management: expected an object with an `edits` list")
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
    found: dict[str, Mapping[str, Any]] = {}
    for i, edit in enumerate(raw["edits"]):
        kind = edit.get("type") if isinstance(edit, Mapping) else None
        if kind not in _BETAS:
            raise bad_request(
                f"context_management.edits.{i}.type: unknown edit {kind!r}; expected one of {sorted(_BETAS)}"
            )
        if _BETAS[kind] not in betas:
            raise bad_request(
                f"context_management.edits.{i}: {kind} is in beta; send the header anthropic-beta: {_BETAS[kind]}"
            )
        found[kind] = edit
    return ContextManagement(
        clear_tool_uses=found.get(CLEAR_TOOL_USES), clear_thinking=found.get(CLEAR_THINKING), compact=found.get(COMPACT)
    )


def after_last_compaction(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every block before the last compaction block dropped (their places kept, empty, so
    positions still match the request's breakpoints)."""
    where = None
    for i, message in enumerate(messages):
        for j, block in enumerate(message["content"]):
            if block.get("type") == "compaction":
                where = (i, j)
    if where is None:
        return messages
    i, j = where
    return [
        {"role": m["role"], "content": [] if k < i else (m["content"][j:] if k == i else m["content"])}
        for k, m in enumerate(messages)
    ]


def clear_tool_uses(
    edit: Mapping[str, Any], messages: list[dict[str, Any]], prompt_tokens: int, tokens_of: Any
) -> tuple[dict[str, Any] | None, str]:
    """Apply clear_tool_uses_20250919 in place (the blocks are the twin's own parse of the body); the applied edit
    (None when nothing was cleared) and a twin note when the request left the trigger or keep to defaults."""
    trigger, keep = edit.get("trigger"), edit.get("keep")
    if not isinstance(trigger, Mapping) or not isinstance(keep, Mapping):
        return None, "context editing: the request left clear_tool_uses' trigger or keep to the vendor's defaults, "
    uses = [
        (b, m)
        for m in messages
        if m["role"] == "assistant"
        for b in m["content"]
        if b.get("type") == "tool_use" and b.get("name") not in (edit.get("exclude_tools") or ())
    ]
    count = sum(1 for m in messages for b in m["content"] if b.get("type") == "tool_use")
    fired = prompt_tokens > trigger["value"] if trigger.get("type") == "input_tokens" else count > trigger["value"]
    if not fired:
        return None, ""
    results = {
        b["tool_use_id"]: b
        for m in messages
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result"
    }
    oldest = uses[: max(len(uses) - int(keep["value"]), 0)]
    targets = [
        (use, results[use["id"]])
        for use, _ in oldest
        if use["id"] in results and results[use["id"]].get("content") != CLEARED
    ]
    cleared = sum(tokens_of(result) for _, result in targets)
    least = edit.get("clear_at_least")
    if not targets or (isinstance(least, Mapping) and cleared < least["value"]):
        return None, ""
    inputs = edit.get("clear_tool_inputs") is True
    before = cleared + (sum(tokens_of(use) for use, _ in targets) if inputs else 0)
    for use, result in targets:
        result["content"] = CLEARED
        if inputs:
            use["input"] = {}
    after = sum(tokens_of(result) for _, result in targets) + (
        sum(tokens_of(use) for use, _ in targets) if inputs else 0
    )
    return {"type": CLEAR_TOOL_USES, "cleared_tool_uses": len(targets), "cleared_input_tokens": before - after}, ""


def clear_thinking(
    edit: Mapping[str, Any], messages: list[dict[str, Any]], tokens_of: Any
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Apply clear_thinking_20251015: the messages with the thinking of older assistant turns left off, and the
    applied edit (None when nothing was cleared)."""
    keep = edit.get("keep", DEFAULT_THINKING_KEEP)
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return messages, None
    if not isinstance(keep, Mapping):
        return messages, None
    thinking = [
        i
        for i, m in enumerate(messages)
        if m["role"] == "assistant" and any(b.get("type") in ("thinking", "redacted_thinking") for b in m["content"])
    ]
    older = set(thinking[: max(len(thinking) - int(keep["value"]), 0)])
    if not older:
        return messages, None
    tokens = 0
    edited = []
    for i, m in enumerate(messages):
        if i in older:
            gone = [b for b in m["content"] if b.get("type") in ("thinking", "redacted_thinking")]
            tokens += sum(tokens_of(b) for b in gone)
            m = {"role": m["role"], "content": [b for b in m["content"] if b not in gone]}
        edited.append(m)
    return edited, {"type": CLEAR_THINKING, "cleared_thinking_turns": len(older), "cleared_input_tokens": tokens}


def summary_of(messages: list[dict[str, Any]]) -> str:
    """The twin's summary of a conversation: each turn's text and each tool call with its result, cut short."""
    lines = []
    names: dict[str, str] = {}
    for m in messages:
        for b in m["content"]:
            kind = b.get("type")
            if kind == "text":
                lines.append(f"{m['role']}: {str(b['text'])[:SUMMARY_CHARS]}")
            elif kind == "compaction" and b.get("content"):
                lines.append(str(b["content"]))
            elif kind == "tool_use":
                names[b["id"]] = f"{b.get('name')}({_short(b.get('input'))})"
            elif kind == "tool_result":
                lines.append(f"tool {names.get(b['tool_use_id'], b['tool_use_id'])} -> {_short(b.get('content'))}")
    return "\n".join(lines) or "(nothing to summarize)"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text[:SUMMARY_CHARS]


@attrs.frozen
class Edited:
    """The prompt after context editing: its messages, the edits applied (as applied_edits reports them), and a
    twin note for what was not emulated."""

    messages: list[dict[str, Any]]
    applied: list[dict[str, Any]]
    note: str = ""


def edit_context(
    managed: ContextManagement,
    messages: list[dict[str, Any]],
    *,
    tokens_of: Callable[[Mapping[str, Any]], int],
    prompt_tokens: Callable[[list[dict[str, Any]]], int],
) -> Edited:
    """Apply the request's context edits (thinking first, then tool uses, as the request lists them by the SDK's
    order of strategies) to the prompt before the model sees it."""
    applied: list[dict[str, Any]] = []
    note = ""
    if managed.clear_thinking is not None:
        messages, edit = clear_thinking(managed.clear_thinking, messages, tokens_of)
        applied += [edit] if edit is not None else []
    if managed.clear_tool_uses is not None:
        edit, note = clear_tool_uses(managed.clear_tool_uses, messages, prompt_tokens(messages), tokens_of)
        applied += [edit] if edit is not None else []
    return Edited(messages=messages, applied=applied, note=note and note + "so the twin cleared nothing. ")


def compacted(messages: list[dict[str, Any]], compaction: dict[str, Any]) -> list[dict[str, Any]]:
    """The compacted context the answer continues from: the compaction block in place of every message, then the
    request's last user message (what the twin's policy answers). Every message keeps its place (the dropped ones
    empty, the block opening the first, a user turn), so positions still match the request's breakpoints."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    out = []
    for i, m in enumerate(messages):
        content = m["content"] if i == last else []
        out.append({"role": m["role"], "content": [compaction, *content] if i == 0 else content})
    return out
