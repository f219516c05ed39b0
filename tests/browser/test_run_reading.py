"""How a run reads in the viewer: outputs as fields, each model turn's thinking apart, one count for replay and log."""

from __future__ import annotations

from typing import Any

from tests.browser.support import WAIT_MS, open_ended_run, shot
from tests.support.server import RunningServer


async def test_a_report_shows_its_outputs_as_fields_with_lists_links_and_files_not_the_envelope(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id, _ = await open_ended_run(page, viewer_server, "demo-report", topic="tides")
    outcome = page.locator(".outcome .fields").first
    await outcome.locator('dd[data-field="reportFile"] a.file-link').wait_for(timeout=WAIT_MS)
    await page.set_viewport_size({"width": 1400, "height": 1000})
    await shot(page, "outputs-as-fields", store)

    assert "tides is explained" in await outcome.locator('dd[data-field="summary"] .markdown').inner_text()
    points = outcome.locator('dd[data-field="keyPoints"] .markdown li')
    assert await points.count() == 3
    sources = outcome.locator('dd[data-field="sources"] ul li a')
    assert await sources.evaluate_all("links => links.map(a => a.href)") == [
        "https://example.org/overview", "https://example.org/recent-study"]
    assert await outcome.locator(".raw").evaluate("raw => raw.open") is False
    shown = await outcome.evaluate("f => [...f.children].filter(c => !c.matches('.raw')).map(c => c.innerText).join()")
    assert '"status"' not in shown and "200" not in shown

    async with page.expect_download() as download_info:
        await outcome.locator('dd[data-field="reportFile"] a.file-link').click()
    assert (await download_info.value).suggested_filename.endswith("-workspace.zip")


async def test_each_model_turn_of_a_visit_keeps_its_own_thinking(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id, _ = await open_ended_run(page, viewer_server, "demo-report", topic="tides")
    research = page.locator('.visit[data-node-id="research"]')
    await research.locator("summary").first.click()
    turns = research.locator(".thinking")
    await page.set_viewport_size({"width": 390, "height": 844})
    await shot(page, "thinking-turns-phone", store)

    assert await turns.count() == 3
    assert (await turns.nth(0).inner_text()).endswith("then for a recent study.")
    assert (await turns.nth(1).inner_text()).startswith("The overview gives me the basics.")
    assert "study.The" not in await research.inner_text()


async def test_replay_and_the_event_log_count_the_same_messages(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id, ids = await open_ended_run(page, viewer_server, "demo-report", topic="tides")
    await page.get_by_role("button", name="Replay").click()
    await page.get_by_role("button", name="Play max").click()
    await page.locator('#run[data-replay-done="true"]').wait_for(timeout=WAIT_MS)
    await shot(page, "replay-counts", store)

    assert ids[-1] > len(ids)  # the stream leaves out model calls and visit starts: its ids have gaps
    log = await page.locator("#event-log").evaluate("log => log.closest('details').querySelector('summary').innerText")
    assert log.startswith(f"Event log ({len(ids)} messages")
    assert (await page.locator("#replay-position").inner_text()).startswith(f"message {len(ids)} of {len(ids)}")
    assert await page.locator("#scrubber").get_attribute("max") == str(len(ids))
