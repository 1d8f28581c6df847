"""Serialize a 200-message replayed conversation to each vendor's request body, beside json.dumps of that body.

    python bench/wire.py [--runs 50] [--repeat 7]

Prints, per vendor, the time segue takes to build the body (canonical -> vendor wire, cache breakpoints,
reasoning placement) and the time json.dumps takes to encode the same body, measured in the same run, and their
ratio. The target is a ratio within 5x: building the body should cost about as much as encoding it.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock
from segue.providers.base import FRAGMENT_META_KEY, ProviderRequest
from segue.wire import anthropic, openai_chat, openai_responses, openrouter

WORDS = "the quarterly revenue by region grew while churn in the enterprise segment fell sharply again".split()


def prose(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i * 7) % len(WORDS)] for i in range(n))


def reasoning(vendor: str, i: int) -> ReasoningBlock:
    text = prose(90, i)
    if vendor == "anthropic":
        return ReasoningBlock(vendor="anthropic", format="anthropic.thinking", text=text, signature="S" * 340)
    if vendor == "openai":
        enc = "E" * 1200
        return ReasoningBlock(
            vendor="openai", format="openai.reasoning_item", id=f"rs_{i}", summary=[text], encrypted_content=enc
        )
    native = {
        "type": "reasoning.text",
        "text": text,
        "signature": "S" * 340,
        "format": "anthropic-claude-v1",
        "index": 0,
    }
    return ReasoningBlock(vendor="openrouter", format="openrouter.reasoning_details", text=text, native=native)


def conversation(vendor: str, runs: int) -> list[Message]:
    """`runs` replayed runs of four messages: question, reasoning + tool call, tool result, answer."""
    messages = []
    for i in range(runs):
        sql = f"SELECT region, sum(amount) FROM sales WHERE q = {i} GROUP BY region"
        call = ToolCallBlock(id=f"call_{i}", name="run_query", arguments={"sql": sql})
        rows = json.dumps([[f"r{k}", k * 1000.5] for k in range(30)])
        messages += [
            Message(role="user", content=[TextBlock(text=prose(35, i))]),
            Message(role="assistant", content=[reasoning(vendor, i), call]),
            Message(role="tool", content=[ToolResultBlock(tool_call_id=call.id, content=rows)]),
            Message(role="assistant", content=[TextBlock(text=prose(70, i + 3))]),
        ]
    return messages


TOOLS = [
    ToolDefinition(
        name="run_query",
        description="Run a read-only SQL query.",
        parameters={"type": "object", "properties": {"sql": {"type": "string"}}},
    )
]


def request(vendor: str, runs: int) -> ProviderRequest:
    messages = [*conversation(vendor, runs), Message(role="user", content=[TextBlock(text="And last year?")])]
    messages.append(Message(role="user", content=[TextBlock(text="iteration 1 of 10")], meta={FRAGMENT_META_KEY: True}))
    return ProviderRequest(
        system=prose(200, 1),
        stable_head=prose(400, 2),
        messages=messages,
        tools=TOOLS,
        replay_end=runs * 4 - 1,
        cache_key="acme",
    )


def _anthropic(r: ProviderRequest) -> Any:
    return anthropic.build_request(r, model="claude-x", max_tokens=4096, cache_ttl="5m", thinking={"type": "adaptive"})


def _responses(r: ProviderRequest) -> Any:
    return openai_responses.build_request(
        r, model="gpt-5.5", reasoning={"effort": "low"}, store=False, cache_key_prefix="a"
    )


def _chat(r: ProviderRequest) -> Any:
    return openai_chat.build_request(r, model="Qwen/Qwen3-32B", vendor="vllm")


def _openrouter(r: ProviderRequest) -> Any:
    return openrouter.build_request(
        r,
        model="anthropic/claude-x",
        provider_order=None,
        allow_fallbacks=True,
        plugins=None,
        reasoning=None,
        cache_ttl="5m",
    )


#: wire -> (ReasoningBlock.vendor its replayed runs carry, body builder)
BUILDERS: dict[str, tuple[str, Callable[[ProviderRequest], Any]]] = {
    "anthropic": ("anthropic", _anthropic),
    "openai_responses": ("openai", _responses),
    "openai_chat": ("openai_chat", _chat),
    "openrouter": ("openrouter", _openrouter),
}


def best(fn: Callable[[Any], Any], arg: Any, repeat: int, loops: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            fn(arg)
        times.append((time.perf_counter() - start) / loops)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="replayed runs (4 messages each; default 50 = 200)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--loops", type=int, default=20)
    args = parser.parse_args()
    print(f"{args.runs * 4 + 2} canonical messages per request; best of {args.repeat} x {args.loops} loops")
    print(f"{'vendor':<18}{'build body':>12}{'json.dumps':>12}{'ratio':>8}{'body KiB':>10}")
    worst = 0.0
    for name, (vendor, build) in BUILDERS.items():
        req = request(vendor, args.runs)
        body = build(req).body
        t_build = best(build, req, args.repeat, args.loops)
        t_dumps = best(json.dumps, body, args.repeat, args.loops)
        ratio = t_build / t_dumps
        worst = max(worst, ratio)
        size = len(json.dumps(body)) / 1024
        print(f"{name:<18}{t_build * 1e6:>10.0f}us{t_dumps * 1e6:>10.0f}us{ratio:>7.2f}x{size:>10.0f}")
    print(f"worst ratio {worst:.2f}x (target: within 5x of json.dumps)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
