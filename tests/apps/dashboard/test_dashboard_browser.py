"""The dashboard in real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium).

Skipped locally when chromium, chromedriver or selenium is missing; a failure in CI (CI=true), which installs them.
The browser runs with background networking off and a fresh profile: this machine has no network.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segue import RunStore
from segue.apps.dashboard import RunningDashboard, create_app, serve_in_thread
from tests._support.environment import require_tool
from tests._support.sample_runs import SampleRuns

pytestmark = pytest.mark.browser

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1200",
]


def _require_selenium() -> None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("selenium is required in CI (dashboard browser tests); add it to the dev extra")
        pytest.skip("selenium is not installed (dashboard browser tests)")


@pytest.fixture(scope="module")
def dashboard(runs: SampleRuns) -> Iterator[RunningDashboard]:
    store = RunStore(runs.url)
    running = serve_in_thread(create_app(store), host="127.0.0.1", port=0)
    yield running
    running.stop()
    store.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium = require_tool("chromium", "headless browser tests of the dashboard")
    chromedriver = require_tool("chromedriver", "headless browser tests of the dashboard (chromium-driver)")
    _require_selenium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _wait_for_url(browser: Any, part: str) -> None:
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(expected_conditions.url_contains(part))


def _png(path: Path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_run_list_conversation_chain_and_chart(
    browser: Any, dashboard: RunningDashboard, runs: SampleRuns, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    browser.get(dashboard.url + "/")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.run-row")
    assert [r.get_attribute("data-run-id") for r in rows] == [runs.edited, runs.third, runs.second, runs.first]
    browser.save_screenshot(str(tmp_path / "runs.png"))
    _png(tmp_path / "runs.png")

    # The JavaScript quick filter (allowed by the page's Content-Security-Policy) hides other rows.
    browser.find_element(By.ID, "quick-filter").send_keys(runs.first)
    visible = [r.get_attribute("data-run-id") for r in rows if r.is_displayed()]
    assert visible == [runs.second, runs.first]  # the second run's "continues" cell names the first

    browser.get(dashboard.url + "/")
    browser.find_element(By.CSS_SELECTOR, f'tr[data-run-id="{runs.third}"] a.conversation-link').click()
    _wait_for_url(browser, f"/conversations/{runs.third}")
    turns = browser.find_elements(By.CSS_SELECTOR, "#chain li.turn")
    assert [t.get_attribute("data-run-id") for t in turns] == [runs.first, runs.second, runs.third, runs.edited]
    assert "current" in (turns[2].get_attribute("class") or "")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#chain .arrow")) == 3
    for turn in turns:
        read = turn.find_element(By.CSS_SELECTOR, "rect.seg-cache-read")
        assert float(read.get_attribute("width") or 0) > 0
        assert turn.find_element(By.CSS_SELECTOR, "dd.cache-read").text.replace(",", "").isdigit()
    # The stylesheet loaded and colours the bars (cache read green).
    assert turns[0].find_element(By.CSS_SELECTOR, "rect.seg-cache-read").value_of_css_property("fill") == (
        "rgb(46, 157, 104)"
    )
    browser.save_screenshot(str(tmp_path / "conversation.png"))
    _png(tmp_path / "conversation.png")

    turns[1].find_element(By.CSS_SELECTOR, "a.run-id").click()
    _wait_for_url(browser, f"/runs/{runs.second}")
    bars = browser.find_elements(By.CSS_SELECTOR, "#iterations svg.chart g.bar")
    assert [b.get_attribute("data-label") for b in bars] == ["#1", "#2"]
    for bar in bars:
        kinds = [r.get_attribute("data-kind") for r in bar.find_elements(By.CSS_SELECTOR, "rect")]
        assert kinds == ["cache-read", "cache-write"]
    origins = [m.get_attribute("class") for m in browser.find_elements(By.CSS_SELECTOR, "li.message")]
    assert sum("origin-replayed" in (o or "") for o in origins) == 4
    assert sum("origin-new" in (o or "") for o in origins) == 4

    requests = browser.find_elements(By.CSS_SELECTOR, "details.request")
    assert len(requests) == 2 and not any(d.get_attribute("open") for d in requests)
    browser.find_element(By.CSS_SELECTOR, 'button[data-details="open"]').click()
    assert all(d.get_attribute("open") is not None for d in requests)
    assert '"messages": [' in requests[0].find_element(By.CSS_SELECTOR, "pre.json").text
    browser.save_screenshot(str(tmp_path / "run.png"))
    _png(tmp_path / "run.png")


def test_a_script_in_a_model_answer_renders_as_text(
    browser: Any, dashboard: RunningDashboard, runs: SampleRuns, tmp_path: Path
) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    for path in (f"/runs/{runs.third}", f"/conversations/{runs.third}"):
        browser.get(dashboard.url + path)
        assert browser.execute_script("return window.__pwned === undefined")
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018 - reading it is what raises when there is no alert
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "<script>window.__pwned = 1</script>" in body
    answer = browser.find_element(By.CSS_SELECTOR, f'li.turn[data-run-id="{runs.third}"] p.answer')
    assert answer.text.startswith("<script>window.__pwned")
    browser.save_screenshot(str(tmp_path / "escaped.png"))
    _png(tmp_path / "escaped.png")


def test_another_tenants_run_is_not_found(browser: Any, dashboard: RunningDashboard, runs: SampleRuns) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{dashboard.url}/runs/{runs.other_tenant}")
    assert browser.find_element(By.TAG_NAME, "h1").text == "404"
    assert runs.other_tenant in browser.find_element(By.CSS_SELECTOR, ".error-message").text


async def _below_minimum_run(url: str) -> str:
    """One run on the twin whose prompt is below claude-sonnet-4-6's minimum cacheable length."""
    from segue import Agent
    from segue.providers import AnthropicProvider
    from segue.twin import Twin, sample_db

    store = RunStore(url)
    try:
        provider = AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client())
        agent = Agent(provider, "You help.", [sample_db.list_tables], store)
        result = await agent.run("Which tables are there?", tenant_id="t")
        assert result.status == "success", result.error
        return result.run_id
    finally:
        store.close()


