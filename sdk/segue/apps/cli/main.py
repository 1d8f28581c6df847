"""The `segue` command. Exit codes: 0 ok, 1 the command ran and found nothing or a problem, 2 bad input or
environment.

Adding a command is one handler `_name(args) -> int` plus one `_command(...)` entry in `build_parser`. Handlers
raise `CommandError` for bad input; `main` prints it as one line on stderr and returns its exit code. No command
prints a traceback: anything unexpected is one `segue: internal error: ...` line, and a reader that goes away
(`segue runs list --json | head`) ends the command quietly, as it ends other Unix tools. Commands that read runs
take `--db URL` (default $SEGUE_DB, else sqlite:///segue.db) and `--tenant T` / `--admin`, and open the store
read-only: they never create, migrate or change it (`segue db migrate` and `segue runs sweep` are the writers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args
from urllib.parse import urlparse

from segue._core.run_text import other_tenants
from segue._support.resources import package_version
from segue.apps.cli.arguments import Parser, offset, port_number, positive_int, store_url
from segue.apps.cli.render import LIST_WIDTH, clean, count, explain_text, prewarm_text, runs_table, show_text
from segue.apps.cli.tree import nested, tree_lines
from segue.errors import StoreError
from segue.generated import RunDetail, RunExplanation, RunStatus, RunSummary, SweptRuns, Usage, get_converter

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT = 0, 1, 2
DB_ENV = "SEGUE_DB"
DEFAULT_DB = "sqlite:///segue.db"
DEFAULT_TENANT = "default"
_STATUSES: tuple[str, ...] = get_args(RunStatus)
_MAX_CHAIN = 200  # runs `runs show` adds up for "conversation so far"

if TYPE_CHECKING:  # imported lazily at run time, so `segue --help` stays quick
    from segue.store.run_store import RunStore


class CommandError(Exception):
    """Bad input or environment: one line on stderr, nothing written, exit code 2 (or `code`)."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


# -- the store ----------------------------------------------------------------------------------------------


def _db_url(args: argparse.Namespace) -> str:
    url: str = args.db or store_url(os.environ.get(DB_ENV) or DEFAULT_DB)  # --db is a store_url already
    return url


@contextmanager
def _store(args: argparse.Namespace, *, write: bool = False, create: bool = False) -> Iterator[RunStore]:
    """The run store of `--db`: read-only unless the command writes (then migrated; created only with `create`)."""
    from segue.store.connection import refuse_damaged_sqlite_file, sqlite_path
    from segue.store.run_store import RunStore

    url = _db_url(args)
    path = sqlite_path(url) if urlparse(url).scheme == "sqlite" else ":memory:"
    if not write and path != ":memory:" and not Path(path).is_file():
        raise CommandError(f"no run store at {path} ({url}); pass --db URL or set {DB_ENV}")
    if write:
        refuse_damaged_sqlite_file(url)  # before anything is migrated or swept
    store = RunStore(url, read_only=not write, create=create)
    try:
        yield store
    finally:
        store.close()


def _scope(args: argparse.Namespace) -> dict[str, Any]:
    return {"tenant_id": args.tenant, "all_tenants": bool(args.admin)}


def _who(args: argparse.Namespace) -> str:
    return "any tenant (--admin)" if args.admin else f"tenant {args.tenant!r}"


def _tenant_hint(args: argparse.Namespace, tenants: list[tuple[str, int]]) -> str:
    """When the list is empty because of the tenant: which tenants the database holds (operators read the file)."""
    found = other_tenants(args.tenant, tenants, clean)
    if found is None:
        return "; the database holds no runs of any tenant" if not tenants else ""
    shown, first = found
    return f"; the database holds runs of tenant {shown}: pass --tenant {first} (or --admin)"


def _get_run(store: RunStore, args: argparse.Namespace, run_id: str) -> RunDetail:
    run = store.get_run(run_id, **_scope(args))
    if run is None:
        prewarm = store.prewarms.get(run_id, **_scope(args))
        if prewarm is not None:  # an Agent.prewarm call: it has no traces or answer to show
            raise CommandError(prewarm_text(run_id, prewarm), EXIT_PROBLEM)
        hint = "" if args.admin else "; pass --tenant T for another tenant's runs (or --admin)"
        raise CommandError(f"no run {run_id!r} for {_who(args)}: check the run id{hint}", EXIT_PROBLEM)
    return run


# -- runs list / show / explain -----------------------------------------------------------------------------


