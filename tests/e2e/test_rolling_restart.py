"""A rolling restart repeats no model call: on SIGTERM a replica takes no new job, lets the visits in flight end
within its drain window, hands each run over at that visit boundary, says so in its log, and exits; the next replica
goes on from the log. What is still in a visit when the window closes is handed over then, and that visit runs again.
While it drains, a replica still answers requests but /readyz says it is not ready; on SQLite the run goes on at the
next start.

Real `flowtrail serve` processes on one PostgreSQL schema (three behind Debian's haproxy, health-checked on /readyz),
a fake OpenAI-compatible model on loopback that counts every request it gets, and scripted visits whose every play
the log records (one ModelCalled per play that ends).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path
from uuid import UUID

import httpx
import pytest

from domain import events as ev
from engine.store import EventStore, parse_database_url
from tests.fakes.openai_server import FakeOpenAI
from tests.support.haproxy import Haproxy
from tests.support.hopping_sse import Hopper
from tests.support.private_cluster import PrivateCluster, private_postgres
from tests.support.process import ServerProcess
from tests.support.replicas import replicas, runs_active, start_run, stream_path
from tests.support.sse import read_stream
from tests.support.stores import store_url

FLOW = "relay-flow"
RUNS = 30
SCRIPTED = ("draft", "check", "polish", "sign")
MODELLED = ("review", "summarise")
INTERRUPTED = "this visit was interrupted before it ended"
BOUND_SECONDS = 90
"""Bounds, not figures: the whole restart takes about 20 s on a quiet machine."""


def scripted(node_id: str, seconds: float) -> dict:
    return {"id": node_id, "type": "llm", "label": node_id, "data": {
        "model_id": "scripted", "prompt": "go",
        "script": [[{"status": f"{node_id} began"}, {"sleep": seconds}, {"text": f"{node_id} done"}]]}}


def modelled(node_id: str) -> dict:
    return {"id": node_id, "type": "llm", "label": node_id, "data": {"model_id": "fake", "prompt": f"{node_id} it"}}


def relay_flow(draft_seconds: float, scripted_seconds: float) -> dict:
    """A chain of visits, scripted and fake-model ones in turn (the first, `draft`, takes `draft_seconds`), then an
    output."""
    chain = [scripted("draft", draft_seconds), modelled("review"), scripted("check", scripted_seconds),
             modelled("summarise"), scripted("polish", scripted_seconds), scripted("sign", scripted_seconds)]
    nodes = [{"id": "input", "type": "userInput", "label": "in", "data": {"inputs": []}}, *chain,
             {"id": "out", "type": "output", "label": "out",
              "data": {"outputs": [{"name": "text", "type": "string", "value": "{{sign.text}}"}]}}]
    ids = ["input", *(n["id"] for n in chain), "out"]
    return {"name": FLOW, "displayName": "Relay", "mode": "DAG", "nodes": nodes,
            "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)]}


@pytest.fixture
async def slow_model():
    """A fake model that takes about a second to answer each request (and counts them)."""
    model = FakeOpenAI()
    model.will_stream_text(*(f"piece {i} " for i in range(8)), pace_seconds=0.12)
    await model.start()
    try:
        yield model
    finally:
        await model.stop()


def replica_env(tmp_path: Path, model: FakeOpenAI, *, scripted_seconds: float, drain_seconds: float,
                draft_seconds: float | None = None) -> dict[str, str]:
    folder = tmp_path / "flows"
    folder.mkdir(exist_ok=True)
    flow = relay_flow(scripted_seconds if draft_seconds is None else draft_seconds, scripted_seconds)
    (folder / f"{FLOW}.json").write_text(json.dumps(flow), encoding="utf-8")
    models = [{"id": "fake", "base_url": model.base_url, "model": "fake-model", "api_key_env": "FAKE_MODEL_KEY"}]
    return {"FLOWTRAIL_WORKFLOWS_DIR": str(folder), "FLOWTRAIL_MODELS": json.dumps(models),
            "FAKE_MODEL_KEY": "sk-fake", "FLOWTRAIL_DRAIN_SECONDS": str(drain_seconds),
            "FLOWTRAIL_LOAD_DEMOS": "false"}


def stored(url: str, run_id: str) -> list[ev.RunEvent]:
    store = EventStore(parse_database_url(url))
    try:
        return store.read_stream(UUID(hex=run_id))
    finally:
        store.close()


async def restart(server: ServerProcess) -> None:
    """SIGTERM, wait until the process exited (it drains first), start it again."""
    await server.stop()
    assert server.process is not None and server.process.returncode == 0, server.log()[-2000:]
    await server.start()


async def busy(server: ServerProcess) -> None:
    """Wait (a bounded time) until the replica executes some run, so its SIGTERM finds visits in flight."""
    for _ in range(100):
        if await runs_active(server):
            return
        await asyncio.sleep(0.05)


def model_calls(events: list[ev.RunEvent]) -> Counter[str]:
    return Counter(e.node_id for e in events if isinstance(e, ev.ModelCalled))


def visits(events: list[ev.RunEvent]) -> Counter[str]:
    return Counter(e.node_id for e in events if isinstance(e, ev.VisitStarted))


def visited_and_called_once(events: list[ev.RunEvent]) -> bool:
    """Every node visited once, every model visit made one call that ended, and every scripted play is in the log
    once (no visit ran again)."""
    once = dict.fromkeys((*SCRIPTED, *MODELLED), 1)
    return (visits(events) == Counter({"input": 1, "out": 1, **once}) and model_calls(events) == Counter(once)
            and played_once(events))


def played_once(events: list[ev.RunEvent]) -> bool:
    """Every scripted visit's play is in the log once: its opening line once, and no visit said it runs again."""
    lines = [e.content for e in events if isinstance(e, ev.NodeStreamed) and e.kind == "status"]
    return all(lines.count(f"{node} began") == 1 for node in SCRIPTED) and not any(INTERRUPTED in x for x in lines)


