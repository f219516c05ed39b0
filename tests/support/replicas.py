"""Several `flowtrail serve` processes (replicas) on one PostgreSQL schema, as the multi-replica tests start them."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.process import ServerProcess

STALL_SECONDS = 3.0
REPLICA_ENV = {
    "FLOWTRAIL_LOAD_DEMOS": "true",
    "FLOWTRAIL_SCRIPTED_PACE_SECONDS": "0.02",
    "FLOWTRAIL_WORKER_HEARTBEAT_SECONDS": "0.5",
    "FLOWTRAIL_WORKER_STALL_SECONDS": str(STALL_SECONDS),
    "FLOWTRAIL_WORKER_POOL_SIZE": "2",
    "FLOWTRAIL_WRITE_THREADS": "2",
    "FLOWTRAIL_SHUTDOWN_GRACE_SECONDS": "1",
}
"""Quick heart-beats and a short stall threshold (a killed replica's runs move on within seconds), small pools."""


@contextlib.asynccontextmanager
async def replicas(url: str, tmp_path: Path, count: int, **env: str) -> AsyncIterator[list[ServerProcess]]:
    """`count` replicas on the store at `url` (REPLICA_ENV changed by `env`), stopped afterwards."""
    servers = [ServerProcess(url, tmp_path / f"replica-{i}", **{**REPLICA_ENV, **env}) for i in range(count)]
    try:
        await asyncio.gather(*(server.start() for server in servers))
        yield servers
    finally:
        await asyncio.gather(*(server.stop() for server in servers), return_exceptions=True)


async def runs_active(server: ServerProcess) -> int:
    """How many runs the replica executes now (its `flowtrail_runs_active` metric)."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{server.base_url}/metrics")).text
    found = re.search(r"^flowtrail_runs_active (\S+)$", text, flags=re.MULTILINE)
    return int(float(found.group(1))) if found else 0


def paced_flow(name: str, display: str, steps: int) -> dict[str, Any]:
    """Three scripted llm nodes of `steps` status lines each, then an output (about 3 * steps + 10 events a run)."""
    nodes: list[dict[str, Any]] = [{"id": "input", "type": "userInput", "label": "in", "data": {"inputs": []}}]
    edges, previous = [], "input"
    for n in range(3):
        script = [[*({"status": f"step {n}.{k}"} for k in range(steps)), {"text": f"part {n}"}]]
        nodes.append({"id": f"part-{n}", "type": "llm", "label": f"part {n}",
                      "data": {"model_id": "scripted", "prompt": "go", "script": script}})
        edges.append({"source": previous, "target": f"part-{n}"})
        previous = f"part-{n}"
    nodes.append({"id": "result", "type": "output", "label": "result",
                  "data": {"outputs": [{"name": "text", "type": "string", "value": "{{part-2.text}}"}]}})
    edges.append({"source": previous, "target": "result"})
    return {"name": name, "displayName": display, "mode": "DAG", "nodes": nodes, "edges": edges}


def stream_path(flow: str, run_id: str) -> str:
    """The run's stream path."""
    return f"/api/v1/workflows/{flow}/runs/{run_id}/stream"


async def start_run(client: httpx.AsyncClient, flow: str) -> str:
    """Create a run of `flow` with no variables and start it; its id."""
    created = await client.post(f"/api/v1/workflows/{flow}/runs", json={"variables": {}})
    assert created.status_code == 201, created.text
    run_id: str = created.json()["data"]["runId"]
    started = await client.post(f"/api/v1/workflows/{flow}/runs/{run_id}/start")
    assert started.status_code == 200, started.text
    return run_id
