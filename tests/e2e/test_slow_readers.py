"""Slow and stuck readers of a fast 50,000-event run (issue 11): bounded memory, the others unaffected, the stuck cut.

The server is the test's own (in this process: its memory is this process's RSS; the readers are
bare sockets that keep only ids), with the connection guards `flowtrail serve` has (api.protocol).
The run is longer than the memory buffer (5,000 messages), so a lagging reader is served from
the store: that read differs per store, so the first test runs on both; the deadline test does
not depend on the store and runs on SQLite.
"""

from __future__ import annotations

import asyncio
import bisect
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from uuid import UUID

import httpx
import pytest

from engine.bootstrap import Services
from projections.sse import render_all
from tests.support.pressure import RawStream, closed_by_server, request_head, rss_mib, stuck_stream
from tests.support.runs import finish, new_run, open_visit, stream_steps
from tests.support.server import RunningServer, server_settings

EVENTS = 50_000
STUCK = 10
SLOW = 10
STUCK_SECONDS = 2.0
SLOW_PACE = (4096, 0.05)
"""A slow reader takes 4 KiB every 50 ms (80 KiB/s; the run is written at several MiB/s)."""


def stream_path(run_id: UUID) -> str:
    return f"/api/v1/workflows/allowed-flow/runs/{run_id.hex}/stream"


@dataclass
class Delivery:
    """What a healthy reader saw of one run: its rate and the delay of each written batch."""

    rate: float
    delay_p50_ms: float
    delay_p99_ms: float

    def __str__(self) -> str:
        return f"{self.rate:,.0f} events/s, delay p50 {self.delay_p50_ms:.1f} ms, p99 {self.delay_p99_ms:.1f} ms"


def delivery(stream: RawStream, marks: list[tuple[int, float]]) -> Delivery:
    """The reader's rate over the run, and for each batch (its last position, when it was applied) the delay
    until the reader had it."""
    delays = []
    for position, at in marks:
        i = bisect.bisect_left(stream.ids, position)
        if i < len(stream.ids):
            delays.append(max(0.0, stream.arrivals[i] - at))
    delays.sort()
    span = stream.arrivals[-1] - stream.arrivals[0]
    return Delivery(len(stream.ids) / span, statistics.median(delays) * 1000,
                    delays[int(len(delays) * 0.99)] * 1000)


async def open_run(services: Services) -> tuple[UUID, str]:
    """A started run with one open visit: (run, visit)."""
    run_id = await new_run(services)
    return run_id, await open_visit(await services.runs.writer(run_id))


async def write_run(services: Services, run_id: UUID, visit: str) -> list[tuple[int, float]]:
    """EVENTS step chunks written as fast as the writer takes them, then the run's end; the marks of its batches."""
    writer = await services.runs.writer(run_id)
    hot = await services.runs.hot(run_id)
    marks = []
    for start in range(0, EVENTS, 1000):
        await stream_steps(writer, visit, 1000, start=start)
        marks.append((hot.version, time.monotonic()))
    await finish(writer, visit)
    await services.runs.release(run_id)
    return marks


async def peak_rss(stop: asyncio.Event) -> float:
    """The highest RSS of this process until `stop`, MiB."""
    peak = rss_mib()
    while not stop.is_set():
        peak = max(peak, rss_mib())
        await asyncio.sleep(0.05)
    return peak


async def healthz_worst(client: httpx.AsyncClient, stop: asyncio.Event) -> float:
    """The slowest /healthz answer until `stop`, seconds."""
    worst = 0.0
    while not stop.is_set():
        start = time.perf_counter()
        assert (await client.get("/healthz")).status_code == 200
        worst = max(worst, time.perf_counter() - start)
        await asyncio.sleep(0.02)
    return worst


@pytest.fixture
async def guarded(store: str, tmp_path) -> AsyncIterator[RunningServer]:
    settings = server_settings(store, tmp_path / "data", keepalive_seconds=1.0, hot_buffer_messages=5000,
                               stuck_seconds=STUCK_SECONDS)
    running = RunningServer(settings)
    await running.start()
    yield running
    await running.stop()


