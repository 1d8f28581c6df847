"""The dashboard WSGI app without a browser: pages, tenant scoping, escaping, JSON endpoints, headers."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segue import RunStore
from segue.apps.dashboard import create_app
from segue.generated import LayoutMeta, RunMeta, Usage
from tests._support.dashboard import get, run_ids_on
from tests._support.sample_runs import SCRIPT_ANSWER, SampleRuns, copy_store, validate


@pytest.fixture
def store(runs: SampleRuns) -> Iterator[RunStore]:
    s = RunStore(runs.url)
    yield s
    s.close()


# -- run list -------------------------------------------------------------------------------------------------


def test_run_list_shows_this_tenants_runs(runs: SampleRuns, store: RunStore) -> None:
    page = get(create_app(store), "/")
    assert page.code == 200
    assert run_ids_on(page) == [runs.edited, runs.third, runs.second, runs.first]
    assert runs.other_tenant not in page.text
    assert 'name="tenant"' not in page.text  # the tenant filter is for admins only
    assert "tenant default" in page.text
    # cost: the scripted vendor has no catalog prices -> a dash titled with the reason recorded with the run
    assert re.search(r'<td class="num cost" title="unknown: no prices: [^"]*scripted[^"]*">—</td>', page.text)
    assert f'href="/conversations/{runs.third}"' in page.text


def test_run_list_filters(runs: SampleRuns, store: RunStore) -> None:
    app = create_app(store)
    assert run_ids_on(get(app, "/?status=error")) == []
    assert "No runs match these filters." in get(app, "/?status=error").text
    assert run_ids_on(get(app, "/?agent=order-desk&limit=2")) == [runs.edited, runs.third]
    older = get(app, "/?agent=order-desk&limit=2")
    assert 'href="/?agent=order-desk&amp;limit=2&amp;offset=2">older' in older.text
    assert run_ids_on(get(app, "/?agent=order-desk&limit=2&offset=2")) == [runs.second, runs.first]
    assert get(app, "/?status=bogus").code == 400
    assert get(app, "/?limit=0").code == 400
    assert get(app, "/?limit=x").code == 400


def test_tenant_scoping(runs: SampleRuns, store: RunStore) -> None:
    app = create_app(store)
    assert get(app, f"/runs/{runs.other_tenant}").code == 404
    assert get(app, f"/conversations/{runs.other_tenant}").code == 404
    assert get(app, f"/api/runs/{runs.other_tenant}").code == 404
    assert get(app, f"/api/runs/{runs.other_tenant}/explain").code == 404
    denied = get(app, "/?tenant=globex")
    assert denied.code == 403 and "shows tenant &#39;default&#39; only" in denied.text
    assert get(app, "/api/runs?tenant=globex").code == 403
    assert get(app, "/?tenant=default").code == 200

    globex = create_app(store, tenant="globex")
    assert run_ids_on(get(globex, "/")) == [runs.other_tenant]
    assert get(globex, f"/runs/{runs.first}").code == 404

    admin = create_app(store, admin=True)
    assert len(run_ids_on(get(admin, "/"))) == 5
    assert run_ids_on(get(admin, "/?tenant=globex")) == [runs.other_tenant]
    assert 'name="tenant"' in get(admin, "/").text
    assert get(admin, f"/runs/{runs.other_tenant}").code == 200
    assert "every tenant (admin)" in get(admin, "/").text


def test_json_endpoints_match_the_schemas_and_are_scoped(runs: SampleRuns, store: RunStore) -> None:
    app = create_app(store)
    listed = get(app, "/api/runs").json()
    assert [r["run_id"] for r in listed] == [runs.edited, runs.third, runs.second, runs.first]
    for item in listed:
        validate(item, "RunSummary")
    detail = get(app, f"/api/runs/{runs.third}").json()
    validate(detail, "RunDetail")
    explained = get(app, f"/api/runs/{runs.third}/explain").json()
    assert explained["iterations"][0]["cause"] == "window"
    missing = get(app, "/api/runs/NOPE")
    assert missing.code == 404 and missing.json() == {"error": "no run NOPE here"}


# -- run detail -----------------------------------------------------------------------------------------------


def test_run_detail_marks_replayed_and_new_messages(runs: SampleRuns, store: RunStore) -> None:
    page = get(create_app(store), f"/runs/{runs.second}")
    assert page.code == 200
    origins = re.findall(r'<li class="message origin-(\w+) role-(\w+)', page.text)
    # The first run's four messages were replayed; then the second run's own four.
    assert origins == [
        ("replayed", "user"), ("replayed", "assistant"), ("replayed", "tool"), ("replayed", "assistant"),
        ("new", "user"), ("new", "assistant"), ("new", "tool"), ("new", "assistant"),
    ]  # fmt: skip
    assert "4 messages came before this run" in page.text
    assert "tool call lookup_order" in page.text and "tool result for call_43" in page.text
    # replay summary, explain, chart, tool calls, provider requests
    assert re.search(rf'<tr class="replayed-run" data-run-id="{runs.first}">', page.text)
    assert "extends the previous request" in page.text
    assert page.text.count('<rect class="seg seg-cache-read"') == 2
    assert '<section id="tool-calls">' in page.text and "order 43 shipped on day 2" in page.text
    assert page.text.count('<details class="request"') == 2
    assert "&#34;system&#34;: &#34;You are the order desk" in page.text  # jinja2 escapes quotes as &#34;


def test_run_detail_explains_window_moves_and_system_edits(runs: SampleRuns, store: RunStore) -> None:
    app = create_app(store)
    third = get(app, f"/runs/{runs.third}").text
    assert f"a moved window: run {runs.first} went in full before" in third
    assert re.search(r"<td>question \+ answer</td>", third)
    edited = get(app, f"/runs/{runs.edited}").text
    assert "system prompt changed at system" in edited


def test_model_and_tool_text_is_escaped(runs: SampleRuns, store: RunStore) -> None:
    for path in (f"/runs/{runs.third}", f"/conversations/{runs.third}"):
        page = get(create_app(store), path)
        assert "<script>window" not in page.text and "<img src=x" not in page.text
        assert html.escape(SCRIPT_ANSWER)[:40] in page.text
    assert re.findall(r"<script\b[^>]*>", get(create_app(store), f"/runs/{runs.third}").text) == [
        '<script src="/static/dashboard.js" defer>'
    ]


def test_layout_decision_is_shown(runs: SampleRuns, tmp_path: Path) -> None:
    url = copy_store(runs, tmp_path / "layout.db")
    store = RunStore(url)
    try:
        run = store.get_run(runs.first)
        assert run is not None
        layout = LayoutMeta(mode="replace", reason="catalog: <model> prefix_prompt_cache=false", iteration=1)
        store.finish_run(
            runs.first, status="success", answer=run.answer, error=None, usage=run.usage, iterations=2,
            meta_updates=RunMeta(segue_layout=layout),
        )  # fmt: skip
        page = get(create_app(store), f"/runs/{runs.first}").text
    finally:
        store.close()
    assert "<strong>replace</strong>" in page
    assert "catalog: &lt;model&gt; prefix_prompt_cache=false" in page and "decided at iteration 1" in page


def test_cost_is_pluggable(runs: SampleRuns, store: RunStore) -> None:
    seen: list[tuple[str, str | None]] = []

    def cost(usage: Usage, model: str, vendor: str | None) -> float | None:
        seen.append((model, vendor))
        return usage.input_tokens / 1000

    page = get(create_app(store, cost=cost), "/").text
    assert "$0.7580" in page and ("scripted-1", "scripted") in seen

    def no_price(usage: Usage, model: str, vendor: str | None) -> float | None:
        raise LookupError(f"no pricing for {model}")

    assert get(create_app(store, cost=no_price), f"/runs/{runs.first}").code == 200


# -- conversation ---------------------------------------------------------------------------------------------


def test_conversation_follows_continued_from_both_ways(runs: SampleRuns, store: RunStore) -> None:
    app = create_app(store)
    chain = [runs.first, runs.second, runs.third, runs.edited]
    for start in chain:
        page = get(app, f"/conversations/{start}")
        assert page.code == 200
        assert re.findall(r'<li class="turn[^"]*" data-run-id="([^"]+)"', page.text) == chain
        assert re.search(rf'<li class="turn current" data-run-id="{start}"', page.text)
    page = get(app, f"/conversations/{runs.third}").text
    assert page.count('class="arrow"') == 3
    assert "replayed 1 in full, 1 as question + answer" in page
    assert page.count('<rect class="seg seg-cache-write"') == 4


async def test_conversation_lists_branches(runs: SampleRuns, tmp_path: Path) -> None:
    from segue import Agent
    from segue.testing import ScriptedProvider, text

    url = copy_store(runs, tmp_path / "branch.db")
    store = RunStore(url)
    try:
        agent = Agent(ScriptedProvider.of(text("another way")), "p", [], store)
        branch = await agent.run("What if?", runs=[runs.first], replay_last="all")
        page = get(create_app(store), f"/conversations/{runs.first}").text
        # The newest continuation is followed; the older chain shows as a branch.
        turns = re.findall(r'<li class="turn[^"]*" data-run-id="([^"]+)"', page)
        assert turns == [runs.first, branch.run_id]
        assert f'<a href="/conversations/{runs.second}">' in page
    finally:
        store.close()


def test_a_tenant_without_runs_is_told_which_tenants_have_them(runs: SampleRuns, store: RunStore) -> None:
    """Issue 30 item 5: the dashboard with the wrong tenant showed an empty page; `segue runs list` named the
    tenants. The unfiltered list now says so too; a filter that matches nothing still says it is the filter."""
    page = html.unescape(get(create_app(store, tenant="acme"), "/").text)
    assert run_ids_on(get(create_app(store, tenant="acme"), "/")) == []
    assert "No runs for tenant 'acme'. The database holds runs of tenant 'default' (4 runs), 'globex' (1 run)" in page
    assert "--tenant default (or --admin for every tenant)" in page
    assert "No runs match these filters." in get(create_app(store, tenant="acme"), "/?status=error").text
    assert "No runs for tenant" not in get(create_app(store), "/?status=error").text


async def test_the_run_list_groups_a_conversations_turns(runs: SampleRuns, tmp_path: Path) -> None:
    """Issue 30 item 5: the run list was flat. Turns linked by continued_from are shown together, in the place
    of their newest turn, under one header with the conversation's link; a lone run stays a row of its own."""
    from segue import Agent
    from segue.testing import ScriptedProvider, text

    store = RunStore(f"sqlite:///{tmp_path / 'threads.db'}")
    try:
        agent = Agent(ScriptedProvider.of(*[text(f"answer {i}") for i in range(5)]), "p", [], store)
        a1 = await agent.run("Thread A, turn 1")
        b1 = await agent.run("Thread B, turn 1")
        lone = await agent.run("A question on its own")
        a2 = await agent.run("Thread A, turn 2", runs=[a1.run_id])
        b2 = await agent.run("Thread B, turn 2", runs=[b1.run_id])
        page = get(create_app(store), "/").text
        # Newest first was b2, a2, lone, b1, a1: now each thread's turns sit together.
        assert run_ids_on(get(create_app(store), "/")) == [b2.run_id, b1.run_id, a2.run_id, a1.run_id, lone.run_id]
        groups = re.findall(r'<tbody class="(\w+)">(.*?)</tbody>', page, re.S)
        assert [(kind, re.findall(r'data-run-id="([^"]+)"', body)) for kind, body in groups] == [
            ("conversation", [b2.run_id, b1.run_id]),
            ("conversation", [a2.run_id, a1.run_id]),
            ("single", [lone.run_id]),
        ]
        assert "2 turns on this page" in groups[0][1] and f'href="/conversations/{b2.run_id}"' in groups[0][1]
        # The first page of two: the older turn is on the next page, and the group says there is more.
        limited = get(create_app(store), "/?limit=2").text
        assert run_ids_on(get(create_app(store), "/?limit=2")) == [b2.run_id, a2.run_id]
        assert "conversation," not in limited and limited.count('<span class="continues"') == 2
    finally:
        store.close()


