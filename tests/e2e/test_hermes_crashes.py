"""A Hermes visit survives kill -9 and a replica's death without running twice, against the real gateway (0.19.0).

flowtrail runs as a real server process (`flowtrail serve`); the gateway is the suite's real one, behind
a loopback proxy that logs every request, so a test counts the `POST /v1/runs` the gateway received.
The gateway's model pauses mid-answer until the test lets it go on, so the kill lands while the
gateway run is in flight, and that run then ends while another process is the one following it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import msgspec
import pytest

from tests.fakes.hermes import FakeGatewayModel, GatewayProxy
from tests.support.engine_runs import edge, node, workflow
from tests.support.hermes_gateway import KEY_ENV, Gateway
from tests.support.killable import KillableServer
from tests.support.process import ServerProcess

pytestmark = pytest.mark.timeout(600)
"""The first test to need the gateway may install it (a minute or two) and start it."""
FLOW = "hermes-crash"
QUICK_TAKEOVER = {"FLOWTRAIL_WORKER_HEARTBEAT_SECONDS": "0.5", "FLOWTRAIL_WORKER_STALL_SECONDS": "2"}
"""On PostgreSQL a dead process's job waits for the stall threshold before another process takes it over."""
END_BOUND_SECONDS = 120.0


def remote_flow_dir(directory: Path) -> Path:
    """A workflows directory with userInput -> remote agent `work` -> output `answer`."""
    work = node("work", "agent", backend="hermes_remote", prompt="Greet {{who}}")
    out = node("out", "output", outputs=[{"name": "answer", "value": "{{work.text}}"}])
    flow = workflow(FLOW, [node("input", "userInput", inputs=[{"name": "who"}]), work, out],
                    [edge("input", "work"), edge("work", "out")])
    directory.mkdir(parents=True)
    (directory / f"{FLOW}.json").write_text(json.dumps(flow))
    return directory


def gateway_env(proxy: GatewayProxy, gateway: Gateway, workflows: Path) -> dict[str, str]:
    """A server's environment: its one gateway behind the proxy, the key in KEY_ENV, the remote workflow."""
    gateways = [{"id": "test", "base_url": f"http://127.0.0.1:{proxy.port}", "api_key_env": KEY_ENV}]
    return {"FLOWTRAIL_HERMES_GATEWAYS": json.dumps(gateways), KEY_ENV: gateway.key,
            "FLOWTRAIL_WORKFLOWS_DIR": str(workflows), **QUICK_TAKEOVER}


async def started_run(client: httpx.AsyncClient) -> str:
    created = await client.post(f"/api/v1/workflows/{FLOW}/runs", json={"variables": {"who": "Ada"}})
    assert created.status_code == 201, created.text
    run_id = created.json()["data"]["runId"]
    assert (await client.post(f"/api/v1/workflows/{FLOW}/runs/{run_id}/start")).status_code == 200
    return str(run_id)


async def stored_events(client: httpx.AsyncClient, run_id: str) -> list[dict]:
    """The run's stored events as the events endpoint serves them."""
    answer = await client.get(f"/api/v1/runs/{run_id}/events")
    assert answer.status_code == 200, answer.text
    return [msgspec.json.decode(line) for line in answer.content.splitlines() if line.strip()]


async def until(check, what: str, timeout: float = 60.0):
    """Poll `check()` until it returns something true; fails naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            found = await check()
        except httpx.TransportError:
            found = None
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"never: {what}")


async def in_flight(client: httpx.AsyncClient, run_id: str, model: FakeGatewayModel) -> str:
    """Wait until the log names the visit's gateway run and the gateway's model is mid-answer; the run's id."""
    async def named() -> str | None:
        accepted = [e for e in await stored_events(client, run_id) if e["type"] == "RemoteRunAccepted"]
        return accepted[0]["remote_run_id"] if accepted and model.streamed else None
    return str(await until(named, "the gateway run is named in the log and in flight"))


async def ended(client: httpx.AsyncClient, run_id: str) -> dict:
    """The run's `GET run` once it ended."""
    async def finished() -> dict | None:
        data = (await client.get(f"/api/v1/workflows/{FLOW}/runs/{run_id}")).json()["data"]
        return data if data["status"] in ("SUCCESS", "FAILED") else None
    return dict(await until(finished, "the run ended", END_BOUND_SECONDS))


