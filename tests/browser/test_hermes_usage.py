"""The viewer shows what Hermes gateway runs cost, and warns when remote work may still be running (real gateway)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine.hermes.gateways import HermesGateway
from tests.browser.support import KEY, WAIT_MS, create_run, open_run, run_result, shot, sign_in
from tests.fakes.hermes import FakeGatewayModel, GatewayProxy
from tests.support.engine_runs import edge, engine_settings, node, workflow
from tests.support.hermes_gateway import KEY_ENV, Gateway
from tests.support.server import RunningServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.parametrize("store", ["sqlite"], indirect=True)]
"""The viewer reads GET run and the listing, whose token sums are checked on both stores in tests/e2e."""


def remote_flow(name: str, gateway: str) -> dict:
    work = node("work", "agent", backend="hermes_remote", gateway=gateway, prompt="Greet {{topic}}")
    out = node("out", "output", outputs=[{"name": "answer", "value": "{{work.text}}"}])
    return workflow(name, [node("input", "userInput", inputs=[{"name": "topic"}]), work, out],
                    [edge("input", "work"), edge("work", "out")])


@pytest.fixture
async def hermes_viewer(keyed_gateway: Gateway, store: str, tmp_path: Path) -> AsyncIterator[RunningServer]:
    """A server with the gateway twice: `test` as it is, `stubborn` behind a proxy that keeps stops from it."""
    proxy = GatewayProxy(int(keyed_gateway.base_url.rsplit(":", 1)[1]), refuse_stop="swallow")
    await proxy.start()
    gateways = (HermesGateway(id="test", base_url=keyed_gateway.base_url, api_key_env=KEY_ENV),
                HermesGateway(id="stubborn", base_url=f"http://127.0.0.1:{proxy.port}", api_key_env=KEY_ENV,
                              stop_confirm_seconds=1.0))
    server = await RunningServer(engine_settings(store, tmp_path / "data", load_demos=False,
                                                 hermes_gateways=gateways)).start()
    await server.services.catalogue.publish(remote_flow("hermes-greet", "test"))
    await server.services.catalogue.publish(remote_flow("hermes-stubborn", "stubborn"))
    yield server
    await server.stop()
    await proxy.stop()


async def test_a_hermes_runs_tokens_are_shown_on_its_page_and_in_the_run_list(
        page: Any, hermes_viewer: RunningServer, hermes_model: FakeGatewayModel, store: str) -> None:
    hermes_model.will_stream_text("Hello tides!")
    run_id = await create_run(hermes_viewer, "hermes-greet")
    await sign_in(page, hermes_viewer.base_url)
    await open_run(page, hermes_viewer.base_url, run_id)
    usage_line = page.locator(".outcome .usage")
    await usage_line.wait_for(timeout=WAIT_MS)
    usage = (await run_result(hermes_viewer, "hermes-greet", run_id))["usage"]
    assert usage["promptTokens"] > 0 and usage["completionTokens"] > 0
    assert await usage_line.get_attribute("data-prompt-tokens") == str(usage["promptTokens"])
    assert await usage_line.get_attribute("data-completion-tokens") == str(usage["completionTokens"])
    assert await page.locator(".outcome .remote-warning").count() == 0
    await shot(page, "hermes-usage", store)
    await page.goto(f"{hermes_viewer.base_url}/ui/")
    cell = page.locator(f'tr[data-run-id="{run_id}"] td.tokens')
    await cell.wait_for(timeout=WAIT_MS)
    assert await cell.inner_text() == f"{usage['promptTokens']} / {usage['completionTokens']}"


async def test_a_run_whose_gateway_never_confirmed_its_stop_warns_that_remote_work_may_still_run(
        page: Any, hermes_viewer: RunningServer, hermes_model: FakeGatewayModel, store: str) -> None:
    hermes_model.will_hang_after("Thinking it over")
    run_id = await create_run(hermes_viewer, "hermes-stubborn")
    while not hermes_model.streamed:
        await asyncio.sleep(0.05)
    async with hermes_viewer.client(key=KEY) as http:
        cancelled = await http.post(f"/api/v1/workflows/hermes-stubborn/runs/{run_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
    await sign_in(page, hermes_viewer.base_url)
    await open_run(page, hermes_viewer.base_url, run_id)
    warning = page.locator(".outcome .remote-warning")
    await warning.wait_for(timeout=WAIT_MS)
    assert "Remote work may still be running" in await warning.inner_text()
    assert (await run_result(hermes_viewer, "hermes-stubborn", run_id))["remoteWorkMayBeRunning"] is True
    await shot(page, "hermes-remote-warning", store)
