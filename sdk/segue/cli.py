"""The `segue` command. Exit codes: 0 ok, 1 the command ran and found a problem, 2 bad input or environment.

Adding a command is one handler `_name(args) -> int` plus one `_command(...)` entry in `build_parser`. Handlers
raise `CommandError` for bad input; `main` prints it as one line on stderr and returns its exit code. Commands
that read runs take `--db URL` (default $SEGUE_DB, else sqlite:///segue.db) and `--tenant T` / `--admin`.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, get_args
from urllib.parse import quote, unquote, urlparse

from segue.errors import StoreError
from segue.generated import RunDetail, RunStatus, RunSummary, Usage, get_converter
from segue.meta import LAYOUT_META_KEY

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT = 0, 1, 2
DB_ENV = "SEGUE_DB"
DEFAULT_DB = "sqlite:///segue.db"
DEFAULT_TENANT = "default"
_STATUSES: tuple[str, ...] = get_args(RunStatus)

if TYPE_CHECKING:  # imported lazily at run time, so `segue --help` stays quick
    from segue.store.run_store import RunStore


class CommandError(Exception):
    """Bad input or environment: one line on stderr, nothing written, exit code 2 (or `code`)."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


# -- output -------------------------------------------------------------------------------------------------


class _Style:
    """ANSI colour only when stdout is a terminal (and NO_COLOR is unset)."""

    CODES: ClassVar[dict[str, str]] = {
        "green": "32",
        "red": "31",
        "yellow": "33",
        "magenta": "35",
        "dim": "2",
        "bold": "1",
    }
    STATUS: ClassVar[dict[str, str]] = {
        "success": "green",
        "error": "red",
        "running": "yellow",
        "waiting_approval": "yellow",
    }

    def __init__(self) -> None:
        self.enabled = sys.stdout.isatty() and "NO_COLOR" not in os.environ

    def __call__(self, text: str, colour: str | None) -> str:
        if not self.enabled or colour is None:
            return text
        return f"\033[{self.CODES[colour]}m{text}\033[0m"

    def status(self, status: str) -> str:
        return self(status, self.STATUS.get(status, "magenta"))


def _printable(c: str) -> bool:
    code = ord(c)
    return c in "\n\t" or (code >= 0x20 and not 0x7F <= code < 0xA0)


