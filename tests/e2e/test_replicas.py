"""Several replicas on one PostgreSQL share the runs; a second process on one SQLite file is refused.

Real server processes on loopback (and Debian's haproxy in front of three of them), a real
PostgreSQL schema per test, real SSE clients that reconnect with Last-Event-ID.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from uuid import UUID

import httpx
import pytest
from httpx_sse import aconnect_sse

from domain import events as ev
from domain import run as decide
from domain.run import fold
from engine.clock import utcnow
from engine.store import EventStore, parse_database_url
from flowtrail_client import FlowtrailClient
from scripts.audit import audit
from tests.support.haproxy import Haproxy
from tests.support.process import ROOT, ServerProcess
from tests.support.replicas import REPLICA_ENV, STALL_SECONDS, replicas, runs_active
from tests.support.sse import read_stream
from tests.support.stores import store_url

TERMINAL_EVENTS = ("workflow_complete", "workflow_error")
TRUE_ENDS = ("SUCCESS", "FAILED")
"""External statuses of ended runs (a cancelled run is FAILED with `cancelled` true)."""


def path(run_id: str, tail: str = "") -> str:
    return f"/api/v1/workflows/demo-report/runs/{run_id}{tail}"


async def create(client: httpx.AsyncClient, topic: str) -> str:
    created = await client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": topic}})
    assert created.status_code == 201, created.text
    return created.json()["data"]["runId"]


async def start(client: httpx.AsyncClient, topic: str) -> str:
    run_id = await create(client, topic)
    started = await client.post(path(run_id, "/start"))
    assert started.status_code == 200, started.text
    return run_id


async def status(client: httpx.AsyncClient, run_id: str) -> str:
    return (await client.get(f"/api/v1/runs/{run_id}/state")).json()["data"]["status"]


@dataclass
class Follower:
    """A client following one run's stream to its end, reconnecting with Last-Event-ID whenever it is cut."""

    run_id: str
    ids: list[int] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    reconnects: int = 0
    got: asyncio.Event = field(default_factory=asyncio.Event)

    async def follow(self, client: httpx.AsyncClient) -> Follower:
        while True:
            headers = {"Accept": "text/event-stream"}
            if self.ids:
                headers["Last-Event-ID"] = str(self.ids[-1])
            try:
                async with aconnect_sse(client, "GET", path(self.run_id, "/stream"), headers=headers,
                                        timeout=httpx.Timeout(10.0, read=30.0)) as source:
                    if source.response.status_code == 200:
                        async for sse in source.aiter_sse():
                            if not sse.data:
                                continue
                            self.ids.append(int(sse.id))
                            self.events.append(sse.event)
                            if len(self.ids) >= 3:
                                self.got.set()
                            if sse.event in TERMINAL_EVENTS:
                                return self
            except httpx.HTTPError:
                pass
            self.reconnects += 1
            await asyncio.sleep(0.2)


def stored_events(url: str, run_id: str) -> list[ev.RunEvent]:
    store = EventStore(parse_database_url(url))
    try:
        return store.read_stream(UUID(hex=run_id))
    finally:
        store.close()


def store_a_start_without_its_job(url: str, run_id: str) -> None:
    """What a process leaves when it stored a run's start and died (or lost the job queue) before queueing its job."""
    store = EventStore(parse_database_url(url))
    try:
        run = fold(store.read_stream(UUID(hex=run_id)))
        assert run is not None
        store.append_to_stream([decide.start_run(run, utcnow())])
    finally:
        store.close()


def model_calls(events: list[ev.RunEvent]) -> Counter[str]:
    """Model calls per node."""
    return Counter(e.node_id for e in events if isinstance(e, ev.ModelCalled))


def assert_true_end(events: list[ev.RunEvent]) -> None:
    """Ended, and a failure says the run was interrupted (the only failure a kill may cause)."""
    last = events[-1]
    assert isinstance(last, ev.RunCompleted | ev.RunFailed | ev.RunCancelled), type(last).__name__
    if isinstance(last, ev.RunFailed):
        assert "stopped while this visit was running" in last.error or "interrupted" in last.error, last.error


