"""External API load: GET run and GET workflows throughput and latency; 100 clients attaching to one run.

The server is `flowtrail serve` in its own process (demo workflows, scripted models), on a
fresh store, on loopback. The load generator is this process: plain asyncio sockets with
HTTP/1.1 keep-alive (one request in flight per connection), so the client spends little CPU
per request on this 2-core machine.

* `GET /api/v1/workflows/{name}/runs/{id}` of a finished demo-report run, and
  `GET /api/v1/workflows`: `--connections` connections for `--seconds`; requests/s and
  latency p50/p99 (send to last body byte).
* attach: a demo-clarify run waits on its question; `--clients` SSE clients connect at once
  with `Last-Event-ID` = the run's position (so nothing is due yet); "attach" is the time
  until every client has its `200` headers. Then the question is answered over HTTP; "next
  event" is, per client, the time from sending the answer to the arrival of the run's next
  SSE message; "first->last" is how long the service took from the first client's copy of
  that message to the last one's (the fan-out itself).

The event after the answer is the resumed visit's first stream chunk, which the writer holds
for its coalescing window (FLOWTRAIL_COALESCE_MS, default 40 ms) before appending it;
`--coalesce-ms 0` shows the delivery without that wait.

    python -m bench.api_load [--store both|sqlite|postgres] [--seconds 5] [--connections 16] [--clients 100]
                             [--coalesce-ms 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.cli import store_kinds
from bench.figures import percentile, print_table
from bench.fleet import Fleet, host_env
from bench.machine import free_port
from bench.names import API_KEY
from bench.stores import Store


class Server:
    """`flowtrail serve` in a child process on a fresh store."""

    def __init__(self, store: Store, workdir: Path, coalesce_ms: float) -> None:
        self.store, self.workdir, self.port = store, workdir, free_port()
        self.coalesce_ms = coalesce_ms
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> str:
        """Start the server; its base URL once it answers /healthz."""
        env = {
            **os.environ,
            **host_env(self.store, self.workdir / "data", self.port, load_demos="true", coalesce_ms=self.coalesce_ms),
        }
        self.proc = subprocess.Popen([sys.executable, "-m", "scripts.cli", "serve"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{self.port}"
        async with httpx.AsyncClient(base_url=base) as client:
            for _ in range(300):
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/healthz")).status_code == 200:
                        return base
                await asyncio.sleep(0.1)
        raise SystemExit("the server did not start within 30 s")

    def stop(self) -> None:
        """Stop the server process."""
        if self.proc is not None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)
            if self.proc.poll() is None:
                self.proc.kill()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of one HTTP/1.1 response with a Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    return status, await reader.readexactly(length)


async def hammer(port: int, path: str, seconds: float, connections: int) -> dict[str, Any]:
    """Requests/s and latency of GET `path` from keep-alive connections."""
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {API_KEY}\r\n\r\n".encode()
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def connection() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                writer.write(request)
                status, _ = await read_response(reader)
                latencies.append(time.perf_counter() - began)
                errors += status != 200
        finally:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(connections)))
    wall = time.perf_counter() - began
    return {
        "requests": len(latencies), "errors": errors, "req/s": round(len(latencies) / wall),
        "p50 ms": round(percentile(latencies, 50) * 1000, 2), "p99 ms": round(percentile(latencies, 99) * 1000, 2),
    }


async def finished_run(client: httpx.AsyncClient) -> str:
    """A demo-report run, started and followed to its end; returns its result path."""
    created = (await client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": "bench"}})).json()
    links = created["data"]["links"]
    await client.post(links["start"])
    async with client.stream("GET", links["stream"], timeout=httpx.Timeout(60.0)) as response:
        async for _ in response.aiter_lines():
            pass
    return links["result"]


async def paused_run(client: httpx.AsyncClient) -> tuple[str, str, str, int]:
    """A demo-clarify run waiting on its question: (run id, stream path, clarify id, position)."""
    created = (await client.post("/api/v1/workflows/demo-clarify/runs", json={"variables": {"topic": "bench"}})).json()
    run_id, links = created["data"]["runId"], created["data"]["links"]
    await client.post(links["start"])
    for _ in range(600):
        state = (await client.get(f"/api/v1/runs/{run_id}/state")).json()["data"]
        if state["currentPause"]:
            audit = (await client.get(f"/api/v1/runs/{run_id}/audit")).json()["data"]
            return run_id, links["stream"], state["currentPause"]["clarifyId"], audit["lastEventId"]
        await asyncio.sleep(0.05)
    raise SystemExit("the demo-clarify run never paused")


async def attach(port: int, base: str, clients: int) -> dict[str, Any]:
    """Time for `clients` SSE clients to attach to one waiting run and to receive its next event."""
    async with httpx.AsyncClient(base_url=base, headers={"X-API-Key": API_KEY}, timeout=30) as client:
        run_id, stream, clarify_id, position = await paused_run(client)
        request = (f"GET {stream} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {API_KEY}\r\n"
                   f"Accept: text/event-stream\r\nLast-Event-ID: {position}\r\n\r\n").encode()
        attached: list[float] = []
        arrived: list[float] = []
        all_attached = asyncio.Event()

        async def one() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                assert head[9:12] == b"200", head[:200]
                attached.append(time.perf_counter())
                if len(attached) == clients:
                    all_attached.set()
                while True:
                    line = await reader.readline()
                    if line.startswith(b"id: ") or b"\nid: " in line:
                        arrived.append(time.perf_counter())
                        return
            finally:
                writer.close()

        began = time.perf_counter()
        tasks = [asyncio.create_task(one()) for _ in range(clients)]
        await asyncio.wait_for(all_attached.wait(), 60)
        attach_s = max(attached) - began
        await asyncio.sleep(0.2)
        answered = time.perf_counter()
        await client.post(f"/api/v1/runs/{run_id}/resume", json={"clarifyId": clarify_id, "answer": "bullet list"})
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        delays = [a - answered for a in arrived]
        return {
            "clients": clients, "attach all ms": round(attach_s * 1000, 1),
            "next p50 ms": round(percentile(delays, 50) * 1000, 1), "next p99 ms": round(percentile(delays, 99) * 1000, 1),
            "next max ms": round(max(delays) * 1000, 1),
            "first->last ms": round((max(arrived) - min(arrived)) * 1000, 1),
            "attach+next ms": round((attach_s + max(delays)) * 1000, 1),
        }


async def bench_store(kind: str, args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every measurement on one store."""
    async with Fleet(f"api-{kind}") as fleet:
        server = Server(fleet.store(kind), fleet.workdir, args.coalesce_ms)
        try:
            base = await server.start()
            async with httpx.AsyncClient(base_url=base, headers={"X-API-Key": API_KEY}, timeout=30) as client:
                result = await finished_run(client)
            await hammer(server.port, result, 1.0, args.connections)
            rows = []
            for label, path in (("GET run", result), ("GET workflows", "/api/v1/workflows")):
                rows.append({"store": kind, "endpoint": label,
                             **await hammer(server.port, path, args.seconds, args.connections)})
            return rows, {"store": kind, **await attach(server.port, base, args.clients)}
        finally:
            server.stop()


async def main(args: argparse.Namespace) -> None:
    """Measure each store, then print both tables."""
    throughput, attaching = [], []
    for kind in store_kinds(args.store):
        rows, attached = await bench_store(kind, args)
        throughput += rows
        attaching.append(attached)
    print_table(f"Requests over loopback ({args.connections} keep-alive connections, {args.seconds:g} s each)", throughput)
    print_table(f"{args.clients} SSE clients attach to one waiting run, then its next event", attaching)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", choices=["both", "sqlite", "postgres"], default="both")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--coalesce-ms", type=float, default=40.0,
                        help="the server's FLOWTRAIL_COALESCE_MS (the next event after the answer is a stream chunk)")
    asyncio.run(main(parser.parse_args()))