async def test_stuck_and_slow_readers_of_a_long_fast_run_cost_bounded_memory_and_leave_the_others_alone(guarded):
    services, port = guarded.services, guarded.settings.port

    # Baseline: two healthy readers, alone.
    alone = [RawStream(), RawStream()]
    run_id, visit = await open_run(services)
    reading = [asyncio.create_task(s.read(port, request_head(stream_path(run_id)))) for s in alone]
    marks = await write_run(services, run_id, visit)
    await asyncio.wait_for(asyncio.gather(*reading), 30)
    baseline = delivery(alone[0], marks)

    # Under pressure: the same, plus 10 readers that read nothing, 10 that read 80 KiB/s, and one that reads
    # slowly while the run is written and then fast to its end.
    start_rss = rss_mib()
    stop_rss = asyncio.Event()
    rss = asyncio.create_task(peak_rss(stop_rss))
    run_id, visit = await open_run(services)
    head = request_head(stream_path(run_id))
    stuck = [stuck_stream(port, head) for _ in range(STUCK)]
    slow = [RawStream() for _ in range(SLOW)]
    slow_reading = [asyncio.create_task(s.read(port, head, pace=SLOW_PACE, receive_buffer=16384)) for s in slow]
    hurry = asyncio.Event()
    laggard = RawStream()
    laggard_reading = asyncio.create_task(laggard.read(port, head, pace=SLOW_PACE, receive_buffer=16384, hurry=hurry))
    healthy = [RawStream(), RawStream()]
    reading = [asyncio.create_task(s.read(port, head)) for s in healthy]
    marks = await write_run(services, run_id, visit)
    await asyncio.wait_for(asyncio.gather(*reading), 30)
    under_pressure = delivery(healthy[0], marks)
    hurry.set()
    await asyncio.wait_for(laggard_reading, 30)
    stop_rss.set()
    peak = await rss

    expected = [m.id for m in render_all(await services.runs.events(run_id))]
    async with httpx.AsyncClient(base_url=guarded.base_url) as client:
        stop_probe = asyncio.Event()
        probe = asyncio.create_task(healthz_worst(client, stop_probe))
        held = services.hot_runs.find(run_id)
        assert held is not None
        started = time.monotonic()
        cut = await asyncio.gather(*(asyncio.to_thread(closed_by_server, sock, STUCK_SECONDS + 8) for sock in stuck))
        cut_after = time.monotonic() - started
        slow_still_open = sum(not task.done() for task in slow_reading)
        for s in slow:
            s.close()
        await asyncio.gather(*slow_reading)
        for _ in range(100):
            if held.watchers == 0:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        stop_probe.set()
        worst_healthz = await probe
    for sock in stuck:
        sock.close()

    growth = peak - start_rss
    print(f"\n[slow readers] alone: {baseline}; with {STUCK} stuck + {SLOW} slow readers: {under_pressure}")
    print(f"[slow readers] RSS {start_rss:.0f} -> peak {peak:.0f} MiB (+{growth:.0f} MiB for {STUCK + SLOW + 1} "
          f"lagging readers, {growth / (STUCK + SLOW + 1):.1f} MiB each)")
    print(f"[slow readers] stuck readers cut: {sum(cut)}/{STUCK} within {cut_after:.1f} s of the run's end; "
          f"slow readers still served: {slow_still_open}/{SLOW}; /healthz worst while they went: "
          f"{worst_healthz * 1000:.0f} ms")
    assert healthy[0].ids == expected and healthy[1].ids == expected and healthy[0].ended
    assert laggard.ids == expected and laggard.ended, "a reader behind memory reads the rest from the store, exactly"
    assert growth < 150, "each lagging reader holds at most a page and its connection's write buffer"
    assert all(cut), "a reader that takes nothing for FLOWTRAIL_STREAM_STUCK_SECONDS is cut"
    assert slow_still_open == SLOW, "a reader that keeps taking bytes is not cut"
    assert held.watchers == 0 and services.hot_runs.find(run_id) is None, "a finished run nobody reads leaves memory"
    assert worst_healthz < 1.0
    assert under_pressure.rate > baseline.rate / 4
    assert under_pressure.delay_p99_ms < STUCK_SECONDS * 1000 / 2, (
        "a healthy reader never waits on a stuck one (that wait would last until the stuck one is cut)")


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_a_stream_ends_at_max_stream_seconds_even_when_its_client_reads_nothing(store, tmp_path):
    settings = server_settings(store, tmp_path / "data", keepalive_seconds=0.5, max_stream_seconds=2.0,
                               stuck_seconds=60.0)
    server = RunningServer(settings)
    await server.start()
    try:
        services = server.services
        run_id = await new_run(services)
        writer = await services.runs.writer(run_id)
        visit = await open_visit(writer)
        head = request_head(stream_path(run_id))
        stuck = stuck_stream(server.settings.port, head)
        slow = RawStream()
        slow_reading = asyncio.create_task(slow.read(server.settings.port, head, pace=SLOW_PACE, receive_buffer=16384))
        started = time.monotonic()
        for start in range(0, 20_000, 1000):
            await stream_steps(writer, visit, 1000, start=start)
        hot = services.hot_runs.find(run_id)
        while hot.watchers and time.monotonic() - started < 10:
            await asyncio.sleep(0.05)
        ended_after = time.monotonic() - started
        cut = await asyncio.to_thread(closed_by_server, stuck, 5)
        print(f"\n[max stream seconds] 2 s: both streams (a client that reads nothing, one that reads 80 KiB/s) "
              f"ended after {ended_after:.1f} s; the one that reads nothing was cut: {cut}; the slow one had "
              f"{len(slow.ids)} messages by then")
        stuck.close()
        slow.close()
        await slow_reading
        assert hot.watchers == 0 and ended_after < 6
        assert cut
        await finish(writer, visit)
    finally:
        await server.stop()
