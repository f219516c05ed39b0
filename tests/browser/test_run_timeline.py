"""The run's timeline on its page: each visit's start, duration and wait, tokens per visit and per run, cost if priced."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine.llm.config import ModelPrice
from tests.browser.support import (
    WAIT_MS,
    both_sizes,
    create_run,
    open_ended_run,
    open_run,
    run_result,
    shot,
    sign_in,
    wait_until_ended,
)
from tests.support.engine_runs import engine_settings
from tests.support.server import RunningServer


@pytest.fixture
async def priced_server(store: str, tmp_path: Path) -> AsyncIterator[RunningServer]:
    """A viewer server whose scripted model has a price (FLOWTRAIL_MODEL_PRICES)."""
    price = ModelPrice(model="scripted", input_per_1k=2.0, output_per_1k=8.0, currency="EUR")
    running = await RunningServer(engine_settings(store, tmp_path / "data", model_prices=(price,))).start()
    yield running
    await running.stop()


async def test_a_finished_run_shows_a_bar_per_visit_with_its_tokens_and_the_runs_cost(
    page: Any, priced_server: RunningServer, store: str
) -> None:
    run_id, _ = await open_ended_run(page, priced_server, "demo-report")
    timeline = page.get_by_role("region", name="Timeline")
    rows = timeline.locator("li[data-visit-uuid]")
    await timeline.locator('.run-tokens:not([data-cost=""])').wait_for(timeout=WAIT_MS)
    await both_sizes(page, "timeline-report", store)

    usage = (await run_result(priced_server, "demo-report", run_id))["usage"]
    cost = round(usage["promptTokens"] * 0.002 + usage["completionTokens"] * 0.008, 6)
    assert await rows.count() == 5
    assert float(await timeline.locator(".run-tokens").get_attribute("data-cost")) == cost
    assert "EUR" in await timeline.locator(".run-tokens").inner_text()
    assert "null" not in await page.locator("#run").inner_text()
    assert all(ms.isdigit() for ms in await rows.evaluate_all("rows => rows.map(r => r.dataset.durationMs)"))
    research = page.locator('.visit[data-node-id="research"] .visit-timing')
    assert " in · " in await research.inner_text() and "EUR" in await research.inner_text()

    await rows.filter(has_text="Key points").get_by_role("button").click()
    await page.locator('.visit.picked[data-node-id="key-points"] details[open]').wait_for(timeout=WAIT_MS)
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390


async def test_a_visit_that_waited_for_an_answer_shows_its_wait(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id = await create_run(viewer_server, "demo-clarify")
    await sign_in(page, viewer_server.base_url)
    await open_run(page, viewer_server.base_url, run_id)
    panel = page.get_by_role("region", name="Question")
    await panel.wait_for(timeout=WAIT_MS)
    await page.get_by_role("region", name="Timeline").locator('li[data-node-id="ask"]').wait_for(timeout=WAIT_MS)
    await panel.get_by_role("button", name="Send answer").click()
    await wait_until_ended(page)
    timeline = page.get_by_role("region", name="Timeline")
    asked = timeline.locator('li[data-node-id="ask"][data-status="SUCCESS"]')
    await asked.wait_for(timeout=WAIT_MS)
    await both_sizes(page, "timeline-waited", store)

    assert int(await asked.get_attribute("data-waiting-ms")) > 0
    assert await asked.locator(".wait").count() == 1
    assert "waited" in await asked.inner_text()
    assert "waited for answers" in await timeline.locator(".timeline-totals").inner_text()
    assert "no price set" in await timeline.locator(".timeline-totals").inner_text()
    await shot(page, "timeline-waited-end-phone", store)
