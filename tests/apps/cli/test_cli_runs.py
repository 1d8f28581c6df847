"""`segue runs list|show|explain`: output, --json shapes (validated against the schemas), exit codes, bad input."""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import uuid
from pathlib import Path

import pytest

from segue import Agent, RunStore
from segue.apps.cli.main import build_parser, main
from segue.generated import LayoutMeta, RunDetail, RunMeta, get_converter
from segue.testing import ScriptedProvider, text
from tests._support.cli import run_cli
from tests._support.environment import pg_url
from tests._support.sample_runs import SampleRuns, copy_store, validate

# -- runs list ------------------------------------------------------------------------------------------------


def test_list_shows_only_the_tenants_runs(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "runs", "list", "--db", runs.url)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["RUN", "STATUS", "MODEL"], "one tenant, one agent: neither is a column"
    assert [line.split()[0] for line in lines[1:]] == [runs.edited, runs.third, runs.second, runs.first]
    assert runs.other_tenant not in out
    # A turn that continues another run is marked; the question column shows its input.
    assert lines[1][lines[0].index("QUESTION") :] == "↳ Where is order 44?"
    assert lines[-1][lines[0].index("QUESTION") :] == "Where is order 42?"

    code, out, _ = run_cli(capsys, "runs", "list", "--db", runs.url, "--wide")
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["RUN", "STATUS", "TENANT"]
    # --wide: the continued_from column links each run to the one before it.
    assert lines[1][lines[0].index("CONTINUES") :].split()[0] == runs.third
    assert lines[1][lines[0].index("QUESTION") :] == "Where is order 44?"

    code, out, _ = run_cli(capsys, "runs", "list", "--db", runs.url, "--tenant", "globex")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == [runs.other_tenant]
    code, out, _ = run_cli(capsys, "runs", "list", "--db", runs.url, "--admin")
    assert code == 0 and len(out.splitlines()) == 6 and runs.other_tenant in out


