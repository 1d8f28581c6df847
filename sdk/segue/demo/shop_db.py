"""The sample shop database (customers, products, orders, order_items) and its three read-only tools.

The data is `data/shop.sql`, committed as SQL text and built into an in-memory SQLite database on first use.
`list_tables`, `describe_table` and `run_query` are plain functions an agent can register as tools; the
twin's DatabaseChatPolicy asks for exactly these tools.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from importlib import resources
from typing import Any

_ALLOWED_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, getattr(sqlite3, "SQLITE_RECURSIVE", 33)}
)
_LEADING_NOISE = re.compile(r"^(\s+|--[^\n]*\n?|/\*.*?\*/)+", re.DOTALL)


def shop_sql() -> str:
    """The SQL text of the sample database."""
    return resources.files("segue.demo").joinpath("data/shop.sql").read_text(encoding="utf-8")


class ShopDatabase:
    """An in-memory copy of the shop database. Every query is read-only; the instance is thread-safe."""

    def __init__(self, sql: str | None = None) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.executescript(shop_sql() if sql is None else sql)
        self._conn.execute("PRAGMA query_only = ON")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def list_tables(self) -> list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
        return [str(row["name"]) for row in rows]

    def describe_table(self, table: str) -> list[dict[str, Any]]:
        tables = self.list_tables()
        if table not in tables:
            raise ValueError(f"unknown table {table!r}; the shop database has: {', '.join(tables)} (see list_tables)")
        with self._lock:
            columns = self._conn.execute("SELECT * FROM pragma_table_info(?)", (table,)).fetchall()
            keys = self._conn.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,)).fetchall()
        references = {str(k["from"]): f"{k['table']}({k['to']})" for k in keys}
        return [
            {
                "column": str(c["name"]),
                "type": str(c["type"]),
                "nullable": not c["notnull"] and not c["pk"],
                "primary_key": bool(c["pk"]),
                "references": references.get(str(c["name"])),
            }
            for c in columns
        ]

    def run_query(self, sql: str) -> list[dict[str, Any]]:
        if not isinstance(sql, str):
            raise TypeError(f"run_query needs the SQL as a string, got {type(sql).__name__}")
        if not sql.strip():
            raise ValueError("run_query needs one SELECT statement; got an empty string")
        head = _LEADING_NOISE.sub("", sql)[:6].upper()
        if not (head.startswith("SELECT") or head.startswith("WITH")):
            raise ValueError(
                f"run_query accepts one read-only SELECT (or WITH ... SELECT) statement; got {sql.strip()[:80]!r}"
            )
        with self._lock:
            self._conn.set_authorizer(_read_only)
            try:
                cursor = self._conn.execute(sql)
                rows = cursor.fetchall()
            except (sqlite3.DatabaseError, sqlite3.ProgrammingError, sqlite3.Warning) as exc:
                raise ValueError(f"run_query failed for {sql.strip()[:80]!r}: {exc}") from None
            finally:
                self._conn.set_authorizer(None)
        return [dict(row) for row in rows]


def _read_only(action: int, *_args: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


_default: ShopDatabase | None = None
_default_lock = threading.Lock()


def default_database() -> ShopDatabase:
    """The process-wide shop database the module-level tool functions use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ShopDatabase()
        return _default


def list_tables() -> list[str]:
    """List the tables of the shop database."""
    return default_database().list_tables()


def describe_table(table: str) -> list[dict[str, Any]]:
    """Describe one table of the shop database: its columns, types, keys and foreign-key references."""
    return default_database().describe_table(table)


def run_query(sql: str) -> list[dict[str, Any]]:
    """Run one read-only SQL SELECT against the shop database (SQLite dialect) and return the rows."""
    return default_database().run_query(sql)
