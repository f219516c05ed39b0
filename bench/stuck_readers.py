"""Stuck readers of a long finished run: the server's memory while they wait, and /healthz while they go (issue 11).

The server is the service behind uvicorn in this process (`Service.serving`); a run of
`--events` step chunks is written and finished, then `--clients` bare sockets (receive buffer
4 KiB) ask for its stream from the start and read nothing. The run is longer than the memory
buffer, so every reader is served from the store. Printed: this process's RSS before the
readers, its peak over `--hold` seconds, and the slowest `/healthz` while every reader
disconnects at once (connection reset).

    python -m bench.stuck_readers [--store both|sqlite|postgres] [--clients 20] [--events 50000] [--hold 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import tempfile
import time
from pathlib import Path

import httpx

from bench.cli import bench_main
from bench.machine import free_port, rss_kib
from bench.names import NODE_ID, WORKFLOW
from bench.service import Service, settings_for
from bench.stores import Store


def stuck_reader(port: int, path: str) -> socket.socket:
    """A connection that asks for the stream and never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: demo-key\r\n\r\n".encode())
    return sock


def rss_mib() -> float:
    """This process's resident memory, MiB."""
    return rss_kib(os.getpid())["VmRSS"] / 1024


async def one_store(kind: str, clients: int, events: int, hold: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(kind, Path(tmp))
        try:
            port = free_port()
            service = Service(settings_for(store, Path(tmp) / "data", host="127.0.0.1", port=port))
            async with service.serving():
                run_id, writer, visit = await service.open_run_visit()
                for i in range(events):
                    await writer.stream(visit_uuid=visit, node_id=NODE_ID, kind="step", content=f'{{"i":{i}}}')
                await writer.flush()
                await service.release(run_id)
                path = f"/api/v1/workflows/{WORKFLOW}/runs/{run_id.hex}/stream"
                before = rss_mib()
                readers = [stuck_reader(port, path) for _ in range(clients)]
                peak, until = before, time.monotonic() + hold
                while time.monotonic() < until:
                    peak = max(peak, rss_mib())
                    await asyncio.sleep(0.05)
                worst = 0.0
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                    await client.get("/healthz")
                    for sock in readers:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        sock.close()
                    for _ in range(40):
                        started = time.perf_counter()
                        await client.get("/healthz")
                        worst = max(worst, time.perf_counter() - started)
                        await asyncio.sleep(0.02)
                print(f"{kind:8}  {clients} stuck readers of a {events:,}-event run: RSS {before:.0f} -> peak "
                      f"{peak:.0f} MiB (+{(peak - before) / clients:.1f} MiB a reader); /healthz worst while they "
                      f"disconnect {worst * 1000:.0f} ms")
        finally:
            store.drop()


async def run(kinds: list[str], clients: int, events: int, hold: float) -> None:
    for kind in kinds:
        await one_store(kind, clients, events, hold)


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--hold", type=float, default=3.0)


if __name__ == "__main__":
    bench_main(run, add_args, __doc__ or "")
