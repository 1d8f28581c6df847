"""Trailing runtime-state layouts on an exact byte-prefix cache: appendOnly vs replace.

Run: .venv/bin/python bench/layout.py

A 10-iteration tool loop (a ~3k-token system prompt, a question, per iteration one tool call and a tool result of
a few hundred tokens, and a runtime-state fragment that changes every iteration) is laid out by segue's own
LayoutPolicy in each mode. Each request is rendered to bytes and looked up in a simulated prefix cache that uses
the serving path's catalog rules (gpt-4.1-mini@openai: hits from cache_min_tokens=1024, in
cache_increment_tokens=128 steps). Tokens are approximated as ceil(utf-8 bytes / 4), and a prefix of b bytes
counts as floor(b / 4) tokens, so a partly matching token never counts as cached.

Two cache models are printed, because they bracket reality:
- "request ends": a request's prefix can be reused only up to the end of an earlier request (or the end of the
  system prompt). The feature's authors probed OpenAI this way: swapping the last message cached only the system
  prompt, appending cached all of the previous request. Their measurement: ~93% (appendOnly) vs ~22% (replace).
- "any prefix": the longest common prefix with any earlier request counts, in 128-token steps (an upper bound).

Share is not cost: with a large changing state, appendOnly keeps every earlier fragment in the context, so the
input tokens and dollars are printed next to the share. `simulate` is the one function that produces usage; it
will be switched to segue's offline vendor emulator (segue.twin) without touching the reporting.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from segue.catalog import Catalog, Resolved
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock, Usage, get_converter
from segue.layout import LayoutPolicy, ResolvedLayout, RuntimeState

MODEL, VENDOR = "gpt-4.1-mini", "openai"
ITERATIONS = 10
_WORDS = (
    "table column index query join filter revenue region customer order invoice status shipped pending quarter "
    "total average count distinct schema partition warehouse ledger account balance currency rate forecast"
).split()


def tokens(data: bytes | str) -> int:
    return math.ceil(len(data.encode() if isinstance(data, str) else data) / 4)


def prose(rng: random.Random, n_tokens: int) -> str:
    out: list[str] = []
    while tokens(" ".join(out)) < n_tokens:
        out.append(rng.choice(_WORDS))
    return " ".join(out)


@dataclass(frozen=True)
class Shape:
    name: str
    system_tokens: int
    result_tokens: tuple[int, int]  # each tool result: uniform in this range
    state_tokens: int  # the runtime-state fragment, rebuilt every iteration


class PrefixCache:
    """Exact byte-prefix cache with one key. `anchors`: where earlier requests can be reused (see module doc)."""

    def __init__(self, *, min_tokens: int, increment: int, anchors: str) -> None:
        self.min_tokens, self.increment, self.anchors = min_tokens, increment, anchors
        self.seen: list[bytes] = []

    def _common(self, a: bytes, b: bytes) -> int:
        lo, hi = 0, min(len(a), len(b))
        while lo < hi:  # binary search on prefix equality: slices compare in C
            mid = (lo + hi + 1) // 2
            if a[:mid] == b[:mid]:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def request(self, body: bytes, system_end: int) -> int:
        """Cached tokens for `body`; then `body` is stored."""
        if self.anchors == "request ends":
            ends = [len(e) for e in self.seen if body.startswith(e)]
            ends += [system_end] if self.seen and body[:system_end] == self.seen[0][:system_end] else []
            best = max(ends, default=0)
        else:
            best = max((self._common(body, e) for e in self.seen), default=0)
        self.seen.append(body)
        hit = best // 4
        if hit < self.min_tokens:
            return 0
        return self.min_tokens + (hit - self.min_tokens) // self.increment * self.increment


def render(system: str, messages: list[Message]) -> tuple[bytes, int]:
    """The request bytes (meta never reaches a vendor) and where the system prompt ends."""
    conv = get_converter()
    head = json.dumps({"system": system}, separators=(",", ":")) + "\n"
    lines = [
        json.dumps(conv.unstructure(Message(role=m.role, content=m.content)), separators=(",", ":")) for m in messages
    ]
    return (head + "\n".join(lines)).encode(), len(head.encode())


def simulate(mode: ResolvedLayout, shape: Shape, cache: PrefixCache, seed: int = 7) -> list[Usage]:
    """One run of the tool loop laid out in `mode`; usage per iteration. The swap point for the emulator."""
    rng = random.Random(seed)  # same conversation for both modes
    system = "You are a data analyst agent. " + prose(rng, shape.system_tokens)
    history = [
        Message(role="user", content=[TextBlock(text="Which regions grew revenue last quarter? " + prose(rng, 40))])
    ]
    used = Usage(input_tokens=0, output_tokens=0)

    def state_text(s: RuntimeState) -> str:
        budget = f"iteration {s.iteration} of {s.max_iterations}; input tokens so far {s.usage_so_far.input_tokens}"
        return budget + "\nnotes: " + prose(random.Random(s.iteration), shape.state_tokens - tokens(budget) - 3)

    policy = LayoutPolicy(mode=mode, trailing_state=state_text)
    out: list[Usage] = []
    for i in range(1, ITERATIONS + 1):
        fragment = policy.fragment_for(i, RuntimeState(run_id="bench", iteration=i, max_iterations=ITERATIONS,
                                                        usage_so_far=used))  # fmt: skip
        body, system_end = render(system, policy.lay_out(history, fragment, i))
        call = ToolCallBlock(id=f"call_{i}", name="run_query", arguments={"sql": f"select {prose(rng, 30)}"})
        answer = Message(role="assistant", content=[call])
        usage = Usage(
            input_tokens=tokens(body),
            output_tokens=tokens(json.dumps(get_converter().unstructure(answer))),
            cache_read_tokens=cache.request(body, system_end),
        )
        out.append(usage)
        used = Usage(input_tokens=used.input_tokens + usage.input_tokens, output_tokens=used.output_tokens)
        result = ToolResultBlock(tool_call_id=call.id, content=prose(rng, rng.randint(*shape.result_tokens)))
        history += [answer, Message(role="tool", content=[result])]
    return out


def report(catalog: Catalog, path: Resolved, shapes: list[Shape], anchors: str, out: Callable[[str], None]) -> None:
    assert path.cache_min_tokens is not None and path.cache_increment_tokens is not None
    out(f"\ncache model: {anchors}")
    head = f"{'shape':<24}{'layout':<12}{'input tok':>10}{'cached tok':>12}{'cached share':>14}"
    out(head + f"{'from it. 3':>12}{'cost $':>10}")
    for shape in shapes:
        rows = {}
        for mode in ("appendOnly", "replace"):
            cache = PrefixCache(
                min_tokens=path.cache_min_tokens, increment=path.cache_increment_tokens, anchors=anchors
            )
            usage = simulate(mode, shape, cache)
            inp = sum(u.input_tokens for u in usage)
            hit = sum(u.cache_read_tokens or 0 for u in usage)
            cost = sum(catalog.cost(u, path.model, path.vendor) for u in usage)
            rows[mode] = (inp, cost)
            late = usage[2:]  # the authors' figures are for iterations >= 3
            late_share = sum(u.cache_read_tokens or 0 for u in late) / sum(u.input_tokens for u in late)
            out(f"{shape.name:<24}{mode:<12}{inp:>10,}{hit:>12,}{hit / inp:>14.1%}{late_share:>12.1%}{cost:>10.5f}")
        (a_in, a_cost), (r_in, r_cost) = rows["appendOnly"], rows["replace"]
        out(f"{'':<24}{'ratio a/r':<12}{a_in / r_in:>10.2f}{'':>38}{a_cost / r_cost:>10.2f}")


def main() -> None:
    catalog = Catalog.load()
    path = catalog.resolve(MODEL, VENDOR)
    shapes = [
        Shape(name="small state (~100 tok)", system_tokens=3000, result_tokens=(200, 500), state_tokens=100),
        Shape(name="large state (~2k tok)", system_tokens=3000, result_tokens=(200, 500), state_tokens=2000),
    ]
    print(f"trailing runtime-state layout, {ITERATIONS}-iteration tool loop, serving path {path.label}")
    print(
        f"cache rules from the catalog: min {path.cache_min_tokens} tokens, +{path.cache_increment_tokens}-token "
        "steps; tokens ~ ceil(utf-8 bytes / 4); reference (authors, OpenAI): ~93% appendOnly vs ~22% replace"
    )
    for anchors in ("request ends", "any prefix"):
        report(catalog, path, shapes, anchors, print)


if __name__ == "__main__":
    main()
