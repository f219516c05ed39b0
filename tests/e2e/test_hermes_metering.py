"""Every gateway run is metered like a model call: one record in the log, counted in GET run, the listing and
/metrics; against the real gateway (hermes-agent 0.19.0), over real HTTP."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest

from engine.hermes.gateways import HermesGateway
from tests.support.engine_runs import edge, engine_settings, node, workflow
from tests.support.hermes_gateway import KEY_ENV, Gateway
from tests.support.server import RunningServer

pytestmark = pytest.mark.timeout(600)
"""The first test to need the gateway may install it (a minute or two) and start it."""
FLOW = "hermes-metered"


@pytest.fixture
async def metered_server(keyed_gateway: Gateway, store: str, tmp_path) -> AsyncIterator[RunningServer]:
    """A real server whose one gateway is the test gateway; it publishes the remote workflow."""
    gateway = HermesGateway(id="test", base_url=keyed_gateway.base_url, api_key_env=KEY_ENV)
    server = await RunningServer(engine_settings(store, tmp_path / "data", load_demos=False,
                                                 hermes_gateways=(gateway,))).start()
    work = node("work", "agent", backend="hermes_remote", prompt="Greet {{who}}")
    out = node("out", "output", outputs=[{"name": "answer", "value": "{{work.text}}"}])
    await server.services.catalogue.publish(workflow(
        FLOW, [node("input", "userInput", inputs=[{"name": "who"}]), work, out], [edge("input", "work"), edge("work", "out")]))
    yield server
    await server.stop()


async def run_to_end(client: httpx.AsyncClient) -> tuple[str, dict]:
    """Create and start a run of FLOW; its id and `GET run` once it ended."""
    run_id = (await client.post(f"/api/v1/workflows/{FLOW}/runs", json={"variables": {"who": "Ada"}})).json()["data"]["runId"]
    assert (await client.post(f"/api/v1/workflows/{FLOW}/runs/{run_id}/start")).status_code == 200
    for _ in range(1200):
        data = (await client.get(f"/api/v1/workflows/{FLOW}/runs/{run_id}")).json()["data"]
        if data["status"] in ("SUCCESS", "FAILED"):
            return run_id, data
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} never ended")


async def remote_ends(client: httpx.AsyncClient, run_id: str) -> list[dict]:
    lines = (await client.get(f"/api/v1/runs/{run_id}/events")).content.splitlines()
    return [event for event in map(msgspec.json.decode, lines) if event["type"] == "RemoteRunEnded"]


async def metric(client: httpx.AsyncClient, name: str, **labels: str) -> float:
    """One sample of /metrics (0 when it is not there yet)."""
    text = (await client.get("/metrics")).text
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        found = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if found and ",".join(sorted(found.group(1).split(","))) == wanted:
            return float(found.group(2))
    return 0.0


async def listed(client: httpx.AsyncClient, run_id: str) -> dict:
    """The run's row of the listing, once the read model has its last position."""
    for _ in range(200):
        items = (await client.get("/api/v1/runs", params={"workflow": FLOW, "limit": 200})).json()["data"]["items"]
        row = next((item for item in items if item["runId"] == run_id), None)
        if row is not None and row["status"] in ("SUCCESS", "FAILED"):
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} is not listed as ended")


async def gateway_usage(gateway: Gateway, remote_run_id: str) -> dict:
    async with httpx.AsyncClient(base_url=gateway.base_url, headers={"Authorization": f"Bearer {gateway.key}"}) as client:
        return (await client.get(f"/v1/runs/{remote_run_id}")).json()["usage"]


@pytest.mark.store
async def test_a_gateway_run_is_one_record_counted_in_get_run_the_listing_and_metrics(
        metered_server, keyed_gateway, hermes_model):
    hermes_model.will_stream_text("Hello ", "Ada!")
    async with metered_server.client() as client:
        runs_before = await metric(client, "flowtrail_gateway_runs_total", gateway="test", outcome="completed")
        prompt_before = await metric(client, "flowtrail_gateway_tokens_total", gateway="test", kind="prompt")
        completion_before = await metric(client, "flowtrail_gateway_tokens_total", gateway="test", kind="completion")
        run_id, data = await run_to_end(client)
        (end,) = await remote_ends(client, run_id)
        usage = await gateway_usage(keyed_gateway, end["remote_run_id"])
        row = await listed(client, run_id)
        runs_after = await metric(client, "flowtrail_gateway_runs_total", gateway="test", outcome="completed")
        prompt_after = await metric(client, "flowtrail_gateway_tokens_total", gateway="test", kind="prompt")
        completion_after = await metric(client, "flowtrail_gateway_tokens_total", gateway="test", kind="completion")
    tokens = (usage["input_tokens"], usage["output_tokens"])
    assert data["status"] == "SUCCESS" and tokens[0] > 0 and tokens[1] > 0
    assert (end["gateway_id"], end["attempt"], end["outcome"]) == ("test", 1, "completed")
    assert end["session_id"].startswith(f"flowtrail-{run_id}-") and end["duration_ms"] > 0
    assert (end["prompt_tokens"], end["completion_tokens"]) == tokens
    assert (data["usage"]["promptTokens"], data["usage"]["completionTokens"]) == tokens
    assert (row["promptTokens"], row["completionTokens"]) == tokens
    assert (runs_after - runs_before, prompt_after - prompt_before, completion_after - completion_before) == (1, *tokens)
    assert "remoteWorkMayBeRunning" not in data


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_a_gateway_run_that_failed_is_counted_by_its_reason(metered_server, hermes_model):
    hermes_model.will_fail(401, "the model's key was revoked", "invalid_request_error")
    async with metered_server.client() as client:
        before = await metric(client, "flowtrail_gateway_failures_total", gateway="test", reason="run_failed")
        run_id, data = await run_to_end(client)
        (end,) = await remote_ends(client, run_id)
        after = await metric(client, "flowtrail_gateway_failures_total", gateway="test", reason="run_failed")
    assert data["status"] == "FAILED" and (end["outcome"], end["reason"]) == ("failed", "run_failed")
    assert after - before == 1
