"""Opening the store's database and running units of work on it: transactions, reconnects, one clear error.

- `open_database(url, read_only=...)`: SQLite (WAL, busy timeout, write transactions that take the write lock at
  BEGIN, so several processes can share a file; `synchronous` NORMAL unless the URL asks `?synchronous=full`, see
  `sqlite_synchronous`) or PostgreSQL by URL (libpq's connection string, all of it).
  Read-only opens never create or change anything: SQLite with `mode=ro` (on read-only media, where that cannot
  open, see `read_only_fallback`), PostgreSQL with `default_transaction_read_only`.
- `Units.read(fn)` / `Units.write(fn, idempotent=...)`: each call is one unit of work; a write is one transaction.
  Each thread keeps its own open connection (reconnecting per call redid the connection setup every time, which
  dominated small writes). When a PostgreSQL connection turns out dead (the server restarted, or closed it), the
  unit reconnects (waiting up to `reconnect_seconds` for the server to come back) and runs again, at most once.
  A write whose COMMIT was cut off may or may not have been saved, so it runs again only when it is idempotent;
  otherwise it fails with an error that says so.
- Every database failure leaves as a `StoreError` naming the store (password redacted) and the real cause: a
  ROLLBACK that fails after the database already gave up the transaction (SQLite's "database or disk is full",
  a dropped connection) no longer hides the error that caused it.

Peewee's connection pool was not used: after a restart every pooled connection is dead, and the single retry
would draw another dead one.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlparse

import peewee as pw

from segue.errors import StoreError

log = logging.getLogger("segue.store")
T = TypeVar("T")
DEFAULT_RECONNECT_SECONDS = 10.0
READ_ONLY_PRAGMAS = {"busy_timeout": 10_000, "query_only": 1}
#: How long opening a writable SQLite store waits out another connection's lock (the busy timeout, in seconds).
SQLITE_BUSY_SECONDS = 10


class _WritableSqlite(pw.SqliteDatabase):
    """A writable SQLite store whose connection setup waits out other writers. Switching a new database to WAL
    needs its exclusive lock, and while another connection holds the write lock SQLite answers "database is
    locked" at once instead of calling the busy handler (waiting could deadlock the two); writers starting
    together on a new store met that. The pragmas, which are idempotent, are tried again until the busy timeout."""

    def _set_pragmas(self, conn: sqlite3.Connection) -> None:
        deadline = time.monotonic() + SQLITE_BUSY_SECONDS
        while True:
            try:
                super()._set_pragmas(conn)  # type: ignore[misc]  # peewee's stubs leave out its private hooks
                return
            except sqlite3.OperationalError as e:
                if "database is locked" not in str(e) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)


class _Psycopg2Postgresql(pw.PostgresqlDatabase):
    """PostgreSQL through psycopg2 always, the driver `segue[postgres]` installs and the store is built on (a dead
    connection is told by psycopg2's `closed`, below). Peewee would take psycopg 3 when psycopg2 is missing and
    psycopg 3 is there (DBOS brings it: `segue[dbos]`): the store then says psycopg2 is missing instead."""

    psycopg3_adapter = pw.PostgresqlDatabase.psycopg2_adapter


SCHEMA_TABLE = "segue_schema_version"  # models.SchemaVersion's table: a database that has it is a store


def redact(url: str) -> str:
    """The URL with its secrets replaced by ***, for messages and logs: the password of the user part, and those
    of the query (libpq's `password` and `sslpassword`)."""
    parsed = urlparse(url)
    if parsed.password:
        url = url.replace(f":{parsed.password}@", ":***@")
    return _QUERY_SECRET.sub(r"\1***", url)


_QUERY_SECRET = re.compile(r"([?&](?:password|sslpassword)=)[^&#]*")


def postgresql_parameters(url: str, *, read_only: bool) -> dict[str, Any]:
    """PostgresqlDatabase's arguments for a postgresql:// URL. The URL itself is libpq's connection string, so
    every parameter of its query (sslmode, sslrootcert, connect_timeout, application_name, password, ...) reaches
    the connection as psql would use it, and libpq refuses one it does not know, by name. Two defaults stay
    segue's: the database `postgres` and the host localhost (libpq's are the user's name and the Unix socket)."""
    parsed = urlparse(url)
    query = dict(parse_qsl(parsed.query))
    options: dict[str, Any] = {"dsn": url}
    if not parsed.hostname and not {"host", "hostaddr"} & query.keys():
        options["host"] = "localhost"
    if read_only:  # kept with the URL's own `options`, which a keyword argument would replace
        options["options"] = " ".join(filter(None, [query.get("options"), "-c default_transaction_read_only=on"]))
    return {"database": unquote(parsed.path.lstrip("/")) or query.get("dbname") or "postgres", **options}


def sqlite_path(url: str) -> str:
    """The file of a SQLite URL (`sqlite:///segue.db?synchronous=full` -> `segue.db`)."""
    return unquote(url.removeprefix("sqlite:///").removeprefix("sqlite://").split("?", 1)[0])


#: The values a SQLite store URL's `?synchronous=` takes (SQLite's own names for them).
SQLITE_SYNCHRONOUS = ("normal", "full", "extra")


def sqlite_synchronous(url: str) -> str:
    """SQLite's `synchronous` for a writable store: `normal` unless the URL says `?synchronous=full` (or `extra`).

    In WAL mode NORMAL syncs the log at checkpoints, not at every commit, and SQLite's pragma page says what that
    costs: a commit survives a crash of the application, though it "might roll back following a power loss or
    system crash". A run's journal makes three commits a turn, and the sync was nearly all of their cost (bench/
    durable.py). An app that must not lose the last commits to a power cut asks for `full` (one sync per commit),
    or keeps its store on PostgreSQL. Any other query key or value is refused, naming it."""
    query = parse_qsl(urlparse(url).query, keep_blank_values=True)
    for key, value in query:
        if key != "synchronous":
            raise StoreError(
                f"the SQLite URL {redact(url)!r} has the option {key!r}; the one option it takes is "
                f"?synchronous=normal|full|extra (a file name with '?' in it is written %3F)"
            )
        if value.lower() not in SQLITE_SYNCHRONOUS:
            raise StoreError(
                f"synchronous={value!r} in the SQLite URL {redact(url)!r}: use one of {', '.join(SQLITE_SYNCHRONOUS)}"
            )
    return query[-1][1].lower() if query else "normal"


def open_database(url: str, *, read_only: bool, create: bool = True) -> pw.Database:
    """The (not yet connected) Peewee database for a store URL. `create=False`: a SQLite file that does not exist,
    or holds no store, is refused here, before a connection would create it (PostgreSQL: when migrating)."""
    if not create and not read_only:
        refuse_if_no_sqlite_store(url)
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = sqlite_path(url)
        if not path:
            raise StoreError(f"no file in the SQLite URL {url!r}; use sqlite:///path/to/segue.db")
        memory = path == ":memory:"
        synchronous = sqlite_synchronous(url)
        if read_only and not memory:
            file = Path(path)
            if not file.is_file():
                raise StoreError(f"no run store at {path} ({url}); pass the URL of an existing store")
            return pw.SqliteDatabase(
                f"file:{quote(str(file.resolve()))}?mode=ro",
                uri=True,
                pragmas=READ_ONLY_PRAGMAS,
                timeout=10,
                check_same_thread=False,
            )
        return _WritableSqlite(
            path,
            pragmas={
                "journal_mode": "memory" if memory else "wal",
                "synchronous": synchronous,
                "busy_timeout": SQLITE_BUSY_SECONDS * 1000,
                "foreign_keys": 1,
            },
            # Write transactions take the write lock at BEGIN. A deferred one that reads before it writes (as
            # finish_run reads the run's meta) cannot wait for another process's writer when it upgrades: SQLite
            # answers "database is locked" at once, ignoring the busy timeout.
            lock_type="IMMEDIATE",
            timeout=SQLITE_BUSY_SECONDS,
            thread_safe=not memory,
            check_same_thread=False,
        )
    if parsed.scheme in ("postgresql", "postgres"):
        return _Psycopg2Postgresql(**postgresql_parameters(url, read_only=read_only))
    raise StoreError(f"unsupported store URL {redact(url)!r}: use sqlite:///path.db or postgresql://user@host/db")


def no_store(url: str, why: str) -> str:
    """The message for opening a store that is not there, where nothing may be created."""
    return (
        f"no run store at {url} ({why}): check the URL; a new store is created only on purpose "
        "(`segue db migrate --db URL --create`, or RunStore(url) from Python)"
    )


def refuse_if_no_sqlite_store(url: str) -> None:
    """For writers that must not create a store: a SQLite URL whose file does not exist, or holds no segue tables,
    is a StoreError, found without creating or changing the file (a writable connection would create it, and switch
    another app's database to WAL)."""
    if urlparse(url).scheme != "sqlite" or (path := sqlite_path(url)) in ("", ":memory:"):
        return
    file = Path(path)
    if not file.is_file():
        raise StoreError(no_store(redact(url), f"the file {file.resolve()} does not exist"))
    try:
        with closing(sqlite3.connect(f"file:{quote(str(file.resolve()))}?mode=ro", uri=True)) as probe:
            found = probe.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (SCHEMA_TABLE,))
            if found.fetchone() is None:
                raise StoreError(no_store(redact(url), f"{file} has no {SCHEMA_TABLE} table"))
    except sqlite3.OperationalError as e:  # unreadable, say
        raise StoreError(f"cannot open the run store at {redact(url)}: {e}") from None
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{file} is not a SQLite database ({e}); pass a segue run store") from None


def refuse_damaged_sqlite_file(url: str) -> None:
    """For the maintenance commands that write (`segue db migrate`, `segue runs sweep`): SQLite's quick_check over
    the whole file, before anything is written. Those commands read only the pages they need, so a file damaged
    elsewhere was migrated or swept and reported fine. StoreError naming the file, SQLite's first finding and what
    to do; nothing for a file SQLite cannot open at all (the store's own open reports that)."""
    if urlparse(url).scheme != "sqlite" or (path := sqlite_path(url)) in ("", ":memory:"):
        return
    file = Path(path)
    if not file.is_file():
        return
    try:
        with closing(sqlite3.connect(f"file:{quote(str(file.resolve()))}?mode=ro", uri=True)) as probe:
            found = [row[0] for row in probe.execute("PRAGMA quick_check(3)").fetchall() if row[0] != "ok"]
    except sqlite3.OperationalError:
        return
    except sqlite3.DatabaseError as e:  # damage where quick_check itself starts (the schema's pages)
        found = [str(e)]
    if found:
        first = " ".join(str(found[0]).split()).removeprefix("*** in database main *** ")
        raise StoreError(
            f"{file} has damaged pages (SQLite's quick_check: {first}); nothing was changed. Restore it from a "
            f"backup, or copy what SQLite can still read into a new file (`sqlite3 {file} .recover | sqlite3 "
            "recovered.db`) and use that"
        )


def read_only_fallback(db: pw.Database) -> bool:
    """A read-only SQLite file that `mode=ro` cannot open: a WAL file on read-only media, where the -shm file (the
    WAL index other processes share) cannot be created. Switches `db` to a way that reads it; False when this does
    not apply.

    With no -wal file, or an empty one, everything is in the database file: it is read as immutable. A non-empty
    -wal holds transactions not yet copied into the file, which an immutable open ignores (it showed 1 of 4 runs):
    then each connection keeps the WAL index in its own memory (exclusive locking mode) and takes no file locks
    (the unix-none VFS), which is safe because nothing can write on read-only media."""
    if not isinstance(db, pw.SqliteDatabase) or not str(db.database).endswith("?mode=ro"):
        return False
    db.close()
    base = str(db.database).removesuffix("?mode=ro")
    wal = Path(unquote(base.removeprefix("file:")) + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        db.init(f"{base}?mode=ro&vfs=unix-none", pragmas={"locking_mode": "exclusive", **READ_ONLY_PRAGMAS}, timeout=10)
    else:
        db.init(f"{base}?immutable=1", pragmas=READ_ONLY_PRAGMAS, timeout=10)
    return True


class _CommitFailed(Exception):
    def __init__(self, cause: pw.PeeweeException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Units:
    """Units of work on one database, serialising this process's writes (SQLite has one writer)."""

    def __init__(self, db: pw.Database, url: str, *, reconnect_seconds: float = DEFAULT_RECONNECT_SECONDS) -> None:
        self.db = db
        self.shown = redact(url)
        self.reconnect_seconds = reconnect_seconds
        self.can_reconnect = isinstance(db, pw.PostgresqlDatabase)
        self.write_lock = threading.RLock()
        # An in-memory SQLite database has one shared connection: reads take the lock too.
        self.read_lock = self.write_lock if str(db.database).endswith(":memory:") else None

    def read(self, work: Callable[[], T]) -> T:
        return self._run(work, write=False, idempotent=True)

    def write(self, work: Callable[[], T], *, idempotent: bool) -> T:
        """`work` in one transaction. `idempotent`: running it twice leaves what running it once does."""
        return self._run(work, write=True, idempotent=idempotent)

    def _run(self, work: Callable[[], T], *, write: bool, idempotent: bool) -> T:
        retried = False
        while True:
            try:
                with self._locked(write):
                    self._ensure_open()
                    return self._transaction(work) if write else work()
            except _CommitFailed as e:
                if not self._lost(e.cause):
                    raise self.error(e.cause) from e.cause
                if retried or not idempotent:
                    raise StoreError(
                        f"the connection to the run store at {self.shown} was lost while committing a write "
                        f"({_first_line(e.cause)}); whether it was saved is unknown"
                    ) from e.cause
            except pw.IntegrityError:
                raise  # the caller's to interpret (an idempotency key taken, say)
            except pw.PeeweeException as e:
                if retried or not self._lost(e):
                    raise self.error(e) from e
            log.warning("the connection to the run store at %s was lost; reconnecting and trying once more", self.shown)
            self._reconnect()
            retried = True

    @contextmanager
    def _locked(self, write: bool) -> Iterator[None]:
        lock = self.write_lock if write else self.read_lock
        if lock is None:
            yield
            return
        with lock:
            yield

    def _ensure_open(self) -> None:
        if _dead(self.db):
            self.db.dispose()  # psycopg2 already knows this connection is dead: do not try it
        self.db.connect(reuse_if_open=True)

    def _transaction(self, work: Callable[[], T]) -> T:
        """BEGIN, work, COMMIT; a failed ROLLBACK never replaces the error that made it necessary."""
        txn = self.db.transaction()
        txn.__enter__()
        try:
            result = work()
        except BaseException:
            self.db.pop_transaction()  # type: ignore[no-untyped-call]
            try:
                self.db.rollback()
            except pw.PeeweeException as rollback_error:
                # SQLite ends the transaction itself on "database or disk is full"; a dead connection cannot
                # roll back. Either way the transaction is gone, and the first error is the one to report.
                log.debug("rollback after a failed write: %s", rollback_error)
            raise
        self.db.pop_transaction()  # type: ignore[no-untyped-call]
        try:
            self.db.commit()
        except pw.PeeweeException as e:
            raise _CommitFailed(e) from e
        return result

    def _lost(self, e: pw.PeeweeException) -> bool:
        """Whether `e` means the PostgreSQL connection is gone (not a problem with the statement)."""
        if not self.can_reconnect:
            return False
        return self.db.is_closed() or _dead(self.db) or isinstance(e, pw.InterfaceError)

    def _reconnect(self) -> None:
        self.db.dispose()
        deadline = time.monotonic() + self.reconnect_seconds
        delay = 0.05
        while True:
            try:
                self.db.connect()
                return
            except pw.OperationalError as e:
                if time.monotonic() + delay > deadline:
                    raise StoreError(
                        f"the run store at {self.shown} is unreachable: {_first_line(e)} "
                        f"(tried to reconnect for {self.reconnect_seconds:g} s)"
                    ) from e
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def error(self, e: BaseException) -> StoreError:
        """A database failure as a StoreError naming the store and the cause."""
        return StoreError(f"the run store at {self.shown} failed: {type(e).__name__}: {_first_line(e)}")

    def close(self) -> None:
        if not self.db.is_closed():
            self.db.close()


def _dead(db: pw.Database) -> bool:
    """Whether psycopg2 already knows the calling thread's connection is broken (`closed` is 2 then)."""
    if db.is_closed():
        return False
    conn: Any = db.connection()  # type: ignore[no-untyped-call]
    return bool(getattr(conn, "closed", False))


def _first_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__
