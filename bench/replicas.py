"""Replicas on one PostgreSQL (issue 11): run throughput and p99 run duration with 1, 2 and 3 replicas, one sitting.

Each replica is a `flowtrail serve` process on a loopback port, on one fresh PostgreSQL schema
per row (scripted pace 0, demos loaded). The client starts `--runs` runs of `demo-report`,
at most `--in-flight` at a time, spreading create/start requests over the replicas round
robin (the job queue decides which replica executes a run), and follows each run's stream to
its terminal event. A run's duration is from its start request to that event; throughput is
runs per second of wall time. The job queue's PostgreSQL connections (application name
`flowtrail-jobs`) are counted at the end.

    python -m bench.replicas [--runs 300] [--in-flight 50] [--replicas 1,2,3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.figures import percentile, print_table
from bench.names import API_KEY, ROOT
from bench.stores import PG_BASE, Store

TERMINAL = (b"event: workflow_complete", b"event: workflow_error")


def free_port() -> int:
    """An unused loopback port."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replica:
    """One `flowtrail serve` process."""

    def __init__(self, url: str, workdir: Path, index: int) -> None:
        self.port = free_port()
        self.log = workdir / f"replica-{index}.log"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("FLOWTRAIL_")},
            "FLOWTRAIL_DATABASE_URL": url, "FLOWTRAIL_DATA_DIR": str(workdir / f"data-{index}"),
            "FLOWTRAIL_PORT": str(self.port), "FLOWTRAIL_API_KEYS": json.dumps([{"key": API_KEY, "id": "bench"}]),
            "FLOWTRAIL_SCRIPTED_PACE_SECONDS": "0", "FLOWTRAIL_LOG_LEVEL": "WARNING",
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Start and wait for /healthz."""
        with self.log.open("ab") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "scripts.cli", "serve"], cwd=ROOT, env=self.env,
                                            stdout=subprocess.DEVNULL, stderr=log)
        async with httpx.AsyncClient() as client:
            for _ in range(600):
                if self.process.poll() is not None:
                    raise RuntimeError(f"replica exited: {self.log.read_text()[-2000:]}")
                try:
                    if (await client.get(f"{self.base_url}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError("replica did not start in 30 s")

    async def stop(self) -> None:
        """SIGTERM and wait."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            await asyncio.to_thread(self.process.wait, 30)


async def one_run(client: httpx.AsyncClient, topic: str) -> float:
    """Create, start and follow one run; seconds from the start request to its terminal event."""
    created = await client.post("/api/v1/workflows/demo-report/runs", json={"variables": {"topic": topic}})
    run_id = created.json()["data"]["runId"]
    path = f"/api/v1/workflows/demo-report/runs/{run_id}"
    began = time.perf_counter()
    started = await client.post(f"{path}/start")
    started.raise_for_status()
    async with client.stream("GET", f"{path}/stream", timeout=httpx.Timeout(30.0, read=120.0)) as response:
        async for line in response.aiter_bytes():
            if any(end in line for end in TERMINAL):
                return time.perf_counter() - began
    raise RuntimeError(f"run {run_id}: the stream ended before the run")


def pg_connections(schema_url: str) -> dict[str, int]:
    """Connections to the bench database now, by application name."""
    import psycopg

    with psycopg.connect(PG_BASE) as conn:
        rows = conn.execute(
            "SELECT coalesce(nullif(application_name, ''), '(unnamed)'), count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1").fetchall()
    return {name: int(n) for name, n in rows}


async def measure(replica_count: int, runs: int, in_flight: int, workdir: Path) -> dict[str, Any]:
    """One row of the table: `replica_count` replicas on a fresh schema."""
    workdir.mkdir(parents=True, exist_ok=True)
    store = Store("postgres", workdir)
    replicas = [Replica(store.url, workdir, i) for i in range(replica_count)]
    try:
        for replica in replicas:  # one after another, as the start-up lock has them anyway
            await replica.start()
        clients = [httpx.AsyncClient(base_url=r.base_url, headers={"X-API-Key": API_KEY}, timeout=30.0)
                   for r in replicas]
        gate = asyncio.Semaphore(in_flight)

        async def gated(i: int) -> float:
            async with gate:
                return await one_run(clients[i % len(clients)], f"topic {i}")

        await asyncio.gather(*(gated(i) for i in range(min(20, runs))))  # warm-up
        began = time.perf_counter()
        durations = await asyncio.gather(*(gated(i) for i in range(runs)))
        wall = time.perf_counter() - began
        connections = pg_connections(store.url)
        for client in clients:
            await client.aclose()
        return {
            "replicas": replica_count, "runs": runs, "runs/s": runs / wall,
            "p50 run ms": percentile(durations, 50) * 1000, "p99 run ms": percentile(durations, 99) * 1000,
            "job-queue conns": connections.get("flowtrail-jobs", 0),
        }
    finally:
        await asyncio.gather(*(r.stop() for r in replicas), return_exceptions=True)
        store.drop()


async def run(counts: list[int], runs: int, in_flight: int) -> None:
    """Every row in one sitting, then the table."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="flowtrail-replicas-") as tmp:
        for count in counts:
            rows.append(await measure(count, runs, in_flight, Path(tmp) / f"r{count}"))
            print(f"{count} replica(s): {rows[-1]['runs/s']:.1f} runs/s", flush=True)
    print_table(f"demo-report at pace 0, {runs} runs, {in_flight} in flight, PostgreSQL", rows)


def main() -> None:
    """`python -m bench.replicas`"""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--in-flight", type=int, default=50)
    parser.add_argument("--replicas", default="1,2,3", help="comma-separated replica counts")
    args = parser.parse_args()
    asyncio.run(run([int(n) for n in args.replicas.split(",")], args.runs, args.in_flight))


if __name__ == "__main__":
    main()