def test_a_below_minimum_run_page_shows_its_numbers(browser: Any, tmp_path: Path) -> None:
    """Issue 30 acceptance: the run page of a below-minimum run says "N tokens, below the 1,024-token minimum",
    as the browser renders it (the numbers are the run's stored note; the minimum is the catalog's)."""
    import asyncio

    from selenium.webdriver.common.by import By

    from segue.catalog import Catalog

    url = f"sqlite:///{tmp_path / 'below.db'}"
    run_id = asyncio.run(_below_minimum_run(url))
    store = RunStore(url)
    try:
        run = store.get_run(run_id, tenant_id="t")
        assert run is not None and run.meta is not None and run.meta.segue_notes
        note = next(n for n in run.meta.segue_notes if n.kind == "cache-below-minimum")
        assert note.limit == Catalog.load().resolve("claude-sonnet-4-6", "anthropic").cache_min_tokens == 1024
        assert note.measured is not None and note.measured < note.limit
        stated = f"{note.measured:,} tokens, below the {note.limit:,}-token minimum"
        with serve_in_thread(create_app(store, tenant="t"), host="127.0.0.1", port=0) as running:
            browser.get(f"{running.url}/runs/{run_id}")
            shown = [
                e for e in browser.find_elements(By.XPATH, f'//*[contains(text(), "{stated}")]') if e.is_displayed()
            ]
            assert shown, browser.find_element(By.TAG_NAME, "body").text
            assert stated in browser.find_element(By.TAG_NAME, "body").text
            shown[0].screenshot(str(tmp_path / "below-minimum-note.png"))
            browser.save_screenshot(str(tmp_path / "below-minimum.png"))
    finally:
        store.close()
    _png(tmp_path / "below-minimum.png")
    assert (tmp_path / "below-minimum-note.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_run_list_fits_a_screen_of_runs_and_groups_conversations(browser: Any, tmp_path: Path) -> None:
    """Issue 30 item 5: about 9 runs fitted a screen, and a conversation's turns were spread over the list. Long
        questions no longer wrap: every row is one line, so a window 1,200 pixels high shows 25 runs or more, with the
    header lines of their conversations."""
    import asyncio

    from selenium.webdriver.common.by import By

    from segue import Agent
    from segue.testing import ScriptedProvider, text

    long = "Which customers placed an order in every month of 2025, and how much did each of them spend? " * 2
    store = RunStore(f"sqlite:///{tmp_path / 'many.db'}")

    async def record() -> list[str]:
        agent = Agent(ScriptedProvider.of(*[text("An answer.")] * 40), "You help.", [], store)
        ids: list[str] = []
        for i in range(40):
            continues = [ids[-1]] if i % 4 else []  # conversations of four turns
            ids.append((await agent.run(f"{i}: {long}", runs=continues)).run_id)
        return ids

    try:
        ids = asyncio.run(record())
        with serve_in_thread(create_app(store), host="127.0.0.1", port=0) as running:
            browser.get(running.url + "/")
            rows = browser.find_elements(By.CSS_SELECTOR, "tr.run-row")
            assert [r.get_attribute("data-run-id") for r in rows[:4]] == ids[-1:-5:-1], "newest conversation first"
            heights = {round(r.rect["height"]) for r in rows}
            assert max(heights) <= 30, f"one line per run, got row heights {sorted(heights)}"
            window = browser.execute_script("return window.innerHeight")
            on_screen = [r for r in rows if r.rect["y"] + r.rect["height"] <= window]
            assert len(on_screen) >= 25, f"{len(on_screen)} runs fit a {window}px window"
            heads = browser.find_elements(By.CSS_SELECTOR, "tr.conversation-head")
            assert len(heads) == 10 and all("4 turns on this page" in h.text for h in heads)
            browser.save_screenshot(str(tmp_path / "run-list.png"))
    finally:
        store.close()
    _png(tmp_path / "run-list.png")


def test_at_1280_px_the_run_list_shows_cache_read_and_cost_and_a_conversations_five_cards_share_a_row(
    browser: Any, tmp_path: Path
) -> None:
    """Issue 40 item 4: the run list was 2,014 px wide, its cache-read and cost columns off-screen at 1,400 px; the
    fifth card of the demo's conversation wrapped. At 1,280 px both columns are inside the viewport, the page
    itself does not scroll sideways (the table scrolls in its frame), and the five cards share one row."""
    import asyncio
    import struct

    from selenium.webdriver.common.by import By

    from segue.demo.chat import run_chat
    from segue.twin import Twin

    store = RunStore(f"sqlite:///{tmp_path / 'demo.db'}")
    asyncio.run(run_chat("all", store=store, twin=Twin()))
    running = serve_in_thread(create_app(store, tenant="demo"), host="127.0.0.1", port=0)
    browser.set_window_size(1280, 900)
    try:
        browser.get(running.url + "/")
        width = browser.execute_script("return window.innerWidth")
        assert width == 1280
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
        edges = browser.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#runs thead th')].map("
            "t => [t.textContent.trim(), [t.getBoundingClientRect().left, t.getBoundingClientRect().right]]))"
        )
        for column in ("Question", "Cache read", "Cost"):
            left, right = edges[column]
            assert 0 <= left < right <= width, (column, edges)
        first = browser.find_elements(By.CSS_SELECTOR, "tr.run-row td.cost")[0]
        assert first.text.endswith(" emulated") and first.is_displayed()
        shot = tmp_path / "runs-1280.png"
        browser.save_screenshot(str(shot))
        _png(shot)
        assert struct.unpack(">II", shot.read_bytes()[16:24])[0] == width  # the screenshot is the 1,280-px viewport

        newest = browser.find_element(By.CSS_SELECTOR, "tr.conversation-head a.conversation-link")
        newest.click()
        _wait_for_url(browser, "/conversations/")
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
        boxes = browser.execute_script(
            "return [...document.querySelectorAll('#chain li.turn')].map(t => [t.getBoundingClientRect().top,"
            " t.getBoundingClientRect().right])"
        )
        assert len(boxes) == 5 and len({round(top) for top, _ in boxes}) == 1, boxes  # one row
        assert max(right for _, right in boxes) <= width
        browser.save_screenshot(str(tmp_path / "conversation-1280.png"))
        _png(tmp_path / "conversation-1280.png")
    finally:
        browser.set_window_size(1400, 1200)
        running.stop()
        store.close()
