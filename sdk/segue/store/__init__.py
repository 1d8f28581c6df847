"""The run store: Peewee models, migrations and RunStore (SQLite by default, PostgreSQL by URL)."""

from segue.store.records import DEFAULT_TENANT, TERMINAL, NewRun, StoredRun
from segue.store.run_store import RunStore

__all__ = ["DEFAULT_TENANT", "TERMINAL", "NewRun", "RunStore", "StoredRun"]
