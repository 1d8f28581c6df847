"""The store's schema version table and forward migrations.

Each migration moves the database from version N-1 to N inside one transaction. A database written by a newer
segue (a version above the last migration here) is refused, never downgraded.
"""

from __future__ import annotations

from collections.abc import Callable

import peewee as pw

from segue.errors import StoreError
from segue.store.models import ALL_MODELS, SchemaVersion


def _v1(db: pw.Database) -> None:
    db.create_tables(ALL_MODELS)


#: version -> migration that produces it, in order.
MIGRATIONS: list[tuple[int, Callable[[pw.Database], None]]] = [(1, _v1)]
LATEST = MIGRATIONS[-1][0]


def current_version(db: pw.Database) -> int:
    if not db.table_exists(SchemaVersion._meta.table_name):
        return 0
    row = SchemaVersion.select(pw.fn.MAX(SchemaVersion.version).alias("v")).scalar()
    return int(row or 0)


def migrate(db: pw.Database, url: str) -> int:
    """Bring the database to LATEST; returns the version found before."""
    with db.atomic():
        found = current_version(db)
        if found > LATEST:
            raise StoreError(
                f"the database at {url} was written by a newer segue (store schema version {found}; this segue "
                f"knows up to {LATEST}); upgrade segue to read it"
            )
        for version, step in MIGRATIONS:
            if version > found:
                step(db)
                SchemaVersion.create(version=version)
    return found
