"""Chat Completions wire (OpenAI, vLLM, SGLang, llama.cpp, Cerebras; OpenRouter builds on it).

Grouping: system and stable head become one system message (many open-model chat templates accept a single
system message only); each canonical tool result becomes a `tool` message; assistant text and tool calls share
one assistant message. Consecutive user or assistant messages are merged, because several chat templates reject
roles that do not alternate. Chat Completions has no reasoning replay, so reasoning is parsed (`reasoning`, or
the older `reasoning_content`) but never sent back. Gemini's tool calls are the exception: a call's thought
signature (ToolCallBlock.signature, read from `extra_content.google.thought_signature`) goes back with the call
on the gemini vendor's requests, because Gemini 3 answers a replayed call without it with a 400 ("When using
Gemini 3 models, you must pass back thought signatures during function calling, otherwise you will get a
validation error (4xx status code)", ai.google.dev/gemini-api/docs/thought-signatures).

On a breakpoint cache (`breakpoints`, GPT-5.6 and later) every content is a list of parts, the system prompt and
the stable head are two parts of the system message, and segue.wire.breakpoints marks its boundaries with
`prompt_cache_breakpoint`; `prompt_cache_options` carries the mode and the one TTL Chat Completions offers. Chat
Completions has no `prewarm`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs

from segue._core.contracts import OutputFormat, ProviderNote, ProviderRequest, WirePrefix
from segue._support.readers import Unknown, as_map, stop_reason
from segue.errors import MalformedResponseError, WireError
from segue.generated import (
    CompactionBlock,
    ContentBlock,
    Message,
    ModelSettings,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from segue.generated.wire import openai_chat as g
from segue.wire.breakpoints import BreakpointCache, mark
from segue.wire.common import ASSISTANT, SYSTEM, ParsedResponse, WireRequest
from segue.wire.openai_responses.request import cache_key
from segue.wire.settings import EFFORT_SETTING, TOOL_CHOICE_MODES, refuse, refuse_values, refused

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionToolChoiceOptionParam
    from openai.types.chat.completion_create_params import PromptCacheOptions
    from openai.types.shared_params import ResponseFormatJSONSchema

WIRE = "openai_chat"
#: The vendor id whose requests carry tool calls' thought signatures back (the catalog's Gemini vendor).
SIGNATURE_VENDOR = "gemini"
#: ReasoningBlock.vendor of reasoning parsed from Chat Completions (never replayed).
REASONING_VENDOR = "openai_chat"

#: Turns a reasoning block into its `reasoning_details` entry, or None when it cannot be replayed.
Replay = Callable[[ReasoningBlock], dict[str, Any] | None]
#: Reads the reasoning of an assistant message (the wire's own fields: plain text here, entries on OpenRouter).
Reasoning = Callable[[g.ChatMessage, str | None], list[ReasoningBlock]]


#: The ModelSettings.tool_choice forms a catalog row's llm.tool_choice_forms names (a tool's name is "named").
TOOL_CHOICE_FORMS = (*TOOL_CHOICE_MODES, "named")


@attrs.frozen
class ChatPath:
    """What the serving path takes on this wire, from its catalog row (`llm.max_tokens_field`,
    `llm.tool_choice_forms`, `llm.fresh_prompt_fields`); the defaults are a path the catalog says nothing of."""

    #: The key that carries max_tokens; None: max_completion_tokens on OpenAI, max_tokens elsewhere.
    max_tokens_field: str | None = None
    #: The tool_choice forms the path honours (TOOL_CHOICE_FORMS); None: every form.
    tool_choice_forms: tuple[str, ...] | None = None
    #: Body fields that make the server evaluate the prompt afresh (ProviderRequest.fresh).
    fresh_fields: Mapping[str, Any] = attrs.field(factory=dict)
    #: Names the path in a refusal (the catalog label, "smollm2-135m@llamacpp").
    label: str = ""


def check_path_settings(settings: ModelSettings, path: ChatPath) -> None:
    """Refuse a tool_choice form the path would drop silently (llama-server runs a named tool_choice as auto)."""
    choice = settings.tool_choice
    forms = path.tool_choice_forms
    if choice is None or forms is None:
        return
    form = choice if choice in TOOL_CHOICE_MODES else "named"
    if form not in forms:
        taken = ", ".join(f for f in TOOL_CHOICE_FORMS if f in forms)
        raise WireError(
            f"model_settings.tool_choice={choice!r} ({form}) is not honoured on {path.label or 'this path'}: the "
            f"catalog's llm.tool_choice_forms says it takes {taken}, and the server would run the request as if "
            "tool_choice were unset; use one of those (say which tool to call in the prompt), or serve the run from "
            "a path that takes a named tool_choice"
        )


def build_request(
    request: ProviderRequest,
    *,
    model: str,
    vendor: str,
    breakpoints: BreakpointCache | None = None,
    stream: bool = False,
    output: OutputFormat | None = None,
    path: ChatPath | None = None,
) -> WireRequest:
    """The Chat Completions body; `output`: structured output as `response_format` (json_schema); `path`: what
    the serving path takes (its catalog row), where it differs from the wire's defaults."""
    refuse_prewarm(request, WIRE)
    parts = breakpoints is not None
    messages, anchors = build_messages(
        request.messages, parts=parts, wire_prefix=request.wire_prefix, signatures=vendor == SIGNATURE_VENDOR
    )
    fixed = insert_system(messages, request, parts=parts)
    options = None
    if breakpoints is not None:
        mark(messages, fixed, anchors, request, breakpoints, g.prompt_cache_breakpoint)
        options = cache_options(breakpoints)
    openai = vendor == "openai"
    path = path or ChatPath()
    # OpenAI's reasoning models reject max_tokens; open servers (vLLM, llama.cpp) read max_tokens. The catalog's
    # llm.max_tokens_field names the key where a path says.
    field = path.max_tokens_field or ("max_completion_tokens" if openai else "max_tokens")
    settings = request.settings  # asked of this path before any row (segue.run.settings.check_paths)
    body = g.request(
        model=model,
        messages=messages,
        tools=[g.tool(t) for t in request.tools] or None,
        response_format=response_format(output) if output is not None else None,
        max_completion_tokens=settings.max_tokens if field == "max_completion_tokens" else None,
        max_tokens=settings.max_tokens if field == "max_tokens" else None,
        temperature=settings.temperature,
        top_p=settings.top_p,
        stop=settings.stop,
        seed=settings.seed,
        tool_choice=tool_choice(settings.tool_choice),
        # Only beside tools: OpenAI refuses parallel_tool_calls on a request that offers none.
        parallel_tool_calls=settings.parallel_tool_calls if request.tools else None,
        reasoning_effort=settings.reasoning_effort,
        prompt_cache_key=cache_key(None, request.cache_key) if openai and request.cache_key else None,
        prompt_cache_options=options,
        stream=stream,
    )
    out = dict(body)
    if request.fresh:
        out.update(path.fresh_fields)  # the path's own keys (llama.cpp's cache_prompt), outside the SDK's types
    return WireRequest(body=out, output_limit=settings.max_tokens)