def test_list_json_is_a_list_of_run_summaries(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", "list", "--db", runs.url, "--admin", "--json")
    assert code == 0
    data = json.loads(out)
    assert len(data) == 5
    for item in data:
        validate(item, "RunSummary")
    assert {item["tenant_id"] for item in data} == {"default", "globex"}
    third = next(item for item in data if item["run_id"] == runs.third)
    assert third["continued_from"] == runs.second and third["replay"]["runs_text"] == [runs.first]


def test_list_filters(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    def ids(*extra: str) -> list[str]:
        code, out, _ = run_cli(capsys, "runs", "list", "--db", runs.url, "--json", *extra)
        found = [r["run_id"] for r in json.loads(out)]
        assert code == (0 if found else 1), "an empty list is 'found nothing'"
        return found

    assert ids("--limit", "2") == [runs.edited, runs.third]
    assert ids("--admin", "--agent", "billing") == [runs.other_tenant]
    assert ids("--agent", "billing") == []
    assert ids("--status", "error") == []
    assert len(ids("--status", "success")) == 4
    code, out, err = run_cli(capsys, "runs", "list", "--db", runs.url, "--status", "error")
    assert code == 1 and out == ""
    assert err.startswith("segue: no runs for tenant 'default' matching the filters;") and err.count("\n") == 1


# -- runs show ------------------------------------------------------------------------------------------------


def test_show_text(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "runs", "show", runs.second, "--db", runs.url)
    assert code == 0 and err == ""
    assert out.splitlines()[0] == f"run {runs.second}  success"
    assert f"continued from {runs.first}" in out
    assert f"in full: {runs.first}" in out and "as question + answer: —" in out
    assert "ITER  MODEL" in out and "CACHE READ  CACHE WRITE  UNCACHED" in out
    assert "[0] iter 0 user: And order 43?" in out
    assert 'call lookup_order({"order": 43})' in out
    assert "tool calls:" in out and "→ order 43 shipped on day 2" in out


def test_show_json_is_a_run_detail(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", "show", runs.third, "--db", runs.url, "--json")
    assert code == 0
    data = json.loads(out)
    validate(data, "RunDetail")
    store = RunStore(runs.url)
    try:
        assert data == get_converter().unstructure(store.get_run(runs.third), RunDetail)
    finally:
        store.close()


def test_show_layout_decision(runs: SampleRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = copy_store(runs, tmp_path / "layout.db")
    store = RunStore(url)
    try:
        run = store.get_run(runs.first)
        assert run is not None
        layout = LayoutMeta(mode="appendOnly", reason="catalog: x prefix_prompt_cache=true", iteration=1)
        store.finish_run(
            runs.first,
            status="success",
            answer=run.answer,
            error=None,
            usage=run.usage,
            iterations=2,
            meta_updates=RunMeta(segue_layout=layout),
        )
    finally:
        store.close()
    code, out, _ = run_cli(capsys, "runs", "show", runs.first, "--db", url)
    assert code == 0
    assert "layout: appendOnly (catalog: x prefix_prompt_cache=true) at iteration 1" in out


def test_show_cleans_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'esc.db'}"
    store = RunStore(url)
    try:
        agent = Agent(ScriptedProvider.of(text("\x1b]0;owned\x07 done \x1b[2J")), "p", [], store)
        result = asyncio.run(agent.run("hi"))
    finally:
        store.close()
    code, out, _ = run_cli(capsys, "runs", "show", result.run_id, "--db", url)
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out
    assert "answer: \\x1b]0;owned\\x07 done \\x1b[2J" in out


def test_colour_only_on_a_terminal(
    runs: SampleRuns, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, plain, _ = run_cli(capsys, "runs", "list", "--db", runs.url)
    assert "\x1b[" not in plain
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    _, coloured, _ = run_cli(capsys, "runs", "list", "--db", runs.url)
    assert "\x1b[32msuccess" in coloured
    monkeypatch.setenv("NO_COLOR", "1")
    _, no_color, _ = run_cli(capsys, "runs", "list", "--db", runs.url)
    assert "\x1b[" not in no_color


# -- runs explain ---------------------------------------------------------------------------------------------


def test_explain_a_cache_friendly_run_exits_0(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", "explain", runs.second, "--db", runs.url)
    assert code == 0
    assert f"{runs.first} #2" in out  # iteration 1 is compared with the last request of the run it continued
    assert "1: extends the previous request" in out and "2: extends the previous request" in out


def test_explain_names_the_system_prompt(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", "explain", runs.edited, "--db", runs.url)
    assert code == 1
    assert "1: system prompt changed at system" in out
    assert "Be brief." in out


def test_explain_names_the_first_collapsed_run(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", "explain", runs.third, "--db", runs.url)
    assert code == 1
    assert f"a moved window: run {runs.first} went in full before" in out


def test_explain_json(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", "explain", runs.third, "--db", runs.url, "--json")
    assert code == 1
    data = json.loads(out)
    assert data["run_id"] == runs.third and data["continued_from"] == runs.second
    (it,) = data["iterations"]
    assert it["cause"] == "window" and it["collapsed_run"] == runs.first
    assert it["previous_run_id"] == runs.second and it["previous_iteration"] == 2
    validate(data, "RunExplanation", "explain")
    assert {"run_id", "continued_from", "iterations"} <= set(data)
    assert {
        "iteration",
        "cause",
        "reason",
        "request_bytes",
        "prefix_bytes",
        "previous_bytes",
        "previous_run_id",
        "previous_iteration",
        "divergence",
        "collapsed_run",
        "usage",
    } <= set(it)
    assert set(it["divergence"]) == {"path", "section", "byte_offset", "previous", "current"}
    validate(it["usage"], "Usage", "message")
    code, out, _ = run_cli(capsys, "runs", "explain", runs.first, "--db", runs.url, "--json")
    assert code == 0 and [i["cause"] for i in json.loads(out)["iterations"]] == ["first", "extends"]


# -- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["show", "explain"])
def test_unknown_or_other_tenants_run_is_found_nothing(
    runs: SampleRuns, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for run_id in ("01NOSUCHRUN0000000000000000", runs.other_tenant):
        code, out, err = run_cli(capsys, "runs", command, run_id, "--db", runs.url)
        assert code == 1 and out == ""
        assert err.count("\n") == 1 and err.startswith(f"segue: no run '{run_id}' for tenant 'default'")
    code, out, _ = run_cli(capsys, "runs", command, runs.other_tenant, "--db", runs.url, "--admin")
    assert code in (0, 1) and runs.other_tenant in out


def _one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, (out, err)
    assert out == "" and err.startswith("segue: ") and err.count("\n") == 1
    return err


@pytest.mark.parametrize("command", [["runs", "list"], ["runs", "show", "X"], ["runs", "explain", "X"]])
def test_a_missing_sqlite_file_is_not_created(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    err = _one_line_error(capsys, *command, "--db", f"sqlite:///{missing}")
    assert f"no run store at {missing}" in err
    assert list(tmp_path.iterdir()) == []


def test_the_default_database_is_segue_db_in_the_cwd_or_segue_db_env(
    runs: SampleRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEGUE_DB", raising=False)
    err = _one_line_error(capsys, "runs", "list")
    assert "no run store at segue.db (sqlite:///segue.db)" in err and "SEGUE_DB" in err
    assert not (tmp_path / "segue.db").exists()
    monkeypatch.setenv("SEGUE_DB", runs.url)
    code, out, _ = run_cli(capsys, "runs", "list", "--json")
    assert code == 0 and len(json.loads(out)) == 4


def test_files_that_are_not_run_stores_are_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text_file = tmp_path / "notes.db"
    text_file.write_text("not a database")
    assert "is not a SQLite database" in _one_line_error(capsys, "runs", "list", "--db", f"sqlite:///{text_file}")
    assert text_file.read_text() == "not a database"

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    before = other.read_bytes()
    assert "not a segue run store" in _one_line_error(capsys, "runs", "list", "--db", f"sqlite:///{other}")
    assert other.read_bytes() == before
    assert "no run store" in _one_line_error(capsys, "runs", "list", "--db", f"sqlite:///{tmp_path}")


def test_a_database_from_a_newer_segue_is_refused(
    runs: SampleRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "newer.db"
    copy_store(runs, db)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO segue_schema_version (version) VALUES (99)")
    err = _one_line_error(capsys, "runs", "list", "--db", f"sqlite:///{db}")
    assert "newer segue" in err and "upgrade segue" in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT MAX(version) FROM segue_schema_version").fetchone() == (99,)
        assert conn.execute("SELECT COUNT(*) FROM agent_runs").fetchone() == (5,)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://nobody@127.0.0.1:1/segue", "cannot open the run store"),
        ("mysql://host/db", "unsupported store URL"),
    ],
)
def test_unreachable_or_unsupported_urls(url: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert says in _one_line_error(capsys, "runs", "list", "--db", url)


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list", "--limit", "0"],
        ["runs", "list", "--status", "bogus"],
        ["runs", "list", "--tenant", "a", "--admin"],
        ["runs", "show"],
        ["runs"],
        ["dashboard", "--port", "70000"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage: segue" in capsys.readouterr().err


def _commands(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
    found = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, [*prefix, name])
    return found


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _commands(build_parser(), [])
    assert ["runs", "explain"] in commands and ["dashboard"] in commands and ["schema", "export"] in commands
    for command in commands:
        with pytest.raises(SystemExit) as exit_info:
            main([*command, "--help"])
        assert exit_info.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: segue {' '.join(command)}".rstrip()), command
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "exit codes: 0 ok, 1 the command found nothing or a problem, 2 bad input" in capsys.readouterr().out


@pytest.mark.postgres
def test_runs_on_postgresql(capsys: pytest.CaptureFixture[str]) -> None:
    url = pg_url()
    tenant = f"cli-{uuid.uuid4().hex}"  # a tenant of its own: other tests may share the database
    store = RunStore(url)
    try:
        agent = Agent(ScriptedProvider.of(text("one"), text("two")), "p", [], store)
        first = asyncio.run(agent.run("first", tenant_id=tenant))
        second = asyncio.run(agent.run("second", tenant_id=tenant, runs=[first.run_id], replay_last="all"))
    finally:
        store.close()
    code, out, _ = run_cli(capsys, "runs", "list", "--db", url, "--tenant", tenant, "--json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == [second.run_id, first.run_id]
    code, out, _ = run_cli(capsys, "runs", "explain", second.run_id, "--db", url, "--tenant", tenant)
    assert code == 0 and "1: extends the previous request" in out
    code, _, err = run_cli(capsys, "runs", "show", second.run_id, "--db", url)
    assert code == 1 and "for tenant 'default'" in err


def test_list_rows_fit_120_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30 item 5: `runs list` rows were ~215 characters wide. Long questions and model names are cut to the
    width (the question takes what is left), agent and tenant columns appear only when the rows differ in them,
    and --wide still has every column in full."""
    db = tmp_path / "long.db"
    store = RunStore(f"sqlite:///{db}")
    question = "How many customers placed an order in every month of 2025, and which of them spent the most? " * 3

    def record(agent: str) -> None:
        provider = ScriptedProvider.of(text("An answer."), model="a-model-name-longer-than-the-column-allows")
        assert asyncio.run(Agent(provider, "You help.", [], store, name=agent).run(question)).status == "success"

    def listed(*extra: str) -> list[str]:
        code, out, _ = run_cli(capsys, "runs", "list", "--db", str(db), *extra)
        assert code == 0
        return out.splitlines()

    try:
        record("desk")
        record("desk")
        lines = listed()
        assert max(len(line) for line in lines) <= 120, "\n".join(lines)
        assert lines[0].split() == ["RUN", "STATUS", "MODEL", "STARTED", "INPUT", "CACHED", "COST", "QUESTION"]
        assert all(line.endswith("…") and len(line) == 120 for line in lines[1:]), "the question is cut, and says so"
        record("billing-with-a-long-agent-name")
        lines = listed()
        assert lines[0].split()[:3] == ["RUN", "STATUS", "AGENT"] and max(len(line) for line in lines) <= 124
        assert max(len(line) for line in listed("--wide")) > 150 and "CONTINUES" in listed("--wide")[0]
    finally:
        store.close()


@pytest.mark.parametrize("form", ["{db}", "./{name}", "{name}"])
def test_db_takes_a_plain_path_as_sqlite(
    runs: SampleRuns, form: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30 item 5: `--db ./file.db` was refused ("unsupported store URL"). A value without a scheme is a
    SQLite file, on every command that takes --db, and in $SEGUE_DB."""
    db = Path(runs.url.removeprefix("sqlite:///"))
    monkeypatch.chdir(db.parent)
    given = form.format(db=db, name=db.name)
    code, out, err = run_cli(capsys, "runs", "list", "--db", given, "--json")
    assert (code, err, len(json.loads(out))) == (0, "", 4)
    code, out, _ = run_cli(capsys, "runs", "show", runs.first, "--db", given, "--json")
    assert code == 0 and json.loads(out)["run_id"] == runs.first
    monkeypatch.setenv("SEGUE_DB", given)
    code, out, _ = run_cli(capsys, "runs", "list", "--json")
    assert code == 0 and len(json.loads(out)) == 4
    assert build_parser().parse_args(["dashboard", "--db", given]).db == f"sqlite:///{given}"
    assert build_parser().parse_args(["demo", "--db", given]).db == f"sqlite:///{given}"
    assert build_parser().parse_args(["db", "migrate", "--db", given]).db == f"sqlite:///{given}"


@pytest.mark.parametrize(
    ("argv", "suggested"),
    [
        (["runs", "list", "--tennant", "acme"], "--tenant"),
        (["runs", "show", "RUN", "--jsno"], "--json"),
        (["dashboard", "--prot", "9000"], "--port"),
        (["runs", "list", "--tennant=acme"], "--tenant"),
    ],
)
def test_a_mistyped_option_gets_a_did_you_mean(
    argv: list[str], suggested: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30 item 5: `--tennant` got the top-level usage and no suggestion."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"did you mean {suggested}?" in err and f"usage: segue {argv[0]}" in err, err


def test_an_unknown_option_far_from_any_is_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["runs", "list", "--zzzzzz"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzzzz" in err and "did you mean" not in err
