"""PostgreSQL goes away mid-run (our connections killed, the cluster restarted or stopped for a while): a server
process needs no restart, requests answer `503 STORE_UNAVAILABLE` within a second instead of hanging or answering
500, the outage is logged once instead of a traceback per request, streams pause and resume exactly, runs finish,
and every run audits clean.

Every test runs on a private cluster on its own port (tests/support/private_cluster.py), never the shared one.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from flowtrail_client import FlowtrailClient
from scripts.audit import audit
from tests.support.private_cluster import PrivateCluster, private_postgres
from tests.support.process import ServerProcess
from tests.support.sse import Received, read_stream

PACE_SECONDS = "0.08"
"""The scripted model's pause between chunks: a demo report then takes about 12 s, long enough to span a fault."""
TOPICS = ("tides", "moons", "comets")
OUTAGE_SECONDS = 3.0
RUN_BOUND_SECONDS = 40
UNAVAILABLE_BOUND_SECONDS = 3.0
"""The issue asks for a 503 within a second; asserted with slack for a loaded machine, the real figure is printed."""
OUTAGE_LINE = "the event store is unavailable"


cluster = private_postgres
"""The module's private cluster (one for the whole module: making one takes about 3 s)."""


def outage_server(cluster: PrivateCluster, tmp_path, url: str | None = None, name: str = "data") -> ServerProcess:
    return ServerProcess(
        url or cluster.url(cluster.new_schema()), tmp_path / name, FLOWTRAIL_LOAD_DEMOS="true",
        FLOWTRAIL_SCRIPTED_PACE_SECONDS=PACE_SECONDS, FLOWTRAIL_STORE_REQUEST_TIMEOUT_SECONDS="1",
    )


def run_path(run_id: str) -> str:
    return f"/api/v1/workflows/demo-report/runs/{run_id}"


async def start_report(client: httpx.AsyncClient, topic: str) -> str:
    created = await client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": topic}})
    run_id: str = created.json()["data"]["runId"]
    assert (await client.post(f"{run_path(run_id)}/start")).status_code == 200
    return run_id


async def last_event_ids(client: httpx.AsyncClient) -> dict[str, int]:
    """Each run's last event id, from the listing (empty while the store is away)."""
    answer = await client.get("/api/v1/runs", params={"limit": 100})
    if answer.status_code != 200:
        return {}
    return {item["runId"]: item["lastEventId"] for item in answer.json()["data"]["items"]}


async def until_events(client: httpx.AsyncClient, run_ids: list[str], at_least: int) -> None:
    """Wait until every run has at least that many events."""
    for _ in range(400):
        found = await last_event_ids(client)
        if all(found.get(run_id, 0) >= at_least for run_id in run_ids):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the runs did not get going")


async def streams_of(client: httpx.AsyncClient, run_ids: list[str]) -> list[asyncio.Task[Received]]:
    return [asyncio.create_task(read_stream(client, f"{run_path(run_id)}/stream")) for run_id in run_ids]


async def assert_finished_exactly(server: ServerProcess, client: httpx.AsyncClient, run_id: str, live: Received) -> None:
    """The run succeeded, the live stream got every message once in order (the replay has the same ids), audit clean."""
    assert live.ended and live.events[-1] == "workflow_complete", live.events[-3:]
    replay = await read_stream(client, f"{run_path(run_id)}/stream")
    assert live.ids == replay.ids
    assert (await client.get(run_path(run_id))).json()["data"]["status"] == "SUCCESS"
    async with FlowtrailClient(server.base_url, "test-key-all") as auditor:
        assert await audit(auditor, run_id) == 0


def outage_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if OUTAGE_LINE in line]


async def test_our_connections_killed_mid_run_are_invisible_runs_finish_and_streams_are_exact(cluster, tmp_path):
    server = await outage_server(cluster, tmp_path).start()
    try:
        async with server.client() as client:
            run_ids = [await start_report(client, topic) for topic in TOPICS]
            streams = await streams_of(client, run_ids)
            await until_events(client, run_ids, 10)
            killed = 0
            for _ in range(3):
                killed += await asyncio.to_thread(cluster.terminate_backends)
                await asyncio.sleep(0.5)
            live = await asyncio.wait_for(asyncio.gather(*streams), RUN_BOUND_SECONDS)
            for run_id, received in zip(run_ids, live):
                await assert_finished_exactly(server, client, run_id, received)
    finally:
        await server.stop()
    print(f"\nterminated {killed} backends of the server in three rounds; {len(run_ids)} runs finished exactly")
    assert killed >= 3
    assert "Traceback" not in server.log()


