"""Memory: server RSS growth per retained event after 100 runs of 1,000 events.

The server is a subprocess (`python -m bench.host`, built from FLOWTRAIL_* like
`flowtrail serve`); its RSS is read from /proc/<pid>/status (VmRSS; VmHWM is the peak). The
hot buffer is bounded (FLOWTRAIL_HOT_BUFFER_MESSAGES, default 10,000 frames a run) and
FLOWTRAIL_HOT_RETENTION_SECONDS is low (2 s), so finished runs leave memory within seconds
and are served from the store.

* warm-up: 3 runs written, one read over SSE, all evicted (imports, pools and caches exist);
  RSS `before` (after a full gc);
* each round: the server's own writer writes `runs` runs of `events` step chunks one after
  another, each finished and released (`after writes`); a client then reads every run from
  the start over SSE, 5 at a time (each is loaded from the store, served, evicted again);
  once no run is hot, RSS `after`. `per event` = (after - before) / (runs x events).
  A second round shows whether the growth continues or was the allocator's high-water mark.
  `heap blocks +` is the change of live Python heap blocks (sys.getallocatedblocks) since the
  warm-up: near 0 means no Python object outlived its run;
* all hot: retention 1 h, every run stays in memory: what a hot event costs.

    python -m bench.memory [--store both|sqlite|postgres] [--runs 100] [--events 1000]
                           [--retention 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bench.channel import Worker
from bench.cli import bench_main
from bench.figures import print_table
from bench.fleet import Fleet, follow
from bench.machine import rss_kib

COLUMNS = [
    "store",
    "retention s",
    "round",
    "runs x events",
    "write s",
    "read all s",
    "hot runs",
    "hot left",
    "before MiB",
    "after writes MiB",
    "after MiB",
    "peak MiB",
    "per event B",
    "heap blocks +",
]


async def _wait_cold(host: Worker, timeout: float) -> int:
    """Wait until the server holds no hot run; returns how many are still hot."""
    deadline = time.monotonic() + timeout
    while True:
        hot = (await host.call("hot"))["hot_runs"]
        if hot == 0 or time.monotonic() > deadline:
            return hot
        await asyncio.sleep(0.25)


async def _rss(host: Worker) -> dict[str, int]:
    """RSS and peak (KiB) after a full collection, with the count of live Python heap blocks."""
    blocks = (await host.call("objects", top=0))["allocated_blocks"]
    await asyncio.sleep(0.2)
    return {**rss_kib(host.pid), "blocks": blocks}


async def _read_all(
    client: Worker, host: Worker, runs: list[str], parallel: int = 5
) -> None:
    for start in range(0, len(runs), parallel):
        part = runs[start : start + parallel]
        got = await follow(client, host, part).result()
        if not all(c["ended"] for c in got["clients"]):
            raise RuntimeError("a replayed stream did not end")


async def evicted_rounds(
    kind: str, runs: int, events: int, retention: float, rounds: int
) -> list[dict[str, Any]]:
    """Runs leave memory `retention` s after they finish; each round writes, reads and waits."""
    rows = []
    async with Fleet("memory") as fleet:
        store = fleet.store(kind)
        host = await fleet.host(store, hot_retention_seconds=retention)
        client = await fleet.client()
        warm = await host.call("many_runs", runs=3, events=events)
        await _read_all(client, host, warm["runs"][:1])
        await _wait_cold(host, retention + 10)
        first = before = await _rss(host)
        for round_ in range(1, rounds + 1):
            written = await host.call(
                "many_runs", runs=runs, events=events, timeout=900
            )
            after_writes = await _rss(host)
            hot_after_writes = (await host.call("hot"))["hot_runs"]
            t0 = time.time()
            await _read_all(client, host, written["runs"])
            read_s = time.time() - t0
            hot_left = await _wait_cold(host, retention + 15)
            after = await _rss(host)
            rows.append(
                {
                    "store": kind,
                    "retention s": retention,
                    "round": round_,
                    "runs x events": f"{runs} x {events:,}",
                    "write s": written["elapsed"],
                    "read all s": read_s,
                    "hot runs": hot_after_writes,
                    "hot left": hot_left,
                    "before MiB": before["VmRSS"] / 1024,
                    "after writes MiB": after_writes["VmRSS"] / 1024,
                    "after MiB": after["VmRSS"] / 1024,
                    "peak MiB": after["VmHWM"] / 1024,
                    "per event B": (after["VmRSS"] - before["VmRSS"])
                    * 1024
                    / (runs * events),
                    "heap blocks +": after["blocks"] - first["blocks"],
                }
            )
            before = after
    return rows


async def all_hot(kind: str, runs: int, events: int) -> dict[str, Any]:
    """Every run stays in memory (retention 1 h): what a hot event costs."""
    async with Fleet("memory") as fleet:
        store = fleet.store(kind)
        host = await fleet.host(store, hot_retention_seconds=3600)
        warm = await host.call("many_runs", runs=3, events=events)
        await host.call("evict")
        before = await _rss(host)
        written = await host.call("many_runs", runs=runs, events=events, timeout=900)
        after = await _rss(host)
        hot = await host.call("hot")
        del warm
        return {
            "store": kind,
            "retention s": 3600.0,
            "round": 1,
            "runs x events": f"{runs} x {events:,}",
            "write s": written["elapsed"],
            "hot runs": hot["hot_runs"],
            "before MiB": before["VmRSS"] / 1024,
            "after writes MiB": after["VmRSS"] / 1024,
            "after MiB": after["VmRSS"] / 1024,
            "peak MiB": after["VmHWM"] / 1024,
            "per event B": (after["VmRSS"] - before["VmRSS"]) * 1024 / (runs * events),
            "heap blocks +": after["blocks"] - before["blocks"],
        }


async def run(
    kinds: list[str],
    runs: int = 100,
    events: int = 1000,
    retention: float = 2.0,
    rounds: int = 2,
) -> list[dict[str, Any]]:
    """Every store; one table."""
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        rows.extend(await evicted_rounds(kind, runs, events, retention, rounds))
        rows.append(await all_hot(kind, runs, events))
    print_table(
        f"Memory: server RSS, rounds of {runs} runs of {events:,} events", rows, COLUMNS
    )
    return rows


def add_args(parser: argparse.ArgumentParser) -> None:
    """The bench's own options."""
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--retention", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2)


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
