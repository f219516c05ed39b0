"""`flowtrail audit` finds no difference on a healthy run and reports one it is shown; `export` writes the log."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

from tests.support.process import ROOT
from tests.support.runs import run_with_steps


async def flowtrail(server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FLOWTRAIL_DATABASE_URL": server.settings.store.database_url,
        "FLOWTRAIL_PORT": str(server.settings.port),
        "FLOWTRAIL_AUDIT_KEY": "test-key-all",
    }
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "scripts.cli", *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )


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


async def test_exporting_an_unknown_run_says_so(server):
    done = await flowtrail(server, "export", "0" * 32)
    assert done.returncode == 1 and "not found" in done.stderr