async def test_three_replicas_behind_haproxy_end_every_run_truly_with_exact_streams_when_one_is_killed(
        postgres, tmp_path):
    async with replicas(postgres, tmp_path, 3) as servers:
        balancer = await Haproxy([s.port for s in servers], tmp_path / "haproxy").start()
        try:
            async with httpx.AsyncClient(base_url=balancer.base_url, headers={"X-API-Key": "test-key-all"},
                                         timeout=30.0) as client:
                run_ids = list(await asyncio.gather(*(start(client, f"topic {i}") for i in range(30))))
                followers = [Follower(run_id) for run_id in run_ids]
                following = [asyncio.create_task(f.follow(client)) for f in followers]
                await asyncio.wait_for(asyncio.gather(*(f.got.wait() for f in followers)), 30)
                active = [await runs_active(s) for s in servers]
                victim = servers[active.index(max(active))]
                assert victim.process is not None
                victim.process.kill()
                killed_at = time.perf_counter()
                await asyncio.wait_for(asyncio.gather(*following), 35)
                print(f"\nkilled a replica executing {max(active)} of 30 runs (active per replica: {active}); "
                      f"every stream ended {time.perf_counter() - killed_at:.1f} s later, "
                      f"{sum(f.reconnects for f in followers)} reconnects through haproxy")
                for follower in followers:
                    fresh = await read_stream(client, path(follower.run_id, "/stream"))
                    assert follower.ids == fresh.ids, follower.run_id
                    assert len(set(follower.ids)) == len(follower.ids)
                    assert await status(client, follower.run_id) in TRUE_ENDS
                ends = Counter()
                for run_id in run_ids:
                    assert_true_end(stored_events(postgres, run_id))
                    ends[type(stored_events(postgres, run_id)[-1]).__name__] += 1
                print(f"ends: {dict(ends)}")
                async with FlowtrailClient(balancer.base_url, "test-key-all") as auditor:
                    for run_id in run_ids:
                        assert await audit(auditor, run_id) == 0, run_id
        finally:
            await balancer.stop()


async def test_a_double_start_across_two_servers_answers_one_success_and_one_409_never_500(postgres, tmp_path):
    async with replicas(postgres, tmp_path, 2) as (first, second):
        async with first.client() as a, second.client() as b:
            run_ids = [await create(a, f"topic {i}") for i in range(10)]
            for run_id in run_ids:
                answers = await asyncio.gather(a.post(path(run_id, "/start")), b.post(path(run_id, "/start")))
                codes = sorted(r.status_code for r in answers)
                assert codes == [200, 409], [r.text for r in answers]
                loser = next(r for r in answers if r.status_code == 409)
                assert loser.json()["code"] == "RUN_ALREADY_STARTED"


SLOW_PACE = "0.06"
"""A demo report then takes about 10 s: it is still executing once a second server has started on a loaded machine
(at pace 0.02 it sometimes ended first, and a test meant for a run in flight watched a finished one)."""


async def executing_on_first(url: str, tmp_path, **env: str):
    """A run executing on a first server (started alone), then a second server on the same store."""
    env = {**REPLICA_ENV, "FLOWTRAIL_SCRIPTED_PACE_SECONDS": SLOW_PACE, **env}
    first = await ServerProcess(url, tmp_path / "first", **env).start()
    client = first.client()
    run_id = await start(client, "tides")
    follower = Follower(run_id)
    following = asyncio.create_task(follower.follow(client))
    following.add_done_callback(lambda _: asyncio.ensure_future(client.aclose()))
    await asyncio.wait_for(follower.got.wait(), 20)
    second = await ServerProcess(url, tmp_path / "second", **env).start()
    assert not set(follower.events) & set(TERMINAL_EVENTS), "the run ended before the second server was up"
    return first, second, run_id, follower, following


async def test_a_cancel_through_b_of_a_run_a_executes_is_recorded_and_reaches_a_within_a_second(postgres, tmp_path):
    first, second, run_id, follower, following = await executing_on_first(
        postgres, tmp_path, FLOWTRAIL_SCRIPTED_PACE_SECONDS="0.05")
    try:
        assert await runs_active(first) == 1 and await runs_active(second) == 0
        async with second.client() as b:
            asked = time.perf_counter()
            answer = await b.post(path(run_id, "/cancel"))
            answered = time.perf_counter()
            assert answer.status_code == 200 and answer.json()["data"]["outcome"] == "REQUESTED", answer.text
            while not isinstance(stored_events(postgres, run_id)[-1], ev.RunCancelled):
                assert time.perf_counter() - answered < 5, "the cancel did not reach the executing server"
                await asyncio.sleep(0.02)
            reached = time.perf_counter() - answered
            await asyncio.wait_for(following, 10)
            run = (await b.get(path(run_id))).json()["data"]
            assert run["status"] == "FAILED" and run["cancelled"] is True, run
        print(f"\ncancel through B answered in {(answered - asked) * 1000:.0f} ms; "
              f"A had stopped the run {reached * 1000:.0f} ms later")
        assert follower.events[-1] == "workflow_error"
        assert isinstance(stored_events(postgres, run_id)[-1], ev.RunCancelled)
    finally:
        following.cancel()
        await asyncio.gather(first.stop(), second.stop(), return_exceptions=True)