#: The vendor-native context settings, which Chat Completions has no parameter for (the pinned openai SDK's
#: CompletionCreateParams has no context_management; compaction is a Responses feature).
REFUSED_SETTINGS = refused(
    compaction="Chat Completions has no server-side compaction (CompletionCreateParams has no context_management; "
    "OpenAI's is on the Responses API, Anthropic's on the Messages API)",
    context_editing="context editing is Anthropic's (Messages API context_management); Chat Completions has none",
)


def check_settings(settings: ModelSettings) -> None:
    """Chat Completions takes every ModelSettings field but the vendor-native context ones (reasoning_effort: the
    values of the pinned SDK's ReasoningEffort)."""
    refuse(settings, WIRE, REFUSED_SETTINGS)
    refuse_values(WIRE, EFFORT_SETTING, settings.reasoning_effort, g.REASONING_EFFORTS)


def tool_choice(choice: str | None) -> ChatCompletionToolChoiceOptionParam | None:
    """ModelSettings.tool_choice as Chat Completions (and OpenRouter) take it: a mode, or the named function."""
    if choice is None:
        return None
    for mode in TOOL_CHOICE_MODES:  # the three modes are spelled alike on the wire
        if choice == mode:
            return mode
    return g.named_tool_choice(name=choice)


def response_format(output: OutputFormat) -> ResponseFormatJSONSchema:
    """Structured output on Chat Completions (and OpenRouter)."""
    return g.json_schema_format(name=output.name, schema=output.schema, strict=output.strict)