def remote_facts(events: list[dict]) -> list[tuple]:
    return [(e["type"], e.get("attempt"), e.get("outcome")) for e in events if e["type"].startswith("RemoteRun")]


async def check_one_submission(client: httpx.AsyncClient, run_id: str, gateway_run: str, proxy: GatewayProxy) -> dict:
    """The run succeeded with the answer the interrupted gateway run gave, and the gateway was asked for one run."""
    data = await ended(client, run_id)
    assert data["status"] == "SUCCESS", data["error"]
    assert data["outputs"]["data"] == {"answer": "Hello after the kill."}
    assert proxy.submissions() == ["POST /v1/runs HTTP/1.1"], proxy.requests
    assert any(line.startswith(f"GET /v1/runs/{gateway_run} ") for line in proxy.requests)
    events = await stored_events(client, run_id)
    assert remote_facts(events) == [("RemoteRunRequested", 1, None), ("RemoteRunAccepted", 1, None),
                                    ("RemoteRunEnded", 1, "completed")]
    return data


@pytest.fixture
async def proxy(keyed_gateway: Gateway):
    """The logging proxy in front of the real gateway."""
    started = GatewayProxy(int(keyed_gateway.base_url.rsplit(":", 1)[1]))
    await started.start()
    yield started
    await started.stop()


@pytest.mark.store
async def test_kill_9_during_a_hermes_visit_then_a_restart_follows_the_gateway_run_submitted_once(
        store, tmp_path, keyed_gateway, hermes_model, proxy, measured):
    hermes_model.will_pause_between(["Hello "], ["after ", "the kill."])
    env = gateway_env(proxy, keyed_gateway, remote_flow_dir(tmp_path / "workflows"))
    server = KillableServer(store, tmp_path / "data", **env)
    server.launch()
    try:
        await server.ready(timeout=60)
        async with server.client() as client:
            run_id = await started_run(client)
            gateway_run = await in_flight(client, run_id, hermes_model)
            killed = server.kill()
            server.launch()
            await server.ready(timeout=60)
            ready = asyncio.get_running_loop().time()
            hermes_model.open_gate()
            data = await check_one_submission(client, run_id, gateway_run, proxy)
            ended_at = asyncio.get_running_loop().time()
    finally:
        await server.stop()
    assert "Traceback" not in server.log()
    measured(f"kill -9 mid Hermes visit [{store.split(':')[0]}]: ready {ready - killed:.2f} s after the kill, "
             f"run ended {ended_at - killed:.2f} s after it; 1 POST /v1/runs, "
             f"{sum(1 for r in proxy.requests if r.startswith(f'GET /v1/runs/{gateway_run} '))} status reads; "
             f"usage {data['usage']}")


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
async def test_a_replica_that_takes_over_a_hermes_visit_from_a_killed_one_follows_the_gateway_run_submitted_once(
        store, tmp_path, keyed_gateway, hermes_model, proxy, measured):
    hermes_model.will_pause_between(["Hello "], ["after ", "the kill."])
    env = gateway_env(proxy, keyed_gateway, remote_flow_dir(tmp_path / "workflows"))
    servers = [ServerProcess(store, tmp_path / f"replica-{i}", **env) for i in range(2)]
    try:
        await asyncio.gather(*(server.start() for server in servers))
        async with servers[0].client() as first, servers[1].client() as second:
            run_id = await started_run(first)
            gateway_run = await in_flight(first, run_id, hermes_model)
            victim = await _executing(servers, run_id)
            survivor = second if victim is servers[0] else first
            assert victim.process is not None
            victim.process.kill()
            killed = asyncio.get_running_loop().time()
            hermes_model.open_gate()
            await check_one_submission(survivor, run_id, gateway_run, proxy)
            ended_at = asyncio.get_running_loop().time()
    finally:
        await asyncio.gather(*(server.stop() for server in servers), return_exceptions=True)
    measured(f"replica killed mid Hermes visit [postgres]: the other replica ended the run {ended_at - killed:.2f} s "
             "after the kill; 1 POST /v1/runs")


async def _executing(servers: list[ServerProcess], run_id: str) -> ServerProcess:
    """The replica executing the run (its /metrics say one run is active)."""
    async def which() -> ServerProcess | None:
        for server in servers:
            async with httpx.AsyncClient() as client:
                text = (await client.get(f"{server.base_url}/metrics")).text
            if "\nflowtrail_runs_active 1.0" in text:
                return server
        return None
    return await until(which, f"a replica executes run {run_id}")
