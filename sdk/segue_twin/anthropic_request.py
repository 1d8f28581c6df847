"""Parse and validate an Anthropic Messages request the way the vendor does (400 invalid_request_error).

Rules and their sources (see docs/twin.md):
- the first turn is a user turn (later turns alternate once consecutive ones are combined, below);
- every tool_use is answered by tool_result blocks, first in the next user message
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls);
- at most `max_breakpoints` cache_control markers over tools, system and messages, and a 1h entry may not come
  after a 5m one (https://platform.claude.com/docs/en/build-with-claude/prompt-caching);
- with thinking on, the assistant turn answered by the final tool results starts with a thinking block, and
  `tool_choice` may not force tool use (`any` / `tool`)
  (https://platform.claude.com/docs/en/build-with-claude/extended-thinking);
- `max_tokens: 0` asks only to populate the prompt cache (the pinned SDK's `max_tokens` docstring), and is refused
  with `stream: true`, thinking on, structured outputs (`output_config.format`) or a forced `tool_choice`
  (the prompt-caching page, "pre-warming the cache");
- consecutive `user` or `assistant` turns "will be combined into a single turn" (the pinned SDK's `messages`
  docstring): the twin merges them before any other check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from segue_twin.errors import bad_request
from segue_twin.rules import CacheRules
from segue_twin.structured import anthropic_schema

BINDING_BETA = "thinking-binding-controls-2026-08-01"
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
_KNOWN_BLOCKS = frozenset(
    {
        "text",
        "image",
        "document",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "search_result",
        "compaction",
    }
)


@attrs.frozen(kw_only=True)
class AnthropicRequest:
    """A validated request, with system and every message's content normalised to lists of blocks."""

    model: str
    max_tokens: int
    stream: bool
    tools: list[dict[str, Any]]
    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    thinking: dict[str, Any] | None
    tool_choice: Any
    #: `output_config.effort` (message-level cache key) and `speed` (system-level), as sent (None when absent).
    effort: Any
    speed: Any
    #: The schema `output_config.format` constrains the answer to (None: free text).
    output_schema: Mapping[str, Any] | None = None
    drop_block: bool
    binding_requested: bool
    #: TTL name per breakpoint, keyed by path ("tools.0", "system.1", "messages.3.content.2").
    breakpoints: dict[str, str]

    @property
    def thinking_on(self) -> bool:
        return self.thinking is not None and self.thinking.get("type") in ("enabled", "adaptive")

    @property
    def prewarm(self) -> bool:
        """`max_tokens: 0`: populate the prompt cache without generating a response."""
        return self.max_tokens == 0

    @property
    def thinking_omitted(self) -> bool:
        return self.thinking is not None and self.thinking.get("display") == "omitted"