def _clean(text: str, width: int | None = None) -> str:
    """Text from users, tools or models, safe for a terminal: control characters are shown, not obeyed."""
    out = "".join(c if _printable(c) else f"\\x{ord(c):02x}" for c in text)
    if width is not None:
        out = " ".join(out.split())
        if len(out) > width:
            out = out[: width - 1] + "…"
    return out


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], colours: Sequence[Sequence[str | None]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    style = _Style()
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row, colour in zip(rows, colours, strict=True):
        cells = [style(c.ljust(w), k) for c, w, k in zip(row, widths, colour, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _n(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


# -- the store ----------------------------------------------------------------------------------------------


def _db_url(args: argparse.Namespace) -> str:
    url: str = args.db or os.environ.get(DB_ENV) or DEFAULT_DB
    return url


def _check_sqlite(url: str) -> None:
    """A read command never creates or changes a file: the database must exist and be a segue run store."""
    path = unquote(url.removeprefix("sqlite:///").removeprefix("sqlite://"))
    if not path or path == ":memory:":
        return
    file = Path(path)
    if not file.is_file():
        raise CommandError(f"no run store at {path} ({url}); pass --db URL or set {DB_ENV}")
    from segue.store.models import SchemaVersion

    try:
        with sqlite3.connect(f"file:{quote(str(file.resolve()))}?mode=ro", uri=True) as db:
            query = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
            found = db.execute(query, (SchemaVersion._meta.table_name,))
            is_store = found.fetchone() is not None
    except sqlite3.DatabaseError as e:
        raise CommandError(f"{path} is not a SQLite database ({e}); pass --db with a segue run store") from None
    if not is_store:
        raise CommandError(f"{path} is a SQLite database but not a segue run store; pass --db with one")


@contextmanager
def _store(args: argparse.Namespace) -> Iterator[RunStore]:
    import peewee

    from segue.store.run_store import RunStore

    url = _db_url(args)
    if urlparse(url).scheme == "sqlite":
        _check_sqlite(url)
    try:
        store = RunStore(url)
    except peewee.ImproperlyConfigured as e:
        raise CommandError(f"cannot open {url}: {e}") from None
    try:
        yield store
    except peewee.PeeweeException as e:
        raise CommandError(f"reading the run store failed: {e}".strip()) from None
    finally:
        store.close()


def _scope(args: argparse.Namespace) -> dict[str, Any]:
    return {"tenant_id": args.tenant, "all_tenants": bool(args.admin)}


def _who(args: argparse.Namespace) -> str:
    return "any tenant (--admin)" if args.admin else f"tenant {args.tenant!r}"


def _get_run(store: RunStore, args: argparse.Namespace, run_id: str) -> RunDetail:
    run = store.get_run(run_id, **_scope(args))
    if run is None:
        hint = "" if args.admin else "; pass --tenant T for another tenant's runs (or --admin)"
        raise CommandError(f"no run {run_id!r} for {_who(args)}: check the run id{hint}")
    return run


# -- runs list / show / explain -----------------------------------------------------------------------------


def _runs_list(args: argparse.Namespace) -> int:
    with _store(args) as store:
        runs = store.list_runs(
            **_scope(args), status=args.status, agent_name=args.agent, limit=args.limit, offset=args.offset
        )
    if args.json:
        _print_json([get_converter().unstructure(r, RunSummary) for r in runs])
        return EXIT_OK
    if not runs:
        print(f"no runs for {_who(args)} matching the filters")
        return EXIT_OK
    from segue.explain import cache_parts

    headers = ["RUN", "STATUS", "TENANT", "AGENT", "MODEL", "STARTED", "INPUT", "OUTPUT", "CACHE READ", "CONTINUES"]
    rows = [
        [
            r.run_id,
            r.status,
            _clean(r.tenant_id, 20),
            _clean(r.agent_name, 24),
            _clean(r.model, 28),
            r.created_at[:19].replace("T", " "),
            _n(r.usage.input_tokens),
            _n(r.usage.output_tokens),
            _share(cache_parts(r.usage).read_share),
            r.continued_from or "",
        ]
        for r in runs
    ]
    colours = [[None, _Style.STATUS.get(r.status, "magenta"), *([None] * 8)] for r in runs]
    print(_table(headers, rows, colours))
    return EXIT_OK


def _block_line(block: Any) -> str:
    from segue.generated import ImageBlock, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock

    if isinstance(block, TextBlock):
        return _clean(block.text, 160)
    if isinstance(block, ToolCallBlock):
        return f"call {_clean(block.name)}({_clean(json.dumps(block.arguments, ensure_ascii=False), 120)})"
    if isinstance(block, ToolResultBlock):
        flag = " ERROR" if block.is_error else ""
        return f"result{flag} [{_clean(block.tool_call_id)}]: {_clean(block.content, 140)}"
    if isinstance(block, ReasoningBlock):
        return f"reasoning ({_clean(block.vendor)} {_clean(block.format)}, {len(block.text or '')} chars)"
    if isinstance(block, ImageBlock):
        return "[image]"
    return _clean(str(block), 120)


def _usage_line(u: Usage) -> str:
    from segue.explain import cache_parts

    parts = cache_parts(u)
    return (
        f"input {_n(u.input_tokens)} (cache read {_n(parts.read)}, cache write {_n(parts.write)}, uncached "
        f"{_n(parts.uncached)}), output {_n(u.output_tokens)}, cache-read share {_share(parts.read_share)}"
    )


def _show_text(run: RunDetail) -> str:
    from segue.explain import cache_parts, is_fragment_text
    from segue.generated import TextBlock

    style = _Style()
    out = [
        f"{style('run', 'bold')} {run.run_id}  {style.status(run.status)}",
        f"tenant {_clean(run.tenant_id)} · agent {_clean(run.agent_name)} · model {_clean(run.model)}"
        + (f" @ {_clean(run.vendor)}" if run.vendor else ""),
        f"started {run.created_at}" + (f" · finished {run.finished_at}" if run.finished_at else ""),
    ]
    for label, value in (("continued from", run.continued_from), ("retry of", run.retry_of)):
        if value:
            out.append(f"{label} {value}")
    if run.error:
        out.append(style(f"error: {_clean(run.error)}", "red"))
    out += [
        f"input: {_clean(run.input, 200)}",
        f"answer: {_clean(run.answer or '—', 200)}",
        f"usage: {_usage_line(run.usage)}",
    ]
    layout = (run.meta or {}).get(LAYOUT_META_KEY)
    if isinstance(layout, dict):
        at = f" at iteration {layout['iteration']}" if layout.get("iteration") else ""
        out.append(f"layout: {layout.get('mode', 'undecided')} ({_clean(str(layout.get('reason', '')))}){at}")
    if run.replay is not None:
        r = run.replay
        out.append("replay:")
        out.append(f"  in full: {', '.join(r.runs_full) or '—'}")
        out.append(f"  as question + answer: {', '.join(r.runs_text) or '—'}")
        out.append(f"  reasoning kept: {', '.join(r.reasoning_kept) or '—'}")
        out.append(f"  reasoning dropped: {', '.join(r.reasoning_dropped) or '—'}")
        out += [f"  warning {w.run_id} [{w.cause}]: {_clean(w.message)}" for w in r.warnings]
    if run.llm_interactions:
        headers = ["ITER", "MODEL", "INPUT", "CACHE READ", "CACHE WRITE", "UNCACHED", "OUTPUT", "LATENCY"]
        rows = []
        for c in run.llm_interactions:
            parts = cache_parts(c.usage)
            rows.append(
                [
                    str(c.iteration),
                    _clean(c.model, 28),
                    _n(c.usage.input_tokens),
                    _n(parts.read),
                    _n(parts.write),
                    _n(parts.uncached),
                    _n(c.usage.output_tokens),
                    f"{c.latency_ms:,.0f} ms",
                ]
            )
        out += ["", "iterations:", _table(headers, rows, [[None] * 8] * len(rows))]
    out += ["", "traces:"]
    for t in run.traces:
        fragment = any(isinstance(b, TextBlock) and is_fragment_text(b.text) for b in t.message.content)
        tag = " (runtime-state fragment)" if fragment else ""
        for i, block in enumerate(t.message.content):
            head = f"  [{t.index}] iter {t.iteration if t.iteration is not None else '-'} {t.message.role}{tag}:"
            out.append(f"{head if i == 0 else ' ' * len(head)} {_block_line(block)}")
    if run.tool_calls:
        out += ["", "tool calls:"]
        for call in run.tool_calls:
            flag = style(" ERROR", "red") if call.is_error else ""
            args = _clean(json.dumps(call.arguments, ensure_ascii=False), 100)
            out.append(f"  iter {call.iteration} {_clean(call.name)}({args}){flag} {call.duration_ms:,.0f} ms")
            out.append(f"    → {_clean(call.result or '—', 160)}")
    return "\n".join(out)


def _runs_show(args: argparse.Namespace) -> int:
    with _store(args) as store:
        run = _get_run(store, args, args.run_id)
    if args.json:
        _print_json(get_converter().unstructure(run, RunDetail))
    else:
        print(_show_text(run))
    return EXIT_OK


def _runs_explain(args: argparse.Namespace) -> int:
    from segue.explain import BREAK_CAUSES, breaks, explain_run, prefix_share

    with _store(args) as store:
        run = _get_run(store, args, args.run_id)
        previous = store.get_run(run.continued_from, **_scope(args)) if run.continued_from else None
    explanation = explain_run(run, previous)
    if args.json:
        _print_json(get_converter().unstructure(explanation))
        return EXIT_PROBLEM if breaks(explanation) else EXIT_OK
    style = _Style()
    print(f"{style('run', 'bold')} {run.run_id}" + (f" (continues {run.continued_from})" if run.continued_from else ""))
    if explanation.layout:
        print(f"layout: {explanation.layout.get('mode', 'undecided')}")
    if not explanation.iterations:
        print("the run made no provider request")
    headers = ["ITER", "COMPARED WITH", "REUSED", "OF", "SHARE", "CACHE READ", "INPUT", "CAUSE"]
    rows, colours = [], []
    for it in explanation.iterations:
        before = f"{it.previous_run_id} #{it.previous_iteration}" if it.previous_run_id else "—"
        rows.append(
            [
                str(it.iteration),
                before,
                f"{it.prefix_bytes:,} B",
                f"{it.previous_bytes:,} B" if it.previous_bytes is not None else "—",
                _share(prefix_share(it)),
                _n(it.usage.cache_read_tokens),
                _n(it.usage.input_tokens),
                it.cause,
            ]
        )
        colour = "red" if it.cause in BREAK_CAUSES else "green" if it.cause == "extends" else "dim"
        colours.append([*([None] * 7), colour])
    if rows:
        print(_table(headers, rows, colours))
    for it in explanation.iterations:
        print(f"  {it.iteration}: {_clean(it.reason)}")
        if it.divergence is not None and it.cause in BREAK_CAUSES:
            d = it.divergence
            print(f"     at byte {d.byte_offset:,}, {d.path}: was {_clean(d.previous or '∅', 70)}")
            print(f"     {' ' * len(f'at byte {d.byte_offset:,}, {d.path}:')} now {_clean(d.current or '∅', 70)}")
        if it.note:
            print(f"     note: {it.note}")
    return EXIT_PROBLEM if breaks(explanation) else EXIT_OK


# -- dashboard ----------------------------------------------------------------------------------------------


def _catalog_cost() -> Callable[[Usage, str, str | None], float | None]:
    """Dollar cost of a run from the catalog's prices (the model name may be the vendor's API name); the
    dashboard shows "—" where the catalog knows no price (CatalogLookupError)."""
    from segue.catalog import Catalog

    catalog = Catalog.load()

    def cost(usage: Usage, model: str, vendor: str | None) -> float | None:
        return catalog.cost(usage, model, vendor)

    return cost


def _dashboard(args: argparse.Namespace) -> int:
    from segue.dashboard import create_app, serve
    from segue.dashboard.app import LOOPBACK_HOSTS

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
    from segue.bundle import export_bundle

    dest: Path = args.dir
    if dest.exists() and not dest.is_dir():
        print(f"segue: {dest} exists and is not a folder; pass a folder path", file=sys.stderr)
        return EXIT_BAD_INPUT
    count = export_bundle(dest, progress=lambda line: print(f"  {line}", file=sys.stderr))
    print(f"exported {count} files to {dest}")
    return EXIT_OK


# -- serve (JSON-RPC for apps in other languages; segue/protocol) -------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from segue.protocol import ServeError, serve

    try:
        return serve(args.config, http=args.http, host=args.host, port=args.port)
    except ServeError as e:
        raise CommandError(str(e)) from None


# -- parser -------------------------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 0..65535 (0 = any free port), got {value}")
    return value


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        metavar="URL",
        help=f"run store: sqlite:///path.db or postgresql://... (default: ${DB_ENV}, else {DEFAULT_DB})",
    )
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
    parser = argparse.ArgumentParser(
        prog="segue",
        description="Cache-friendly, replayable LLM agent runs.",
        epilog="exit codes: 0 ok, 1 the command found a problem, 2 bad input or environment",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    runs = _command(commands, "runs", None, "list, show and explain recorded runs")
    runs_cmds = runs.add_subparsers(dest="runs_command", required=True, metavar="SUBCOMMAND")
    p = _command(runs_cmds, "list", _runs_list, "the newest runs, one per line")
    _store_options(p)
    p.add_argument("--status", choices=_STATUSES, help="only runs in this status")
    p.add_argument("--agent", metavar="NAME", help="only runs of this agent name")
    p.add_argument("--limit", type=_positive_int, default=50, help="at most this many runs (default: 50)")
    p.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    _json_option(p, "a list of RunSummary")
    p = _command(
        runs_cmds,
        "show",
        _runs_show,
        "one run: traces, tool calls, usage per iteration, replay summary, layout decision",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="the run id")
    _store_options(p)
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

    p = _command(commands, "dashboard", _dashboard, "serve the run dashboard (run list, conversations, run detail)")
    _store_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=_port, default=8710, help="port to listen on (default: 8710; 0 = any free port)")

    from segue.cli_tools import add_commands

    add_commands(commands, _command, _port)

    schema = _command(commands, "schema", None, "segue's JSON Schemas and TypeScript declarations")
    schema_cmds = schema.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    p = _command(schema_cmds, "export", _schema_export, "write the bundle for clients in other languages")
    p.add_argument("dir", type=Path, help="folder to write (created if missing)")

    p = _command(commands, "serve", _serve, "drive agents over JSON-RPC 2.0: stdio (LSP framing) or HTTP + SSE")
    transport = p.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true", help="Content-Length framed JSON-RPC on stdin/stdout")
    transport.add_argument("--http", action="store_true", help="POST /rpc for requests, GET /events for notifications")
    p.add_argument("--config", type=Path, required=True, metavar="FILE", help="agents file (schemas/serve.schema.json)")
    p.add_argument("--host", default="127.0.0.1", help="--http: address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8711, help="--http: port (default: 8711; 0 = any free port)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except CommandError as e:
        print(f"segue: {_one_line(str(e))}", file=sys.stderr)
        return e.code
    except StoreError as e:
        print(f"segue: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _one_line(message: str) -> str:
    # Driver errors (e.g. psycopg2's) span lines; scripts read one line per error.
    return " ".join(message.split())


if __name__ == "__main__":
    raise SystemExit(main())
