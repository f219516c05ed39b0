"""Fan-out: 50 clients attached to one run while it appends: deliveries/s and delay p99.

Target (issue 2): >= 50,000 deliveries/s on this 2-core machine with the clients in another
process.

The clients (one process, asyncio, one TCP connection each) attach to a run with one open
visit; then the server's own writer appends step chunks (coalescing on, default window) and
finishes the run. Modes:

* max          - the writer appends `events` chunks as fast as it can; deliveries/s = step frames
                 received by all clients / (last client's last step - writer's first chunk). Run
                 with httpx clients and with bare-socket clients (less client CPU a frame);
* paced        - the writer appends at `rate` events/s (1,000/s x 50 clients = the 50,000
                 deliveries/s target) for `paced_events` chunks: the delay at the target load.

Delay = arrival - the time the writer's save of that event returned, over every delivery;
chunk->client adds the coalescing wait. CPU % is each process's CPU time over the measured
wall time (100 % = one of the two cores).

    python -m bench.fanout [--store both|sqlite|postgres] [--clients 50] [--events 5000]
                           [--rate 1000] [--paced-events 3000]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.channel import Worker
from bench.cli import bench_main
from bench.figures import ms, percentile, print_table, verdict
from bench.fleet import Fleet, follow
from bench.frames import Frames, chunk_delays, save_delays
from bench.machine import cpu_seconds

TARGET_RATE = 50_000.0


async def one_run(
    fleet: Fleet,
    host: Worker,
    client: Worker,
    kind: str,
    clients: int,
    events: int,
    raw: bool,
    rate: float | None,
) -> dict[str, Any]:
    """One run followed by `clients` clients: deliveries/s, delays and CPU."""
    made = await host.call("new_run", record=True)
    out = fleet.frames_file()
    call = follow(client, host, [made["run"]] * clients, out=out, raw=raw)
    await call.wait("connected")
    cpu0 = (cpu_seconds(host.pid), cpu_seconds(client.pid), time.time())
    streamed = await host.call(
        "stream", run=made["run"], visit=made["visit"], n=events, finish=True, rate=rate
    )
    results = (await call.result(timeout=600))["clients"]
    cpu1 = (cpu_seconds(host.pid), cpu_seconds(client.pid), time.time())
    frames = Frames.load(out)
    per_client_last: dict[float, float] = {}
    for a, c in zip(frames.arrival, frames.client):
        if a > per_client_last.get(c, 0.0):
            per_client_last[c] = a
    last = max(per_client_last.values())
    delivered = len(frames)
    delays = save_delays(frames, streamed["saved"])
    rate_got = delivered / (last - streamed["t0"])
    p99 = ms(percentile(delays, 99))
    wall = cpu1[2] - cpu0[2]
    return {
        "store": kind,
        "mode": f"paced {rate:,.0f}/s" if rate else "max",
        "client": "socket" if raw else "httpx",
        "clients": clients,
        "deliveries": delivered,
        "complete": all(r["ended"] for r in results) and delivered == clients * events,
        "deliveries/s": rate_got,
        "vs 50k": "(offered)"
        if rate
        else verdict(rate_got, TARGET_RATE, at_least=True),
        "append/s": events / (streamed["t1"] - streamed["t0"]),
        "save->client p50 ms": ms(percentile(delays, 50)),
        "p99 ms": p99,
        "chunk->client p99 ms": ms(percentile(chunk_delays(frames), 99)),
        "server CPU %": 100 * (cpu1[0] - cpu0[0]) / wall,
        "clients CPU %": 100 * (cpu1[1] - cpu0[1]) / wall,
    }


async def bench_store(
    kind: str, clients: int, events: int, rate: float, paced_events: int
) -> list[dict[str, Any]]:
    """The max runs (httpx, socket) and the paced run on a fresh store of one kind."""
    rows = []
    async with Fleet("fanout") as fleet:
        store = fleet.store(kind)
        host = await fleet.host(store)
        client = await fleet.client()
        rows.append(
            await one_run(
                fleet, host, client, kind, clients, events, raw=False, rate=None
            )
        )
        rows.append(
            await one_run(
                fleet, host, client, kind, clients, events, raw=True, rate=None
            )
        )
        if paced_events > 0:
            rows.append(
                await one_run(
                    fleet,
                    host,
                    client,
                    kind,
                    clients,
                    paced_events,
                    raw=False,
                    rate=rate,
                )
            )
    return rows


async def run(
    kinds: list[str],
    clients: int = 50,
    events: int = 5000,
    rate: float = 1000.0,
    paced_events: int = 3000,
) -> list[dict[str, Any]]:
    """Every store; one table."""
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        rows.extend(await bench_store(kind, clients, events, rate, paced_events))
    print_table(
        f"Fan-out: {clients} clients on one run (max: {events:,} events; paced: {paced_events:,})",
        rows,
    )
    return rows


def add_args(parser: argparse.ArgumentParser) -> None:
    """The bench's own options."""
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--paced-events", type=int, default=3000)


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
