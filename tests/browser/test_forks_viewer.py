"""Forks in the run viewer (real Chromium, real server, both stores): fork from a visit card, re-run a failed run,
and the links between a fork and its source."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

from domain.run import RunStatus
from tests.browser.support import KEY, WAIT_MS, create_run, open_run, shot, sign_in, wait_until_ended
from tests.support.engine_runs import wait_until
from tests.support.server import RunningServer

RUN_URL = re.compile(r".*/ui/runs/([0-9a-f]{32})$")


async def new_run_id(page: Any, other_than: str) -> str:
    """The run the page went to (its URL changed from `other_than`'s)."""
    await page.wait_for_url(lambda url: RUN_URL.match(url) is not None and other_than not in url, timeout=WAIT_MS)
    found = RUN_URL.match(page.url)
    assert found is not None
    await page.locator(f'#run[data-run-id="{found.group(1)}"][data-stream]').wait_for(timeout=WAIT_MS)
    return found.group(1)


async def test_forking_from_a_visit_card_opens_the_fork_with_its_copies_marked_and_links_both_ways(
    page: Any, viewer_server: RunningServer, store: str
) -> None:
    source_id = await create_run(viewer_server, "demo-report", topic="tides")
    await wait_until(viewer_server.services, UUID(source_id), RunStatus.SUCCEEDED)
    await sign_in(page, viewer_server.base_url)
    await open_run(page, viewer_server.base_url, source_id)
    await wait_until_ended(page)
    summary = page.locator('.visit[data-node-id="summary"]')
    await summary.locator("summary").first.click()
    await summary.get_by_role("button", name="Fork from here").click()
    fork_id = await new_run_id(page, source_id)
    await page.locator('.visit[data-node-id="research"][data-copied="true"]').wait_for(timeout=WAIT_MS)
    assert await page.locator('#run[data-status="CREATED"]').count() == 1
    origin = page.locator(".origin")
    assert "Forked from run" in await origin.inner_text()
    assert await origin.get_attribute("data-source-run-id") == source_id
    await shot(page, "fork-created", store)

    await page.get_by_role("button", name="Start").click()
    await wait_until_ended(page)
    await page.locator('.visit[data-node-id="report"][data-status="SUCCESS"]').wait_for(timeout=WAIT_MS)
    assert await page.locator('.visit[data-node-id="summary"][data-copied="false"]').count() == 1
    assert await page.locator('.visit[data-copied="true"]').count() == 2
    await shot(page, "fork-ended", store)

    await origin.get_by_role("link").click()
    await page.locator(f'#run[data-run-id="{source_id}"][data-stream]').wait_for(timeout=WAIT_MS)
    forks = page.get_by_role("region", name="Forks")
    await forks.locator(f'li[data-run-id="{fork_id}"]').wait_for(timeout=WAIT_MS)
    await page.get_by_role("link", name="All runs").click()
    listed = page.locator(f'tr[data-run-id="{fork_id}"] .fork-of')
    await listed.wait_for(timeout=WAIT_MS)
    assert source_id[:12] in await listed.inner_text()


async def test_a_cancelled_run_is_re_run_from_its_page(page: Any, viewer_server: RunningServer, store: str) -> None:
    run_id = await create_run(viewer_server, "demo-report", start=False, topic="tides")
    async with viewer_server.client(key=KEY) as http:
        await http.post(f"/api/v1/workflows/demo-report/runs/{run_id}/cancel")
    await wait_until(viewer_server.services, UUID(run_id), RunStatus.CANCELLED)
    await sign_in(page, viewer_server.base_url)
    await open_run(page, viewer_server.base_url, run_id)
    await wait_until_ended(page)
    await page.get_by_role("button", name="Re-run").click()
    rerun_id = await new_run_id(page, run_id)
    assert "Re-run of run" in await page.locator(".origin").inner_text()
    await page.get_by_role("button", name="Start").click()
    await wait_until_ended(page)
    await page.locator('#run[data-status="SUCCESS"]').wait_for(timeout=WAIT_MS)
    assert await page.get_by_role("button", name="Re-run").is_disabled()
    await shot(page, "rerun-ended", store)
    assert rerun_id != run_id
