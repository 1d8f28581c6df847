"""Secrets, PII and tenants: what must never be stored, logged, or shown to the wrong tenant.

- API keys and auth headers never reach the run store (checked on the raw SQLite file bytes and on every row of
  every table, SQLite and PostgreSQL) nor the logs, for each official-SDK driver, streamed or not.
- The PII guardrail's mapping never reaches provider_request or any other llm_interactions column.
- Tenant B can neither read, replay, retry, resume nor list tenant A's runs, through the agent, the RunStore,
  the CLI or the dashboard, and no error tells B anything about A's run beyond what B already passed in.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest

from segue import (
    Agent,
    IdempotencyConflictError,
    InputError,
    PIIGuardrail,
    ReplayRunError,
    RunStore,
    tool,
)
from segue.apps.cli.main import main
from segue.apps.dashboard import create_app
from segue.generated import get_converter
from segue.providers import AnthropicProvider, Failover, OpenAIChatProvider, OpenAIResponsesProvider
from segue.store.models import ALL_MODELS
from segue.testing import ScriptedProvider, call, text
from tests._support.anthropic_bodies import MODEL, answer, anthropic_events, streamed_tool_use, tool_use
from tests._support.anthropic_bodies import response as anthropic_body
from tests._support.dashboard import get, run_ids_on
from tests._support.helpers import stored_meta
from tests._support.openai_chat_bodies import completion
from tests._support.responses_bodies import MODEL as RESPONSES_MODEL
from tests._support.responses_bodies import response as responses_body
from tests._support.responses_bodies import text_output
from tests._support.vendor_http import Recorder, json_response, sse

T = TypeVar("T")
ANTHROPIC_KEY = "sk-ant-FAKE-SECRET-123"
OPENAI_KEY = "sk-FAKE-OPENAI-456"
SECRETS = (ANTHROPIC_KEY, OPENAI_KEY)
# Credential header names. Stored as a mapping key (`"authorization": ...`) they would mean request headers
# were copied wholesale; the first two must not appear at all.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "openai-organization")
NEVER_MENTIONED = ("authorization", "x-api-key")
HEADER_KEY = re.compile(rb"(?i)(?:%s)[\"']?\s*[:=]" % b"|".join(h.encode() for h in CREDENTIAL_HEADERS))
TABLES = [m._meta.table_name for m in ALL_MODELS]


async def bounded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, 10)


def anthropic_client(rec: Recorder) -> Any:
    import anthropic

    http = httpx2.AsyncClient(transport=rec.transport())
    return anthropic.AsyncAnthropic(api_key=ANTHROPIC_KEY, http_client=http, max_retries=0)


def openai_client(rec: Recorder) -> Any:
    import openai

    http = httpx2.AsyncClient(transport=rec.transport())
    return openai.AsyncOpenAI(api_key=OPENAI_KEY, http_client=http, max_retries=0)


def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: what to look up
    """
    return f"facts about {q}"


def sql(store: RunStore, query: str) -> list[tuple[Any, ...]]:
    db: Any = store.db  # peewee is untyped
    rows: list[tuple[Any, ...]] = db.execute_sql(query).fetchall()
    return rows


def all_rows(store: RunStore) -> str:
    """Every column of every row of every segue table, as text (works on SQLite and PostgreSQL alike)."""
    return "\n".join(repr(row) for table in TABLES for row in sql(store, f"SELECT * FROM {table}"))


def database_files(store: RunStore) -> bytes:
    """The SQLite database file and its write-ahead log, byte for byte (free pages included)."""
    main_file = Path(store.url.removeprefix("sqlite:///"))
    files = [main_file, main_file.with_name(main_file.name + "-wal")]
    return b"".join(f.read_bytes() for f in files if f.exists())


def assert_no_credentials(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret} leaked into {where}"
    assert "Bearer sk-" not in text, f"an Authorization header value leaked into {where}"


# -- API keys -------------------------------------------------------------------------------------------------


