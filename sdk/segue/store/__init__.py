"""The run store: Peewee models, migrations and RunStore (SQLite by default, PostgreSQL by URL)."""

from segue.store.run_store import DEFAULT_TENANT, TERMINAL, NewRun, RunStore, StoredRun

__all__ = ["DEFAULT_TENANT", "TERMINAL", "NewRun", "RunStore", "StoredRun"]
