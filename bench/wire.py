"""Serialize a 200-message replayed conversation to each vendor's request body, beside json.dumps of that body.

    python bench/wire.py [--runs 50] [--repeat 7] [--against main]

Prints, per vendor, the time segue takes to build the body (canonical -> vendor wire, cache breakpoints,
reasoning placement) and the time json.dumps takes to encode the same body, measured in the same run, and their
ratio. The target is a ratio within 5x: building the body should cost about as much as encoding it.

With `--against REV` the same bodies are also built by the segue of git revision REV (its sdk/ exported to a
temporary folder and run in a worker process), round by round in turn with this checkout's, and the ratio of the
two build times is printed: below 1.00x this checkout is faster.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from segue._core.contracts import FRAGMENT_META_KEY, ProviderRequest
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock
from segue.wire.anthropic import request as anthropic
from segue.wire.openai_chat import request as openai_chat
from segue.wire.openai_responses import request as openai_responses
from segue.wire.openrouter import request as openrouter

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
    """Seconds per call, best of `repeat` rounds of `loops` calls; the garbage collector off, as timeit does."""
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            for _ in range(loops):
                fn(arg)
            times.append((time.perf_counter() - start) / loops)
        finally:
            gc.enable()
    return min(times)


def worker() -> int:
    """Serve `build <wire> <runs> <loops>` lines on stdin with the seconds per build, one line each."""
    requests: dict[tuple[str, int], ProviderRequest] = {}
    for line in sys.stdin:
        _, name, runs, loops = line.split()
        vendor, build = BUILDERS[name]
        req = requests.setdefault((name, int(runs)), request(vendor, int(runs)))
        print(best(build, req, 1, int(loops)), flush=True)
    return 0


REPO = Path(__file__).resolve().parent.parent


class Worker:
    """A worker process building the bodies with the segue in `sdk` (a folder holding the `segue` package)."""

    def __init__(self, sdk: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(sdk)}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
        )

    def build(self, name: str, runs: int, loops: int) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"build {name} {runs} {loops}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()


def compare(rev: str, runs: int, repeat: int, loops: int) -> None:
    """Build time of this checkout beside REV's: two like worker processes, best of `repeat` rounds taken in turn."""
    with tempfile.TemporaryDirectory(prefix="segue-bench-") as folder:
        archive = subprocess.run(["git", "archive", rev, "sdk"], cwd=REPO, capture_output=True, check=True).stdout
        (Path(folder) / "sdk.tar").write_bytes(archive)
        with tarfile.open(Path(folder) / "sdk.tar") as tar:
            tar.extractall(folder, filter="data")
        this, other = Worker(REPO / "sdk"), Worker(Path(folder) / "sdk")
        try:
            print(f"\nagainst {rev}: two worker processes, best of {repeat} rounds, in turn, of {loops} builds each")
            print(f"{'vendor':<18}{'this':>12}{rev:>12}{'ratio':>8}")
            worst = 0.0
            for name in BUILDERS:
                ours, theirs = [], []
                for _ in range(repeat):
                    ours.append(this.build(name, runs, loops))
                    theirs.append(other.build(name, runs, loops))
                ratio = min(ours) / min(theirs)
                worst = max(worst, ratio)
                print(f"{name:<18}{min(ours) * 1e6:>10.0f}us{min(theirs) * 1e6:>10.0f}us{ratio:>7.2f}x")
            print(f"slowest ratio {worst:.2f}x (below 1.00x: this checkout builds faster than {rev})")
        finally:
            this.close()
            other.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="replayed runs (4 messages each; default 50 = 200)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--loops", type=int, default=20)
    parser.add_argument("--against", metavar="REV", help="also time the bodies built by git revision REV's segue")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()
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
    if args.against:
        compare(args.against, args.runs, args.repeat, args.loops)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
