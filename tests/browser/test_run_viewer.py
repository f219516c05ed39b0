"""The run viewer in a real headless Chromium against a real server: live, AskFor, a cut stream, replay, listing."""

from __future__ import annotations

import asyncio
import io
import zipfile
from typing import Any

from tests.browser.support import (
    KEY,
    WAIT_MS,
    CuttingProxy,
    create_run,
    open_run,
    run_result,
    shot,
    shown_ids,
    sign_in,
    start_run,
    stream_ids,
    wait_until_ended,
)
from tests.support.server import RunningServer


async def test_a_live_demo_report_is_watched_to_its_end_with_every_panel(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id = await create_run(viewer_server, "demo-report", start=False, topic="event sourcing")
    await sign_in(page, viewer_server.base_url)
    await open_run(page, viewer_server.base_url, run_id)
    await page.locator('#run[data-stream="live"]').wait_for(timeout=WAIT_MS)
    async with viewer_server.client(key=KEY) as http:
        await start_run(http, "demo-report", run_id)
    await page.locator(".visit").first.wait_for(timeout=WAIT_MS)
    await shot(page, "live-running", store)
    await wait_until_ended(page)
    await page.locator('.visit[data-node-id="report"][data-status="SUCCESS"]').wait_for(timeout=WAIT_MS)
    await shot(page, "live-ended", store)

    assert await shown_ids(page) == await stream_ids(viewer_server, "demo-report", run_id)
    research = page.locator('.visit[data-node-id="research"]')
    await research.locator("summary").first.click()
    assert await research.locator(".thinking").first.inner_text() != ""
    tools = research.locator(".tool")
    assert await tools.count() >= 2
    assert await research.locator('.tool[data-open="true"]').count() == 0
    assert "web_search" in await tools.first.inner_text()
    assert await page.locator(".todo .todo-list li").count() > 0
    assert "report" in (await page.locator(".outcome .output").inner_text()).lower()
    await shot(page, "live-research-open", store)

    async with page.expect_download() as download_info:
        await page.get_by_role("button", name="Download workspace (zip)").click()
    download = await download_info.value
    with zipfile.ZipFile(io.BytesIO(open(await download.path(), "rb").read())) as archive:
        assert any(name.endswith("report.md") for name in archive.namelist())


async def test_a_demo_clarify_question_is_answered_from_the_page_at_phone_size(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    await page.set_viewport_size({"width": 390, "height": 844})
    run_id = await create_run(viewer_server, "demo-clarify", topic="tides")
    await sign_in(page, viewer_server.base_url)
    await open_run(page, viewer_server.base_url, run_id)
    panel = page.get_by_role("region", name="Question")
    await panel.wait_for(timeout=WAIT_MS)
    await shot(page, "askfor-asked-phone", store)

    await panel.get_by_label("short paragraph").check()
    await panel.get_by_role("button", name="Send answer").click()
    await wait_until_ended(page)
    await shot(page, "askfor-answered-phone", store)

    assert await panel.is_hidden()
    result = await run_result(viewer_server, "demo-clarify", run_id)
    assert result["status"] == "SUCCESS"
    assert "short paragraph" in str(result["outputs"])
    assert "short paragraph" in await page.locator(".outcome .output").inner_text()
    assert await shown_ids(page) == await stream_ids(viewer_server, "demo-clarify", run_id)


async def test_a_stream_cut_mid_run_resumes_with_every_event_once_in_order(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id = await create_run(viewer_server, "demo-report", start=False, topic="resuming")
    async with CuttingProxy(viewer_server.settings.port, cut_after=6000) as proxy:
        await sign_in(page, proxy.base_url)
        await open_run(page, proxy.base_url, run_id)
        async with viewer_server.client(key=KEY) as http:
            await start_run(http, "demo-report", run_id)
        await page.locator("#banner", has_text="reconnecting").wait_for(timeout=WAIT_MS)
        await shot(page, "cut-reconnecting", store)
        await wait_until_ended(page)
        await shot(page, "cut-resumed", store)

    expected = await stream_ids(viewer_server, "demo-report", run_id)
    assert proxy.cut
    assert len(proxy.stream_requests) >= 2
    resumed_from = int(proxy.stream_requests[1]["last-event-id"])
    assert 0 < resumed_from < expected[-1]
    assert await shown_ids(page) == expected
    assert await page.locator("#banner").is_hidden()


async def test_a_finished_run_replays_at_max_speed_and_the_scrubber_jumps_to_an_event(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id = await create_run(viewer_server, "demo-agentic", topic="tides")
    expected = await stream_ids(viewer_server, "demo-agentic", run_id)
    await sign_in(page, viewer_server.base_url)
    await open_run(page, viewer_server.base_url, run_id)
    await wait_until_ended(page)
    assert await page.locator(".decisions li").count() > 0
    assert await page.locator(".visit").count() > len(set(await page.eval_on_selector_all(
        ".visit", "cards => cards.map(c => c.dataset.nodeId)")))

    await page.get_by_role("button", name="Replay").click()
    await page.get_by_role("button", name="Play max").click()
    await page.locator('#run[data-replay-done="true"]').wait_for(timeout=WAIT_MS)
    assert await shown_ids(page) == expected
    await shot(page, "replay-done", store)

    middle = expected[len(expected) // 2]
    await page.get_by_label("Jump to event id").fill(str(middle))
    await page.get_by_label("Jump to event id").press("Enter")
    await page.locator(f'#run[data-replay-at="{middle}"]').wait_for(timeout=WAIT_MS)
    assert await shown_ids(page) == [i for i in expected if i <= middle]
    await shot(page, "replay-jumped", store)

    await page.set_viewport_size({"width": 390, "height": 844})
    await page.get_by_role("button", name="Play 10x").click()
    await page.locator('#run[data-replay-done="true"]').wait_for(timeout=WAIT_MS)
    assert await shown_ids(page) == expected
    await shot(page, "replay-done-phone", store)


async def test_the_run_list_filters_by_status_pages_by_cursor_and_links_to_a_shareable_run_url(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    finished = await create_run(viewer_server, "demo-report")
    await stream_ids(viewer_server, "demo-report", finished)
    for _ in range(21):
        await create_run(viewer_server, "demo-report", start=False)
    await sign_in(page, viewer_server.base_url)
    rows = page.locator("table.runs tbody tr[data-run-id]")
    await rows.nth(19).wait_for(timeout=WAIT_MS)
    assert "demo-report" in await page.locator(".workflows").inner_text()
    await shot(page, "list-first-page", store)

    await page.get_by_role("button", name="Older").click()
    await page.locator("table.runs tbody tr[data-run-id]", has_text="SUCCESS").wait_for(timeout=WAIT_MS)
    assert await rows.count() == 2
    await page.get_by_role("button", name="Newer").click()
    await rows.nth(19).wait_for(timeout=WAIT_MS)

    await page.get_by_label("SUCCESS").check()
    await page.get_by_role("button", name="Apply").click()
    await page.locator(f'tr[data-run-id="{finished}"]').wait_for(timeout=WAIT_MS)
    await page.wait_for_function("document.querySelectorAll('table.runs tbody tr[data-run-id]').length === 1")
    await page.set_viewport_size({"width": 390, "height": 844})
    await shot(page, "list-success-phone", store)
    await page.get_by_label("SUCCESS").uncheck()
    await page.get_by_role("button", name="Apply").click()
    await rows.nth(19).wait_for(timeout=WAIT_MS)
    await shot(page, "list-first-page-phone", store)
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    assert await page.locator(".table-wrap").first.evaluate("wrap => wrap.scrollWidth <= wrap.clientWidth")
    await page.get_by_label("SUCCESS").check()
    await page.get_by_role("button", name="Apply").click()
    await rows.nth(1).wait_for(state="detached", timeout=WAIT_MS)

    await page.locator(f'tr[data-run-id="{finished}"] a').focus()
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"**/ui/runs/{finished}")
    await wait_until_ended(page)
    await page.reload()
    await wait_until_ended(page)
    assert await page.locator(".visit").count() == 5


async def test_a_created_run_is_started_from_the_page_and_a_waiting_one_is_cancelled_from_it(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id = await create_run(viewer_server, "demo-report", start=False, topic="tides")
    await sign_in(page, viewer_server.base_url)
    await open_run(page, viewer_server.base_url, run_id)
    start = page.get_by_role("button", name="Start")
    cancel = page.get_by_role("button", name="Cancel")
    await page.locator("header.run-head button:enabled", has_text="Start").wait_for(timeout=WAIT_MS)
    await start.click()
    await wait_until_ended(page)
    assert await start.is_disabled() and await cancel.is_disabled()
    assert (await run_result(viewer_server, "demo-report", run_id))["status"] == "SUCCESS"

    waiting = await create_run(viewer_server, "demo-clarify", topic="tides")
    await open_run(page, viewer_server.base_url, waiting)
    await page.get_by_role("region", name="Question").wait_for(timeout=WAIT_MS)
    assert await start.is_disabled()
    await cancel.click()
    await wait_until_ended(page)
    await shot(page, "cancelled-from-the-page", store)
    result = await run_result(viewer_server, "demo-clarify", waiting)
    assert result["status"] == "FAILED" and result["cancelled"] is True


async def test_runs_waiting_for_an_answer_are_listed_first_with_since_when(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    waiting = await create_run(viewer_server, "demo-clarify")
    async with viewer_server.client(key=KEY) as http:
        for _ in range(200):
            state = (await http.get(f"/api/v1/runs/{waiting}/state")).json()["data"]
            if state["currentPause"] is not None:
                break
            await asyncio.sleep(0.05)
    newer = await create_run(viewer_server, "demo-report", start=False)
    await sign_in(page, viewer_server.base_url)
    first = page.locator("section.waiting table.waiting-runs tbody tr[data-run-id]")
    await first.first.wait_for(timeout=WAIT_MS)
    assert await first.count() == 1 and await first.first.get_attribute("data-run-id") == waiting
    assert await page.locator("section.waiting time").get_attribute("datetime")
    listed = page.locator("table.runs tbody tr[data-run-id]")
    await listed.first.wait_for(timeout=WAIT_MS)
    assert await listed.first.get_attribute("data-run-id") == newer
    assert "waiting for an answer" in await page.locator(f'table.runs tr[data-run-id="{waiting}"]').inner_text()
    await shot(page, "list-waiting-first", store)


async def test_an_erased_run_is_shown_as_erased_with_the_same_events_and_none_of_its_content(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    run_id = await create_run(viewer_server, "demo-report", topic="a secret topic")
    ids = await stream_ids(viewer_server, "demo-report", run_id)
    async with viewer_server.client(key=KEY) as http:
        erased = await http.delete(f"/api/v1/workflows/demo-report/runs/{run_id}")
    assert erased.status_code == 200, erased.text
    await sign_in(page, viewer_server.base_url)
    listed = page.locator(f'tr[data-run-id="{run_id}"] .badge-erased')
    await listed.wait_for(timeout=WAIT_MS)
    await open_run(page, viewer_server.base_url, run_id)
    await wait_until_ended(page)
    await page.locator('#run[data-erased="true"]').wait_for(timeout=WAIT_MS)
    await shot(page, "erased", store)
    assert await shown_ids(page) == ids
    outcome = await page.locator(".outcome").inner_text()
    assert "ERASED" in outcome and "content was erased on " in outcome
    assert "secret topic" not in await page.locator("#run").inner_text()
    assert await page.locator(".outcome .download").count() == 0