# -- HTTP details ---------------------------------------------------------------------------------------------


def test_headers_methods_static_and_hosts(runs: SampleRuns, store: RunStore) -> None:
    app = create_app(store)
    page = get(app, "/")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert get(app, "/", method="POST").code == 405
    assert get(app, "/", method="HEAD").text == ""
    css = get(app, "/static/dashboard.css")
    assert css.code == 200 and css.headers["Content-Type"].startswith("text/css")
    assert get(app, "/static/../app.py").code == 404
    assert get(app, "/static/app.py").code == 404
    assert get(app, "/nowhere").code == 404
    # DNS rebinding: a loopback dashboard answers only to loopback names.
    assert get(app, "/", host="evil.example:8710").code == 421
    assert get(app, "/", host="localhost:8710").code == 200
    assert get(app, "/", host="[::1]:8710").code == 200
    assert get(create_app(store, allowed_hosts=None), "/", host="evil.example").code == 200


def test_a_failing_page_is_a_500_without_details(runs: SampleRuns, store: RunStore) -> None:
    app = create_app(store)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internals")

    app.store = type("Broken", (), {"list_runs": broken})()  # type: ignore[assignment]
    page = get(app, "/")
    assert page.code == 500 and "secret internals" not in page.text


def test_a_tenant_is_required() -> None:
    with pytest.raises(ValueError, match="needs a tenant"):
        create_app(None, tenant="")  # type: ignore[arg-type]


def test_serve_in_thread_stops_when_its_with_block_ends(store: RunStore) -> None:
    """docs/dashboard.md starts the dashboard in a background thread; as a context manager it stops on leaving."""
    import urllib.error
    import urllib.request

    from segue.apps.dashboard import serve_in_thread

    with serve_in_thread(create_app(store, tenant="acme")) as dashboard:
        with urllib.request.urlopen(f"{dashboard.url}/api/runs", timeout=10) as response:
            assert response.status == 200
    assert not dashboard.thread.is_alive()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{dashboard.url}/api/runs", timeout=2)
