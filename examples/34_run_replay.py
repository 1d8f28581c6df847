"""Run replay, the headline: a 5-turn database chat where each turn replays the earlier runs.

Without an API key everything runs against the twin, segue's offline emulator of the vendors' HTTP APIs and
their prompt-cache rules. With ANTHROPIC_API_KEY (or OPENAI_API_KEY and --vendor openai) set, the same chat goes
to the real vendor.

    python examples/34_run_replay.py                      # replay_last="all" on the Anthropic twin
    python examples/34_run_replay.py --setting history    # the same chat with history= only: it re-explores
    python examples/34_run_replay.py --vendor openai --db sqlite:///demo.db

Per turn it prints iterations, tool calls, input tokens, cache read, cache write, uncached tokens, cost, and
the ReplaySummary (runs in full / as question + answer, reasoning kept / dropped, warnings).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from segue import RunStore
from segue.demo import SETTINGS, TurnReport, format_report, run_chat, uses_real_vendor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vendor", choices=["anthropic", "openai"], default="anthropic")
    parser.add_argument("--setting", choices=SETTINGS, default="all", help="how each turn carries the earlier ones")
    parser.add_argument("--db", default="sqlite:///segue-demo.db", help="where the runs are recorded")
    args = parser.parse_args(argv)
    logging.getLogger("segue.replay").setLevel(logging.ERROR)  # the report below lists every replay warning

    where = "the real vendor" if uses_real_vendor(args.vendor) else "the twin (no API key set)"
    print(f"segue demo: 5-turn database chat, setting {args.setting!r}, {args.vendor} via {where}", file=sys.stderr)

    def progress(report: TurnReport) -> None:
        print(f"  turn {report.turn} done: {', '.join(report.tool_calls) or 'no tool calls'}", file=sys.stderr)

    store = RunStore(args.db)
    reports = asyncio.run(run_chat(args.setting, vendor=args.vendor, store=store, on_turn=progress))
    print(format_report(reports, title=f"setting={args.setting} vendor={args.vendor} db={args.db}"))
    print(f"\nlast answer:\n{reports[-1].answer}")
    print(f"\nruns recorded in {args.db}; inspect them with `segue runs list --db {args.db} --tenant demo`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
