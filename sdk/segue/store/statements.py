"""The journal's per-step writes, their SQL made once per store and shape.

Peewee builds a query's SQL anew on every execute, walking its expression tree: about 0.1 ms for one of the
journal's small inserts or updates, three times what SQLite takes to run it and commit. A run's every step writes
the same few shapes (the run row's compare-and-set, its trace rows, the provider call, a tool row, new request
parts), so `Statements` makes each shape's SQL once, from the model's own table and column names and the
database's placeholder, and binds new values on each execute, converted by the same fields Peewee would use
(`Field.db_value`, which carries segue.store.text's rule for NUL and lone surrogates). A read that Peewee's
building dominated does the same (segue.store.rows.replay_sql).

Only what those writes need: an INSERT of whole rows (the model's defaults filled in, as Peewee's insert does),
optionally ignoring a row whose key is there already; an UPDATE (a value may be a Peewee expression the database
computes, such as a lease deadline on its clock) and a one-row SELECT whose WHERE is a conjunction of
`column = value` (`IS NULL` for None). Everything else goes through Peewee's query builder as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import peewee as pw


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Statements:
    """The per-step writes of one store's database (its models are bound to it: segue.store.models.Bound)."""

    def __init__(self, db: pw.Database) -> None:
        self.db = db
        self._sql: dict[tuple[Any, ...], str] = {}
        self._ignore = (
            ("INSERT OR IGNORE INTO", "")
            if isinstance(db, pw.SqliteDatabase)
            else ("INSERT INTO", " ON CONFLICT DO NOTHING")
        )

    def insert(self, model: Any, rows: Iterable[Mapping[str, Any]], *, ignore_existing: bool = False) -> None:
        """Inside a write: each row, by field name. `ignore_existing`: a row whose unique key is taken is skipped."""
        meta = model._meta
        for row in rows:
            columns: list[str] = []
            values: list[Any] = []
            for field in meta.sorted_fields:
                if field.name in row:
                    value = row[field.name]
                elif field in meta.defaults:
                    default = meta.defaults[field]
                    value = default() if callable(default) else default
                else:
                    continue  # NULL, or the database's own (an auto-incremented id)
                columns.append(field.column_name)
                values.append(field.db_value(value))
            key = ("insert", meta.table_name, ignore_existing, *columns)
            sql = self._sql.get(key)
            if sql is None:
                verb, tail = self._ignore if ignore_existing else ("INSERT INTO", "")
                sql = self._sql[key] = (
                    f"{verb} {_quoted(meta.table_name)} ({', '.join(map(_quoted, columns))}) "
                    f"VALUES ({', '.join([self.db.param] * len(columns))}){tail}"
                )
            self._execute(sql, values)

    def update(self, model: Any, values: Mapping[str, Any], where: Mapping[str, Any]) -> int:
        """Inside a write: set `values` (by field name) on the rows matching `where`; how many rows changed."""
        fields = model._meta.fields
        setting: list[tuple[str, str]] = []  # (field name, the SQL of its new value)
        params: list[Any] = []
        for name, value in values.items():
            if isinstance(value, pw.Node):  # computed by the database (a lease deadline on its clock)
                expression, expression_params = self.db.get_sql_context().sql(value).query()  # type: ignore[no-untyped-call]
                setting.append((name, expression))
                params.extend(expression_params)
            else:
                setting.append((name, self.db.param))
                params.append(fields[name].db_value(value))
        conditions, bound = self._where(model, where)
        key = ("update", model._meta.table_name, conditions, *setting)
        sql = self._sql.get(key)
        if sql is None:
            assignments = ", ".join(f"{_quoted(fields[name].column_name)} = {new}" for name, new in setting)
            sql = self._sql[key] = f"UPDATE {_quoted(model._meta.table_name)} SET {assignments} WHERE {conditions}"
        return int(self._execute(sql, params + bound).rowcount)

    def first(self, model: Any, columns: Sequence[str], where: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """Inside a unit of work: `columns` (field names) of the first row matching `where`, as stored, or None."""
        fields = model._meta.fields
        conditions, bound = self._where(model, where)
        key = ("first", model._meta.table_name, tuple(columns), conditions)
        sql = self._sql.get(key)
        if sql is None:
            chosen = ", ".join(_quoted(fields[c].column_name) for c in columns)
            sql = self._sql[key] = f"SELECT {chosen} FROM {_quoted(model._meta.table_name)} WHERE {conditions} LIMIT 1"
        row = self._execute(sql, bound).fetchone()
        return None if row is None else tuple(fields[c].python_value(v) for c, v in zip(columns, row, strict=True))

    def _execute(self, sql: str, params: Sequence[Any]) -> Any:
        return self.db.execute_sql(sql, params)  # type: ignore[no-untyped-call]  # peewee is untyped

    def _where(self, model: Any, where: Mapping[str, Any]) -> tuple[str, list[Any]]:
        fields = model._meta.fields
        parts: list[str] = []
        bound: list[Any] = []
        for name, value in where.items():
            column = _quoted(fields[name].column_name)
            if value is None:
                parts.append(f"{column} IS NULL")
            else:
                parts.append(f"{column} = {self.db.param}")
                bound.append(fields[name].db_value(value))
        return " AND ".join(parts), bound