def refuse_prewarm(request: ProviderRequest, wire: str) -> None:
    if request.prewarm:
        raise WireError(
            f"prewarm: the {wire} wire has no way to populate the prompt cache without generating (Chat "
            "Completions' prompt_cache_options take no prewarm); use OpenAIResponsesProvider on a breakpoint cache "
            "(GPT-5.6 and later) or AnthropicProvider"
        )


def insert_system(messages: list[Any], request: ProviderRequest, *, parts: bool) -> list[Any]:
    """Put the system prompt and the stable head first, as one system message; with `parts` each is a content
    part of its own, and those parts are returned (the fixed cache breakpoint positions)."""
    texts = [text for text in (request.system, request.stable_head) if text]
    if not texts:
        return []
    if not parts:
        messages.insert(0, g.system_message(content="\n\n".join(texts)))
        return []
    system = [g.text_part(TextBlock(text=t)) for t in texts]
    messages.insert(0, g.system_message(content=system))
    return list(system)


def cache_options(cache: BreakpointCache) -> PromptCacheOptions:
    """The request's `prompt_cache_options` on a breakpoint cache."""
    # 30m is the only TTL Chat Completions offers; the driver refuses others.
    return g.prompt_cache_options(mode=cache.mode, ttl=cache.ttl if cache.ttl == "30m" else None)


#: What the last message built holds while the next may still merge into it: role, parts, the text of its only
#: part when that part is text, tool calls, reasoning_details. A plain tuple: one is made per message.
_Last = tuple[str, list[Any], str | None, list[Any], list[Any]]


def build_messages(
    messages: list[Message],
    *,
    replay: Replay | None = None,
    reasoning_vendor: str | None = None,
    parts: bool = False,
    wire_prefix: WirePrefix | None = None,
    signatures: bool = False,
) -> tuple[list[Any], list[Any]]:
    """Chat messages plus, per canonical message, the last content part it produced (its cache anchor).

    `replay` turns reasoning of `reasoning_vendor` into `reasoning_details` entries; all other reasoning is
    dropped. With `parts`, content is always a list of parts, so any part can carry cache_control; without it
    a lone text part is sent as a plain string (what every server accepts) and anchors are not meaningful.
    Consecutive user or assistant messages merge, as several chat templates reject roles that do not alternate.
    With `signatures`, a tool call that came with a thought signature is sent back with it (Gemini); other servers
    never see the field. The run's `wire_prefix` (if any) is built once per run and continued from a copy.
    """

    def build(head: Sequence[Message]) -> tuple[list[Any], list[Any], _Last | None]:
        out: list[Any] = []
        anchors: list[Any] = []
        return out, anchors, _add(head, out, anchors, None, replay, reasoning_vendor, parts, signatures)

    if wire_prefix is None:
        out, anchors, last = build(messages)
        return out, anchors
    built, built_anchors, last = wire_prefix.built((WIRE, replay, reasoning_vendor, parts, signatures), messages, build)
    out, anchors = list(built), list(built_anchors)
    _add(messages[len(anchors) :], out, anchors, last, replay, reasoning_vendor, parts, signatures)
    return out, anchors


