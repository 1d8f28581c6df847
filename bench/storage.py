"""Stored bytes per turn of a long conversation, every column of every table, turn 10 beside turn 60.

The chat of bench/long.py's `all` setting (the demo's shop analyst on the Anthropic twin, claude-sonnet-4-6 with
thinking and the 1-hour cache, runs=<every earlier run>, replay_last="all"), on a fresh store. After each turn the
bench sums the size of every column of every table of the store; what a turn adds is the difference. A store whose
turns store what they add, and what repeats once, adds as much on turn 60 as on turn 10: each column's ratio is
about 1.0. Turns are averaged over three (8-10 and 58-60: one of each of the chat's three questions), so a ratio
compares like with like.

Sizes: on SQLite the size of each value in SQLite's record format (text its bytes, an integer 1 to 8 bytes by its
magnitude: the id columns grow with the number of rows, not with what a turn repeats); on PostgreSQL (`--pg URL`,
an empty database that the bench fills) pg_column_size, the stored size after PostgreSQL's own compression.
Run: python bench/storage.py [--turns 60] [--pg postgresql://...]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

from segue import Agent, RunStore
from segue.catalog import Catalog
from segue.demo import PROMPT, demo_tools, long_chat
from segue.providers import AnthropicProvider
from segue_twin import Twin
from segue_twin.transport import TwinAsyncTransport

MODEL = "claude-sonnet-4-6"
#: Turns averaged on each side (1-based, inclusive): one of each of long_chat's three questions.
SPAN = 3

Sizes = dict[tuple[str, str], int]


def column_sizes(store: RunStore) -> Sizes:
    """(table, column) -> the bytes its values take, summed over the table's rows."""
    size: Callable[[str], str] = _sqlite_size if store.is_sqlite else (lambda c: f"pg_column_size({c})")
    out: Sizes = {}
    for model in store.models.all:
        table = model._meta.table_name
        columns = [f.column_name for f in model._meta.sorted_fields]
        sums = ", ".join(f"COALESCE(SUM({size(_quoted(c))}), 0)" for c in columns)
        row = store.db.execute_sql(f"SELECT {sums} FROM {_quoted(table)}").fetchone()
        out.update({(table, c): int(v) for c, v in zip(columns, row, strict=True)})
    return out


def _sqlite_size(c: str) -> str:
    """A value's size in SQLite's record format: text and blobs their bytes, reals 8, integers 1 to 8 bytes by
    their magnitude."""
    widths = ((7, 1), (15, 2), (23, 3), (31, 4), (47, 6))
    integer = " ".join(f"WHEN {c} BETWEEN {-(2**b)} AND {2**b - 1} THEN {n}" for b, n in widths)
    return (
        f"CASE typeof({c}) WHEN 'integer' THEN (CASE {integer} ELSE 8 END) WHEN 'real' THEN 8 "
        f"WHEN 'null' THEN 0 ELSE LENGTH(CAST({c} AS BLOB)) END"
    )


def _quoted(name: str) -> str:
    return '"' + name + '"'


async def chat(url: str, turns: int) -> list[Sizes]:
    """Each turn's added bytes per column."""
    twin = Twin()
    client = twin.anthropic_client(http_client=httpx2.AsyncClient(transport=TwinAsyncTransport(twin)))
    provider = AnthropicProvider(
        MODEL, cache_ttl="1h", thinking={"type": "enabled", "budget_tokens": 1024}, client=client
    )
    store = RunStore(url)
    agent = Agent(provider, PROMPT, demo_tools(), store, catalog=Catalog.load(env=False), max_iterations=8)
    ids: list[str] = []
    before = column_sizes(store)
    added: list[Sizes] = []
    for question in long_chat(turns):
        result = await agent.run(question, runs=ids or None, replay_last="all")
        if result.status != "success":
            raise RuntimeError(f"turn {len(ids) + 1} ended {result.status}: {result.error}")
        ids.append(result.run_id)
        after = column_sizes(store)
        added.append({k: after[k] - before.get(k, 0) for k in after})
        before = after
    store.close()
    return added


def mean(added: list[Sizes], last_turn: int, key: tuple[str, str] | None = None) -> float:
    turns = added[last_turn - SPAN : last_turn]
    if key is None:
        return sum(sum(t.values()) for t in turns) / SPAN
    return sum(t.get(key, 0) for t in turns) / SPAN


def report(added: list[Sizes], early: int, late: int) -> list[str]:
    keys = sorted({k for t in added for k, v in t.items() if v})
    head = f"t{early - SPAN + 1}-{early}"
    tail = f"t{late - SPAN + 1}-{late}"
    lines = [f"{'table.column':<34} {head:>10} {tail:>10} {'ratio':>7}"]
    tables: dict[str, list[float]] = {}
    for key in keys:
        a, b = mean(added, early, key), mean(added, late, key)
        sums = tables.setdefault(key[0], [0.0, 0.0])
        sums[0] += a
        sums[1] += b
        lines.append(f"{key[0] + '.' + key[1]:<34} {a:>10,.0f} {b:>10,.0f} {_ratio(a, b):>7}")
    lines.append("per table:")
    lines += [f"{t:<34} {a:>10,.0f} {b:>10,.0f} {_ratio(a, b):>7}" for t, (a, b) in tables.items()]
    a, b = mean(added, early), mean(added, late)
    lines.append(f"{'every column of every table':<34} {a:>10,.0f} {b:>10,.0f} {_ratio(a, b):>7}")
    return lines


def _ratio(a: float, b: float) -> str:
    return f"{b / a:.2f}x" if a else "-"


def _empty_pg(url: str) -> None:
    """Refuse a PostgreSQL database that already holds segue's tables: the bench measures a fresh store."""
    import peewee as pw

    from segue.store.connection import open_database

    db = open_database(url, read_only=False, create=True)
    try:
        db.connect(reuse_if_open=True)
        if db.table_exists("agent_runs"):
            raise SystemExit(f"{url} already holds a run store: pass an empty database")
    except pw.OperationalError as e:
        raise SystemExit(f"cannot open {url}: {e}") from None
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=60, help="turns of the chat (at least 20)")
    parser.add_argument("--pg", help="an empty PostgreSQL database to measure instead of a SQLite file")
    args = parser.parse_args()
    if args.turns < 20:
        parser.error(f"--turns {args.turns}: pass at least 20 so that turn 10 and the last turn are apart")
    logging.getLogger("segue.replay").setLevel(logging.ERROR)
    logging.getLogger("segue.cache").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.pg or f"sqlite:///{Path(tmp) / 'storage.db'}"
        if args.pg:
            _empty_pg(args.pg)
        added: list[Any] = asyncio.run(chat(url, args.turns))
    where = "PostgreSQL, pg_column_size" if args.pg else "SQLite, bytes of each value"
    print(f"{args.turns}-turn tool chat, anthropic twin, {MODEL}, replay_last='all': bytes stored per turn ({where})")
    print("\n".join(report(added, 10, args.turns)))


if __name__ == "__main__":
    main()
