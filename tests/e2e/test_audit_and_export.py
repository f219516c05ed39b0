"""`flowtrail audit` and `export` work against a URL and a key alone, and never create a store.

They read the run's events over HTTP: no FLOWTRAIL_DATABASE_URL is given to them, and one that
points somewhere empty is never opened.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowtrail_client import FlowtrailClient
from tests.support.process import ROOT
from tests.support.runs import run_with_steps

pytestmark = pytest.mark.store
UNKNOWN_RUN = "0" * 32


async def flowtrail(server, *args: str, key: str = "test-key-all", cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("FLOWTRAIL_")}
    env["PYTHONPATH"] = str(ROOT)
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "scripts.cli", *args, "--url", server.base_url, "--key", key],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )


def empty_dir(tmp_path: Path) -> Path:
    """A working directory of its own (the test's store may live in tmp_path)."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path


async def test_auditing_a_healthy_run_finds_every_projection_equal_to_the_log(server):
    run_id = await run_with_steps(server.services, 40)
    done = await flowtrail(server, "audit", run_id.hex)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: every projection matches the log" in done.stdout


async def test_auditing_a_run_whose_served_projection_drifted_prints_the_difference_and_fails(server):
    run_id = await run_with_steps(server.services, 5)
    hot = await server.services.runs.hot(run_id)
    hot.summary.error = "drifted"
    done = await flowtrail(server, "audit", run_id.hex)
    assert done.returncode == 1
    assert "DIFF $.summary.error: rebuilt None, served 'drifted'" in done.stdout


async def test_export_writes_every_event_as_one_json_line_in_order(server):
    run_id = await run_with_steps(server.services, 3)
    done = await flowtrail(server, "export", run_id.hex)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["originator_version"] for line in lines] == list(range(1, len(lines) + 1))
    assert lines[0]["type"] == "RunCreated" and lines[-1]["type"] == "RunCompleted"


@pytest.mark.parametrize("command", [["audit", UNKNOWN_RUN], ["export", UNKNOWN_RUN, "-o", "out.jsonl"]])
async def test_an_unknown_run_is_said_in_one_line_with_a_failing_status_and_nothing_is_created(
    server, tmp_path, command,
):
    elsewhere = empty_dir(tmp_path)
    done = await flowtrail(server, *command, cwd=elsewhere)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["error: RUN_NOT_FOUND: run not found"] and done.stdout == ""
    assert list(elsewhere.iterdir()) == []


async def test_a_run_the_key_may_not_see_is_not_found_for_the_audit(server):
    run_id = await run_with_steps(server.services, 1)
    done = await flowtrail(server, "audit", run_id.hex, key="test-key-scoped")
    assert done.returncode == 1 and done.stderr.strip() == "error: RUN_NOT_FOUND: run not found"


async def test_a_service_that_is_not_there_is_said_in_one_line(server, tmp_path):
    await server.stop()
    elsewhere = empty_dir(tmp_path)
    done = await flowtrail(server, "export", UNKNOWN_RUN, "-o", "out.jsonl", cwd=elsewhere)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and "cannot reach" in done.stderr
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("workflow", ["demo-report", "demo-agentic", "demo-clarify"])
async def test_every_demo_run_audits_clean(demo_server, workflow):
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as client:
        run = await client.create(workflow, {"topic": "tidal energy"})
        await client.start(run)
        async for message in client.stream(run):
            if message.data.get("kind") == "clarify_request":
                asked = json.loads(message.data["content"])
                await client.answer(run, asked["clarify_id"], asked["choices"][0])
    done = await flowtrail(demo_server, "audit", run.run_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: every projection matches the log" in done.stdout