def _add(
    messages: Sequence[Message],
    out: list[Any],
    anchors: list[Any],
    last: _Last | None,
    replay: Replay | None,
    reasoning_vendor: str | None,
    parts: bool,
    signatures: bool,
) -> _Last | None:
    """Append `messages` to `out` and `anchors`, `last` being what the message before may still merge; returns
    that for the last message added. Merging never changes a list it was given: it builds new ones."""
    roles, message = g.ROLES, g.message  # looked up once: this loop runs for every message of every request
    for m in messages:
        content: list[Any] = []
        calls: list[Any] = []
        details: list[dict[str, Any]] = []
        first: Any = None  # the first content block
        anchor: Any = None
        for b in m.content:
            if isinstance(b, ToolResultBlock):
                if parts:
                    anchor = g.text_part(TextBlock(text=b.content))
                    out.append(g.tool_message_parts(b, parts=[anchor]))
                else:
                    out.append(g.tool_message(b))  # each result is a message of its own, after its call
                last = None
            elif isinstance(b, ToolCallBlock):
                call = g.tool_call(b)
                if signatures and b.signature is not None:
                    # A key no SDK TypedDict has (Gemini's), so the call is passed as the plain dict it is.
                    g.thought_signature(cast("dict[str, Any]", call), signature=b.signature)
                calls.append(call)
            elif isinstance(b, ReasoningBlock):
                entry = replay(b) if replay is not None and b.vendor == reasoning_vendor else None
                if entry is not None:
                    details.append(entry)
            elif isinstance(b, CompactionBlock):
                continue  # only the vendor that made a compaction can read it; none speaks Chat Completions
            else:
                first = first or b
                content.append(g.content_part(b))
        if content:
            anchor = content[-1]
        anchors.append(anchor)
        if not (content or calls or details):
            continue
        # Without parts a lone text part goes as a plain string, what every server accepts.
        text = first.text if not parts and len(content) == 1 and isinstance(first, TextBlock) else None
        role = roles[m.role]
        mergeable = m.role != SYSTEM
        if last is not None and last[0] == role and mergeable:
            out.pop()  # merged into the message before, which is built again
            _, last_parts, last_text, last_calls, last_details = last
            if not content:
                text = last_text
            elif last_parts:
                text = None
            content, calls, details = last_parts + content, last_calls + calls, last_details + details
        # With no content at all (an assistant message of tool calls only) the content is null.
        value = content or None if text is None else text
        out.append(message(role=role, content=value, tool_calls=calls or None, reasoning_details=details or None))
        last = (role, content, text, calls, details) if mergeable else None
    return last


#: Where open models' chat templates start a tool call in their text (Hermes, Qwen and SmolLM2 `<tool_call>`,
#: Llama 3.1 `<|python_tag|>`, Mistral `[TOOL_CALLS]`, LFM2 `<|tool_call_start|>`). A server parses a complete
#: call out of the text; one cut at the output limit stays text (`<tool_call>\n{"name": "describe_table`).
_CALL_MARKUP = re.compile(r"<tool_call>|<\|python_tag\|>|\[TOOL_CALLS\]|<\|tool_call_start\|>")
_CALL_NAME = re.compile(r'"name"\s*:\s*"([^"]+)')  # as far as it was written


def cut_call_markup(text: str) -> tuple[str, str] | None:
    """(the text before it, the cut call's name) when `text` holds the start of a tool call's markup; None when it
    holds none."""
    start = _CALL_MARKUP.search(text)
    if start is None:
        return None
    name = _CALL_NAME.search(text, start.end())
    return text[: start.start()].rstrip(), name.group(1) if name else "(unnamed)"


