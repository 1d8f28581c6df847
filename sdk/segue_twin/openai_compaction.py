"""OpenAI's server-side compaction in the twin (Responses `context_management`), per the vendor's guide.

Rules and their sources (developers.openai.com/api/docs/guides/compaction; docs/twin.md, "Fidelity rules"):
- "You can enable server-side compaction in a Responses create request ... by setting context_management with
  compact_threshold. When the rendered token count crosses the configured threshold, the server runs server-side
  compaction"; "The response stream includes the encrypted compaction item". An entry whose type is not
  compaction is refused: "Currently only 'compaction' is supported" (the pinned SDK's ContextManagement.type).
- The item "is opaque and not intended to be human-interpretable": the twin seals its summary (as it seals
  reasoning) and only the twin can open it, as "Only the provider that produced a compaction item can read it"
  (openrouter.ai's Responses compaction page).
- "After appending output items to the previous input items, you can drop items that came before the most recent
  compaction item ... The latest compaction item carries the necessary context to continue the conversation": the
  twin reads (and caches) the input from the latest compaction item on.
Not emulated, for want of a source: the threshold the server uses when an entry gives none (the twin then does not
compact), and how the compaction pass is billed (the response's usage is the request's, as for any request).
The twin's summary keeps each message's text and each tool call with its output, cut to SUMMARY_CHARS each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from segue._core.tokens import count_json
from segue_twin.errors import bad_request
from segue_twin.openai_cache import PromptPiece
from segue_twin.signing import seal, unseal
from segue_twin.state import TwinState

SUMMARY_CHARS = 200
_KIND = "compaction"


def compaction_threshold(body: Mapping[str, Any]) -> int | None:
    """The request's compact_threshold (None: no compaction entry, or one without a threshold)."""
    raw = body.get("context_management")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise bad_request("Invalid type for 'context_management': expected an array.", param="context_management")
    threshold = None
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or entry.get("type") != _KIND:
            raise bad_request(
                f"Invalid value for 'context_management[{i}].type': only 'compaction' is supported.",
                param=f"context_management[{i}].type",
            )
        value = entry.get("compact_threshold")
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise bad_request(
                f"Invalid 'context_management[{i}].compact_threshold': expected a positive integer.",
                param=f"context_management[{i}].compact_threshold",
            )
        threshold = value if value is not None else threshold
    return threshold


def after_last_compaction(state: TwinState, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input from its latest compaction item on, each compaction item opened (`twin_summary`); one the twin did
    not make is refused, as another provider's would be."""
    latest = max((i for i, item in enumerate(items) if item["type"] == _KIND), default=None)
    if latest is None:
        return items
    out = []
    for i, item in enumerate(items[latest:], start=latest):
        if item["type"] == _KIND:
            payload = unseal(state.secret, item.get("encrypted_content"))
            if payload is None:
                raise bad_request(
                    f"Invalid 'input[{i}].encrypted_content': the compaction item could not be decrypted.",
                    param=f"input[{i}].encrypted_content",
                )
            item = {**item, "twin_summary": str(payload.get("summary", ""))}
        out.append(item)
    return out


def compaction_item(
    state: TwinState, items: list[dict[str, Any]], prompt: Sequence[PromptPiece], threshold: int | None
) -> dict[str, Any] | None:
    """The compaction item the response opens with when the rendered prompt crosses `threshold` (None: below it, or
    no threshold); its `twin_summary` is the twin's own, kept off the wire."""
    if threshold is None or sum(count_json(p.render) for p in prompt) <= threshold:
        return None
    summary = summary_of(items)
    return {
        "id": state.ids.next("cmp"),
        "type": _KIND,
        "encrypted_content": seal(state.secret, {"summary": summary}),
        "twin_summary": summary,
    }


def compacted(items: list[dict[str, Any]], compaction: dict[str, Any]) -> list[dict[str, Any]]:
    """What the answer is made from after compacting: the compaction, then the input's last user message."""
    last = [i for i in items if i["type"] == "message" and i.get("role") == "user"][-1:]
    return [compaction, *last]


def summary_of(items: list[dict[str, Any]]) -> str:
    lines = []
    for item in items:
        kind = item["type"]
        if kind == "message":
            lines.append(f"{item.get('role')}: {_text(item.get('content'))[:SUMMARY_CHARS]}")
        elif kind == _KIND:
            lines.append(str(item.get("twin_summary", "")))
        elif kind == "function_call":
            lines.append(f"call {item.get('name')}({str(item.get('arguments'))[:SUMMARY_CHARS]})")
        elif kind == "function_call_output":
            lines.append(f"-> {_text(item.get('output'))[:SUMMARY_CHARS]}")
    return "\n".join(lines) or "(nothing to summarize)"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""