async def test_restarting_one_of_two_servers_does_not_re_run_work_the_other_is_doing(postgres, tmp_path):
    first, second, run_id, follower, following = await executing_on_first(postgres, tmp_path)
    try:
        await second.stop()
        await second.start()
        await asyncio.wait_for(following, 30)
        events = stored_events(postgres, run_id)
        assert isinstance(events[-1], ev.RunCompleted)
        visits = Counter(e.node_id for e in events if isinstance(e, ev.VisitStarted))
        async with first.client() as a:
            undisturbed = await Follower(await start(a, "tides")).follow(a)
        baseline = stored_events(postgres, undisturbed.run_id)
        assert set(visits.values()) == {1}, visits
        assert model_calls(events) == model_calls(baseline)
        assert "interrupted" not in " ".join(str(e) for e in events)
        assert f"recovering run {UUID(run_id).hex} (running): its job is queued" in second.log()
    finally:
        following.cancel()
        await asyncio.gather(first.stop(), second.stop(), return_exceptions=True)


async def test_after_kill_9_of_the_executing_server_the_other_continues_the_run_within_the_stall_threshold(
        postgres, tmp_path):
    first, second, run_id, follower, following = await executing_on_first(postgres, tmp_path)
    try:
        following.cancel()
        assert first.process is not None
        first.process.kill()
        killed = time.perf_counter()
        last_seen = follower.ids[-1]
        before = len(stored_events(postgres, run_id))
        while len(stored_events(postgres, run_id)) == before:
            assert time.perf_counter() - killed < STALL_SECONDS + 10, "no replica took the run over"
            await asyncio.sleep(0.1)
        took_over = time.perf_counter() - killed
        async with second.client() as b:
            rest = await asyncio.wait_for(read_stream(b, path(run_id, "/stream"), last_event_id=last_seen), 30)
            assert rest.ended and rest.ids[0] > last_seen
            assert await status(b, run_id) in TRUE_ENDS
        print(f"\nthe other server continued the run {took_over:.1f} s after kill -9 "
              f"(stall threshold {STALL_SECONDS:g} s)")
        assert_true_end(stored_events(postgres, run_id))
    finally:
        await asyncio.gather(first.stop(), second.stop(), return_exceptions=True)


async def test_a_run_whose_start_was_stored_without_its_job_is_queued_by_the_sweep_and_ends(postgres, tmp_path):
    async with replicas(postgres, tmp_path, 1) as (server,):
        async with server.client() as client:
            run_id = await create(client, "orphan")
            store_a_start_without_its_job(postgres, run_id)
            stored = time.perf_counter()
            while await status(client, run_id) not in TRUE_ENDS:
                assert time.perf_counter() - stored < 2 * STALL_SECONDS + 20, "no job was queued for the run"
                await asyncio.sleep(0.2)
            ended = time.perf_counter() - stored
        assert "was executing with no job to carry it; queued one" in server.log()
    assert isinstance(stored_events(postgres, run_id)[-1], ev.RunCompleted)
    print(f"\na run started with no job ended {ended:.1f} s after its start was stored "
          f"(the sweep runs every {STALL_SECONDS:g} s, the stall threshold)")


async def test_a_stop_signal_hands_the_runs_of_a_replica_to_the_other_at_their_next_visit_boundary_not_after_the_stall_threshold(
        postgres, tmp_path):
    first, second, run_id, follower, following = await executing_on_first(
        postgres, tmp_path, FLOWTRAIL_WORKER_STALL_SECONDS="60")
    try:
        following.cancel()
        before = len(stored_events(postgres, run_id))
        assert first.process is not None
        first.process.terminate()
        stopped = time.perf_counter()
        await asyncio.to_thread(first.process.wait, 15)
        assert first.process.returncode == 0
        while len(stored_events(postgres, run_id)) == before or await runs_active(second) == 0:
            if isinstance(stored_events(postgres, run_id)[-1], ev.RunCompleted):
                break
            assert time.perf_counter() - stopped < 15, "the stopped replica's run was not handed back"
            await asyncio.sleep(0.05)
        handed = time.perf_counter() - stopped
        async with second.client() as b:
            rest = await asyncio.wait_for(read_stream(b, path(run_id, "/stream"), last_event_id=follower.ids[-1]), 30)
        print(f"\nSIGTERM: the other replica went on with the run {handed:.1f} s after the signal "
              f"(stall threshold 60 s)")
        assert rest.ended and rest.events[-1] == "workflow_complete"
        assert "Traceback" not in first.log()
    finally:
        await asyncio.gather(first.stop(), second.stop(), return_exceptions=True)