async def test_a_cluster_restart_mid_run_pauses_the_streams_which_resume_exactly_and_the_runs_finish(cluster, tmp_path):
    server = await outage_server(cluster, tmp_path).start()
    reader = await outage_server(cluster, tmp_path, server.env["FLOWTRAIL_DATABASE_URL"], "reader").start()
    try:
        async with server.client() as client, reader.client() as other:
            run_ids = [await start_report(client, topic) for topic in TOPICS]
            streams = await streams_of(client, run_ids)
            followed = await streams_of(other, run_ids)  # through the other process's live tail
            await until_events(client, run_ids, 10)
            await asyncio.to_thread(cluster.restart)
            resumed = await seconds_until_appending(client, other)
            live = await asyncio.wait_for(asyncio.gather(*streams), RUN_BOUND_SECONDS)
            for run_id, received in zip(run_ids, live):
                await assert_finished_exactly(server, client, run_id, received)
            for received, through_tail in zip(live, await asyncio.wait_for(asyncio.gather(*followed), 10)):
                assert through_tail.ended and through_tail.ids == received.ids
    finally:
        await reader.stop()
        await server.stop()
    print(f"\nthe runs appended again {resumed:.2f} s after the restarted cluster accepted connections; "
          f"the streams through another process's live tail were exact too")
    for process in (server, reader):
        assert "Traceback" not in process.log()
        assert len(outage_lines(process.log())) <= 2


async def test_while_the_cluster_is_stopped_requests_answer_503_within_a_second_and_all_resumes_after(
    cluster, tmp_path,
):
    server = outage_server(cluster, tmp_path)
    await server.start()
    async with server.client() as client:
        created = await client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": "earlier"}})
        cold = created.json()["data"]["runId"]
    await server.stop()
    await server.start()  # the run created before is no longer in memory: reading it needs the store
    try:
        async with server.client() as client:
            run_ids = [await start_report(client, topic) for topic in TOPICS[:2]]
            streams = await streams_of(client, run_ids)
            await until_events(client, run_ids, 10)
            await asyncio.to_thread(cluster.stop)
            answers = await requests_during(client, cold, OUTAGE_SECONDS)
            await asyncio.to_thread(cluster.start)
            resumed = await seconds_until_appending(client)
            live = await asyncio.wait_for(asyncio.gather(*streams), RUN_BOUND_SECONDS)
            for run_id, received in zip(run_ids, live):
                await assert_finished_exactly(server, client, run_id, received)
            assert (await client.get(run_path(cold))).json()["data"]["status"] == "CREATED"
    finally:
        await server.stop()
    log = server.log()
    unavailable = [seconds for name, seconds, answer in answers if name != "readyz"]
    print(f"\n{len(answers)} requests during a {OUTAGE_SECONDS:g} s stop: 503 STORE_UNAVAILABLE in "
          f"{min(unavailable):.2f}-{max(unavailable):.2f} s; /readyz 503 within "
          f"{max(s for n, s, _ in answers if n == 'readyz'):.2f} s; runs moved on {resumed:.2f} s after the cluster "
          f"was back; {len(outage_lines(log))} outage log lines")
    for name, seconds, answer in answers:
        if name == "readyz":
            assert answer.status_code == 503 and answer.json()["code"] == "NOT_READY"
            continue
        assert answer.status_code == 503, (name, answer.status_code, answer.text)
        assert answer.json() == {"code": "STORE_UNAVAILABLE", "message": answer.json()["message"], "data": None}
        assert answer.headers["retry-after"] == "1"
        assert seconds < UNAVAILABLE_BOUND_SECONDS, (name, seconds)
    assert "Traceback" not in log
    assert len(outage_lines(log)) <= 2
    assert "the event store answers again" in log


async def appended(client: httpx.AsyncClient) -> float:
    """How many events the server process appended so far (its /metrics, which needs no store)."""
    text = (await client.get("/metrics")).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("flowtrail_events_appended_total"))


async def seconds_until_appending(*clients: httpx.AsyncClient) -> float:
    """From now until one of the servers appends its next event (on PostgreSQL any replica's job worker may be the
    one executing the runs)."""
    began, before = time.monotonic(), [await appended(client) for client in clients]
    while [await appended(client) for client in clients] == before:
        assert time.monotonic() - began < RUN_BOUND_SECONDS, "the runs did not move on after the store came back"
        await asyncio.sleep(0.02)
    return time.monotonic() - began


async def requests_during(client: httpx.AsyncClient, cold: str, seconds: float) -> list[tuple[str, float, httpx.Response]]:
    """Send requests that need the store (a create, a read of the cold run, the listing) and /readyz, in rounds."""
    answers: list[tuple[str, float, httpx.Response]] = []
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        for name, request in (
            ("create", lambda: client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": "x"}})),
            ("cold read", lambda: client.get(run_path(cold))),
            ("listing", lambda: client.get("/api/v1/runs")),
            ("readyz", lambda: client.get("/readyz")),
        ):
            began = time.monotonic()
            answer = await request()
            answers.append((name, time.monotonic() - began, answer))
    return answers
