"""The dashboard as a WSGI application: routing, tenant scoping, rendering, security headers.

One `DashboardApp` serves one scope: a tenant (it never shows another tenant's runs; their ids answer 404) or
`admin` (every tenant, with a tenant filter). Pages are jinja2 templates with autoescape on; the JSON endpoints
answer in the generated types' JSON and are scoped the same way.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, get_args
from urllib.parse import parse_qs, quote, urlencode
from wsgiref.types import StartResponse, WSGIEnvironment

import attrs
import jinja2

from segue.apps.dashboard.listing import empty_hint, run_groups
from segue.apps.dashboard.subruns import subrun_rows
from segue.apps.dashboard.views import CostFn, chain_view, no_pricing, run_view
from segue.cache.explain import explain_run
from segue.generated import ApiError, RunDetail, RunExplanation, RunStatus, RunSummary, get_converter
from segue.store.run_store import RunStore

log = logging.getLogger("segue.dashboard")

HERE = Path(__file__).resolve().parent
STATIC = {"dashboard.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8"}
STATUSES: tuple[str, ...] = get_args(RunStatus)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_CHAIN = 200
_SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]
_ROUTES = [
    (re.compile(r"^/$"), "runs"),
    (re.compile(r"^/runs/([^/]+)$"), "run"),
    (re.compile(r"^/conversations/([^/]+)$"), "conversation"),
    (re.compile(r"^/api/runs$"), "api_runs"),
    (re.compile(r"^/api/runs/([^/]+)$"), "api_run"),
    (re.compile(r"^/api/runs/([^/]+)/explain$"), "api_explain"),
    (re.compile(r"^/static/([^/]+)$"), "static"),
]


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@attrs.frozen(kw_only=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"


_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed"}
_REASONS |= {421: "Misdirected Request", 500: "Internal Server Error"}


class DashboardApp:
    """WSGI callable. `allowed_hosts` (None = any) guards a loopback dashboard against DNS rebinding."""

    def __init__(
        self,
        store: RunStore,
        *,
        tenant: str = "default",
        admin: bool = False,
        cost: CostFn = no_pricing,
        allowed_hosts: frozenset[str] | None = LOOPBACK_HOSTS,
    ) -> None:
        if not admin and not tenant:
            raise ValueError(f"the dashboard needs a tenant (or admin=True), got {tenant!r}")
        self.store = store
        self.tenant = tenant
        self.admin = admin
        self.cost = cost
        self.allowed_hosts = allowed_hosts
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["q"] = lambda value: quote(str(value), safe="")
        self.env.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
        self.env.globals["scope"] = "every tenant (admin)" if admin else f"tenant {tenant}"

    # -- WSGI -------------------------------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            self._check_host(environ)
            if method not in ("GET", "HEAD"):
                raise HttpError(405, f"{method} is not supported: the dashboard is read-only")
            response = self._route(environ.get("PATH_INFO", "/") or "/", parse_qs(environ.get("QUERY_STRING", "")))
        except HttpError as e:
            response = self._error(e.status, e.message, json_wanted=environ.get("PATH_INFO", "").startswith("/api/"))
        except Exception:
            log.exception("dashboard request %s %s failed", method, environ.get("PATH_INFO"))
            response = self._error(500, "the dashboard failed to render this page; see its log")
        headers = [("Content-Type", response.content_type), ("Content-Length", str(len(response.body)))]
        start_response(f"{response.status} {_REASONS.get(response.status, '')}", headers + _SECURITY_HEADERS)
        return [b""] if method == "HEAD" else [response.body]

    def _check_host(self, environ: WSGIEnvironment) -> None:
        if self.allowed_hosts is None:
            return
        host = str(environ.get("HTTP_HOST") or "")
        name = host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0]
        if host and name.lower() not in self.allowed_hosts:
            raise HttpError(421, f"this dashboard answers to {', '.join(sorted(self.allowed_hosts))} only")

    def _route(self, path: str, query: Mapping[str, list[str]]) -> Response:
        for pattern, name in _ROUTES:
            found = pattern.match(path)
            if found:
                handler: Callable[..., Response] = getattr(self, f"_{name}")
                return handler(query, *found.groups())
        raise HttpError(404, f"no page at {path}")

    # -- scoping ----------------------------------------------------------------------------------------------

    def _get(self, run_id: str) -> RunDetail:
        run = self.store.get_run(run_id, tenant_id=self.tenant, all_tenants=self.admin)
        if run is None:
            raise HttpError(404, f"no run {run_id} here")
        return run

    def _list(self, query: Mapping[str, list[str]]) -> tuple[list[RunSummary], dict[str, Any]]:
        def one(key: str) -> str | None:
            values = [v for v in query.get(key, []) if v.strip()]
            return values[-1].strip() if values else None

        status, agent, tenant = one("status"), one("agent"), one("tenant")
        if status is not None and status not in STATUSES:
            raise HttpError(400, f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        if tenant is not None and not self.admin and tenant != self.tenant:
            raise HttpError(403, f"this dashboard shows tenant {self.tenant!r} only")
        limit, offset = _int(one("limit"), 50, 1, 500, "limit"), _int(one("offset"), 0, 0, 10**9, "offset")
        runs = self.store.list_runs(
            tenant_id=tenant or self.tenant,
            all_tenants=self.admin and tenant is None,
            status=status,  # type: ignore[arg-type]  # checked against STATUSES above
            agent_name=agent,
            limit=limit,
            offset=offset,
        )
        filters = {"status": status, "agent": agent, "tenant": tenant, "limit": limit, "offset": offset}
        return runs, filters

    def _chain(self, run: RunDetail) -> tuple[list[RunDetail], str | None, list[str]]:
        """The runs of `run`'s conversation: back through continued_from to the first run, then forward
        through the newest run that continued from the last one. Other continuations are branches."""
        chain = [run]
        truncated: str | None = None
        seen = {run.run_id}
        while chain[0].continued_from and len(chain) < MAX_CHAIN:
            earlier_id = chain[0].continued_from
            earlier = self.store.get_run(earlier_id, tenant_id=self.tenant, all_tenants=self.admin)
            if earlier is None or earlier.run_id in seen:
                truncated = earlier_id
                break
            seen.add(earlier.run_id)
            chain.insert(0, earlier)
        else:
            truncated = chain[0].continued_from

        def children(run_id: str) -> list[str]:
            """Runs that continued from `run_id`, newest first (an indexed lookup, not a scan)."""
            found = self.store.list_runs(tenant_id=run.tenant_id, continued_from=run_id, limit=MAX_CHAIN)
            return [s.run_id for s in found]

        branches: list[str] = []
        for link, nxt in itertools.pairwise(chain):
            branches += [c for c in children(link.run_id) if c != nxt.run_id]
        while len(chain) < MAX_CHAIN and (later_ids := children(chain[-1].run_id)):
            newest, *others = later_ids
            later = self.store.get_run(newest, tenant_id=self.tenant, all_tenants=self.admin)
            if later is None or later.run_id in seen:
                break
            branches += others
            seen.add(later.run_id)
            chain.append(later)
        return chain, truncated, branches

    # -- pages ------------------------------------------------------------------------------------------------

    def _render(self, template: str, status: int = 200, **context: Any) -> Response:
        return Response(status=status, body=self.env.get_template(template).render(**context).encode("utf-8"))

    def _runs(self, query: Mapping[str, list[str]]) -> Response:
        runs, filters = self._list(query)
        base = {k: v for k, v in filters.items() if v is not None and k != "offset"}
        limit, offset = int(filters["limit"]), int(filters["offset"])
        newer = urlencode({**base, "offset": max(offset - limit, 0)}) if offset else None
        older = urlencode({**base, "offset": offset + limit}) if len(runs) == limit else None
        unfiltered = not any(filters[k] for k in ("status", "agent", "tenant", "offset"))
        empty = empty_hint(self.tenant, self.store.tenants()) if not runs and unfiltered and not self.admin else None
        return self._render(
            "runs.html",
            groups=run_groups(runs, self.cost),
            empty=empty,
            filters=filters,
            statuses=STATUSES,
            admin=self.admin,
            newer=newer,
            older=older,
        )

    def _run(self, query: Mapping[str, list[str]], run_id: str) -> Response:
        run = self._get(run_id)
        previous = None
        if run.continued_from:
            previous = self.store.get_run(run.continued_from, tenant_id=self.tenant, all_tenants=self.admin)
        descendants = self.store.lineage.tree(run.run_id, tenant_id=self.tenant, all_tenants=self.admin)
        subruns, total = subrun_rows(run, descendants, self.cost)
        return self._render("run.html", view=run_view(run, previous, self.cost), subruns=subruns, total=total)

    def _conversation(self, query: Mapping[str, list[str]], run_id: str) -> Response:
        run = self._get(run_id)
        chain, truncated, branches = self._chain(run)
        return self._render("conversation.html", chain=chain_view(chain, run_id, truncated, branches, self.cost))

    def _error(self, status: int, message: str, *, json_wanted: bool = False) -> Response:
        if json_wanted:
            return _json(get_converter().unstructure(ApiError(error=message)), status)
        return self._render("error.html", status=status, status_code=status, message=message)

    # -- JSON -------------------------------------------------------------------------------------------------

    def _api_runs(self, query: Mapping[str, list[str]]) -> Response:
        runs, _ = self._list(query)
        return _json(get_converter().unstructure(runs, list[RunSummary]))

    def _api_run(self, query: Mapping[str, list[str]], run_id: str) -> Response:
        return _json(get_converter().unstructure(self._get(run_id), RunDetail))

    def _api_explain(self, query: Mapping[str, list[str]], run_id: str) -> Response:
        run = self._get(run_id)
        previous = None
        if run.continued_from:
            previous = self.store.get_run(run.continued_from, tenant_id=self.tenant, all_tenants=self.admin)
        return _json(get_converter().unstructure(explain_run(run, previous), RunExplanation))

    def _static(self, query: Mapping[str, list[str]], name: str) -> Response:
        if name not in STATIC:
            raise HttpError(404, f"no static file {name}")
        return Response(status=200, body=(HERE / "static" / name).read_bytes(), content_type=STATIC[name])


def _json(data: Any, status: int = 200) -> Response:
    body = json.dumps(data, ensure_ascii=False).encode("utf-8")
    return Response(status=status, body=body, content_type="application/json; charset=utf-8")


def _int(text: str | None, default: int, low: int, high: int, name: str) -> int:
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise HttpError(400, f"{name} must be a whole number, got {text!r}") from None
    if not low <= value <= high:
        raise HttpError(400, f"{name} must be in {low}..{high}, got {value}")
    return value


def create_app(
    store: RunStore,
    *,
    tenant: str = "default",
    admin: bool = False,
    cost: CostFn = no_pricing,
    allowed_hosts: frozenset[str] | None = LOOPBACK_HOSTS,
) -> DashboardApp:
    """The dashboard for one tenant (or every tenant with admin=True). `cost(usage, model, vendor)` prices runs;
    the default knows no prices and shows "—"."""
    return DashboardApp(store, tenant=tenant, admin=admin, cost=cost, allowed_hosts=allowed_hosts)