def _runs_list(args: argparse.Namespace) -> int:
    with _store(args) as store:
        runs = store.list_runs(
            **_scope(args), status=args.status, agent_name=args.agent, limit=args.limit, offset=args.offset
        )
        tenants = store.tenants() if not runs and not args.admin else []
    if args.json:
        _print_json(get_converter().unstructure(runs, list[RunSummary]))
    if not runs:
        raise CommandError(f"no runs for {_who(args)} matching the filters{_tenant_hint(args, tenants)}", EXIT_PROBLEM)
    if args.json:
        return EXIT_OK
    width = shutil.get_terminal_size((LIST_WIDTH, 24)).columns if sys.stdout.isatty() else LIST_WIDTH
    print(runs_table(nested(runs), _catalog_cost(), wide=args.wide, width=width))
    return EXIT_OK


def _runs_show(args: argparse.Namespace) -> int:
    with _store(args) as store:
        run = _get_run(store, args, args.run_id)
        if args.json:
            _print_json(get_converter().unstructure(run, RunDetail))
            return EXIT_OK
        chain = _conversation_so_far(store, args, run)
        descendants = store.lineage.tree(run.run_id, **_scope(args))
    from segue.apps.dashboard.views import TWIN_TITLE, price_sources, run_cost, shown_cost, totals

    price = _catalog_cost()
    shown, where = shown_cost(run, price)[0], run_cost(run, price)[1]
    facts = [TWIN_TITLE] if run.served_by == "twin" else []
    facts.append(f"cost: {shown} ({clean(where)})")
    if args.sources:
        facts += [f"price source: {clean(line)}" for line in price_sources(run)]
    if len(chain) > 1:
        t = totals(chain, price)
        facts.append(
            f"conversation so far: {t.runs} runs, input {count(t.usage.input_tokens)}, output "
            f"{count(t.usage.output_tokens)}, cache read {count(t.usage.cache_read_tokens)} ({t.read_share}), "
            f"cost {t.cost}"
        )
    from segue.cache.explain import explain_run, miss_cause

    miss = miss_cause(explain_run(run, chain[-2] if len(chain) > 1 else None))
    if miss is not None:
        facts.append(f"cache miss: {clean(miss)} (segue runs explain {run.run_id} has every request)")
    notes = run.meta.segue_notes if run.meta is not None else None
    facts += [f"cache TTL: {clean(n.message)}" for n in notes or () if n.kind == "ttl-chosen"]
    facts += tree_lines(run, descendants, price)
    print(show_text(run, facts))
    return EXIT_OK


def _conversation_so_far(store: RunStore, args: argparse.Namespace, run: RunDetail) -> list[RunDetail]:
    """The run and the runs it continued from, oldest first (as far as this tenant can read them)."""
    chain = [run]
    while (earlier := chain[0].continued_from) and len(chain) < _MAX_CHAIN:
        found = store.get_run(earlier, **_scope(args))
        if found is None or any(r.run_id == found.run_id for r in chain):
            break
        chain.insert(0, found)
    return chain


def _runs_explain(args: argparse.Namespace) -> int:
    from segue.cache.explain import breaks, explain_run

    with _store(args) as store:
        run = _get_run(store, args, args.run_id)
        previous = store.get_run(run.continued_from, **_scope(args)) if run.continued_from else None
        descendants = store.lineage.tree(run.run_id, **_scope(args))
    explanation = explain_run(run, previous)
    if args.json:
        _print_json(get_converter().unstructure(explanation, RunExplanation))
        return EXIT_PROBLEM if breaks(explanation) else EXIT_OK
    print("\n".join([explain_text(run, explanation), *tree_lines(run, descendants, _catalog_cost())]))
    return EXIT_PROBLEM if breaks(explanation) else EXIT_OK


# -- dashboard ----------------------------------------------------------------------------------------------


def _catalog_cost() -> Callable[[Usage, str, str | None], float | None]:
    """Dollar cost of a run from the catalog's prices (the model name may be the vendor's API name); the
    dashboard shows "—" where the catalog knows no price (CatalogLookupError)."""
    from segue.catalog import Catalog, CatalogError

    try:
        catalog = Catalog.load()
    except CatalogError as e:
        raise CommandError(f"cannot load the catalog for prices: {e}") from None

    def cost(usage: Usage, model: str, vendor: str | None) -> float | None:
        return catalog.cost(usage, model, vendor)

    return cost


