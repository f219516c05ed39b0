"""The gateway key never leaves its environment variable: not in settings, logs, events, streams or API answers."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from uuid import UUID

import msgspec
import pytest

from engine.hermes.gateways import HermesGateway
from engine.settings import EngineSettings
from tests.support.engine_runs import edge, events_of, node, wait_until, workflow
from tests.support.hermes_gateway import KEY_ENV
from tests.support.server import RunningServer, server_settings
from tests.support.sse import read_stream

pytestmark = pytest.mark.timeout(600)
"""The first test to need the gateway may install it (a minute or two) and start it."""


@pytest.fixture
async def hermes_server(keyed_gateway, store, tmp_path):
    """A real server whose one gateway is the test gateway; it publishes `hermes-secret`."""
    gateway = HermesGateway(id="test", base_url=keyed_gateway.base_url, api_key_env=KEY_ENV, auto_approve=False)
    settings = server_settings(store, tmp_path / "data")
    settings = replace(settings, engine=replace(EngineSettings(), hermes_gateways=(gateway,)))
    server = RunningServer(settings)
    await server.start()
    work = node("work", "agent", backend="hermes_remote", prompt="Clean up {{dir}}")
    out = node("out", "output", outputs=[{"name": "answer", "value": "{{work.text}}"}])
    await server.services.catalogue.publish(workflow(
        "hermes-secret", [node("input", "userInput", inputs=[{"name": "dir"}]), work, out], [edge("input", "work"), edge("work", "out")]))
    yield server
    await server.stop()


async def test_the_gateway_key_appears_in_no_setting_log_event_stream_or_answer(
        hermes_server, keyed_gateway, hermes_model, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    hermes_model.will_run_command(f"rm -rf {tmp_path / 'nothing'}")
    hermes_model.will_stream_text("Refused, so nothing was removed.")
    seen: list[str] = [repr(hermes_server.settings)]
    async with hermes_server.client() as client:
        created = (await client.post("/api/v1/workflows/hermes-secret/runs",
                                     json={"variables": {"dir": str(tmp_path)}})).json()["data"]
        links = created["links"]
        seen.append((await client.post(links["start"])).text)
        got = await read_stream(client, links["stream"])
        run_id = created["runId"]
        await wait_until(hermes_server.services, UUID(run_id), timeout=120)
        for path in (links["result"], f"/api/v1/runs/{run_id}/state", f"/api/v1/runs/{run_id}/nodes/work/logs",
                     f"/api/v1/runs/{run_id}/audit", "/healthz", "/api/v1/workflows", "/schema/openapi.json"):
            seen.append((await client.get(path)).text)
    events = await events_of(hermes_server.services, UUID(run_id))
    seen += [json.dumps(got.data), repr(got), caplog.text, msgspec.json.encode(events).decode()]
    assert got.ended and any("hermes_remote:approval" in text for text in seen)
    assert [text for text in seen if keyed_gateway.key in text] == []
