"""Start latency: from the start request returning to the first event at an already attached SSE client.

Target (issue 3): <= 20 ms. The server is a separate process built as `flowtrail serve` builds
it (`python -m bench.host`, demos loaded, scripted pace 0). For each sample this process creates a
`demo-report` run over HTTP, attaches a raw-socket SSE client to its stream and waits for the
response headers, then POSTs `/start` and times:

* `start ms`     - the start request, sent to answered (RunStarted is durable when it answers);
* `first ms`     - the start answer to the first SSE frame (node_status RUNNING of `input`)
                   reaching the attached client; 0 when the frame arrived before the answer;
* `total ms`     - the start request sent to that first frame.

    python -m bench.engine_start_latency [--store both|sqlite|postgres] [--samples 200]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import httpx

from bench.cli import bench_main
from bench.figures import ms, percentile, print_table, verdict
from bench.fleet import Fleet
from bench.names import API_KEY

TARGET_MS = 20.0
WORKFLOW = "demo-report"


async def attach(host: str, port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw SSE connection whose response headers have arrived."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n"
                  f"X-API-Key: {API_KEY}\r\nConnection: close\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"stream refused: {head[:200]!r}")
    return reader, writer


async def first_frame(reader: asyncio.StreamReader) -> float:
    """perf_counter() when the first data frame (one with an id) arrives."""
    seen = b""
    while b"id: " not in seen:
        data = await reader.read(1 << 16)
        if not data:
            raise RuntimeError("stream ended before its first event")
        seen += data
    return time.perf_counter()


async def drain(reader: asyncio.StreamReader) -> None:
    """Read the stream to its end (the run finishes quickly at pace 0)."""
    while await reader.read(1 << 16):
        pass


async def sample(client: httpx.AsyncClient, host: str, port: int) -> dict[str, float]:
    """One run: create, attach, start; the three intervals in seconds."""
    created = await client.post(f"/api/v1/workflows/{WORKFLOW}/runs", json={"variables": {"topic": "tides"}})
    created.raise_for_status()
    run_id = created.json()["data"]["runId"]
    reader, writer = await attach(host, port, f"/api/v1/workflows/{WORKFLOW}/runs/{run_id}/stream")
    try:
        frame = asyncio.create_task(first_frame(reader))
        sent = time.perf_counter()
        started = await client.post(f"/api/v1/workflows/{WORKFLOW}/runs/{run_id}/start")
        answered = time.perf_counter()
        started.raise_for_status()
        arrived = await frame
        await asyncio.wait_for(drain(reader), 30)
    finally:
        writer.close()
    return {"start": answered - sent, "first": max(0.0, arrived - answered), "total": arrived - sent}


async def run(kinds: list[str], samples: int) -> None:
    """Measure each store and print the table."""
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        async with Fleet("engine-start") as fleet:
            host = await fleet.host(fleet.store(kind), load_demos=1, scripted_pace_seconds=0)
            base = host.info["base_url"]
            address, port = base.removeprefix("http://").split(":")
            async with httpx.AsyncClient(base_url=base, headers={"X-API-Key": API_KEY}, timeout=30.0) as client:
                for _ in range(10):
                    await sample(client, address, int(port))  # warm-up
                taken = [await sample(client, address, int(port)) for _ in range(samples)]
        for name in ("start", "first", "total"):
            values = [t[name] for t in taken]
            p99 = ms(percentile(values, 99))
            rows.append({"store": kind, "interval": f"{name} ms", "samples": len(values),
                         "p50": ms(percentile(values, 50)), "p95": ms(percentile(values, 95)), "p99": p99,
                         "max": ms(max(values)),
                         "vs 20ms": verdict(p99, TARGET_MS, at_least=False) if name == "first" else ""})
    print_table("engine start latency (start answered -> first event at an attached client)", rows)


def add_args(parser: argparse.ArgumentParser) -> None:
    """The bench's own options."""
    parser.add_argument("--samples", type=int, default=200, help="runs started per store")


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
