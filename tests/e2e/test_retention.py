"""FLOWTRAIL_RETENTION_DAYS (in a fraction of a day) has a server erase the runs that ended before it, on its own,
each counted in /metrics; a run that has not ended is left alone."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path

import pytest

from engine.settings import RetentionSettings
from tests.support.runs import new_run, run_with_steps
from tests.support.server import RunningServer, server_settings

pytestmark = pytest.mark.store
SECONDS = 1 / 86_400
BOUND_SECONDS = 30


async def erased_by_retention(server: RunningServer) -> float:
    async with server.client() as client:
        text = (await client.get("/metrics")).text
    found = re.search(r'^flowtrail_runs_erased_total\{by="retention"\} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_runs_that_ended_past_retention_are_erased_by_the_sweep_and_counted(store: str, tmp_path: Path):
    retention = RetentionSettings(days=2 * SECONDS, sweep_seconds=0.2, batch=2)
    server = await RunningServer(replace(server_settings(store, tmp_path / "data"), retention=retention)).start()
    try:
        before = await erased_by_retention(server)
        ended = [await run_with_steps(server.services, 2) for _ in range(3)]
        running = await new_run(server.services)
        async with asyncio.timeout(BOUND_SECONDS):
            while not all([(await server.services.runs.state(run_id)).erased for run_id in ended]):
                await asyncio.sleep(0.1)
        assert await erased_by_retention(server) - before == 3
        assert not (await server.services.runs.state(running)).erased
        async with server.client() as client:
            listed = (await client.get("/api/v1/runs", params={"limit": 10})).json()["data"]["items"]
        assert {item["runId"] for item in listed if "erasedAt" in item} == {run_id.hex for run_id in ended}
    finally:
        await server.stop()
