"""Stream assembly: vendor stream events in, StreamDeltas out, and at the end the vendor's own non-streamed JSON.

Each assembler rebuilds exactly the response body the vendor would have returned without streaming, and the
driver parses it with the same function as a non-streamed call, so the final message of a stream equals the
non-streamed one by construction. Events arrive as dicts (the SDK's event models via `to_dict()`), keeping
fields the SDK does not model (`input_transformations`, `reasoning_content`, `reasoning_details`, `timings`).

A malformed event, an event out of order, or a stream that ends before its terminal event raises
MalformedResponseError naming what was wrong; drivers report it as ProviderError(kind="stream").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue.errors import ProviderError
from segue.providers.base import StreamDelta
from segue.wire.common import MalformedResponseError, as_map, loads_arguments, req_list, req_map, req_str

__all__ = ["AnthropicStream", "ChatStream", "ResponsesStream"]


def _int(d: Mapping[str, Any], key: str, where: str) -> int:
    value = as_map(d, where).get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedResponseError(f"{where}: {key!r} must be an integer, got {value!r}")
    return value


class AnthropicStream:
    """Messages API server-sent events -> the Message JSON."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, str] = {}
        self.done = False

    def feed(self, event: Mapping[str, Any]) -> list[StreamDelta]:
        kind = event.get("type")
        where = f"anthropic stream event {kind!r}"
        if kind == "message_start":
            self.message = dict(req_map(event, "message", where))
            self.message["content"] = []
            self.message["usage"] = dict(as_map(self.message.get("usage") or {}, where))
            return []
        if kind == "message_stop":
            self.done = True
            return []
        if kind == "message_delta":
            message = self._message(where)
            delta = req_map(event, "delta", where)
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    message[key] = delta[key]
            usage = as_map(event.get("usage") or {}, where)
            message["usage"].update({k: v for k, v in usage.items() if v is not None})
            if event.get("input_transformations") is not None:
                message["input_transformations"] = event["input_transformations"]
            return []
        if kind not in ("content_block_start", "content_block_delta", "content_block_stop"):
            return []  # ping, and event types the API may add later
        self._message(where)
        index = _int(event, "index", where)
        if kind == "content_block_start":
            block = dict(req_map(event, "content_block", where))
            self.blocks[index] = block
            if block.get("type") == "tool_use":
                self.partial_json[index] = ""
            return []
        if index not in self.blocks:
            raise MalformedResponseError(f"{where} for block {index} before its content_block_start")
        block = self.blocks[index]
        if kind == "content_block_stop":
            if index in self.partial_json:
                self._finish_tool(index)
            return []
        return self._delta(block, index, req_map(event, "delta", where), where)

    def _message(self, where: str) -> dict[str, Any]:
        if self.message is None:
            raise MalformedResponseError(f"{where} arrived before message_start")
        return self.message

    def _delta(self, block: dict[str, Any], index: int, delta: Mapping[str, Any], where: str) -> list[StreamDelta]:
        kind = delta.get("type")
        if kind == "text_delta":
            text = req_str(delta, "text", where)
            block["text"] = block.get("text", "") + text
            return [StreamDelta(kind="text", text=text)]
        if kind == "thinking_delta":
            text = req_str(delta, "thinking", where)
            block["thinking"] = block.get("thinking", "") + text
            return [StreamDelta(kind="reasoning", text=text)]
        if kind == "signature_delta":
            block["signature"] = req_str(delta, "signature", where)
            return []
        if kind == "input_json_delta":
            if index not in self.partial_json:
                raise MalformedResponseError(f"{where}: input_json_delta for block {index}, which is not a tool_use")
            text = req_str(delta, "partial_json", where)
            self.partial_json[index] += text
            return [StreamDelta(kind="tool_call", text=text, tool_call_id=block.get("id"), tool_name=block.get("name"))]
        if kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        return []

    def _finish_tool(self, index: int) -> None:
        block = self.blocks[index]
        text = self.partial_json.pop(index)
        where = f"anthropic stream tool_use {block.get('name')!r} ({block.get('id')})"
        block["input"] = loads_arguments(text, where) if text else dict(block.get("input") or {})

    def result(self) -> dict[str, Any]:
        message = self._message("anthropic stream end")
        if not self.done:
            raise MalformedResponseError("anthropic stream ended before message_stop (connection cut or truncated)")
        for index in list(self.partial_json):
            self._finish_tool(index)
        message["content"] = [self.blocks[i] for i in sorted(self.blocks)]
        return message