def _dashboard(args: argparse.Namespace) -> int:
    from segue.apps.dashboard import create_app, serve
    from segue.apps.dashboard.app import LOOPBACK_HOSTS

    loopback = args.host in LOOPBACK_HOSTS
    # On loopback, requests naming another host are refused (DNS rebinding); elsewhere any Host is served.
    hosts = LOOPBACK_HOSTS if loopback else None
    with _store(args) as store:
        app = create_app(store, tenant=args.tenant, admin=bool(args.admin), allowed_hosts=hosts, cost=_catalog_cost())
        try:
            server = serve(app, host=args.host, port=args.port)
        except OSError as e:
            raise CommandError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
        host, port = str(server.server_address[0]), int(server.server_address[1])
        who = "every tenant (--admin)" if args.admin else f"tenant {args.tenant!r}"
        print(f"segue dashboard for {who}: http://{host}:{port}/  (Ctrl-C stops it)", file=sys.stderr)
        if not loopback:
            print("segue: serving beyond loopback: anyone who can reach this address sees these runs", file=sys.stderr)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return EXIT_OK


# -- schema export ------------------------------------------------------------------------------------------


def _schema_export(args: argparse.Namespace) -> int:
    from segue.apps.bundle import export_bundle

    dest: Path = args.dir
    if dest.exists() and not dest.is_dir():
        raise CommandError(f"{dest} exists and is not a folder; pass a folder path")
    try:
        written = export_bundle(dest, progress=lambda line: print(f"  {line}", file=sys.stderr))
    except OSError as e:
        raise CommandError(f"cannot write the bundle to {dest}: {e.strerror or e} ({e.filename or dest})") from None
    print(f"exported {written} files to {dest}")
    return EXIT_OK


# -- store maintenance: the commands that write -------------------------------------------------------------


def _db_migrate(args: argparse.Namespace) -> int:
    with _store(args, write=True, create=args.create) as store:
        before, after = store.migrated_from, store.schema_version()
    shown = _shown_url(args)
    if before == 0:
        print(f"{shown}: created a run store (schema version {after})")
    elif before == after:
        print(f"{shown}: store schema version {after}, already the newest this segue knows")
    else:
        print(f"{shown}: store schema version {before} -> {after}")
    return EXIT_OK


def _runs_sweep(args: argparse.Namespace) -> int:
    from segue.store.records import SWEEP_GRACE_SECONDS

    grace = SWEEP_GRACE_SECONDS if args.grace is None else args.grace
    with _store(args, write=True) as store:
        swept = store.sweep(grace=grace)
    if args.json:
        _print_json(get_converter().unstructure(swept, SweptRuns))
    elif swept:
        print(f"marked {len(swept)} abandoned run(s) error (their lease expired): {', '.join(swept)}")
    else:
        print(
            f"no abandoned runs: every running run still holds its lease, or lost it less than {grace:g} s ago "
            "(left to a recoverer: Agent.recover_lapsed, segue serve at start)"
        )
    return EXIT_OK


def _shown_url(args: argparse.Namespace) -> str:
    from segue.store.connection import redact

    return redact(_db_url(args))


# -- serve (JSON-RPC for apps in other languages; segue/protocol) -------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from segue.apps.protocol import ServeError, serve

    try:
        return serve(args.config, http=args.http, host=args.host, port=args.port)
    except ServeError as e:
        raise CommandError(str(e)) from None


# -- parser -------------------------------------------------------------------------------------------------


def _db_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        metavar="URL",
        type=store_url,
        help=f"run store: sqlite:///path.db, a path to a SQLite file, or postgresql://... (default: ${DB_ENV}, else "
        f"{DEFAULT_DB})",
    )


def _store_options(p: argparse.ArgumentParser) -> None:
    _db_option(p)
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--tenant", default=DEFAULT_TENANT, help=f"read this tenant's runs (default: {DEFAULT_TENANT})")
    scope.add_argument("--admin", action="store_true", help="read every tenant's runs (operators only)")


def _json_option(p: argparse.ArgumentParser, shape: str) -> None:
    p.add_argument("--json", action="store_true", help=f"print JSON ({shape}) instead of text")


Handler = Callable[[argparse.Namespace], int]