cluster = private_postgres


@pytest.fixture
def own_schema(cluster: PrivateCluster) -> str:
    """A fresh schema of the module's own cluster: three replicas hold about fifty connections, more than the shared
    cluster (max_connections 100) can spare while the other worker's tests use it."""
    return cluster.url(cluster.new_schema())


async def test_three_replicas_restarted_one_after_another_end_every_run_with_exact_streams_and_no_model_call_twice(
        own_schema, tmp_path, slow_model):
    env = replica_env(tmp_path, slow_model, scripted_seconds=2.5, drain_seconds=20)
    async with replicas(own_schema, tmp_path, 3, **env) as servers:
        balancer = await Haproxy([s.port for s in servers], tmp_path / "haproxy", check="/readyz").start()
        try:
            async with httpx.AsyncClient(base_url=balancer.base_url, headers={"X-API-Key": "test-key-all"},
                                         timeout=30.0) as client:
                run_ids = [await start_run(client, FLOW) for _ in range(RUNS)]
                followers = [Hopper([client], stream_path(FLOW, r), random.Random(i), take=(10**9, 10**9))
                             for i, r in enumerate(run_ids)]
                following = asyncio.gather(*(f.follow() for f in followers))
                for server in servers:
                    await busy(server)
                    await restart(server)
                await asyncio.wait_for(following, BOUND_SECONDS)
                statuses = Counter([(await client.get(f"/api/v1/runs/{r}/state")).json()["data"]["status"]
                                    for r in run_ids])
                for follower in followers:
                    assert not follower.endings("refused", "clean end without the terminal event"), follower.connections
                    whole = await read_stream(client, follower.path)
                    assert whole.ended and follower.ids == whole.ids
        finally:
            await balancer.stop()
    logs = [server.log() for server in servers]
    assert statuses == {"SUCCESS": RUNS}, statuses
    everything = {run_id: stored(own_schema, run_id) for run_id in run_ids}
    repeated = {run_id: (dict(visits(events)), dict(model_calls(events))) for run_id, events in everything.items()
                if not visited_and_called_once(events)}
    assert not repeated, repeated
    assert len(slow_model.requests) == sum(model_calls(e)[n] for e in everything.values() for n in MODELLED)
    assert len(slow_model.requests) == RUNS * len(MODELLED)
    handed = sum(log.count("handed over at a visit boundary") for log in logs)
    assert handed > 0 and not any("still in a visit when the drain window" in log for log in logs)
    reconnects = sum(len(f.connections) - 1 for f in followers)
    print(f"\n3 replicas restarted one after another while {RUNS} runs executed: every run SUCCESS, {handed} runs "
          f"handed over at a visit boundary, {len(slow_model.requests)} requests at the fake model = the calls the "
          f"log records = one per visit; {reconnects} stream reconnects through haproxy, every stream exact")


