"""A PostgreSQL store URL is libpq's connection string (issue 24 N3).

Its query parameters used to be dropped: `?sslmode=require` and `?sslmode=verify-full&sslrootcert=...` connected in
plain text to a server without TLS, where psql refuses; `connect_timeout`, `application_name` and `?password=`
were lost too, and that password was printed in clear wherever the URL was shown.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from segue.errors import StoreError
from segue.store import RunStore
from segue.store.connection import redact
from tests._support import warm_cli
from tests._support.environment import pg_url, require_tool
from tests._support.protocol_harness import serve_command, twin_agent, write_config

TIMEOUT = 120
NO_TLS = "server does not support SSL, but SSL was required"


def with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.fixture
def pg() -> Iterator[str]:
    """The test server's URL, its database holding a current store (the test server has no TLS)."""
    url = pg_url()
    RunStore(url).close()
    yield url


@pytest.mark.postgres
@pytest.mark.parametrize("tls", ["sslmode=require", "sslmode=verify-full&sslrootcert=/nonexistent/root.crt"])
def test_tls_required_by_the_url_is_refused_by_a_server_without_it_as_psql_refuses(pg: str, tls: str) -> None:
    psql = require_tool("psql", "the reference for what libpq does with the URL")
    done = subprocess.run([psql, with_query(pg, tls), "-c", "SELECT 1"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and NO_TLS in done.stderr, "psql refuses it"
    for read_only in (False, True):
        with pytest.raises(StoreError, match=f"cannot open the run store at .*{tls}.*{NO_TLS}"):
            RunStore(with_query(pg, tls), read_only=read_only)


@pytest.mark.postgres
def test_every_libpq_url_parameter_reaches_the_connection(pg: str) -> None:
    query = "application_name=segue-n3&connect_timeout=7&password=hunter2&options=-c%20statement_timeout%3D1234"
    for read_only in (False, True):
        store = RunStore(with_query(pg, query), read_only=read_only)
        conn = store.db.connection()
        assert conn.info.dsn_parameters["connect_timeout"] == "7"
        assert conn.info.password == "hunter2"  # what libpq would send (the test server trusts every login)
        settings = store.db.execute_sql(
            "SELECT current_setting('application_name'), current_setting('statement_timeout'), "
            "current_setting('default_transaction_read_only')"
        ).fetchone()
        assert settings == ("segue-n3", "1234ms", "on" if read_only else "off"), "the URL's options are kept"
        store.close()
    with pytest.raises(StoreError, match='invalid URI query parameter: "sslmdoe"'):
        RunStore(with_query(pg, "sslmdoe=require"))


@pytest.mark.postgres
def test_the_writers_refuse_a_postgresql_database_without_a_store(pg: str) -> None:
    """Issue 24 N13 on PostgreSQL: a mistyped database name that exists (another app's) is not made a store."""
    import psycopg2

    admin = psycopg2.connect(pg)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("DROP DATABASE IF EXISTS segue_n13_other")
        cur.execute("CREATE DATABASE segue_n13_other")
    other = pg.rpartition("/")[0] + "/segue_n13_other"
    try:
        for command in (("runs", "sweep"), ("db", "migrate")):
            done = warm_cli.run(
                [sys.executable, "-m", "segue.apps.cli.main", *command, "--db", other], capture_output=True, text=True
            )
            assert done.returncode == 2 and "has no segue_schema_version table" in done.stderr, done.stderr
        probe = psycopg2.connect(other)
        with probe.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            assert cur.fetchone() == (0,), "nothing was created"
        probe.close()
    finally:
        with admin.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS segue_n13_other")
        admin.close()


UNREACHABLE = "postgresql://segue@127.0.0.1:1/runs?sslmode=disable&password=hunter2&sslpassword=keypass"
MASKED = "postgresql://segue@127.0.0.1:1/runs?sslmode=disable&password=***&sslpassword=***"


def test_secrets_in_the_query_are_masked_like_the_user_part() -> None:
    assert redact(UNREACHABLE) == MASKED
    assert redact("postgres://u:pw@h/db?password=p2#x") == "postgres://u:***@h/db?password=***#x"
    with pytest.raises(StoreError) as raised:
        RunStore(UNREACHABLE)
    assert MASKED in str(raised.value) and "hunter2" not in str(raised.value)


@pytest.mark.parametrize("command", [("runs", "list"), ("dashboard", "--port", "0"), ("runs", "sweep")])
def test_query_secrets_never_reach_the_commands_output(command: tuple[str, ...]) -> None:
    done = warm_cli.run(
        [sys.executable, "-m", "segue.apps.cli.main", *command, "--db", UNREACHABLE],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2 and MASKED in done.stderr, done.stderr
    assert "hunter2" not in done.stdout + done.stderr and "keypass" not in done.stdout + done.stderr


def test_serve_never_prints_a_query_password(tmp_path: Path) -> None:
    config = write_config(tmp_path / "agents.json", [{**twin_agent([]), "store": UNREACHABLE}])
    done = warm_cli.run(serve_command(config, "--stdio"), input=b"", capture_output=True, timeout=60, cwd=tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 2 and f"cannot open the run store {MASKED}" in err, err
    assert "hunter2" not in err and "keypass" not in err
