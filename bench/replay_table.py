"""The replay table: turn 4 of the demo's database chat under each way of carrying the earlier turns.

For the Anthropic twin and the OpenAI twin, one run of the 5-turn chat per setting; the row is turn 4 (whose
replayed prefix is ~2.7k tokens under the twin's tokenizer approximation). Columns: tool calls, input tokens,
cache read, cache write, cost. Also prints the chat's totals per setting. The output is pasted into
docs/replay.md ("The replay table"). Run: python bench/replay_table.py [--markdown]
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from segue.demo.chat import SETTINGS, TurnReport, run_chat
from segue_twin import Twin

LABELS = {
    "all": 'replay_last="all"',
    "last3": "replay_last=3",
    "none": "replay_last=0",
    "history": "history= only",
    "tool_added": "tool added on turn 3",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args()
    logging.getLogger("segue.replay").setLevel(logging.ERROR)  # the table shows the causes; no per-run log lines
    for vendor in ("anthropic", "openai"):
        rows: list[tuple[str, TurnReport, list[TurnReport]]] = []
        for setting in SETTINGS:
            reports = asyncio.run(run_chat(setting, vendor=vendor, twin=Twin()))  # type: ignore[arg-type]
            rows.append((LABELS[setting], reports[3], reports))
        title = f"{vendor} twin, turn 4 of 5"
        if args.markdown:
            print(f"\n**{title}**\n")
            print("| setting | tool calls | input tokens | cache read | cache write | cost | chat total cost |")
            print("|---|---|---:|---:|---:|---:|---:|")
            for label, r, chat in rows:
                total = chat_total(chat)
                print(
                    f"| {label} | {', '.join(r.tool_calls)} | {r.usage.input_tokens:,} | {r.cache_read:,} | "
                    f"{r.cache_write:,} | ${dollars(r.cost)} | ${dollars(total)} |"
                )
        else:
            print(f"\n{title}")
            print(
                f"{'setting':<22} {'tool calls':<44} {'input':>7} {'read':>7} {'write':>7} {'cost $':>8} {'chat $':>8}"
            )
            for label, r, chat in rows:
                total = chat_total(chat)
                print(
                    f"{label:<22} {', '.join(r.tool_calls)[:44]:<44} {r.usage.input_tokens:>7} {r.cache_read:>7} "
                    f"{r.cache_write:>7} {dollars(r.cost):>8} {dollars(total):>8}"
                )


def chat_total(chat: list[TurnReport]) -> float | None:
    """The chat's cost, or None when the catalog prices some turn not at all (never a partial sum)."""
    costs = [x.cost for x in chat]
    return None if None in costs else sum(c or 0.0 for c in costs)


def dollars(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    main()