async def test_a_visit_longer_than_the_drain_window_is_handed_over_when_it_closes_and_runs_again_elsewhere(
        own_schema, tmp_path, slow_model):
    env = replica_env(tmp_path, slow_model, scripted_seconds=0.2, draft_seconds=6.0, drain_seconds=2)
    async with replicas(own_schema, tmp_path, 2, **env) as servers:
        async with servers[0].client() as client:
            run_id = await start_run(client, FLOW)
        for _ in range(200):
            active = [await runs_active(s) for s in servers]
            if any(active):
                break
            await asyncio.sleep(0.05)
        first, other = (servers[0], servers[1]) if active[0] else (servers[1], servers[0])
        async with httpx.AsyncClient(base_url=first.base_url, headers={"X-API-Key": "test-key-all"}) as stopping:
            assert first.process is not None
            first.process.terminate()
            ready, healthy, state = await while_draining(stopping, first, run_id)
        await asyncio.to_thread(first.process.wait, 30)
        async with other.client() as client:
            rest = await asyncio.wait_for(read_stream(client, stream_path(FLOW, run_id)), BOUND_SECONDS)
    assert ready == 503 and healthy == 200 and state == 200
    assert rest.ended and rest.events[-1] == "workflow_complete"
    assert f"run {run_id} was still in a visit when the drain window (2 s) closed" in first.log()
    events = stored(own_schema, run_id)
    lines = [e.content for e in events if isinstance(e, ev.NodeStreamed) and e.kind == "status"]
    assert sum(INTERRUPTED in line for line in lines) == 1 and visits(events)["draft"] == 1


async def while_draining(client: httpx.AsyncClient, server: ServerProcess, run_id: str) -> tuple[int, int, int]:
    """What the stopping replica answers on /readyz, /healthz and the run's state while it drains (0: it was gone)."""
    answers = (0, 0, 0)
    assert server.process is not None
    while server.process.poll() is None:
        try:
            answers = ((await client.get("/readyz")).status_code, (await client.get("/healthz")).status_code,
                       (await client.get(f"/api/v1/runs/{run_id}/state")).status_code)
        except httpx.TransportError:
            break
        if answers[0] == 503:
            break
        await asyncio.sleep(0.05)
    return answers


async def until_said(client: httpx.AsyncClient, run_id: str, line: str) -> None:
    """Follow the run's stream until a message carries `line`."""
    async with client.stream("GET", stream_path(FLOW, run_id), timeout=httpx.Timeout(10.0, read=BOUND_SECONDS)) as response:
        async for text in response.aiter_lines():
            if line in text:
                return
    raise AssertionError(f"the run's stream ended without {line!r}")


async def test_on_sqlite_a_stop_signal_lets_the_visit_end_and_the_run_goes_on_from_the_next_visit_after_a_restart(
        tmp_path, slow_model):
    url, _ = store_url("sqlite", tmp_path)
    server = ServerProcess(url, tmp_path / "data", **replica_env(tmp_path, slow_model, scripted_seconds=1.5,
                                                                    drain_seconds=20))
    await server.start()
    try:
        async with server.client() as client:
            run_id = await start_run(client, FLOW)
            await until_said(client, run_id, "draft began")
        await server.stop()
        assert server.process is not None and server.process.returncode == 0
        drained = stored(url, run_id)
        await server.start()
        async with server.client() as client:
            rest = await asyncio.wait_for(read_stream(client, stream_path(FLOW, run_id)), BOUND_SECONDS)
    finally:
        await server.stop()
    assert rest.ended and rest.events[-1] == "workflow_complete"
    assert visits(drained) == {"input": 1, "draft": 1} and isinstance(drained[-1], ev.VisitRecorded)
    assert visited_and_called_once(stored(url, run_id))
    assert len(slow_model.requests) == len(MODELLED)
    assert f"run {run_id}: handed over at a visit boundary" in server.log()
