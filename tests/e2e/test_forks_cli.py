"""`flowtrail runs fork | rerun | forks` against a real server running the demos, through the client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from uuid import UUID

import pytest

from domain.run import RunStatus
from flowtrail_client import FlowtrailClient
from tests.support.engine_runs import wait_until
from tests.support.process import ROOT

pytestmark = pytest.mark.store
KEY = "test-key-all"


async def flowtrail(server, *args: str) -> subprocess.CompletedProcess[str]:
    """`flowtrail runs ...` with the key in FLOWTRAIL_API_KEY and the URL in FLOWTRAIL_URL."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("FLOWTRAIL_")}
    env.update(PYTHONPATH=str(ROOT), FLOWTRAIL_URL=server.base_url, FLOWTRAIL_API_KEY=KEY)
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "scripts.cli", "runs", *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )


async def test_forking_from_the_command_line_starts_the_fork_under_the_overrides_and_lists_it(demo_server):
    async with FlowtrailClient(demo_server.base_url, KEY) as client:
        source = await client.create("demo-report", {"topic": "tides"})
        await client.start(source)
        await wait_until(demo_server.services, UUID(source.run_id), RunStatus.SUCCEEDED)
    done = await flowtrail(demo_server, "fork", source.run_id, "--from-node", "summary", "--var", "topic=waves",
                           "--json")
    assert done.returncode == 0, done.stderr
    forked = json.loads(done.stdout)
    assert forked["forkedFrom"]["runId"] == source.run_id and forked["status"] == "RUNNING"
    watched = await flowtrail(demo_server, "watch", forked["runId"])
    assert watched.returncode == 0, watched.stderr
    listed = await flowtrail(demo_server, "forks", source.run_id)
    assert listed.returncode == 0 and listed.stdout.split()[0] == forked["runId"]
    async with FlowtrailClient(demo_server.base_url, KEY) as client:
        run = await client.get(forked["runId"])
    assert run.status == "SUCCESS" and run.forked_from is not None and run.forked_from.run_id == source.run_id
    events = await demo_server.services.runs.events(UUID(forked["runId"]))
    assert events[0].variables == {"topic": "waves"}


async def test_rerunning_from_the_command_line_reruns_a_cancelled_run_and_refuses_a_successful_one(demo_server):
    async with FlowtrailClient(demo_server.base_url, KEY) as client:
        cancelled = await client.create("demo-report", {"topic": "tides"})
        await client.cancel(cancelled)
        await wait_until(demo_server.services, UUID(cancelled.run_id), RunStatus.CANCELLED)
    done = await flowtrail(demo_server, "rerun", cancelled.run_id)
    assert done.returncode == 0, done.stderr
    assert f"forked from run {cancelled.run_id} at its end" in done.stdout
    rerun_id = done.stdout.split()[1]
    await wait_until(demo_server.services, UUID(rerun_id), RunStatus.SUCCEEDED)
    refused = await flowtrail(demo_server, "rerun", rerun_id)
    assert refused.returncode != 0 and "RUN_NOT_FAILED" in refused.stderr
    created_only = await flowtrail(demo_server, "fork", rerun_id, "--from-node", "report", "--no-start")
    assert created_only.returncode == 0 and "(CREATED)" in created_only.stdout