def parse_response(
    data: Mapping[str, Any],
    *,
    model: str | None = None,
    reasoning: Reasoning | None = None,
    tools_offered: bool = False,
) -> ParsedResponse:
    """A ChatCompletion (or one assembled from a stream): reasoning, then text, then tool calls.

    Cut at the output limit (`length`) with tools offered, an answer is never the cut start of a call: tool-call
    markup left in the text, or nothing at all (a streaming server withholds markup it has not parsed yet), is a
    truncated call (ParsedResponse.truncated_calls), which the run asks again for or reports."""
    where = "chat completion"
    completion = g.parse_completion(data)
    model = model or completion.model
    if not completion.choices:
        raise MalformedResponseError(f"{where}: no choices in the response (the server returned nothing to parse)")
    choice = completion.choices[0]
    message = choice.message
    notes: list[ProviderNote] = []
    content: list[ContentBlock] = list((reasoning or plain_reasoning)(message, model))
    stop = stop_reason(choice.finish_reason, g.STOP_REASONS)
    cut = stop == "max_tokens"
    truncated: list[str] = []
    text = message.content if isinstance(message.content, str) else ""
    markup = cut_call_markup(text) if cut and tools_offered else None
    if markup is not None:
        text, name = markup
        truncated.append(name)
    elif cut and tools_offered and not text.strip() and not message.tool_calls:
        truncated.append("(unnamed)")
    if text:
        content.append(TextBlock(text=text))
    for raw in message.tool_calls or []:
        entry = as_map(raw, f"{where} tool call")
        try:
            call = g.parse_tool_call_entry(entry, model)
            if isinstance(call, Unknown) and call.tag is None:  # servers that leave the type out: a function call
                call = g.parse_tool_call(entry, model)
        except MalformedResponseError:
            if not cut:
                raise
            # Cut at the output limit while writing this call (llama.cpp answers `"arguments": "{"` beside the
            # complete calls, finish_reason "length"): the complete ones are kept, this one is reported.
            truncated.append(_call_name(entry))
            continue
        if isinstance(call, Unknown):
            notes.append(
                ProviderNote(
                    kind="unknown-output",
                    message=f"the server returned a {call.tag!r} tool call segue does not keep; dropped",
                )
            )
        else:
            content.append(call)
    usage = completion.usage
    if usage is None:
        notes.append(
            ProviderNote(kind="usage-missing", message="the server reported no usage; token counts are recorded as 0")
        )
        usage = Usage(input_tokens=0, output_tokens=0)
    return ParsedResponse(
        message=Message(role=ASSISTANT, content=content),
        usage=with_timings(usage, completion.timings),
        stop_reason=stop,
        notes=notes,
        served_model=completion.model,
        truncated_calls=tuple(truncated),
    )


def _call_name(entry: Mapping[str, Any]) -> str:
    """The name of a tool call whose arguments could not be read, as far as the server wrote it."""
    try:
        name = g.parse_call_head(entry).name
    except MalformedResponseError:
        name = None
    return name or "(unnamed)"


def plain_reasoning(message: g.ChatMessage, model: str | None) -> list[ReasoningBlock]:
    """`reasoning` (vLLM, OpenRouter) or the deprecated `reasoning_content` as display-only reasoning."""
    for text in (message.reasoning, message.reasoning_content):
        if isinstance(text, str) and text:
            return [ReasoningBlock(vendor=REASONING_VENDOR, model=model, format="chat.reasoning_text", text=text)]
    return []


def parse_usage(u: Mapping[str, Any], timings: Any = None) -> Usage:
    """prompt_tokens is the whole prompt; cached parts from prompt_tokens_details, else llama.cpp's timings."""
    return with_timings(
        g.parse_usage(u), None if timings is None else g.parse_timings(as_map(timings, "llama.cpp timings"))
    )


def with_timings(usage: Usage, timings: g.Timings | None) -> Usage:
    """Cached tokens from llama.cpp's timings when the usage does not say (a missing cached field stays None, the
    server did not say: vLLM omits it unless enabled, never 0)."""
    if usage.cache_read_tokens is not None or timings is None or timings.cache_n is None:
        return usage
    prompt = max(usage.input_tokens, timings.cache_n + (timings.prompt_n or 0))
    return attrs.evolve(usage, input_tokens=prompt, cache_read_tokens=timings.cache_n)