def later_flow() -> dict:
    """A workflow only the second replica publishes (one scripted llm node)."""
    script = [[{"status": "thinking it over"}, {"text": "done"}]]
    return {
        "name": "later-flow", "displayName": "Later flow", "mode": "DAG",
        "nodes": [
            {"id": "input", "type": "userInput", "label": "in", "data": {"inputs": []}},
            {"id": "answer", "type": "llm", "label": "answer",
             "data": {"model_id": "scripted", "prompt": "go", "script": script}},
            {"id": "result", "type": "output", "label": "result",
             "data": {"outputs": [{"name": "text", "type": "string", "value": "{{answer.text}}"}]}},
        ],
        "edges": [{"source": "input", "target": "answer"}, {"source": "answer", "target": "result"}],
    }


async def test_runs_of_a_workflow_only_a_later_replica_published_succeed_on_every_replica(postgres, tmp_path):
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "later-flow.json").write_text(json.dumps(later_flow()), encoding="utf-8")
    first = await ServerProcess(postgres, tmp_path / "first", **REPLICA_ENV).start()
    second = await ServerProcess(postgres, tmp_path / "second", **REPLICA_ENV,
                                 FLOWTRAIL_WORKFLOWS_DIR=str(flows)).start()
    try:
        async with second.client() as b:
            run_ids = []
            for _ in range(8):
                created = await b.post("/api/v1/workflows/later-flow/runs", json={"variables": {}})
                assert created.status_code == 201, created.text
                run_id = created.json()["data"]["runId"]
                assert (await b.post(f"/api/v1/workflows/later-flow/runs/{run_id}/start")).status_code == 200
                run_ids.append(run_id)
            for run_id in run_ids:
                got = await read_stream(b, f"/api/v1/workflows/later-flow/runs/{run_id}/stream")
                assert got.events[-1] == "workflow_complete", got.data[-1]
        assert "not in the catalogue" not in first.log() + second.log()
    finally:
        await asyncio.gather(first.stop(), second.stop(), return_exceptions=True)


def serve_once(server: ServerProcess, **env: str) -> subprocess.CompletedProcess[str]:
    """`flowtrail serve` with the server's environment (changed by `env`), expected to exit on its own."""
    return subprocess.run([sys.executable, "-m", "scripts.cli", "serve"], cwd=ROOT, env={**server.env, **env},
                          capture_output=True, text=True, timeout=30)


async def test_a_second_server_on_the_same_sqlite_file_is_refused_with_one_line_and_status_2(tmp_path):
    url, _ = store_url("sqlite", tmp_path)
    first = await ServerProcess(url, tmp_path / "first").start()
    try:
        refused = await asyncio.to_thread(serve_once, ServerProcess(url, tmp_path / "second"))
    finally:
        await first.stop()
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "another flowtrail process" in lines[0] and "FLOWTRAIL_DATABASE_URL" in lines[0]


@pytest.mark.store
async def test_a_server_that_cannot_bind_its_port_touches_no_run(store, tmp_path):
    first = await ServerProcess(store, tmp_path / "first", **REPLICA_ENV).start()
    try:
        async with first.client() as client:
            run_id = await start(client, "tides")
            follower = Follower(run_id)
            following = asyncio.create_task(follower.follow(client))
            await asyncio.wait_for(follower.got.wait(), 20)
            refused = await asyncio.to_thread(serve_once, ServerProcess(store, tmp_path / "second"),
                                              FLOWTRAIL_PORT=str(first.port))
            await asyncio.wait_for(following, 30)
            assert await status(client, run_id) == "SUCCESS"
    finally:
        await first.stop()
    assert refused.returncode == 2 and "FLOWTRAIL_PORT" in refused.stderr
    assert follower.reconnects == 0
    events = stored_events(store, run_id)
    assert isinstance(events[-1], ev.RunCompleted)
    assert set(Counter(e.node_id for e in events if isinstance(e, ev.VisitStarted)).values()) == {1}