class ChatStream:
    """Chat Completions chunks -> the ChatCompletion JSON (OpenAI, vLLM, llama.cpp, OpenRouter...)."""

    def __init__(self) -> None:
        self.head: dict[str, Any] | None = None
        self.content: str | None = None
        self.reasoning: dict[str, str] = {}  # "reasoning" or "reasoning_content" -> text
        self.details: dict[int, dict[str, Any]] = {}
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.extra: dict[str, Any] = {}  # usage, timings

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamDelta]:
        where = "chat stream chunk"
        if self.head is None:
            self.head = {k: chunk[k] for k in ("id", "created", "model", "system_fingerprint") if k in chunk}
        for key in ("usage", "timings"):
            if chunk.get(key) is not None:
                self.extra[key] = chunk[key]
        out: list[StreamDelta] = []
        for choice in chunk.get("choices") or []:
            choice = as_map(choice, where)
            if choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason") is not None:
                self.finish_reason = choice["finish_reason"]
            out += self._delta(as_map(choice.get("delta") or {}, where), where)
        return out

    def _delta(self, delta: Mapping[str, Any], where: str) -> list[StreamDelta]:
        out: list[StreamDelta] = []
        plain_reasoning = False
        for key in ("reasoning", "reasoning_content"):
            text = delta.get(key)
            if isinstance(text, str) and text:
                self.reasoning[key] = self.reasoning.get(key, "") + text
                out.append(StreamDelta(kind="reasoning", text=text))
                plain_reasoning = True
        for raw in delta.get("reasoning_details") or []:
            piece = as_map(raw, where)
            slot = self.details.setdefault(_int(piece, "index", where) if "index" in piece else len(self.details), {})
            for k, v in piece.items():
                if k in ("text", "summary", "data") and isinstance(v, str):
                    slot[k] = slot.get(k, "") + v
                elif v is not None or k not in slot:
                    slot[k] = v
            text = piece.get("text") or piece.get("summary")
            if isinstance(text, str) and text and not plain_reasoning:
                out.append(StreamDelta(kind="reasoning", text=text))
        text = delta.get("content")
        if isinstance(text, str) and text:
            self.content = (self.content or "") + text
            out.append(StreamDelta(kind="text", text=text))
        for raw in delta.get("tool_calls") or []:
            piece = as_map(raw, where)
            call = self.calls.setdefault(_int(piece, "index", where), {"type": "function", "function": {}})
            if piece.get("id"):
                call["id"] = piece["id"]
            function = as_map(piece.get("function") or {}, where)
            if function.get("name"):
                call["function"]["name"] = function["name"]
            args = function.get("arguments")
            if isinstance(args, str):
                call["function"]["arguments"] = call["function"].get("arguments", "") + args
                if args:
                    out.append(
                        StreamDelta(
                            kind="tool_call",
                            text=args,
                            tool_call_id=call.get("id"),
                            tool_name=call["function"].get("name"),
                        )
                    )
        return out

    def result(self) -> dict[str, Any]:
        if self.head is None or self.finish_reason is None:
            raise MalformedResponseError("chat stream ended before a finish_reason (connection cut or truncated)")
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        message.update(self.reasoning)
        if self.details:
            message["reasoning_details"] = [self.details[i] for i in sorted(self.details)]
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        return {**self.head, "object": "chat.completion", "choices": [choice], **self.extra}


_FAILED_KIND = {"rate_limit_exceeded": "rate_limit", "server_error": "server", "vector_store_timeout": "timeout"}


class ResponsesStream:
    """Responses API events -> the Response JSON (taken from the terminal event, items from output_item.done)."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[str | None, str | None]] = {}  # item id -> (call_id, name)
        self.items: dict[int, dict[str, Any]] = {}
        self.final: dict[str, Any] | None = None

    def feed(self, event: Mapping[str, Any]) -> list[StreamDelta]:
        kind = event.get("type")
        where = f"openai stream event {kind!r}"
        if kind == "response.output_text.delta":
            return [StreamDelta(kind="text", text=req_str(event, "delta", where))]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [StreamDelta(kind="reasoning", text=req_str(event, "delta", where))]
        if kind == "response.function_call_arguments.delta":
            call_id, name = self.calls.get(str(event.get("item_id")), (None, None))
            return [
                StreamDelta(kind="tool_call", text=req_str(event, "delta", where), tool_call_id=call_id, tool_name=name)
            ]
        if kind == "response.output_item.added":
            item = req_map(event, "item", where)
            if item.get("type") == "function_call":
                self.calls[str(item.get("id"))] = (item.get("call_id"), item.get("name"))
        elif kind == "response.output_item.done":
            # The copy in output_item.added may be incomplete (e.g. encrypted_content): keep the finished one.
            self.items[_int(event, "output_index", where)] = dict(req_map(event, "item", where))
        elif kind in ("response.completed", "response.incomplete"):
            self.final = dict(req_map(event, "response", where))
        elif kind in ("response.failed", "error"):
            error = as_map(event.get("response", {}).get("error") or event.get("error") or event, where)
            code = error.get("code")
            message = str(error.get("message") or f"the response failed ({code})")
            raise ProviderError(
                f"openai stream failed: {message}",
                vendor="openai",
                kind=_FAILED_KIND.get(str(code), "server"),  # type: ignore[arg-type]
                vendor_message=message,
            )
        return []

    def result(self) -> dict[str, Any]:
        if self.final is None:
            raise MalformedResponseError("openai stream ended before response.completed (connection cut or truncated)")
        final = dict(self.final)
        if not final.get("output") and self.items:
            final["output"] = [self.items[i] for i in sorted(self.items)]
        req_list(final, "output", "openai stream response.completed")
        return final
