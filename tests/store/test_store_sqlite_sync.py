"""SQLite's `synchronous` for a writable store: NORMAL by default, FULL or EXTRA when the URL asks.

The rule, from SQLite's pragma page (https://www.sqlite.org/pragma.html#pragma_synchronous): "WAL mode is always
consistent with synchronous=NORMAL, but WAL mode does lose durability. A transaction committed in WAL mode with
synchronous=NORMAL might roll back following a power loss or system crash. Transactions are durable across
application crashes regardless of the synchronous setting or journal mode." A killed process (what the recovery
tests SIGKILL, on this default) keeps every commit; a power cut may lose the last ones unless the URL says
`?synchronous=full`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from segue.errors import StoreError
from segue.store import RunStore
from segue.store.connection import sqlite_path

# SQLite's numbers for the setting (PRAGMA synchronous answers them): 1 NORMAL, 2 FULL, 3 EXTRA.
NUMBERS = {"normal": 1, "full": 2, "extra": 3}


def pragmas(store: RunStore) -> tuple[int, str]:
    synchronous = store.db.execute_sql("PRAGMA synchronous").fetchone()[0]
    journal = store.db.execute_sql("PRAGMA journal_mode").fetchone()[0]
    return synchronous, journal


def test_a_store_journals_in_wal_with_synchronous_normal_unless_its_url_asks_for_more(tmp_path: Path) -> None:
    default = RunStore(f"sqlite:///{tmp_path}/default.db")
    assert pragmas(default) == (NUMBERS["normal"], "wal")
    default.close()
    for asked in ("full", "extra", "FULL", "normal"):
        store = RunStore(f"sqlite:///{tmp_path}/{asked}.db?synchronous={asked}")
        assert pragmas(store) == (NUMBERS[asked.lower()], "wal"), asked
        store.close()
        # the query is an option, not part of the file's name
        assert (tmp_path / f"{asked}.db").is_file()
    assert sqlite_path(f"sqlite:///{tmp_path}/full.db?synchronous=full") == f"{tmp_path}/full.db"


@pytest.mark.parametrize(
    ("query", "named"),
    [("?sync=full", "'sync'"), ("?synchronous=off", "'off'"), ("?synchronous=full&cache=shared", "'cache'")],
)
def test_an_option_the_store_does_not_take_is_refused_naming_it_before_any_file_is_made(
    tmp_path: Path, query: str, named: str
) -> None:
    with pytest.raises(StoreError, match=named) as refused:
        RunStore(f"sqlite:///{tmp_path}/x.db{query}")
    assert "normal" in str(refused.value) and "full" in str(refused.value)  # what it takes instead
    assert list(tmp_path.iterdir()) == []