def parse_request(body: Mapping[str, Any], headers: Mapping[str, str], rules_of: Any) -> AnthropicRequest:
    """Validate ``body``; ``rules_of(model)`` gives the CacheRules used for breakpoint limits and TTL names."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("model: Field required (a non-empty model id string, e.g. 'claude-sonnet-4-6')")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise bad_request(
            f"max_tokens: Input should be an integer >= 0 (0 only populates the prompt cache), got {max_tokens!r}"
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request(f"stream: Input should be a valid boolean, got {stream!r}")
    tools = _tools(body.get("tools"))
    system = _system(body.get("system"))
    messages = _messages(body.get("messages"))
    thinking, drop_block, binding = _thinking(body.get("thinking"), max_tokens, headers)
    output_config = body.get("output_config")
    if output_config is not None and not isinstance(output_config, dict):
        raise bad_request(f"output_config: Input should be an object, got {output_config!r}")
    if max_tokens == 0:
        _check_prewarm(stream, thinking, output_config, body.get("tool_choice"))
    request_rules: CacheRules = rules_of(model)
    breakpoints = _breakpoints(tools, system, messages, body.get("cache_control"), request_rules)
    request = AnthropicRequest(
        model=model,
        max_tokens=max_tokens,
        stream=stream,
        tools=tools,
        system=system,
        messages=messages,
        thinking=thinking,
        tool_choice=body.get("tool_choice"),
        effort=(output_config or {}).get("effort"),
        speed=body.get("speed"),
        output_schema=anthropic_schema(output_config),
        drop_block=drop_block,
        binding_requested=binding,
        breakpoints=breakpoints,
    )
    _check_roles(messages)
    _check_tool_pairing(messages)
    if request.thinking_on:
        _check_tool_choice_allows_thinking(request.tool_choice)
        _check_thinking_leads_tool_loop(messages)
    return request


def _check_prewarm(stream: bool, thinking: Any, output_config: Any, tool_choice: Any) -> None:
    """`max_tokens: 0` only writes the cache; the settings that need a generated answer are refused with it."""
    refused = []
    if stream:
        refused.append("`stream: true`")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        refused.append(f"thinking ({thinking['type']!r})")
    if isinstance(output_config, dict) and output_config.get("format") is not None:
        refused.append("structured outputs (`output_config.format`)")
    forced = tool_choice.get("type") if isinstance(tool_choice, dict) else None
    if forced in ("any", "tool"):
        refused.append(f"a forced `tool_choice` ({forced!r})")
    if refused:
        raise bad_request(
            f"max_tokens: 0 (cache pre-warming) cannot be combined with {', '.join(refused)}: nothing is generated. "
            "Send the pre-warming request without them, or with max_tokens of at least 1"
        )


def _tools(raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad_request(f"tools: Input should be a valid list, got {type(raw).__name__}")
    names: set[str] = set()
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise bad_request(f"tools.{i}.name: Field required (each tool needs a non-empty name)")
        if tool["name"] in names:
            raise bad_request(f"tools: Tool names must be unique; {tool['name']!r} appears more than once")
        names.add(tool["name"])
    return list(raw)


def _system(raw: Any) -> list[dict[str, Any]]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [{"type": "text", "text": raw}]
    if not isinstance(raw, list):
        raise bad_request(f"system: Input should be a string or a list of text blocks, got {type(raw).__name__}")
    for j, block in enumerate(raw):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise bad_request(f"system.{j}: Input should be a text block {{'type': 'text', 'text': ...}}")
        if not block["text"]:
            raise bad_request(f"system.{j}: text content blocks must be non-empty")
    return list(raw)


def _messages(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise bad_request("messages: Field required (a non-empty list of {'role', 'content'} objects)")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict):
            raise bad_request(f"messages.{i}: Input should be an object with 'role' and 'content'")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise bad_request(f"messages.{i}.role: Input should be 'user' or 'assistant', got {role!r}")
        content = message.get("content")
        if isinstance(content, str):
            if not content:
                raise bad_request(f"messages.{i}.content: text content blocks must be non-empty")
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise bad_request(f"messages.{i}.content: Input should be a string or a list of content blocks")
        for j, block in enumerate(content):
            _check_block(block, f"messages.{i}.content.{j}")
        if out and out[-1]["role"] == role:  # "Consecutive `user` or `assistant` turns ... will be combined"
            out[-1]["content"].extend(content)
            continue
        out.append({"role": role, "content": list(content)})
    return out


def _check_block(block: Any, path: str) -> None:
    if not isinstance(block, dict) or block.get("type") not in _KNOWN_BLOCKS:
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        raise bad_request(f"{path}.type: unknown content block type {kind!r}; expected one of {sorted(_KNOWN_BLOCKS)}")
    kind = block["type"]
    if kind == "text" and (not isinstance(block.get("text"), str) or not block["text"]):
        raise bad_request(f"{path}: text content blocks must be non-empty")
    if kind in _THINKING_TYPES and "cache_control" in block:
        raise bad_request(f"{path}.cache_control: Extra inputs are not permitted (thinking blocks cannot be cached)")
    if kind == "thinking" and (not isinstance(block.get("thinking"), str) or "signature" not in block):
        raise bad_request(f"{path}: thinking blocks need 'thinking' (string) and 'signature' fields")
    if kind == "tool_use" and (not isinstance(block.get("id"), str) or not isinstance(block.get("input"), dict)):
        raise bad_request(f"{path}: tool_use blocks need a string 'id', a 'name' and an object 'input'")
    if kind == "tool_result" and not isinstance(block.get("tool_use_id"), str):
        raise bad_request(f"{path}.tool_use_id: Field required")


def _thinking(raw: Any, max_tokens: int, headers: Mapping[str, str]) -> tuple[dict[str, Any] | None, bool, bool]:
    if raw is None:
        return None, False, False
    if not isinstance(raw, dict) or raw.get("type") not in ("enabled", "adaptive", "disabled"):
        raise bad_request(f"thinking.type: Input should be 'enabled', 'adaptive' or 'disabled', got {raw!r}")
    if raw["type"] == "enabled":
        budget = raw.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise bad_request(f"thinking.enabled.budget_tokens: Input should be an integer >= 1024, got {budget!r}")
        if budget >= max_tokens and max_tokens != 0:  # max_tokens 0 only warms the cache: nothing is generated
            raise bad_request(
                f"`max_tokens` must be greater than `thinking.budget_tokens` ({max_tokens} <= {budget}); "
                "raise max_tokens or lower the budget"
            )
    binding = raw.get("block_binding")
    if binding is None:
        return raw, False, False
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}
    if BINDING_BETA not in betas:
        raise bad_request(
            "thinking.block_binding: Extra inputs are not permitted. Send the beta header "
            f"'anthropic-beta: {BINDING_BETA}' to use block binding controls"
        )
    behavior = binding.get("prefix_mismatch_behavior", "error") if isinstance(binding, dict) else None
    if behavior not in ("error", "drop_block", None):
        raise bad_request(
            f"thinking.block_binding.prefix_mismatch_behavior: Input should be 'error' or 'drop_block', "
            f"got {behavior!r}"
        )
    return raw, behavior == "drop_block", True


def _breakpoints(
    tools: list[dict[str, Any]],
    system: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    automatic: Any,
    rules: CacheRules,
) -> dict[str, str]:
    marked: list[tuple[str, Any]] = [(f"tools.{i}", t.get("cache_control")) for i, t in enumerate(tools)]
    marked += [(f"system.{j}", b.get("cache_control")) for j, b in enumerate(system)]
    for i, message in enumerate(messages):
        marked += [(f"messages.{i}.content.{j}", b.get("cache_control")) for j, b in enumerate(message["content"])]
    limit = rules.number("max_breakpoints")
    found: dict[str, str] = {}
    for path, control in marked:
        if control is not None:
            found[path] = _ttl_of(control, f"{path}.cache_control", rules)
    if automatic is not None:
        last = f"messages.{len(messages) - 1}.content.{len(messages[-1]['content']) - 1}"
        ttl = _ttl_of(automatic, "cache_control", rules)
        if last in found and found[last] != ttl:
            raise bad_request(
                f"cache_control: the top-level cache_control ttl {ttl!r} conflicts with the ttl {found[last]!r} "
                f"already set on the last block ({last})"
            )
        if last not in found and len(found) >= limit:
            raise bad_request(
                f"A maximum of {limit} blocks with cache_control may be provided. Found "
                f"{len(found) + 1} (the top-level cache_control uses one slot)."
            )
        found[last] = ttl
    if len(found) > limit:
        raise bad_request(f"A maximum of {limit} blocks with cache_control may be provided. Found {len(found)}.")
    shortest_seen: tuple[str, float] | None = None
    for path, ttl in found.items():
        seconds = rules.ttl(ttl)
        if shortest_seen is not None and seconds > shortest_seen[1]:
            raise bad_request(
                f"{path}.cache_control.ttl: a ttl='{ttl}' cache_control block must not come after a "
                f"ttl='{shortest_seen[0]}' cache_control block. Note that blocks are processed in the following "
                "order: `tools`, `system`, `messages`."
            )
        if shortest_seen is None or seconds < shortest_seen[1]:
            shortest_seen = (ttl, seconds)
    return found


def _ttl_of(control: Any, path: str, rules: CacheRules) -> str:
    if not isinstance(control, dict) or control.get("type") != "ephemeral":
        raise bad_request(f"{path}: Input should be {{'type': 'ephemeral', 'ttl'?: ...}}, got {control!r}")
    ttl = control.get("ttl", rules.default_ttl)
    if ttl not in rules.ttl_seconds:
        raise bad_request(f"{path}.ttl: Input should be one of {sorted(rules.ttl_seconds)}, got {ttl!r}")
    return str(ttl)


def _check_roles(messages: list[dict[str, Any]]) -> None:
    # Consecutive turns of one role were already combined (_messages), so roles alternate from here.
    if messages[0]["role"] != "user":
        raise bad_request('messages: first message must use the "user" role')
    last = messages[-1]
    # A turn that ends with a compaction block is the continuation after pause_after_compaction ("pause after
    # compaction and return the compaction block to the user", the pinned SDK's BetaCompact20260112EditParam):
    # the block is sent back and the model answers from it, not a prefill to extend.
    resumes = last["role"] == "assistant" and bool(last["content"]) and last["content"][-1].get("type") == "compaction"
    if last["role"] != "user" and not resumes:
        raise bad_request(
            f"messages.{len(messages) - 1}: the twin does not emulate assistant prefill; end `messages` with a "
            "user turn"
        )


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    for i, message in enumerate(messages):
        content = message["content"]
        if message["role"] == "user":
            offered = _tool_use_ids(messages[i - 1]) if i > 0 else []
            seen_other = False
            for j, block in enumerate(content):
                if block["type"] != "tool_result":
                    seen_other = True
                    continue
                if seen_other:
                    raise bad_request(
                        f"messages.{i}.content.{j}: `tool_result` blocks must come first in the user message, "
                        "before any text or other content"
                    )
                if block["tool_use_id"] not in offered:
                    raise bad_request(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block['tool_use_id']}. Each `tool_result` block must have a corresponding `tool_use` "
                        "block in the previous message."
                    )
            continue
        ids = _tool_use_ids(message)
        if not ids:
            continue
        answered: set[str] = set()
        if i + 1 < len(messages):
            answered = {b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"}
        missing = [tool_id for tool_id in ids if tool_id not in answered]
        if missing:
            raise bad_request(
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in "
                "the next message."
            )


def _tool_use_ids(message: dict[str, Any]) -> list[str]:
    if message["role"] != "assistant":
        return []
    return [str(b["id"]) for b in message["content"] if b["type"] == "tool_use"]


def _check_tool_choice_allows_thinking(tool_choice: Any) -> None:
    forced = tool_choice.get("type") if isinstance(tool_choice, dict) else None
    if forced in ("any", "tool"):
        raise bad_request(
            f"Thinking may not be enabled when tool_choice forces tool use (tool_choice.type is {forced!r}). Use "
            'tool_choice {"type": "auto"} or {"type": "none"} with thinking, or turn thinking off to force a tool.'
        )


def _check_thinking_leads_tool_loop(messages: list[dict[str, Any]]) -> None:
    last = messages[-1]["content"]
    if len(messages) < 2 or not last or last[0]["type"] != "tool_result":
        return
    index = len(messages) - 2
    # A compaction block opens the response that compacted (the twin's own, anthropic_api.handle_messages); what
    # follows it is the message the rule reads.
    blocks = [b for b in messages[index]["content"] if b["type"] != "compaction"]
    first = blocks[0]["type"] if blocks else "nothing"
    if first not in _THINKING_TYPES:
        raise bad_request(
            f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. "
            "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
            "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
            "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult "
            "our documentation at https://platform.claude.com/docs/en/build-with-claude/extended-thinking"
        )
