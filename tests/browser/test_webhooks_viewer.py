"""The run viewer's "Webhooks" panel (real Chromium, real server, both stores): a delivery that failed once and then
got through is shown with its attempts, its last answer and its state, and the panel follows it to the end."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from domain.run import RunStatus
from engine.webhooks.settings import WebhookSettings
from tests.browser.support import KEY, WAIT_MS, open_run, shot, sign_in
from tests.fakes.webhook_receiver import Reply, WebhookReceiver
from tests.support.engine_runs import engine_settings, wait_until
from tests.support.server import RunningServer

SECRET = "whsec_" + base64.b64encode(b"flowtrail-viewer-webhook-secret!").decode()
LOOPBACK = WebhookSettings(allow_http=True, allow_private=True, retry_first_seconds=1.0, retry_max_seconds=1.0)


async def test_the_panel_shows_a_delivery_that_failed_once_then_got_through(
    page: Any, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWTRAIL_WEBHOOK_SECRET", SECRET)
    receiver = await WebhookReceiver(script=[Reply(503)]).start()
    settings = dataclasses.replace(engine_settings(store, tmp_path / "data", load_demos=True), webhooks=LOOPBACK)
    server = await RunningServer(settings).start()
    try:
        async with server.client(key=KEY) as http:
            created = await http.post("/api/v1/workflows/demo-report/runs",
                                      json={"variables": {"topic": "tides"}, "webhook": receiver.url()})
            run_id = created.json()["data"]["runId"]
            await http.post(f"/api/v1/workflows/demo-report/runs/{run_id}/start")
        await wait_until(server.services, UUID(run_id), RunStatus.SUCCEEDED)
        await sign_in(page, server.base_url)
        await open_run(page, server.base_url, run_id)
        panel = page.get_by_role("region", name="Webhooks")
        delivered = panel.locator('tr[data-state="DELIVERED"]')
        await delivered.wait_for(timeout=WAIT_MS)
        cells = await delivered.locator("td").all_inner_texts()
        assert cells[:5] == ["run.completed", receiver.url(), "DELIVERED", "2", "200"]
        await shot(page, "webhooks-panel", store)
    finally:
        await server.stop()
        await receiver.stop()
