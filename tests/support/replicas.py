"""Several `flowtrail serve` processes (replicas) on one PostgreSQL schema, as the multi-replica tests start them."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

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