def _command(
    group: Any, name: str, handler: Handler | None, help: str, description: str | None = None
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = group.add_parser(name, help=help, description=description or help)
    if handler is not None:
        parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="segue",
        description="Cache-friendly, replayable LLM agent runs.",
        epilog="exit codes: 0 ok, 1 the command found nothing or a problem, 2 bad input or environment",
    )
    parser.add_argument("--version", action="version", version=f"segue {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    runs = _command(commands, "runs", None, "list, show and explain recorded runs")
    runs_cmds = runs.add_subparsers(dest="runs_command", required=True, metavar="SUBCOMMAND")
    p = _command(runs_cmds, "list", _runs_list, "the newest runs, one per line")
    _store_options(p)
    p.add_argument("--status", choices=_STATUSES, help="only runs in this status")
    p.add_argument("--agent", metavar="NAME", help="only runs of this agent name")
    p.add_argument("--limit", type=positive_int, default=50, help="at most this many runs (default: 50)")
    p.add_argument("--offset", type=offset, default=0, help=argparse.SUPPRESS)
    p.add_argument("--wide", action="store_true", help="every column in full (tenant, output, continued run id)")
    _json_option(p, "a list of RunSummary")
    p = _command(
        runs_cmds,
        "show",
        _runs_show,
        "one run: traces, tool calls, usage per iteration, replay summary, layout decision",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="the run id")
    _store_options(p)
    p.add_argument(
        "--sources", action="store_true", help="each price's source in full: its catalog row's JSON pointer and notes"
    )
    _json_option(p, "a RunDetail")
    p = _command(
        runs_cmds,
        "explain",
        _runs_explain,
        "why each request of a run did or did not reuse the previous one's cached prefix",
        "Compare each provider request with the previous one (the previous iteration, or the last request of the "
        "run it continued from) and name the first divergence: system prompt, tool definitions, a moved window, "
        "a dropped runtime-state fragment, or messages[i]. Exits 1 when some request broke the prefix.",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="the run id")
    _store_options(p)
    _json_option(p, "a RunExplanation")
    p = _command(
        runs_cmds,
        "sweep",
        _runs_sweep,
        "mark runs abandoned by a killed process (their lease expired, and nobody recovered them within --grace) as "
        "error, so they can be replayed",
    )
    _db_option(p)
    p.add_argument(
        "--grace",
        metavar="SECONDS",
        type=float,
        default=None,
        help="end only runs whose lease lapsed this long ago, leaving a restarted server time to recover them "
        "(default 600: segue.store.records.SWEEP_GRACE_SECONDS)",
    )
    _json_option(p, "SweptRuns: the run ids marked")

    db = _command(commands, "db", None, "the run store itself")
    db_cmds = db.add_subparsers(dest="db_command", required=True, metavar="SUBCOMMAND")
    p = _command(
        db_cmds,
        "migrate",
        _db_migrate,
        "bring the store's schema to this segue's version (--create: a new store; read commands never migrate)",
    )
    _db_option(p)
    p.add_argument("--create", action="store_true", help="create a store where there is none (else an error)")

    p = _command(commands, "dashboard", _dashboard, "serve the run dashboard (run list, conversations, run detail)")
    _store_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=port_number, default=8710, help="port to listen on (default: 8710; 0: any free port)")

    from segue.apps.cli.extra_commands import add_commands

    add_commands(commands, _command, port_number)

    schema = _command(commands, "schema", None, "segue's JSON Schemas and TypeScript declarations")
    schema_cmds = schema.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    p = _command(schema_cmds, "export", _schema_export, "write the bundle for clients in other languages")
    p.add_argument("dir", type=Path, help="folder to write (created if missing)")

    p = _command(
        commands,
        "serve",
        _serve,
        "drive agents over JSON-RPC 2.0 (stdio with LSP framing, or HTTP + SSE) and, over HTTP, web pages",
        "--http also serves each agent to web pages: POST /ag-ui/AGENT (AG-UI events) and POST /ai-sdk/AGENT "
        "(the Vercel AI SDK's UI message stream); docs/web.md.",
    )
    transport = p.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true", help="Content-Length framed JSON-RPC on stdin/stdout")
    transport.add_argument(
        "--http",
        action="store_true",
        help="POST /rpc for requests, GET /events for notifications, POST /ag-ui/AGENT and /ai-sdk/AGENT for web pages",
    )
    p.add_argument("--config", type=Path, required=True, metavar="FILE", help="agents file (schemas/serve.schema.json)")
    p.add_argument("--host", default="127.0.0.1", help="--http: address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=8711, help="--http: port (default: 8711; 0 = any free port)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        handler: Handler = args.handler
        return handler(args)
    except CommandError as e:
        return _fail(str(e), e.code)
    except StoreError as e:
        return _fail(str(e), EXIT_BAD_INPUT)
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except Exception as e:  # a bug, or a failure nobody anticipated: still one line, never a traceback
        return _fail(f"internal error: {type(e).__name__}: {e} (please report this)", EXIT_BAD_INPUT)


def _fail(message: str, code: int) -> int:
    try:
        print(f"segue: {_one_line(message)}", file=sys.stderr, flush=True)
    except BrokenPipeError:
        pass
    return code


def _reader_gone() -> int:
    """stdout's reader went away (`segue ... | head`): stop quietly, with the status of a process that SIGPIPE
    ended, like other Unix tools. Python would flush stdout again at exit and complain: point it at /dev/null."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (tests capture it)
        pass
    return 128 + signal.SIGPIPE


def _one_line(message: str) -> str:
    # Driver errors (e.g. psycopg2's) span lines; scripts read one line per error.
    return " ".join(message.split())


if __name__ == "__main__":
    raise SystemExit(main())
