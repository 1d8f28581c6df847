"""The `segue` command's contract, from a real process: no traceback ever, every failure one `segue: ...` line with
exit 2 (1 for "found nothing"), a reader that goes away ends it quietly, read commands never write, and the
commands that do write (`db migrate`, `runs sweep`) are explicit."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from segue.errors import StoreError
from segue.store import RunStore
from segue.store.migrations import LATEST
from tests._support import warm_cli
from tests._support.environment import require_tool
from tests._support.sample_runs import SampleRuns
from tests._support.store_rows import new_run, version_one_store

TIMEOUT = 120


def segue(
    *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None, fresh: bool = False
) -> subprocess.CompletedProcess[str]:
    """`python -m segue ARGV`, forked from the warm CLI server (tests/_support/warm_cli.py), or `fresh`: started as a
    new interpreter, for a test whose point is the command's own start-up."""
    return (subprocess.run if fresh else warm_cli.run)(
        [sys.executable, "-m", "segue", *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The single `segue: ...` line a failure must print, and nothing on stdout."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("segue: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def test_version() -> None:
    """Issue 30 item 5: `python -m segue --version` and `segue.__version__`, both the installed distribution's."""
    import importlib.metadata

    import segue as package

    done = segue("--version", fresh=True)  # the `python -m segue` entry point itself
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == f"segue {importlib.metadata.version('segue')}\n" == f"segue {package.__version__}\n"


PAGE = 4096


def damaged_copy(runs: SampleRuns, damaged: Path, pages: range | None = None) -> Path:
    """A copy of the sample store with `pages` overwritten (0-based; default: the second half of the file)."""
    source, copy = sqlite3.connect(runs.url.removeprefix("sqlite:///")), sqlite3.connect(damaged)
    source.backup(copy)  # a consistent single-file copy (the source is in WAL mode)
    copy.close()
    source.close()
    data = bytearray(damaged.read_bytes())
    count = len(data) // PAGE
    for page in pages if pages is not None else range(count // 2, count):
        data[page * PAGE : (page + 1) * PAGE] = bytes(i * 7 % 251 for i in range(PAGE))
    damaged.write_bytes(bytes(data))
    return damaged


def test_damaged_pages_are_one_line(runs: SampleRuns, tmp_path: Path) -> None:
    """Issue 16 item 9: a file with damaged pages printed a traceback and exited 1."""
    damaged = damaged_copy(runs, tmp_path / "damaged.db")
    for argv in (["runs", "list", "--admin"], ["runs", "show", runs.first], ["dashboard", "--port", "0"]):
        err = one_line(segue(*argv, "--db", f"sqlite:///{damaged}"), 2)
        assert "malformed" in err or "not a database" in err, err


def test_the_writers_check_a_sqlite_file_for_damaged_pages_before_writing(runs: SampleRuns, tmp_path: Path) -> None:
    """Issue 35 R11: `db migrate` and `runs sweep` exited 0 on a file with damaged pages (they read only the pages
    they needed). Now SQLite's quick_check runs first: one line naming the file and what to do, exit 2, and the
    file unchanged."""
    with sqlite3.connect(runs.url.removeprefix("sqlite:///")) as source:
        (root,) = source.execute("SELECT rootpage FROM sqlite_master WHERE name = 'react_traces'").fetchone()
    damaged = damaged_copy(runs, tmp_path / "damaged.db", range(root - 1, root))  # the traces' first page only
    before = damaged.read_bytes()
    for argv in (["db", "migrate"], ["runs", "sweep"], ["runs", "sweep", "--json"]):
        err = one_line(segue(*argv, "--db", f"sqlite:///{damaged}"), 2)
        assert f"{damaged} has damaged pages (SQLite's quick_check:" in err, err
        assert "nothing was changed" in err and ".recover" in err, err
    assert damaged.read_bytes() == before
    intact = tmp_path / "intact.db"
    copy = sqlite3.connect(intact)
    with sqlite3.connect(runs.url.removeprefix("sqlite:///")) as source:
        source.backup(copy)
    copy.close()
    assert segue("db", "migrate", "--db", f"sqlite:///{intact}").returncode == 0
    assert segue("runs", "sweep", "--db", f"sqlite:///{intact}").returncode == 0


def test_a_bad_catalog_path_is_one_line(runs: SampleRuns, tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{ not json")
    done = segue("dashboard", "--db", runs.url, "--port", "0", env={"SEGUE_CATALOG_PATH": str(tmp_path)})
    assert "broken.json" in one_line(done, 2)


def test_schema_export_to_an_unwritable_folder_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert "cannot write the bundle" in one_line(segue("schema", "export", str(tmp_path / "file" / "bundle")), 2)


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list", "--admin", "--json"],
        ["runs", "show", "{first}", "--json"],
        ["catalog", "explain", "claude-sonnet-4-6", "--vendor", "anthropic"],
    ],
)
def test_a_reader_that_goes_away_ends_it_quietly(runs: SampleRuns, argv: list[str]) -> None:
    """`segue ... | head`: the reader closes the pipe before segue writes; no BrokenPipeError traceback."""
    args = [a.replace("{first}", runs.first) for a in argv]
    if args[0] == "runs":
        args += ["--db", runs.url]
    proc = subprocess.Popen(
        [sys.executable, "-m", "segue.apps.cli.main", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before segue (still importing) writes anything
    err = proc.stderr.read()
    code = proc.wait(timeout=TIMEOUT)
    assert err == "" and code == 128 + signal.SIGPIPE, (code, err)


def test_an_empty_list_names_the_tenants_the_database_holds(runs: SampleRuns) -> None:
    done = segue("runs", "list", "--db", runs.url, "--tenant", "acme")
    err = one_line(done, 1)
    assert "no runs for tenant 'acme' matching the filters; the database holds runs of tenant" in err
    assert "'default' (4 runs), 'globex' (1 run): pass --tenant default (or --admin)" in err
    done = segue("runs", "list", "--db", runs.url, "--tenant", "acme", "--json")
    assert json.loads(done.stdout) == [] and done.returncode == 1


def test_demo_twin_forces_the_offline_twin_even_with_a_key(tmp_path: Path) -> None:
    done = segue("demo", "--twin", "--db", f"sqlite:///{tmp_path}/demo.db", env={"ANTHROPIC_API_KEY": "sk-ant-unused"})
    assert done.returncode == 0, done.stderr
    assert "via the twin (offline; --twin)" in done.stderr and "turn 5/5" in done.stderr
    listed = segue("runs", "list", "--db", f"sqlite:///{tmp_path}/demo.db")
    assert "pass --tenant demo" in one_line(listed, 1), "the demo's runs belong to tenant 'demo'"


def test_demo_with_a_key_but_no_network_is_one_line(tmp_path: Path) -> None:
    """The vendor SDK reads ANTHROPIC_BASE_URL: port 1 on loopback refuses at once, like a machine offline."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-unused", "ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}
    done = segue("demo", "--db", f"sqlite:///{tmp_path}/demo.db", env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == ""
    banner, failure = done.stderr.splitlines()  # what the demo is about to do, then the one failure line
    assert banner.startswith("segue demo: ") and "via the real vendor" in banner
    assert failure.startswith("segue: the demo stopped: turn 1 ended error: connection error from anthropic")
    assert failure.endswith("run `segue demo --twin` to use the offline twin")


def test_read_commands_never_migrate_and_db_migrate_does(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before = version_one_store(path)
    err = one_line(segue("runs", "list", "--db", f"sqlite:///{path}"), 2)
    assert "schema version 1" in err and "segue db migrate" in err
    assert path.read_bytes() == before, "a read command changed the file"
    done = segue("db", "migrate", "--db", f"sqlite:///{path}")
    assert done.returncode == 0 and done.stdout.strip().endswith(f"store schema version 1 -> {LATEST}"), done
    done = segue("db", "migrate", "--db", f"sqlite:///{path}")
    assert done.returncode == 0 and "already the newest" in done.stdout
    assert segue("runs", "list", "--db", f"sqlite:///{path}").returncode == 1  # readable now; empty


def test_runs_sweep_ends_abandoned_runs(tmp_path: Path) -> None:
    """Issue 16 item 10: a killed process's runs stayed `running` until app code called RunStore.sweep()."""
    url = f"sqlite:///{tmp_path}/runs.db"
    store = RunStore(url)
    abandoned = "01J" + "0" * 23
    store.create_run(
        new_run(abandoned, "t", input="i", lease_seconds=0.01),
        [],
    )
    store.close()
    time.sleep(0.05)
    waiting = segue("runs", "sweep", "--db", url, "--json")
    assert waiting.returncode == 0 and json.loads(waiting.stdout) == [], "within the grace period: left to recover"
    done = segue("runs", "sweep", "--db", url, "--json", "--grace", "0")
    assert done.returncode == 0 and json.loads(done.stdout) == [abandoned]
    listed = segue("runs", "list", "--db", url, "--tenant", "t", "--status", "error", "--json")
    assert [r["error"] for r in json.loads(listed.stdout)] == ["abandoned: the run's lease expired"]
    again = segue("runs", "sweep", "--db", url)
    assert again.returncode == 0 and "no abandoned runs" in again.stdout


@pytest.fixture
def read_only_media(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A folder, and a command prefix under which that folder is read-only media.

    As root (CI), permissions stop nothing: the command runs in a mount namespace of its own where the folder is
    bind-mounted read-only, a real read-only filesystem (EROFS). Otherwise the folder's write bits are removed.
    """
    folder = tmp_path / "media"
    folder.mkdir()
    if os.geteuid() == 0:
        remount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
        yield (
            folder,
            [
                require_tool("unshare", "mounts the folder read-only as root"),
                "--mount",
                "sh",
                "-c",
                remount,
                str(folder),
            ],
        )
        return
    folder.chmod(0o555)
    try:
        yield folder, []
    finally:
        folder.chmod(0o755)


def test_a_wal_store_on_read_only_media_can_be_read(read_only_media: tuple[Path, list[str]]) -> None:
    """Issue 16 item 8: a WAL-mode file on read-only media could not be read ("not a SQLite database")."""
    folder, prefix = read_only_media
    path = folder / "runs.db"
    if not prefix:
        folder.chmod(0o755)  # to write the store first
    store = RunStore(f"sqlite:///{path}")
    store.create_run(
        new_run("01J" + "0" * 23, "t", input="i"),
        [],
    )
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()
    before = sorted(p.name for p in folder.iterdir())
    if not prefix:
        folder.chmod(0o555)
    command = [
        sys.executable,
        "-m",
        "segue.apps.cli.main",
        "runs",
        "list",
        "--db",
        f"sqlite:///{path}",
        "--admin",
        "--json",
    ]
    done = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert [r["run_id"] for r in json.loads(done.stdout)] == ["01J" + "0" * 23]
    assert sorted(p.name for p in folder.iterdir()) == before == ["runs.db"], "nothing was created"
    # The same command shows the folder really is read-only there.
    probe = subprocess.run([*prefix, "touch", str(folder / "probe")], capture_output=True, text=True, timeout=TIMEOUT)
    assert probe.returncode != 0 and ("Read-only file system" in probe.stderr or "Permission denied" in probe.stderr)


def test_a_wal_store_on_read_only_media_is_read_with_its_wal(
    read_only_media: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """Issue 24 N5: with a non-empty -wal and no -shm (copied off a machine whose writer still had the store open,
    or had crashed), the store was read as immutable, which ignores the WAL: `runs list` showed 1 of 4 runs."""
    folder, prefix = read_only_media
    source = tmp_path / "source.db"
    store = RunStore(f"sqlite:///{source}")
    store.create_run(new_run("01J" + "0" * 23, "t", input="i"), [])
    store.close()  # the first run is checkpointed into the file
    store = RunStore(f"sqlite:///{source}")
    ids = ["01J" + "0" * 23] + [f"01J{'0' * 22}{i}" for i in range(1, 4)]
    for run_id in ids[1:]:
        store.create_run(new_run(run_id, "t", input="i"), [])
    assert Path(f"{source}-wal").stat().st_size > 0, "the other three runs are in the WAL only"
    if not prefix:
        folder.chmod(0o755)
    (folder / "runs.db").write_bytes(source.read_bytes())
    (folder / "runs.db-wal").write_bytes(Path(f"{source}-wal").read_bytes())
    store.close()
    if not prefix:
        folder.chmod(0o555)
    command = [sys.executable, "-m", "segue.apps.cli.main", "runs", "list", "--db", f"sqlite:///{folder / 'runs.db'}"]
    done = subprocess.run([*prefix, *command, "--admin", "--json"], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert sorted(r["run_id"] for r in json.loads(done.stdout)) == ids
    assert sorted(p.name for p in folder.iterdir()) == ["runs.db", "runs.db-wal"], "nothing was created or changed"


def test_the_writers_never_create_a_store_by_accident(tmp_path: Path) -> None:
    """Issue 24 N13: `runs sweep` and `db migrate` on a mistyped path created an empty store and exited 0."""
    typo = tmp_path / "segeu.db"
    for command in (("runs", "sweep"), ("db", "migrate")):
        err = one_line(segue(*command, "--db", f"sqlite:///{typo}"), 2)
        assert f"no run store at sqlite:///{typo} (the file {typo} does not exist)" in err
        assert "`segue db migrate --db URL --create`" in err
    other = tmp_path / "app.db"  # another app's SQLite database
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE orders (id INTEGER)")
    db.commit()
    db.close()
    before = other.read_bytes()
    for command in (("runs", "sweep"), ("db", "migrate")):
        err = one_line(segue(*command, "--db", f"sqlite:///{other}"), 2)
        assert "has no segue_schema_version table" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"] and other.read_bytes() == before
    with pytest.raises(StoreError, match="does not exist"):
        RunStore(f"sqlite:///{typo}", create=False)
    assert not typo.exists()

    done = segue("db", "migrate", "--db", f"sqlite:///{typo}", "--create")
    assert done.returncode == 0 and done.stdout.strip().endswith(f"created a run store (schema version {LATEST})")
    done = segue("runs", "sweep", "--db", f"sqlite:///{typo}")
    assert done.returncode == 0 and "no abandoned runs" in done.stdout


@pytest.mark.parametrize("levels", [100, 5_000], ids=["past-the-limit", "past-the-decoder"])
def test_a_catalog_nested_too_deep_is_one_line_naming_the_file_and_the_limit(tmp_path: Path, levels: int) -> None:
    """Issue 35 R11: a catalog file nested 5,000 deep was "internal error: RecursionError" naming no file."""
    from segue.catalog import Catalog, CatalogError

    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * levels + "1" + "}" * levels)
    expected = "deep.json: the file nests deeper than 64 levels of objects and arrays (segue's limit for JSON it"
    with pytest.raises(CatalogError, match=re.escape(expected)):
        Catalog.load(extra_dirs=[tmp_path], env=False)
    done = segue("catalog", "explain", "claude-sonnet-4-6", env={"SEGUE_CATALOG_PATH": str(tmp_path)})
    err = one_line(done, 2)
    assert str(deep) in err and "64 levels" in err and "RecursionError" not in err, err
