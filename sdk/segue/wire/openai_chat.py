"""Chat Completions wire (OpenAI, vLLM, SGLang, llama.cpp, Cerebras; OpenRouter builds on it).

Grouping: system and stable head become one system message (many open-model chat templates accept a single
system message only); each canonical tool result becomes a `tool` message; assistant text and tool calls share
one assistant message. Consecutive user or assistant messages are merged, because several chat templates reject
roles that do not alternate. Chat Completions has no reasoning replay, so reasoning is parsed (`reasoning`, or
the older `reasoning_content`) but never sent back.

On a breakpoint cache (`breakpoints`, GPT-5.6 and later) every content is a list of parts, the system prompt and
the stable head are two parts of the system message, and segue.wire.breakpoints marks its boundaries with
`prompt_cache_breakpoint`; `prompt_cache_options` carries the mode and the one TTL Chat Completions offers. Chat
Completions has no `prewarm`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from segue.generated import ContentBlock, Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from segue.generated.wire import openai_chat as g
from segue.providers.base import ProviderNote, ProviderRequest
from segue.wire.breakpoints import BreakpointCache, mark
from segue.wire.common import (
    MalformedResponseError,
    ParsedResponse,
    WireError,
    WireRequest,
    as_map,
    opt_int,
    opt_obj,
    req_list,
    req_map,
    stop_reason,
)
from segue.wire.openai_responses import cache_key

if TYPE_CHECKING:
    from openai.types.chat.completion_create_params import PromptCacheOptions

WIRE = "openai_chat"
#: ReasoningBlock.vendor of reasoning parsed from Chat Completions (never replayed).
REASONING_VENDOR = "openai_chat"
REASONING_KEYS = ("reasoning", "reasoning_content")
_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}

#: Turns a reasoning block into its `reasoning_details` entry, or None when it cannot be replayed.
Replay = Callable[[ReasoningBlock], dict[str, Any] | None]


def build_request(
    request: ProviderRequest,
    *,
    model: str,
    vendor: str,
    breakpoints: BreakpointCache | None = None,
    stream: bool = False,
) -> WireRequest:
    refuse_prewarm(request, WIRE)
    parts = breakpoints is not None
    messages, anchors = build_messages(request.messages, parts=parts)
    fixed = insert_system(messages, request, parts=parts)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [g.tool(t) for t in request.tools]
    if request.max_tokens is not None:
        # OpenAI's reasoning models reject max_tokens; open servers (vLLM, llama.cpp) know only max_tokens.
        body["max_completion_tokens" if vendor == "openai" else "max_tokens"] = request.max_tokens
    if vendor == "openai" and request.cache_key:
        body["prompt_cache_key"] = cache_key(None, request.cache_key)
    if breakpoints is not None:
        mark(fixed, anchors, request, breakpoints)
        body["prompt_cache_options"] = cache_options(breakpoints)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return WireRequest(body=body)


def refuse_prewarm(request: ProviderRequest, wire: str) -> None:
    if request.prewarm:
        raise WireError(
            f"prewarm: the {wire} wire has no way to populate the prompt cache without generating (Chat "
            "Completions' prompt_cache_options take no prewarm); use OpenAIResponsesProvider on a breakpoint cache "
            "(GPT-5.6 and later) or AnthropicProvider"
        )


def insert_system(messages: list[dict[str, Any]], request: ProviderRequest, *, parts: bool) -> list[Any]:
    """Put the system prompt and the stable head first, as one system message; with `parts` each is a content
    part of its own, and those parts are returned (the fixed cache breakpoint positions)."""
    texts = [text for text in (request.system, request.stable_head) if text]
    if not texts:
        return []
    if not parts:
        messages.insert(0, {"role": "system", "content": "\n\n".join(texts)})
        return []
    system = [g.text_part(TextBlock(text=t)) for t in texts]
    messages.insert(0, {"role": "system", "content": system})
    return list(system)


def cache_options(cache: BreakpointCache) -> PromptCacheOptions:
    """The request's `prompt_cache_options` on a breakpoint cache."""
    options: PromptCacheOptions = {"mode": cache.mode}
    if cache.ttl == "30m":  # the only TTL Chat Completions offers; the driver refuses others
        options["ttl"] = cache.ttl
    return options


