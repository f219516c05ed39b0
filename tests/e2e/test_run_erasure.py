"""Erasing an ended run: its content leaves every answer and the log, its skeleton and chain stay and verify,
its stream replays with the same ids; only its owner or a key given the right may erase it, and only once it ended."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from uuid import UUID

import pytest

from engine.access import ApiKey
from tests.support.api import AUDITOR_KEY, DEMO_KEY, KEYS, SCOPED_KEY, ask, log_end, open_visit
from tests.support.erasure import BASE, VARIABLE, finished_run, no_marker
from tests.support.process import ROOT
from tests.support.sse import read_stream

ERASER_KEY = "eraser-key"
pytestmark = pytest.mark.api(keys=(*KEYS, ApiKey(key=ERASER_KEY, id="eraser", sees_all_runs=True, may_erase=True)))
async def served(client, run_id: UUID) -> dict[str, bytes]:
    """Everything the API serves about a run, by route."""
    paths = {
        "run": f"{BASE}/{run_id.hex}", "state": f"/api/v1/runs/{run_id.hex}/state",
        "logs": f"{BASE}/{run_id.hex}/nodes/node-2/logs", "events": f"/api/v1/runs/{run_id.hex}/events",
        "workspace": f"{BASE}/{run_id.hex}/workspace", "audit": f"/api/v1/runs/{run_id.hex}/audit",
    }
    return {name: (await client.get(path)).content for name, path in paths.items()}


def flowtrail(*args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("FLOWTRAIL_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "scripts.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)


async def test_an_erased_run_keeps_its_skeleton_and_chain_and_serves_none_of_its_content(api, client, tmp_path):
    run_id = await finished_run(api, client)
    before = await read_stream(client, f"{BASE}/{run_id.hex}/stream")
    assert not all(no_marker(body) for body in (await served(client, run_id)).values())
    erased = await client.delete(f"{BASE}/{run_id.hex}")
    assert erased.status_code == 200, erased.text
    answer = erased.json()["data"]
    assert (answer["runId"], answer["outcome"], answer["erasedBy"]) == (run_id.hex, "ERASED", "demo")
    assert answer["eventsErased"] == 5  # RunCreated, two chunks, the visit's and the run's output
    bodies = await served(client, run_id)
    assert all(no_marker(body) for body in bodies.values()), [name for name, b in bodies.items() if not no_marker(b)]
    run = json.loads(bodies["run"])["data"]
    assert run["erased"] is True and run["erasedAt"] == answer["erasedAt"] and run["status"] == "SUCCESS"
    assert [node["status"] for node in run["nodes"]] == ["SUCCESS"] and run["workspace"]["fileCount"] == 0
    assert not api.services.workspace.path_for(run_id).exists()
    listed = (await client.get("/api/v1/runs", params={"workflow": "report-pipeline", "limit": 200})).json()["data"]
    assert next(item for item in listed["items"] if item["runId"] == run_id.hex)["erasedAt"] == answer["erasedAt"]
    after = await read_stream(client, f"{BASE}/{run_id.hex}/stream")
    assert (after.ids, after.events) == (before.ids, before.events) and after.ended
    assert all(data["erased"] is True for data in after.data) and no_marker(json.dumps(after.data))
    export = tmp_path / "erased.jsonl"
    export.write_bytes(bodies["events"])
    checked = await asyncio.to_thread(flowtrail, "verify", str(export))
    assert checked.returncode == 0, checked.stdout
    assert f"at position {run['chain']['position']}" in checked.stdout and "erased: positions 1, 4-6, 8 " in checked.stdout
    audited = await asyncio.to_thread(flowtrail, "audit", run_id.hex, "--url", api.base_url, "--key", DEMO_KEY)
    assert audited.returncode == 0, audited.stdout + audited.stderr


async def test_erasing_an_erased_run_again_answers_already_erased_and_appends_nothing(api, client):
    run_id = await finished_run(api, client)
    first = (await client.delete(f"{BASE}/{run_id.hex}")).json()["data"]
    end = await log_end(api.services)
    again = await client.delete(f"{BASE}/{run_id.hex}")
    assert again.status_code == 200
    assert again.json()["data"] == {**first, "outcome": "ALREADY_ERASED"}
    assert await log_end(api.services) == end


async def test_a_run_that_has_not_ended_is_not_erased_and_nothing_changes(api, client):
    created = (await client.post(BASE, json={"variables": {"topic": VARIABLE}})).json()["data"]["runId"]
    running = (await client.post(BASE, json={"variables": {"topic": VARIABLE}})).json()["data"]["runId"]
    await client.post(f"{BASE}/{running}/start")
    waiting = (await client.post(BASE, json={"variables": {"topic": VARIABLE}})).json()["data"]["runId"]
    await client.post(f"{BASE}/{waiting}/start")
    visit = await open_visit(api.services, UUID(waiting))
    await ask(api.services, UUID(waiting), visit, "c1", "Which one?", ("a", "b"))
    end = await log_end(api.services)
    for run_id, status in ((created, "created"), (running, "running"), (waiting, "paused")):
        refused = await client.delete(f"{BASE}/{run_id}")
        assert refused.status_code == 409, refused.text
        assert refused.json()["code"] == "RUN_STATE_CONFLICT" and f"has not ended ({status})" in refused.json()["message"]
    assert await log_end(api.services) == end


async def test_only_the_owner_or_a_key_given_the_right_erases_a_run_and_seeing_it_is_not_that_right(api, client):
    run_id = await finished_run(api, client)
    async with api.client(key=AUDITOR_KEY) as auditor:
        forbidden = await auditor.delete(f"{BASE}/{run_id.hex}")
        assert (await auditor.get(f"{BASE}/{run_id.hex}")).status_code == 200
    assert (forbidden.status_code, forbidden.json()["code"]) == (403, "FORBIDDEN")
    async with api.client(key=SCOPED_KEY) as stranger:
        hidden = await stranger.delete(f"{BASE}/{run_id.hex}")
    assert (hidden.status_code, hidden.json()["code"]) == (404, "RUN_NOT_FOUND")
    async with api.client(key=ERASER_KEY) as eraser:
        erased = await eraser.delete(f"{BASE}/{run_id.hex}")
    assert erased.status_code == 200 and erased.json()["data"]["erasedBy"] == "eraser"


async def test_the_runs_erase_command_erases_through_the_api(api, client):
    run_id = await finished_run(api, client)
    done = await asyncio.to_thread(flowtrail, "runs", "erase", run_id.hex, "--url", api.base_url, "--key", DEMO_KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"run {run_id.hex} erased at ") and "by demo (5 events emptied)" in done.stdout
