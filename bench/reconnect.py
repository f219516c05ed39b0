"""Reconnect: time to the first replayed byte and to the last byte of 5,000 missed events.

Targets (issue 2): last byte of 5,000 missed events <= 50 ms after the reconnect request;
first replayed byte <= 5 ms.

A run with one open visit gets `missed + 100` step chunks (~250-byte frames) and stays
open (it is not finished, so the stream stays open; the client stops at the last id). A
client in another process reconnects with `Last-Event-ID: last - missed`; times are from
just before the request is sent (new TCP connection, as after a real disconnect) to the
first body byte and to the arrival of the last missed frame. Each case is measured with an
httpx client and with a bare-socket HTTP/1.1 client (`socket`), whose figures leave out the
client library's own cost (about 0.5 ms a request). Sources:

* memory         - the run is hot in the server;
* store: evicted - before each reconnect the run is evicted from memory (as the retention
                   sweeper does), so the server loads it from the store;
* store: restart - the server process is restarted before each reconnect (first request
                   the new process serves).

    python -m bench.reconnect [--store both|sqlite|postgres] [--missed 5000] [--repeat 15] [--restarts 3] [--client both|httpx|socket]
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.channel import Worker
from bench.cli import bench_main
from bench.figures import median, ms, print_table, verdict
from bench.fleet import Fleet, follow

TARGET_LAST_MS = 50.0
TARGET_FIRST_MS = 5.0


async def _reconnect(
    client: Worker, host: Worker, run: str, last_event_id: int, stop_id: int, raw: bool
) -> dict[str, Any]:
    call = follow(
        client, host, [run], last_event_id=last_event_id, stop_id=stop_id, raw=raw
    )
    got = (await call.result())["clients"][0]
    # After a restart the engine's recovery may have closed the (bench-made, workflow-less)
    # run, adding events after `stop_id`; they may share the last piece read, which is fine.
    if got["last_id"] < stop_id or got["frames"] < stop_id - last_event_id:
        raise RuntimeError(
            f"reconnect delivered {got['frames']} frames up to {got['last_id']}, "
            f"expected {stop_id - last_event_id} up to {stop_id}"
        )
    return {
        "first": got["t_first"] - got["t_req"],
        "last": got["t_last"] - got["t_req"],
        "bytes": got["bytes"],
    }


def _row(
    kind: str, source: str, raw: bool, samples: list[dict[str, Any]], missed: int
) -> dict[str, Any]:
    first = [s["first"] for s in samples]
    last = [s["last"] for s in samples]
    return {
        "store": kind,
        "source": source,
        "client": "socket" if raw else "httpx",
        "missed": missed,
        "n": len(samples),
        "first byte p50 ms": ms(median(first)),
        "first max ms": ms(max(first)),
        "vs 5ms": verdict(ms(median(first)), TARGET_FIRST_MS, at_least=False),
        "last byte p50 ms": ms(median(last)),
        "last max ms": ms(max(last)),
        "vs 50ms": verdict(ms(median(last)), TARGET_LAST_MS, at_least=False),
        "KiB": samples[0]["bytes"] / 1024,
    }


async def bench_store(
    kind: str, missed: int, repeat: int, restarts: int, clients: list[bool]
) -> list[dict[str, Any]]:
    """Every source and client kind on a fresh store of one kind."""
    rows = []
    async with Fleet("reconnect") as fleet:
        store = fleet.store(kind)
        host = await fleet.host(store)
        client = await fleet.client()
        made = await host.call("new_run", record=False)
        streamed = await host.call(
            "stream", run=made["run"], visit=made["visit"], n=missed + 100
        )
        last = streamed["last"]
        after = last - missed
        run = made["run"]
        for raw in clients:
            await _reconnect(client, host, run, after, last, raw)  # warm-up
            samples = [
                await _reconnect(client, host, run, after, last, raw)
                for _ in range(repeat)
            ]
            rows.append(_row(kind, "memory", raw, samples, missed))
        for raw in clients:
            evicted = []
            for _ in range(repeat):
                gone = await host.call("evict", run=run)
                if not gone["gone"]:
                    raise RuntimeError("the run could not be evicted")
                evicted.append(await _reconnect(client, host, run, after, last, raw))
            rows.append(_row(kind, "store: evicted", raw, evicted, missed))
        port = int(host.info["port"])
        for raw in clients:
            restarted = []
            for _ in range(restarts):
                await fleet.retire(host)
                host = await fleet.host(store, port=port)
                restarted.append(await _reconnect(client, host, run, after, last, raw))
            if restarted:
                rows.append(_row(kind, "store: restart", raw, restarted, missed))
    return rows


async def run(
    kinds: list[str],
    missed: int = 5000,
    repeat: int = 15,
    restarts: int = 3,
    client: str = "both",
) -> list[dict[str, Any]]:
    """Every store; one table."""
    clients = {"httpx": [False], "socket": [True], "both": [False, True]}[client]
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        rows.extend(await bench_store(kind, missed, repeat, restarts, clients))
    print_table(f"Reconnect with Last-Event-ID: {missed:,} missed events", rows)
    return rows


def add_args(parser: argparse.ArgumentParser) -> None:
    """The bench's own options."""
    parser.add_argument("--missed", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument(
        "--client",
        choices=["httpx", "socket", "both"],
        default="both",
        help="httpx, or a bare-socket HTTP/1.1 client that shows the server's own latency",
    )


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