async def run_every_driver(store: RunStore) -> tuple[list[Recorder], list[str]]:
    """A tool-using run through each driver (plain and streamed), a failover and an auth failure."""
    recs: list[Recorder] = []
    run_ids: list[str] = []

    def agent(provider: Any) -> Agent:
        return Agent(provider, "You look things up.", [lookup], store)

    # Anthropic with thinking; a second run replays it, so the beta header is recorded in request_headers.
    thinking = {"type": "thinking", "thinking": "Look it up.", "signature": "sig-1"}
    first = Recorder(
        json_response(
            anthropic_body(
                [thinking, {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}],
                stop="tool_use",
            )
        ),
        answer("x is documented."),
        answer("still documented."),
    )
    claude = AnthropicProvider(
        MODEL, thinking={"type": "enabled", "budget_tokens": 1024}, client=anthropic_client(first)
    )
    a = await bounded(agent(claude).run("find x"))
    b = await bounded(agent(claude).run("and now?", runs=[a.run_id], replay_last="all"))
    recs.append(first)
    run_ids += [a.run_id, b.run_id]

    streamed = Recorder(
        sse(streamed_tool_use("toolu_2", "y")),
        sse(anthropic_events([{"type": "text", "text": "y is documented."}], "end_turn")),
    )
    events = [e async for e in agent(AnthropicProvider(MODEL, client=anthropic_client(streamed))).stream("find y")]
    recs.append(streamed)
    run_ids.append(events[-1].run_id)

    call_z = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "z"}'}}
    chat = Recorder(
        json_response(completion({"content": None, "tool_calls": [call_z]}, finish="tool_calls")),
        json_response(completion({"content": "z is documented."})),
    )
    c = await bounded(agent(OpenAIChatProvider("gpt-4.1", client=openai_client(chat))).run("find z"))
    recs.append(chat)
    run_ids.append(c.run_id)

    function_call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"q": "w"}',
        "status": "completed",
    }
    responses = Recorder(
        json_response(responses_body([function_call])), json_response(responses_body([text_output("w is known.")]))
    )
    d = await bounded(agent(OpenAIResponsesProvider(RESPONSES_MODEL, client=openai_client(responses))).run("find w"))
    recs.append(responses)
    run_ids.append(d.run_id)

    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "Too many requests"}}
    primary = Recorder(json_response(limited, 429))
    secondary = Recorder(json_response(completion({"content": "served by the fallback"})))
    chain = Failover(
        [
            AnthropicProvider(MODEL, client=anthropic_client(primary)),
            OpenAIChatProvider("gpt-4.1", client=openai_client(secondary)),
        ]
    )
    e = await bounded(agent(chain).run("anyone there?"))
    recs += [primary, secondary]
    run_ids.append(e.run_id)

    # OpenAI's real 401 echoes a masked key; the masked form is fine, the key itself must not be stored.
    denied = {
        "error": {
            "message": "Incorrect API key provided: sk-FAKE-*******456. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    unauthorised = Recorder(json_response(denied, 401))
    f = await bounded(agent(OpenAIChatProvider("gpt-4.1", client=openai_client(unauthorised))).run("find v"))
    assert f.status == "error" and "Incorrect API key provided" in (f.error or "")
    recs.append(unauthorised)
    run_ids.append(f.run_id)

    assert [r.status for r in (a, b, c, d, e)] == ["success"] * 5
    assert events[-1].type == "RUN_COMPLETED"
    return recs, run_ids


async def test_api_keys_never_reach_the_store_or_the_logs(store: RunStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="segue")
    recs, run_ids = await run_every_driver(store)

    # The keys really were on the wire, so their absence below means something.
    sent = [r.headers for rec in recs for r in rec.requests]
    for key in SECRETS:  # (this anthropic client sends its key as a bearer token, older ones as x-api-key)
        assert any(h.get("authorization") == f"Bearer {key}" or h.get("x-api-key") == key for h in sent), (
            f"{key} was never sent"
        )
    # The logs were captured at DEBUG: the SDKs' request logging and segue's failover warning are in them.
    assert "Request options" in caplog.text and "failed over" in caplog.text
    assert_no_credentials(caplog.text, "the logs")

    rows = all_rows(store)
    assert "facts about x" in rows and "Too many requests" in rows  # the dump does hold the runs
    assert_no_credentials(rows, "the store")
    for name in NEVER_MENTIONED:
        assert name not in rows.lower(), f"a {name} header was stored"
    assert not HEADER_KEY.search(rows.encode()), "a credential header was stored"
    recorded_headers = []
    for run_id in run_ids:
        run = store.get_run(run_id)
        assert run is not None
        assert_no_credentials(json.dumps(get_converter().unstructure(run)), f"run {run_id}")
        for interaction in run.llm_interactions:
            headers = {k.lower(): v for k, v in (interaction.request_headers or {}).items()}
            assert not set(headers) & set(CREDENTIAL_HEADERS)
            assert_no_credentials(json.dumps([interaction.provider_request, headers]), "an llm_interaction")
            recorded_headers.append(headers)
    # The betas segue asked for (block binding, cache diagnostics) are recorded; credentials never are.
    assert {"anthropic-beta": "thinking-binding-controls-2026-08-01,cache-diagnosis-2026-04-07"} in recorded_headers

    if store.is_sqlite:
        raw = database_files(store)
        assert b"facts about x" in raw, "the files read are the store's"
        for secret in SECRETS:
            assert secret.encode() not in raw
        for name in NEVER_MENTIONED:
            assert name.encode() not in raw.lower()
        assert not HEADER_KEY.search(raw)
        assert b"Bearer" not in raw


# -- PII guardrail --------------------------------------------------------------------------------------------

EMAIL = "jane.doe@example.com"
PHONE = "+1 415 555 0134"
CARD = "4111 1111 1111 1111"
OWNER_EMAIL = "bob.smith@corp.example"


async def test_pii_mapping_never_reaches_provider_request(store: RunStore) -> None:
    looked_up: list[str] = []

    @tool
    def crm(email: str) -> str:
        """Find the account owner of a customer.

        Args:
            email: the customer's email
        """
        looked_up.append(email)
        return f"customer {email} is owned by {OWNER_EMAIL}"

    rec = Recorder(
        tool_use(("toolu_1", "crm", {"email": "[EMAIL_1]"})),
        answer("Write to [EMAIL_1]; the owner is [EMAIL_2]."),
    )
    agent = Agent(
        AnthropicProvider(MODEL, client=anthropic_client(rec)), "p", [crm], store, guardrails=[PIIGuardrail()]
    )
    result = await bounded(agent.run(f"Customer {EMAIL}, phone {PHONE}, card {CARD}: who owns the account?"))

    assert result.status == "success"
    assert looked_up == [EMAIL], "the tool got the real value back"
    assert result.answer == f"Write to {EMAIL}; the owner is {OWNER_EMAIL}."
    pii = (EMAIL, PHONE, CARD, OWNER_EMAIL)
    for request in rec.requests:
        body = request.content.decode()
        assert not [v for v in pii if v in body], "raw PII reached the vendor"
    second = rec.requests[1].content.decode()
    assert "[EMAIL_1]" in second and "[PHONE_1]" in second and "[CARD_1]" in second and "[EMAIL_2]" in second

    run = store.get_run(result.run_id)
    assert run is not None and len(run.llm_interactions) == 2
    for interaction in run.llm_interactions:
        stored = json.dumps(interaction.provider_request)
        assert not [v for v in pii if v in stored]
        assert "[EMAIL_1]" in stored
    # Every column of every llm_interactions row, read raw (no mapping, no raw value, anywhere):
    rows = sql(store, "SELECT * FROM llm_interactions")
    assert len(rows) == 2
    for row in rows:
        assert not [v for v in pii if v in repr(row)]
    # The mapping lives in the private column, which reads never return.
    ((private,),) = sql(store, "SELECT private FROM agent_runs")
    assert EMAIL in private and OWNER_EMAIL in private
    assert EMAIL not in json.dumps(stored_meta(run)) and "private" not in get_converter().unstructure(run)


# -- tenant isolation -----------------------------------------------------------------------------------------

ACME, GLOBEX = "acme", "globex"
ACME_INPUT = "Merger plan codename BLUEBIRD: summarise"
ACME_ANSWER = "BLUEBIRD closes on Friday."
NEVER_STORED = "01J9ZZZZZZZZZZZZZZZZZZZZZZ"


def assert_reveals_nothing_of_acme(text: str, where: str) -> None:
    for secret in ("BLUEBIRD", "Merger", "Friday", ACME):
        assert secret not in text, f"{secret!r} of tenant {ACME} leaked into {where}: {text}"


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: the order id
    """
    return f"refunded {order}"


class Tenants:
    """Tenant acme's finished and paused runs, and one run of tenant globex, in one store."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.provider = ScriptedProvider.of(
            text(ACME_ANSWER), call("refund", {"order": "A-7"}, id="c1"), text("globex answer"), text("refunded.")
        )
        self.agent = Agent(self.provider, "p", [refund], store)

    async def build(self) -> Tenants:
        done = await self.agent.run(ACME_INPUT, tenant_id=ACME)
        paused = await self.agent.run("refund A-7 for BLUEBIRD", tenant_id=ACME)
        own = await self.agent.run("globex question", tenant_id=GLOBEX)
        assert (done.status, paused.status, own.status) == ("success", "waiting_approval", "success")
        self.done, self.paused, self.own = done.run_id, paused.run_id, own.run_id
        return self


@pytest.fixture
async def tenants(store: RunStore) -> Tenants:
    return await Tenants(store).build()


async def test_runs_of_another_tenant_cannot_be_replayed(tenants: Tenants) -> None:
    before = tenants.store.counts()
    with pytest.raises(ReplayRunError) as caught:
        await tenants.agent.run("continue", runs=[tenants.done], replay_last="all", tenant_id=GLOBEX)
    assert (caught.value.reason, caught.value.run_id) == ("not_found", tenants.done)
    assert_reveals_nothing_of_acme(str(caught.value), "the ReplayRunError")
    # Another tenant's run and a run that does not exist are the same error, word for word (issue 35 R2).
    unknown = "01J00000000000000000000000"
    with pytest.raises(ReplayRunError) as missing:
        await tenants.agent.run("continue", runs=[unknown], replay_last="all", tenant_id=GLOBEX)
    assert str(caught.value).replace(tenants.done, unknown) == str(missing.value)
    assert missing.value.reason == "not_found"

    events = [e async for e in tenants.agent.stream("continue", runs=[tenants.done], tenant_id=GLOBEX)]
    (event,) = events
    assert event.type == "RUN_ERROR" and event.meta["reason"] == "not_found"
    assert_reveals_nothing_of_acme(json.dumps(get_converter().unstructure(event)), "the RUN_ERROR event")
    assert tenants.store.counts() == before, "nothing was written"
    assert len(tenants.provider.requests) == 3, "and nothing was sent"


@pytest.mark.parametrize("action", ["retry", "resume"])
async def test_retry_and_resume_as_another_tenant_do_not_reveal_the_run(tenants: Tenants, action: str) -> None:
    async def attempt(run_id: str) -> str:
        with pytest.raises(InputError) as caught:
            await getattr(tenants.agent, action)(run_id, tenant_id=GLOBEX)
        return str(caught.value)

    absent = await attempt(NEVER_STORED)
    for run_id in (tenants.done, tenants.paused):
        message = await attempt(run_id)
        # Word for word what a run id that never existed gets: neither existence nor status shows.
        assert message == absent.replace(NEVER_STORED, run_id)
        assert_reveals_nothing_of_acme(message, f"{action} as {GLOBEX}")
    paused = tenants.store.get_run(tenants.paused, tenant_id=ACME)
    assert paused is not None and paused.status == "waiting_approval", "the attempt changed nothing"
    # The owner still can: the refusal above was about the tenant, not the run.
    resumed = await tenants.agent.resume(tenants.paused, approved=True, tenant_id=ACME)
    assert resumed.status == "success"


async def test_run_store_reads_are_tenant_scoped(tenants: Tenants) -> None:
    store = tenants.store
    assert store.get_run(tenants.done, tenant_id=GLOBEX) is None
    assert store.get_run(tenants.done, tenant_id=ACME) is not None
    assert [r.run_id for r in store.list_runs(tenant_id=GLOBEX)] == [tenants.own]
    assert {r.run_id for r in store.list_runs(tenant_id=ACME)} == {tenants.done, tenants.paused}
    assert store.find_idempotent(GLOBEX, "anything") is None
    assert store.claim_paused(tenants.paused, GLOBEX) is False, "another tenant cannot claim a paused run"
    assert store.get_run(tenants.paused, tenant_id=ACME).status == "waiting_approval"  # type: ignore[union-attr]


async def test_cli_shows_another_tenants_run_as_missing(tenants: Tenants, capsys: pytest.CaptureFixture[str]) -> None:
    url = tenants.store.url
    for command in ("show", "explain"):
        code = main(["runs", command, tenants.done, "--db", url, "--tenant", GLOBEX])
        out, err = capsys.readouterr()
        assert code == 1 and out == ""
        assert f"no run '{tenants.done}' for tenant '{GLOBEX}'" in err
        assert_reveals_nothing_of_acme(err, f"runs {command}")
    code = main(["runs", "list", "--db", url, "--tenant", GLOBEX, "--json"])
    out, _ = capsys.readouterr()
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == [tenants.own]
    code = main(["runs", "show", tenants.done, "--db", url, "--tenant", ACME])
    out, _ = capsys.readouterr()
    assert code == 0 and "BLUEBIRD" in out, "its own tenant sees it"


async def test_dashboard_of_another_tenant_answers_404(tenants: Tenants) -> None:
    app = create_app(tenants.store, tenant=GLOBEX)
    for path in ("/runs/{}", "/api/runs/{}", "/api/runs/{}/explain", "/conversations/{}"):
        page = get(app, path.format(tenants.done))
        assert page.code == 404, path
        assert_reveals_nothing_of_acme(page.text, f"the dashboard page {path}")
    listing = get(app, "/")
    assert listing.code == 200 and run_ids_on(listing) == [tenants.own]
    assert_reveals_nothing_of_acme(listing.text, "the run list")
    api = get(app, "/api/runs").json()
    assert [r["run_id"] for r in (api["runs"] if isinstance(api, dict) else api)] == [tenants.own]
    assert get(app, f"/?tenant={ACME}").code == 403
    assert get(app, f"/api/runs?tenant={ACME}").code == 403
    owner = create_app(tenants.store, tenant=ACME)
    assert get(owner, f"/runs/{tenants.done}").code == 200, "the 404 above is about the tenant"


async def test_idempotency_keys_are_per_tenant(store: RunStore) -> None:
    provider = ScriptedProvider.of(text(ACME_ANSWER), text("globex's own answer"))
    agent = Agent(provider, "p", [], store)
    mine = await agent.run(ACME_INPUT, idempotency_key="order-42", tenant_id=ACME)

    # Same key and the very same input in another tenant: a new, independent run, never acme's result.
    theirs = await agent.run(ACME_INPUT, idempotency_key="order-42", tenant_id=GLOBEX)
    assert theirs.run_id != mine.run_id and theirs.answer == "globex's own answer"
    assert len(provider.requests) == 2
    assert [r.run_id for r in store.list_runs(tenant_id=GLOBEX)] == [theirs.run_id]

    with pytest.raises(IdempotencyConflictError) as caught:
        await agent.run("something else", idempotency_key="order-42", tenant_id=GLOBEX)
    message = str(caught.value)
    assert "order-42" in message and mine.run_id not in message and theirs.run_id not in message
    assert_reveals_nothing_of_acme(message, "the idempotency conflict")

    again = await agent.run(ACME_INPUT, idempotency_key="order-42", tenant_id=ACME)
    assert (again.run_id, again.answer) == (mine.run_id, ACME_ANSWER), "each tenant keeps its own key"
    assert len(provider.requests) == 2


def test_the_store_keeps_sql_parameters_out_of_debug_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Peewee logs statements with their values at DEBUG; RunStore quiets it unless the app set a level."""
    import logging

    from segue.generated import RunMeta
    from segue.store import NewRun

    logging.getLogger("peewee").setLevel(logging.NOTSET)
    with caplog.at_level(logging.DEBUG):
        store = RunStore(f"sqlite:///{tmp_path}/quiet.db")
        store.create_run(
            NewRun(
                run_id="01J00000000000000000000000",
                tenant_id="t",
                agent_name="a",
                input="card 4111 1111",
                model="m",
                vendor="v",
                meta=RunMeta(),
                metadata={},
                private={"pii": {"[CARD_1]": "4111 1111"}},
            ),
            [],
        )
    assert "4111 1111" not in caplog.text
    logging.getLogger("peewee").setLevel(logging.DEBUG)  # an app that asks for them still gets them
    assert RunStore(f"sqlite:///{tmp_path}/quiet.db") is not None
    assert logging.getLogger("peewee").level == logging.DEBUG
    logging.getLogger("peewee").setLevel(logging.NOTSET)