def build_messages(
    messages: list[Message],
    *,
    replay: Replay | None = None,
    reasoning_vendor: str | None = None,
    parts: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
    """Chat messages plus, per canonical message, the last content part it produced (its cache anchor).

    `replay` turns reasoning of `reasoning_vendor` into `reasoning_details` entries; all other reasoning is
    dropped. With `parts`, content is always a list of parts, so any part can carry cache_control; without it
    a lone text part is sent as a plain string (what every server accepts) and anchors are not meaningful.
    """
    out: list[dict[str, Any]] = []
    anchors: list[dict[str, Any] | None] = []
    for m in messages:
        content: list[Any] = []
        calls: list[Any] = []
        details: list[dict[str, Any]] = []
        anchor: dict[str, Any] | None = None
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                tool: dict[str, Any] = g.tool_message(b)  # type: ignore[assignment]
                if parts:
                    anchor = g.text_part(TextBlock(text=b.content))  # type: ignore[assignment]
                    tool["content"] = [anchor]
                out.append(tool)  # each result is a message of its own, right after the call it answers
            elif isinstance(b, ToolCallBlock):
                calls.append(g.tool_call(b))
            elif isinstance(b, ReasoningBlock):
                entry = replay(b) if replay is not None and b.vendor == reasoning_vendor else None
                if entry is not None:
                    details.append(entry)
            else:
                content.append(g.content_part(b))
        if content:
            anchor = content[-1]
        anchors.append(anchor)
        if content or calls or details:
            _append(out, "user" if m.role == "tool" else m.role, content, calls, details, parts)
    return out, anchors


def _append(
    out: list[dict[str, Any]], role: str, content: list[Any], calls: list[Any], details: list[Any], parts: bool
) -> None:
    last = out[-1] if out else None
    if last is not None and last["role"] == role and role in ("user", "assistant"):
        content = _as_parts(last["content"]) + content
        calls = last.get("tool_calls", []) + calls
        details = last.get("reasoning_details", []) + details
        out.pop()
    message: dict[str, Any] = {"role": role, "content": _content(content, parts)}
    if calls:
        message["tool_calls"] = calls
    if details:
        message["reasoning_details"] = details
    out.append(message)


def _as_parts(content: Any) -> list[Any]:
    if content is None:
        return []
    return [g.text_part(TextBlock(text=content))] if isinstance(content, str) else list(content)


def _content(content: list[Any], parts: bool) -> Any:
    if not content:
        return None  # an assistant message carrying only tool calls
    if not parts and len(content) == 1 and content[0]["type"] == "text":
        return content[0]["text"]
    return content


def parse_response(
    data: Mapping[str, Any],
    *,
    model: str | None = None,
    reasoning: Callable[[Mapping[str, Any], str | None], list[ReasoningBlock]] | None = None,
) -> ParsedResponse:
    """A ChatCompletion (or one assembled from a stream): reasoning, then text, then tool calls."""
    where = "chat completion"
    model = model or data.get("model")
    choices = req_list(data, "choices", where)
    if not choices:
        raise MalformedResponseError(f"{where}: no choices in the response (the server returned nothing to parse)")
    choice = as_map(choices[0], f"{where} choice")
    message = req_map(choice, "message", f"{where} choice")
    notes: list[ProviderNote] = []
    content: list[ContentBlock] = list((reasoning or plain_reasoning)(message, model))
    text = message.get("content")
    if isinstance(text, str) and text:
        content.append(TextBlock(text=text))
    for raw in message.get("tool_calls") or []:
        entry = as_map(raw, f"{where} tool call")
        call = g.parse_tool_call(entry, model) if "type" not in entry else g.parse_tool_call_entry(entry, model)
        if call is None:
            notes.append(
                ProviderNote(
                    kind="unknown-output",
                    message=f"the server returned a {entry.get('type')!r} tool call segue does not keep; dropped",
                )
            )
        else:
            content.append(call)
    usage = data.get("usage")
    if usage is None:
        notes.append(
            ProviderNote(kind="usage-missing", message="the server reported no usage; token counts are recorded as 0")
        )
    return ParsedResponse(
        message=Message(role="assistant", content=content),
        usage=parse_usage(as_map(usage or {}, f"{where} usage"), data.get("timings")),
        stop_reason=stop_reason(choice.get("finish_reason"), _STOP),
        notes=notes,
    )


def plain_reasoning(message: Mapping[str, Any], model: str | None) -> list[ReasoningBlock]:
    """`reasoning` (vLLM, OpenRouter) or the deprecated `reasoning_content` as display-only reasoning."""
    for key in REASONING_KEYS:
        text = message.get(key)
        if isinstance(text, str) and text:
            return [ReasoningBlock(vendor=REASONING_VENDOR, model=model, format="chat.reasoning_text", text=text)]
    return []


def parse_usage(u: Mapping[str, Any], timings: Any = None) -> Usage:
    """prompt_tokens is the whole prompt; cached parts from prompt_tokens_details, else llama.cpp's timings.

    A missing cached field stays None (the server did not say: vLLM omits it unless enabled), never 0.
    """
    where = "chat usage"
    prompt = opt_int(u, "prompt_tokens", where) or 0
    details = opt_obj(u, "prompt_tokens_details", where)
    read = None if details is None else opt_int(details, "cached_tokens", where)
    write = None if details is None else opt_int(details, "cache_write_tokens", where)
    if read is None and isinstance(timings, Mapping):
        read = opt_int(timings, "cache_n", "llama.cpp timings")
        if read is not None:
            prompt = max(prompt, read + (opt_int(timings, "prompt_n", "llama.cpp timings") or 0))
    completion = opt_obj(u, "completion_tokens_details", where)
    return Usage(
        input_tokens=prompt,
        output_tokens=opt_int(u, "completion_tokens", where) or 0,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=None if completion is None else opt_int(completion, "reasoning_tokens", where),
    )
