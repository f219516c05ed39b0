"""A blocking creation (`async: false`) answers with the run's stream, and that stream is held to the limits of
`GET …/stream` (issue 21): it takes one of the key's FLOWTRAIL_MAX_STREAMS_PER_KEY slots, and it ends at
FLOWTRAIL_MAX_STREAM_SECONDS even when its client reads nothing.

The server is the test's own, with the connection guards `flowtrail serve` has (api.protocol) and the hand-driven
engine (a started run goes on until the test ends it). The limits do not depend on the store and run on SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID

from engine.limits import LimitSettings
from tests.support.api import DEMO_KEY, KEYS, REPORT, ManualEngine, log_end, open_visit
from tests.support.pressure import RawStream, closed_by_server, stuck_stream
from tests.support.runs import stream_steps
from tests.support.server import RunningServer, server_settings

RUNS = "/api/v1/workflows/report-pipeline/runs"


def blocking_creation(key: str = DEMO_KEY) -> bytes:
    """The bytes of a `POST …/runs` with `async: false` (it answers with the run's stream)."""
    body = json.dumps({"variables": {"topic": "x"}, "async": False}).encode()
    return (f"POST {RUNS} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {key}\r\nAccept: text/event-stream\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


@asynccontextmanager
async def blocking_server(tmp_path: Path, *, streams_per_key: int = 500, **stream: Any) -> AsyncIterator[RunningServer]:
    """A guarded server with the seed's keys, the report workflow and the hand-driven engine."""
    settings = server_settings(f"sqlite:///{tmp_path / 'flowtrail.db'}", tmp_path / "data", **stream)
    settings = replace(settings, api_keys=KEYS, limits=LimitSettings(max_streams_per_key=streams_per_key))
    server = RunningServer(settings)
    server.services.engine = ManualEngine(server.services)
    await server.start()
    try:
        await server.services.catalogue.publish(REPORT)
        yield server
    finally:
        await server.stop()


def started_runs(server: RunningServer) -> list[UUID]:
    """The runs the hand-driven engine started, in order."""
    engine = server.services.engine
    assert isinstance(engine, ManualEngine)
    return engine.started


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait until `condition()` holds (TimeoutError after `seconds`)."""
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.02)


async def test_blocking_creations_take_stream_slots_and_one_over_the_most_is_429_and_creates_no_run(tmp_path):
    async with blocking_server(tmp_path, streams_per_key=2, keepalive_seconds=0.5) as server:
        port = server.settings.port
        held = [RawStream() for _ in range(2)]
        reading = [asyncio.create_task(s.read(port, blocking_creation())) for s in held]
        await until(lambda: all(s.status == 200 for s in held))
        async with server.client(DEMO_KEY) as client:
            before = await log_end(server.services)
            async with client.stream("POST", RUNS, json={"variables": {"topic": "x"}, "async": False}) as refused:
                assert refused.status_code == 429
                assert json.loads(await refused.aread())["code"] == "TOO_MANY_STREAMS"
                assert int(refused.headers["Retry-After"]) >= 1
            assert await log_end(server.services) == before, "a refused blocking creation creates no run"
            first = started_runs(server)[0]
            async with client.stream("GET", f"{RUNS}/{first.hex}/stream") as followed:
                assert followed.status_code == 429, "blocking creations and GET …/stream share the key's slots"
            created = await client.post(RUNS, json={"variables": {"topic": "x"}})
            assert created.status_code == 201, "an asynchronous creation holds no stream"
            held[0].close()
            await reading[0]
            again = RawStream()
            again_reading = asyncio.create_task(again.read(port, blocking_creation()))
            await until(lambda: again.status != 0)
            assert again.status == 200
        for s in (*held[1:], again):
            s.close()
        await asyncio.gather(*reading[1:], again_reading)


ENDED_WITHIN = 10.0
"""A bound, not a speed: 2 s of stream and the 40,000 steps this test writes meanwhile (a slow machine took 5.8 s)."""


async def test_a_blocking_creations_stream_ends_at_max_stream_seconds_even_when_its_client_reads_nothing(tmp_path):
    async with blocking_server(tmp_path, keepalive_seconds=0.5, max_stream_seconds=2.0, stuck_seconds=60.0) as server:
        port = server.settings.port
        reader = RawStream()
        began = time.monotonic()
        reading = asyncio.create_task(reader.read(port, blocking_creation()))
        stuck = stuck_stream(port, blocking_creation())
        await until(lambda: len(started_runs(server)) == 2)
        for run_id in started_runs(server):
            writer = await server.services.runs.writer(run_id)
            visit = await open_visit(server.services, run_id)
            await stream_steps(writer, visit, 20_000, node_id="node-2")
        hot = [server.services.hot_runs.find(run_id) for run_id in started_runs(server)]
        with contextlib.suppress(TimeoutError):  # without the limit they would never end (the runs go on)
            await until(lambda: not any(h.watchers for h in hot), ENDED_WITHIN)
        ended_after = time.monotonic() - began
        cut = await asyncio.to_thread(closed_by_server, stuck, 5)  # a bound: the cut comes at once on a quiet machine
        stuck.close()
        reader.close()
        await reading
        print(f"\n[blocking creation, max stream seconds] 2 s: the stream whose client reads ended properly "
              f"({reader.ended}); both had ended after {ended_after:.1f} s, and the one whose client reads nothing "
              f"was cut: {cut}")
        assert reader.status == 200 and reader.ended and not reader.cut
        assert ended_after < ENDED_WITHIN and cut
